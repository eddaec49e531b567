"""`xce submit`'s full path: its words, its script, its job (the fast path is xce/cli/quick.py).

    xce [--state-dir D] [--timeout S] submit [xce's long options] [bsub's options] [--] CMD ...
    xce submit [options] FILE [ARGS ...]     FILE a text file: a job script, kept as submitted
    xce submit [options] < FILE              the script on standard input

The words are split here into XCE's own long options (``--cwd``, ``--rerunnable``,
``--dry-run``, ``--json``, ``-h``/``--help`` and the global ``--state-dir``/``--timeout``)
and bsub's, which go through xce/core/jobspec's one parser; the script's ``#BSUB`` lines
and the options become a JobSpec in xce/core/jobspec/build.py, the builder the ``bsub``
front-end uses too.  Reading the FILE or stdin is the only I/O here.

Lazy imports: the full submit path loads the client and job grammars only once the fast path has declined.
"""

from __future__ import annotations

import os
import sys
from typing import Any, NamedTuple

from xce.site.local import script_file
# -K and -I are xce/client/interactive.py's: the bsub front-end calls the same code.
from xce.client.interactive import follow_job, wait_for_job
from xce.core.jobspec.build import BuiltJob, Submission, bsub_job
from xce.core.jobspec.errors import DirectiveError
from xce.core.jobspec.options import BSUB_OPTIONS, LONG_SPELLINGS, OptionSet, parse_bsub_args
from xce.core.limits import SPEC_FIELD

FLAGS = ("--rerunnable", "--reclaim", "--dry-run", "--json", "--help", "-h")
VALUES = {**LONG_SPELLINGS, "--state-dir": "", "--timeout": ""}  # "": not bsub's; kept by the door

USAGE = """\
usage: xce submit [options] [--] CMD [ARG ...] | xce submit [options] FILE [ARG ...] | xce submit [options] < FILE

bsub's options, on the command line or as #BSUB lines in the script's leading comment
block (the command line wins):
  -J NAME  -q QUEUE  -n SLOTS  -R "rusage[mem=2G] span[hosts=1]"  -M LIMIT (bare number = MB)
  -W [HH:]MM (run limit)  -We [HH:]MM (estimate)  -o/-oo FILE  -e/-eo FILE (%J job id, %I index)
  -cwd DIR  -P PROJECT  -G GROUP  -w 'done(12) && ended(13)'  -sp PRIORITY
  -env all|none|VAR,...  -K (wait, exit with the job's code)  -I (show its output as it runs)
  -E "CMD" (pre-execution: run before the job on its first host; a failure sends it back to PEND)
  -H (submit held: PSUSP until xce resume)  -wa SIGNAL -wt [HH:]MM (the signal that long before -W)
XCE's own: --cwd DIR  --rerunnable  --reclaim (run on reclaimable memory; docs/accounting.md)
  --dry-run  --json  --state-dir DIR  --timeout S
See docs/cli.md and docs/jobmodel.md."""


class SubmitArgs(NamedTuple):
    flags: frozenset[str]   # of FLAGS
    values: dict[str, str]  # --state-dir, --timeout
    options: OptionSet      # bsub's, from the command line
    command: list[str]      # the words after the options


def split_args(argv: list[str]) -> SubmitArgs:
    """XCE's long options out, bsub's through options.parse_bsub_args; the rest is the command."""
    flags: set[str] = set()
    values: dict[str, str] = {}
    words: list[str] = []
    i = 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] not in ("-", "--"):
        name, eq, value = argv[i].partition("=") if argv[i].startswith("--") else (argv[i], "", "")
        if name in FLAGS:
            if eq:
                raise DirectiveError(f"{name} takes no value")
            flags.add(name)
            i += 1
        elif name in VALUES:
            if not eq:
                if i + 1 >= len(argv):
                    raise DirectiveError(f"{name} needs a value")
                value, i = argv[i + 1], i + 1
            i += 1
            if VALUES[name]:
                words += [VALUES[name], value]
            else:
                values[name] = value
        else:  # bsub's (an unknown one is refused by parse_bsub_args, by name)
            spec = BSUB_OPTIONS.get(name)
            n = 2 if spec is not None and spec.kind != "flag" else 1
            words += argv[i:i + n]
            i += n
    options, command = parse_bsub_args(words + argv[i:])
    return SubmitArgs(frozenset(flags), values, options, command)


def read_script(command: list[str]) -> str | None:
    """The job script's text: stdin when no command was given, or a text FILE given as the command."""
    limit = SPEC_FIELD["script"].max_bytes + 1  # one byte over is enough for the limit's message
    if not command:
        if sys.stdin is None or sys.stdin.isatty():
            return None
        return sys.stdin.read(limit) or None
    if not script_file(command[0]):
        return None
    try:
        with open(command[0], encoding="utf-8") as f:
            return f.read(limit)
    except (OSError, UnicodeDecodeError) as e:
        raise DirectiveError(f"cannot read the job script {command[0]}: {e}") from None


def build(args: SubmitArgs) -> BuiltJob:
    """The job of ``args`` (the script read here), by the one bsub builder."""
    sub = Submission(command=args.command, script=read_script(args.command), environ=dict(os.environ),
                     cwd=os.getcwd())
    built = bsub_job(args.options, sub)
    if "--rerunnable" in args.flags:
        built.fields["rerunnable"] = True
    if "--reclaim" in args.flags:
        built.fields["reclaim"] = True
    return built


def job_spec(args: SubmitArgs) -> tuple[Any, BuiltJob]:
    """The JobSpec of `xce submit` (quick.py builds the same one, as a dict, or falls back)."""
    from xce.client import make_spec

    built = build(args)
    return make_spec(**built.fields), built


