"""sbatch's option grammar and ``--dependency``, for the Slurm front-end (issue 15).

``parse_sbatch_args`` reads argv words (the command line or one ``#SBATCH`` line) into
an OptionSet keyed by the long name (``--job-name``), whichever spelling was used:
``--opt=value``, ``--opt value``, ``-J value``, ``-Jvalue``.  A later value replaces an
earlier one, as in sbatch.  What the values mean for the job model is the front-end's
business; only ``--dependency`` is translated here, into depend.py's AST.

Known options (short forms in brackets)::

    [-A] --account   [-a] --array      [-c] --cpus-per-task  [-D] --chdir
    [-d] --dependency [-e] --error     [-J] --job-name       [-N] --nodes
    [-n] --ntasks    [-o] --output     [-p] --partition      [-q] --qos
    [-t] --time      [-H] --hold       [-W] --wait
    --exclusive[=user|mcs]  --export  --mem  --mem-per-cpu  --ntasks-per-node
    --open-mode  --signal  --wckey  --parsable  --mail-type  --mail-user

GPU options (``--gres -G --gpus --gpus-per-node --gpus-per-task --cpus-per-gpu
--mem-per-gpu``) are refused by name; any other option is refused as unknown.

Dependencies: ``after:ID`` -> ``started(ID)``, ``afterany`` -> ``ended``, ``afterok`` ->
``done``, ``afternotok`` -> ``exit``, several ids after one type all must hold, ``,``
joins with AND and ``?`` with OR (not both), ``ID_N`` is an array element, and
``singleton`` -> ``ended("<this job's name>")`` (name references match only the
submitting user's earlier jobs).  ``aftercorr``, ``afterburstbuffer`` and ``+time``
delays are refused by name.
"""

from __future__ import annotations

from xce.core.jobspec.errors import ArraySpecError, DependError
from xce.core.jobspec.options import OptionSet, ParsedArgs, Source

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (plain.py says why)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Literal

    from xce.core.jobspec.depend import Expr, JobRef

    Kind = Literal["value", "flag", "optional"]

SBATCH_OPTIONS: dict[str, Kind] = {
    "account": "value", "array": "value", "cpus-per-task": "value", "chdir": "value",
    "dependency": "value", "error": "value", "job-name": "value", "nodes": "value", "ntasks": "value",
    "output": "value", "partition": "value", "qos": "value", "time": "value", "hold": "flag",
    "wait": "flag", "exclusive": "optional", "export": "value", "mem": "value", "mem-per-cpu": "value",
    "ntasks-per-node": "value", "open-mode": "value", "signal": "value", "wckey": "value",
    "parsable": "flag", "mail-type": "value", "mail-user": "value",
}
SBATCH_SHORT: dict[str, str] = {
    "A": "account", "a": "array", "c": "cpus-per-task", "D": "chdir", "d": "dependency", "e": "error",
    "J": "job-name", "N": "nodes", "n": "ntasks", "o": "output", "p": "partition", "q": "qos",
    "t": "time", "H": "hold", "W": "wait",
}
# srun's options beyond sbatch's: --unbuffered (submitit's srun line; XCE relays output as it comes).
SRUN_ONLY: dict[str, Kind] = {"unbuffered": "flag"}
SRUN_SHORT: dict[str, str] = {"u": "unbuffered"}
_GPU = "GPUs are not supported"
SBATCH_REFUSED: dict[str, str] = {
    "gres": "generic resources (GPUs) are not supported", "G": _GPU, "gpus": _GPU,
    "gpus-per-node": _GPU, "gpus-per-task": _GPU, "cpus-per-gpu": _GPU, "mem-per-gpu": _GPU,
}


def parse_sbatch_args(argv: Sequence[str], source: Source = Source(), *,
                      into: OptionSet | None = None, allow_command: bool = True, srun: bool = False) -> ParsedArgs:
    """Read sbatch options from ``argv``; the rest (script and its arguments) is the command.
    ``srun``: srun's own options (SRUN_ONLY) are known too."""
    opts = into if into is not None else OptionSet(values={}, origins={})
    i = 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
        if argv[i] == "--":
            i += 1
            break
        take = _take_long if argv[i].startswith("--") else _take_short
        i = take(opts, argv, i, source, srun)
    command = list(argv[i:])
    if command and not allow_command:
        raise source.fail(command[0], f"unexpected word {command[0]!r} (a {source.noun} line holds options only)")
    return ParsedArgs(opts, command)


