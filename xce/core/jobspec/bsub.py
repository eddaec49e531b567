"""What bsub's options mean: a merged OptionSet -> a typed ``BsubRequest``.

Both doors that speak bsub (``xce submit`` and the ``bsub`` front-end) call
``bsub_request`` on the options that options.py parsed and merged; each value is
parsed by its own module (arrays, runlimit, depend, xce/core/units.py through runlimit), and
an error from a directive is prefixed with its line (``#BSUB at line 4: -W 1:75: ...``).
Which JobSpec field each becomes is options.py's table and docs/jobmodel.md.  Not
decided here: queue defaults and maxima, whether the queue kills a job whose
dependency is never met, whether ``-U`` names a reservation that exists.
"""

from __future__ import annotations

from xce.core.jobspec.errors import DirectiveError, JobSpecError
from xce.core.jobspec.options import OptionSet
from xce.core.jobspec.plain import ARRAY_SIZE_CAP, Plain
from xce.core.jobspec.runlimit import parse_lsf_time, parse_mem_limit

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (plain.py says why)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Literal, TypeVar

    from xce.core.jobspec.arrays import ArraySpec
    from xce.core.jobspec.depend import Expr
    from xce.core.jobspec.options import Value

    T = TypeVar("T")



class EnvPolicy(Plain, frozen=True):
    """Which of the submitting environment travels (``-env``); default: all of it."""

    mode: Literal["all", "none", "names"] = "all"
    names: tuple[str, ...] = ()  # mode "names": the variables that travel
    exclude: tuple[str, ...] = ()  # mode "all": ~VAR
    values: dict[str, str] = {}  # VAR=value: set whatever the mode


class BsubRequest(Plain):
    name: str = ""
    array: ArraySpec | None = None
    queue: str | None = None
    slots: int | None = None
    resreq: str | None = None
    mem_limit: int | None = None  # bytes
    run_limit: int | None = None  # seconds
    run_estimate: int | None = None  # seconds
    stdout: str | None = None
    stdout_overwrite: bool = False
    stderr: str | None = None
    stderr_overwrite: bool = False
    cwd: str | None = None
    project: str | None = None
    user_group: str | None = None
    depend: Expr | None = None
    depend_text: str | None = None
    kill_if_never: bool = False  # -ti
    priority: int | None = None
    exclusive: bool = False
    wait: bool = False  # -K
    interactive: bool = False  # -I
    env: EnvPolicy = EnvPolicy()
    pre_exec: str | None = None
    pre_exec_cancel: bool = False  # -En: bmod's, refused at submit
    reservation: str | None = None
    nodes: int | None = None  # -nnodes
    hold: bool = False  # -H: submitted held (PSUSP)
    warn_signal: int | None = None  # -wa: sent -wt before the run limit, to all the job's processes
    warn_time: int | None = None  # -wt, seconds


def bsub_request(opts: OptionSet, *, max_array_size: int = ARRAY_SIZE_CAP,
                 mem_unit: str = "MB") -> BsubRequest:
    """Interpret every option in ``opts`` (flags True, ``-R`` a list)."""
    v = opts.values

    def at(name: str, parse: Callable[[str], T]) -> T | None:
        return _at(opts, name, parse)

    name, array = at("-J", lambda s: _job_name(s, max_array_size)) or ("", None)
    out, err = _stream(v, "-o", "-oo"), _stream(v, "-e", "-eo")
    depend_text = _str(v.get("-w"))
    return BsubRequest(
        name=name, array=array, queue=_str(v.get("-q")), slots=at("-n", _slots),
        resreq=" ".join(_list(v.get("-R"))) or None, mem_limit=at("-M", lambda s: parse_mem_limit(s, mem_unit)),
        run_limit=at("-W", parse_lsf_time), run_estimate=at("-We", lambda s: parse_lsf_time(s, "-We")),
        stdout=out[0], stdout_overwrite=out[1], stderr=err[0], stderr_overwrite=err[1],
        cwd=_str(v.get("-cwd")), project=_str(v.get("-P")), user_group=_str(v.get("-G")),
        depend=at("-w", _depend), depend_text=depend_text, kill_if_never=bool(v.get("-ti")),
        priority=at("-sp", _priority), exclusive=bool(v.get("-x")), wait=bool(v.get("-K")),
        interactive=bool(v.get("-I")), env=at("-env", parse_env) or EnvPolicy(),
        pre_exec=at("-E", _pre_exec), pre_exec_cancel=bool(v.get("-En")), reservation=_str(v.get("-U")), nodes=at("-nnodes", _nodes),
        hold=bool(v.get("-H")), **_warning(opts))


