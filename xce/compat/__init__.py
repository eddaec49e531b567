"""LSF- and Slurm-compatible front-ends over XCE's job model (issue 15, docs/compat.md).

An edge layer beside xce/rest and xce/tui: each command (``bsub``, ``bjobs``, ...,
``sbatch``, ``squeue``, ...) parses the other system's options with the job-spec
parsers of xce/core/jobspec/, calls the same xce.client as `xce`, and prints the
other system's output.  Nothing is decided here twice:

    mapping.py   states both ways, units, queue<->partition, project<->account, refusals
    shims.py     the command directories `xce compat path lsf|slurm` prints, and LSF_ENVDIR
    session.py   the client, the exit codes, CLEAN_PERIOD's filter of finished jobs, the exit
    lsf.py       bjobs, bkill, bhosts, bqueues, lsid, ... (lsf_fmt.py formats)
    lsf_submit.py    bsub, alone: what its script imports
    slurm.py     squeue, sacct, scancel, sinfo, scontrol, srun, salloc
    slurm_submit.py  sbatch, alone: what its script imports
    cli.py       `xce compat path|env|commands`

The command directories are not on PATH by themselves, so a real LSF or Slurm on the
same machine is never shadowed.
"""
