"""The job model's input grammars, pure and I/O-free (issue 14, for issue 15's front-ends too).

::

    argv / #BSUB lines --options.py--> OptionSet --merge--> bsub.py --> BsubRequest
    #SBATCH lines ------slurm.py-----> OptionSet (long names; the Slurm front-end maps it)
         directives.py finds the lines; values are parsed by:
    arrays.py    -J "a[1-1000]%50", --array, ID[INDEX] -> ArraySpec (ranges, never expanded)
    runlimit.py  -W, -We, --time -> seconds; -M -> bytes (xce/core/units.py)
    depend.py    -w 'done(12) && ...' -> tagged-struct AST; refs() for the reverse index
    depeval.py   AST x lookup(ref) -> SATISFIED | WAITING(reason) | NEVER(reason)
    filenames.py %J %I / %j %A %a %x %u in output paths

Nothing here does I/O, reads a clock or knows the controller; errors are
xce.core.jobspec.errors classes (InvalidRequest) naming the offending part.
Design and what is still to be wired: docs/jobmodel.md.
"""
