"""bsub's option grammar: one table, one argv parser for the command line and ``#BSUB``.

``parse_bsub_args`` reads argv words into an ``OptionSet`` (option -> raw value, and
where each was set).  The command line and every ``#BSUB`` line go through it, so a
directive takes exactly the spellings an option does; ``merge_options`` then lets
the command line win, slot by slot (``-o`` on the command line replaces a
directive's ``-oo``; a command-line ``-R`` replaces the directives' ``-R`` list).
What each value becomes is xce/core/jobspec/bsub.py's job.

======  ======  ========================================================
option  takes   maps to
======  ======  ========================================================
-J      value   JobSpec.name, and an ArraySpec if it ends in ``[...]``
-q      value   JobSpec.queue
-n      value   JobSpec.slots
-R      list    JobSpec.resreq (repeatable; the parts are joined by spaces)
-M      value   JobSpec.mem_limit (bytes)
-W      value   run limit (seconds)
-We     value   runtime estimate (seconds) for backfill
-o      value   stdout file, appended to
-oo     value   stdout file, overwritten (same slot as -o)
-e      value   stderr file, appended to
-eo     value   stderr file, overwritten (same slot as -e)
-cwd    value   JobSpec.cwd
-P      value   project
-G      value   user group (fairshare)
-w      value   dependency expression (xce/core/jobspec/depend.py AST)
-ti     flag    end the job at once when its dependency can never be met
-sp     value   user priority within the queue
-x      flag    exclusive use of its hosts
-env    value   which of the submitting environment travels (EnvPolicy)
-K      flag    submit, wait for the end, exit with the job's code (client side)
-I      flag    interactive: stream stdout/stderr back (client side)
-E      value   JobSpec.pre_exec: run by /bin/sh before the command (exit 0, or the job pends again)
-En     flag    modify (bmod) only: drop the job's -E
-U      value   advance reservation id
-nnodes value   hosts (IBM CSM's form): the front-end makes it span[] (docs/compat.md)
======  ======  ========================================================

Refused by name with a reason: ``-Is -Ip -IS -ISp -ISs -IX`` (pseudo-terminals, X11),
``-gpu``.  Any other option is refused as unknown.  Values are taken as
the next word, whatever it starts with; options end at the first other word (the
command) or at ``--``.
"""

from __future__ import annotations

from xce.core.jobspec.errors import DirectiveError
from xce.core.jobspec.plain import Plain

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~5 ms of the bsub door)
if TYPE_CHECKING:  # annotations only: the bsub door loads neither typing nor msgspec (plain.py)
    from collections.abc import Iterator, Sequence
    from typing import Any, Literal

    Value = str | bool | list[str]


class OptSpec(Plain, frozen=True):
    kind: Literal["value", "flag", "list"]
    slot: str  # options sharing a slot replace each other when merged
    # The JobSpec field `xce submit`'s stdlib door (xce/cli/quick.py) sets from this option's word,
    # given once; "": only the full path's builder takes the option.
    door: str = ""


BSUB_OPTIONS: dict[str, OptSpec] = {
    "-J": OptSpec("value", "-J", "name"), "-q": OptSpec("value", "-q", "queue"),
    "-n": OptSpec("value", "-n", "slots"), "-R": OptSpec("list", "-R", "resreq"),
    "-M": OptSpec("value", "-M", "mem_limit"), "-W": OptSpec("value", "-W"),
    "-We": OptSpec("value", "-We"), "-o": OptSpec("value", "stdout", "stdout"), "-oo": OptSpec("value", "stdout"),
    "-e": OptSpec("value", "stderr", "stderr"), "-eo": OptSpec("value", "stderr"),
    "-cwd": OptSpec("value", "-cwd", "cwd"),
    "-P": OptSpec("value", "-P"), "-G": OptSpec("value", "-G"), "-w": OptSpec("value", "-w"),
    "-ti": OptSpec("flag", "-ti"), "-sp": OptSpec("value", "-sp"), "-x": OptSpec("flag", "-x"),
    "-env": OptSpec("value", "-env"), "-K": OptSpec("flag", "-K"), "-I": OptSpec("flag", "-I"),
    "-H": OptSpec("flag", "-H"), "-wa": OptSpec("value", "-wa"), "-wt": OptSpec("value", "-wt"),
    "-E": OptSpec("value", "-E", "pre_exec"), "-En": OptSpec("flag", "-En"), "-U": OptSpec("value", "-U"), "-nnodes": OptSpec("value", "-nnodes"),
}
# `xce submit`'s own long spellings of bsub options (xce/cli/submit.py, xce/cli/quick.py).
LONG_SPELLINGS = {"--cwd": "-cwd"}