def _warning(opts: OptionSet) -> dict[str, int | None]:
    """-wa SIGNAL -wt [HOUR:]MINUTE: LSF's job warning, both or neither."""
    if ("-wa" in opts.values) != ("-wt" in opts.values):
        raise DirectiveError("-wa (the warning signal) and -wt (how long before the run limit) go together")
    if "-wa" not in opts.values:
        return {"warn_signal": None, "warn_time": None}
    from xce.core.jobspec.signals import parse_signal  # lazy: the signal table only for a job with -wa

    return {"warn_signal": _at(opts, "-wa", lambda s: parse_signal(s, "-wa")),
            "warn_time": _at(opts, "-wt", lambda s: parse_lsf_time(s, "-wt"))}


def _job_name(text: str, max_size: int) -> tuple[str, ArraySpec | None]:
    """-J: a name with brackets is an array, which arrays.py parses (and refuses, saying why)."""
    if "[" not in text and "]" not in text:
        return text, None
    # lazy: arrays.py holds ArraySpec, a msgspec Struct; only an array's submit pays for msgspec
    from xce.core.jobspec.arrays import parse_lsf_job_name

    return parse_lsf_job_name(text, max_size=max_size)


def _depend(text: str) -> Expr:
    # lazy: the dependency AST is msgspec Structs; only a job with -w pays for msgspec
    from xce.core.jobspec.depend import parse_depend

    return parse_depend(text)


def _at(opts: OptionSet, name: str, parse: Callable[[str], T]) -> T | None:
    """Parse option ``name`` if set; a directive's error names its line first."""
    value = opts.values.get(name)
    if not isinstance(value, str):
        return None
    try:
        return parse(value)
    except JobSpecError as e:
        origin = opts.origins.get(name, "command line")
        if origin == "command line":
            raise
        raise type(e)(f"{origin}: {e.message}") from None


def _str(value: Value | None) -> str | None:
    return value if isinstance(value, str) else None


def _list(value: Value | None) -> list[str]:
    return value if isinstance(value, list) else []


def _stream(v: dict[str, Value], append: str, overwrite: str) -> tuple[str | None, bool]:
    if isinstance(v.get(overwrite), str):
        return _str(v[overwrite]), True
    return _str(v.get(append)), False


def _slots(text: str) -> int:
    if "," in text:
        raise DirectiveError(f"-n {text}: a range of slots (min,max) is not supported; give one number")
    if not text.strip().isdigit() or int(text) < 1:
        raise DirectiveError(f"-n {text}: expected a whole number of slots, 1 or more")
    return int(text)


def _nodes(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise DirectiveError(f"-nnodes {text}: expected a whole number of hosts, 1 or more")
    return int(text)


def _pre_exec(text: str) -> str:
    """-E: a command line /bin/sh runs on the first host before the job's (NUL-free, not blank)."""
    if not text.strip():
        raise DirectiveError('-E "": give the pre-execution command to run')
    if "\0" in text:
        raise DirectiveError("-E: the pre-execution command holds a NUL byte")
    return text


def _priority(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise DirectiveError(f"-sp {text}: expected a whole number, 1 or more")
    return int(text)


def parse_env(text: str) -> EnvPolicy:
    """``-env``: ``all``, ``none``, ``all, ~HOME, A=1``, ``PATH, A=1``."""
    items = [item.strip() for item in text.split(",")]
    where = f'-env "{text}"'
    if items[0].lower() == "none":
        if len(items) > 1:
            raise DirectiveError(f"{where}: none takes nothing after it")
        return EnvPolicy("none")
    mode: Literal["all", "names"] = "all" if items[0].lower() == "all" else "names"
    names, exclude, values = [], [], {}
    for item in items[1:] if mode == "all" else items:
        var, eq, val = item.lstrip("~").partition("=")
        if not (var.isascii() and var.isidentifier()) or item.startswith("~") and (eq or mode != "all"):
            raise DirectiveError(f"{where}: bad item {item!r} (VAR, VAR=value, or ~VAR after all)")
        if eq:
            values[var] = val
        else:
            (exclude if item.startswith("~") else names).append(var)
    if mode == "all" and names:
        raise DirectiveError(f"{where}: after all, give ~VAR to leave out or VAR=value to set")
    return EnvPolicy(mode, tuple(names), tuple(exclude), values)