def _known(name: str, shown: str, source: Source, srun: bool = False) -> Kind:
    if srun and name in SRUN_ONLY:
        return SRUN_ONLY[name]
    if name in SBATCH_REFUSED:
        raise source.fail(shown, f"{shown} is not supported: {SBATCH_REFUSED[name]}")
    if name not in SBATCH_OPTIONS:
        raise source.fail(shown, f"unknown {source.noun} {shown}")
    return SBATCH_OPTIONS[name]


def _take_long(opts: OptionSet, argv: Sequence[str], i: int, source: Source, srun: bool = False) -> int:
    name, eq, value = argv[i][2:].partition("=")
    shown = f"--{name}"
    kind = _known(name, shown, source, srun)
    if kind == "flag" and eq:
        raise source.fail(shown, f"{shown} takes no value")
    if kind == "value" and not eq:
        if i + 1 >= len(argv):
            raise source.fail(shown, f"{shown} needs a value")
        value, i = argv[i + 1], i + 1
    _store(opts, name, value if (eq or kind == "value") else True, source)
    return i + 1


def _take_short(opts: OptionSet, argv: Sequence[str], i: int, source: Source, srun: bool = False) -> int:
    letter, attached = argv[i][1:2], argv[i][2:]
    shown = f"-{letter}"
    name = (SRUN_SHORT.get(letter) if srun else None) or SBATCH_SHORT.get(letter, letter)
    if _known(name, shown, source, srun) == "flag":
        if attached:
            raise source.fail(shown, f"{shown} takes no value (got {argv[i]!r})")
        _store(opts, name, True, source)
        return i + 1
    if attached:
        _store(opts, name, attached, source)
        return i + 1
    if i + 1 >= len(argv):
        raise source.fail(shown, f"{shown} needs a value")
    _store(opts, name, argv[i + 1], source)
    return i + 2


def _store(opts: OptionSet, name: str, value: str | bool, source: Source) -> None:
    key = f"--{name}"
    opts.values[key] = value
    opts.origins[key] = source.label


def merge_sbatch_options(directives: OptionSet, command_line: OptionSet) -> OptionSet:
    """Directives overridden by the command line, option by option (sbatch's rule)."""
    return OptionSet(values={**directives.values, **command_line.values},
                     origins={**directives.origins, **command_line.origins})


_TYPES: dict[str, Literal["started", "ended", "done", "exit"]] = {
    "after": "started", "afterany": "ended", "afterok": "done", "afternotok": "exit",
}
_REFUSED_TYPES = {"aftercorr": "element-by-element dependencies", "afterburstbuffer": "burst buffers"}


def parse_slurm_dependency(text: str, job_name: str = "") -> Expr:
    """``--dependency`` value -> the same AST as ``-w``; ``job_name`` serves ``singleton``."""
    # lazy: the AST is msgspec Structs; only a job with --dependency pays for msgspec
    from xce.core.jobspec.depend import And, Or

    where = f"--dependency={text}"
    if "," in text and "?" in text:
        raise DependError(f"{where}: ',' (all) and '?' (any) cannot be mixed")
    sep, combine = ("?", Or) if "?" in text else (",", And)
    terms = tuple(_slurm_term(part, where, job_name) for part in text.split(sep))
    return terms[0] if len(terms) == 1 else combine(terms)


def _slurm_term(part: str, where: str, job_name: str) -> Expr:
    # lazy: as parse_slurm_dependency (which has loaded it already)
    from xce.core.jobspec.depend import And, NameRef, State

    if part == "singleton":
        if not job_name:
            raise DependError(f"{where}: singleton needs the job's name (--job-name)")
        return State("ended", NameRef(job_name))
    kind, _, ids = part.partition(":")
    if kind in _REFUSED_TYPES:
        raise DependError(f"{where}: {kind} is not supported ({_REFUSED_TYPES[kind]})")
    if kind not in _TYPES:
        raise DependError(f"{where}: unknown dependency type {kind!r} (after, afterany, afterok, "
                          "afternotok, singleton)")
    if not ids:
        raise DependError(f"{where}: {kind} needs at least one job id ({kind}:ID[:ID...])")
    conds = tuple(State(_TYPES[kind], _slurm_ref(one, where)) for one in ids.split(":"))
    return conds[0] if len(conds) == 1 else And(conds)


def _slurm_ref(text: str, where: str) -> JobRef:
    from xce.core.jobspec.arrays import parse_job_target  # lazy: as parse_slurm_dependency
    from xce.core.jobspec.depend import JobRef  # lazy: as parse_slurm_dependency

    if "+" in text:
        raise DependError(f"{where}: a delay after a dependency ({text[text.index('+'):]}) is not supported")
    try:
        target = parse_job_target(text)
    except ArraySpecError:
        raise DependError(f"{where}: bad job id {text!r} (expected ID or ID_INDEX)") from None
    return JobRef(target.job_id, target.indices)