_PTY = "interactive jobs with a pseudo-terminal or X11 are not supported (use -I)"
BSUB_REFUSED: dict[str, str] = {
    "-Is": _PTY, "-Ip": _PTY, "-IS": _PTY, "-ISp": _PTY, "-ISs": _PTY, "-IX": _PTY,
    "-gpu": "GPU requests are not supported",
}


class Source(Plain, frozen=True):
    """Where words come from, for messages: the command line or ``#BSUB line 3``."""

    prefix: str = ""  # "#BSUB " before the option in a message
    noun: str = "option"
    suffix: str = ""  # " at line 3"
    label: str = "command line"

    def fail(self, option: str, what: str) -> DirectiveError:
        return DirectiveError(f"{self.prefix}{option}: {what}{self.suffix}")


def directive_source(keyword: str, line: int) -> Source:
    return Source(f"{keyword} ", "directive", f" at line {line}", f"{keyword} at line {line}")


class OptionSet(Plain):
    """Raw option values (``-R`` a list, flags True) and where each was set."""

    values: dict[str, Value] = {}
    origins: dict[str, str] = {}


class ParsedArgs(Plain, frozen=True):
    options: OptionSet
    command: list[str]

    def __iter__(self) -> Iterator[Any]:  # ``options, command = parse_bsub_args(...)``
        return iter((self.options, self.command))


def parse_bsub_args(argv: Sequence[str], source: Source = Source(), *,
                    into: OptionSet | None = None, allow_command: bool = True) -> ParsedArgs:
    """Read options from ``argv`` (into ``into`` if given); the rest is the command."""
    opts = into if into is not None else OptionSet(values={}, origins={})
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            i += 1
            break
        if not word.startswith("-") or word == "-":
            break
        i = _take(opts, argv, i, source)
    command = list(argv[i:])
    if command and not allow_command:
        raise source.fail(command[0], f"unexpected word {command[0]!r} (a {source.noun} line holds options only)")
    return ParsedArgs(opts, command)


def _take(opts: OptionSet, argv: Sequence[str], i: int, source: Source) -> int:
    """Store the option at ``argv[i]``; return the index after it (and its value)."""
    name = argv[i]
    spec = BSUB_OPTIONS.get(name)
    if spec is None:
        if name in BSUB_REFUSED:
            raise source.fail(name, f"{name} is not supported: {BSUB_REFUSED[name]}")
        raise source.fail(name, f"unknown {source.noun} {name}")
    _check_slot(opts, name, spec, source)
    opts.origins[name] = source.label
    if spec.kind == "flag":
        opts.values[name] = True
        return i + 1
    if i + 1 >= len(argv):
        raise source.fail(name, f"{name} needs a value")
    value = argv[i + 1]
    if spec.kind == "list":
        current = opts.values.setdefault(name, [])
        assert isinstance(current, list)
        current.append(value)
    else:
        opts.values[name] = value
    return i + 2


def _check_slot(opts: OptionSet, name: str, spec: OptSpec, source: Source) -> None:
    """Two spellings of one slot in one set (``-o`` and ``-oo``) contradict each other."""
    for other in opts.values:
        if other != name and BSUB_OPTIONS[other].slot == spec.slot:
            raise source.fail(name, f"{name} and {other} both set the {spec.slot} file; give one")


def merge_options(directives: OptionSet, command_line: OptionSet) -> OptionSet:
    """Directives overridden by the command line, slot by slot."""
    slots = {BSUB_OPTIONS[name].slot for name in command_line.values}
    values = {k: v for k, v in directives.values.items() if BSUB_OPTIONS[k].slot not in slots}
    origins = {k: directives.origins[k] for k in values}
    values.update(command_line.values)
    origins.update(command_line.origins)
    return OptionSet(values=values, origins=origins)
