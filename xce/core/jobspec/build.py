"""The one builder from bsub-style options (and a job script) to JobSpec fields.

Every door that speaks bsub (``xce submit``, the ``bsub`` front-end in xce/compat) reads
its words and its script, then calls ``bsub_job``; nothing here does I/O, so what a door
has read (argv, the script's text, the environment, the working directory) comes in a
``Submission``::

    door:  argv --options.parse_bsub_args--> (command-line OptionSet, command words)
           FILE or stdin --------------------> script text (is_script decides for a FILE)
    bsub_job:  directives of the script (directives.bsub_directives)
               -> merge_options (the command line wins, slot by slot)
               -> bsub.bsub_request (each value parsed by its module)
               -> refuse_unsupported (what the job model cannot carry yet, by name)
               -> job_fields (JobSpec field by field; the -env policy over the environment)

A script is kept as submitted (``JobSpec.script``, hard state, size-limited by
xce/core/limits.py); its ``command`` is ``[name, *args]`` as submitted (``name`` the
FILE as given, or ``STDIN``): the worker runs its private copy of the script under its
``#!`` line or /bin/sh with those args.  ``-K``/``-I`` stay in the returned request: they
are for the door (wait, stream), not for the job.
"""

from __future__ import annotations

import posixpath

from xce.core.jobspec.bsub import BsubRequest, EnvPolicy, bsub_request
from xce.core.jobspec.errors import DirectiveError
from xce.core.jobspec.options import OptionSet, merge_options
from xce.core.jobspec.plain import ARRAY_SIZE_CAP, Plain
from xce.core.jobspec.scripts import is_script

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (plain.py says why)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["STDIN_NAME", "BuiltJob", "Submission", "apply_env", "bsub_job", "is_script", "job_fields"]

STDIN_NAME = "STDIN"  # a script read from standard input, as bjobs -l shows it
NOT_YET = "is not supported by this XCE yet"

# Options bsub_request parses that XCE does not take at submit: refused by name, never dropped.
UNSUPPORTED: dict[str, str] = {
    "-U": "-U (advance reservations): XCE has no advance reservations (LSF's brsvadd); submit without -U",
    "-En": "-En drops a pending job's pre-execution command: it is for modify (bmod -En), not submit",
}


class Submission(Plain, frozen=True):
    """What a door read: the words after the options, the script's text if any, where from."""

    command: list[str]         # a script: [FILE, *args] (or [] for stdin); else the job's argv
    script: str | None = None  # the job script's text, as submitted
    environ: dict[str, str] = {}
    cwd: str = "/"             # the submitting directory (absolute)


class BuiltJob(Plain, frozen=True):
    fields: dict[str, Any]  # JobSpec fields (xce.client.make_spec adds user, submit_host and checks)
    request: BsubRequest     # -K, -I and the rest, as parsed


def bsub_job(command_line: OptionSet, sub: Submission, *, mem_unit: str = "MB",
             max_array_size: int = ARRAY_SIZE_CAP) -> BuiltJob:
    """The JobSpec fields of one bsub-style submission; DirectiveError & co. name the bad part."""
    if not sub.command and sub.script is None:
        raise DirectiveError("no command given (submit [options] COMMAND, a FILE, or a script on stdin)")
    directives = _directives(sub.script) if sub.script else OptionSet(values={}, origins={})
    req = bsub_request(merge_options(directives, command_line), mem_unit=mem_unit, max_array_size=max_array_size)
    refuse_unsupported(req)
    return BuiltJob(job_fields(req, sub), req)


def _directives(script: str) -> OptionSet:
    # lazy: only a job script has #BSUB lines to read (directives.py loads shlex and the sbatch grammar)
    from xce.core.jobspec.directives import bsub_directives

    return bsub_directives(script).options


def refuse_unsupported(req: BsubRequest) -> None:
    given = {"-U": req.reservation is not None, "-En": req.pre_exec_cancel}
    for name, present in given.items():
        if present:
            raise DirectiveError(UNSUPPORTED[name])
    if req.kill_if_never and req.depend is None:
        raise DirectiveError("-ti ends the job when its dependency can never be met: give the dependency with -w")


def job_fields(req: BsubRequest, sub: Submission) -> dict[str, Any]:
    """JobSpec fields from a parsed request; only what was given (the JobSpec defaults stand)."""
    fields: dict[str, Any] = {
        "command": _command(sub), "env": apply_env(req.env, sub.environ),
        "cwd": posixpath.normpath(posixpath.join(sub.cwd, req.cwd)) if req.cwd else sub.cwd}
    given = {"name": req.name, "queue": req.queue, "slots": req.slots,
             "resreq": with_nodes(req.resreq or "", req.nodes, req.slots or 1),
             "mem_limit": req.mem_limit, "run_limit": req.run_limit, "run_estimate": req.run_estimate,
             "project": req.project, "group": req.user_group, "priority": req.priority, "depend": req.depend, "array": req.array,
             "stdout": req.stdout, "stderr": req.stderr, "script": sub.script,
             "pre_exec": req.pre_exec}
    fields.update((k, v) for k, v in given.items() if v is not None and v != "")  # -M 0 is given (and refused)
    if req.exclusive:
        fields["exclusive"] = True
    if req.hold:
        fields["hold"] = True
    if req.warn_signal is not None:  # LSF sends the warning to every process of the job
        fields.update(warn_signal=req.warn_signal, warn_time=float(req.warn_time or 0), warn_to="")
    if req.kill_if_never:
        fields["dep_never_kill"] = True
    if req.stdout and req.stdout_overwrite:
        fields["stdout_overwrite"] = True
    if req.stderr and req.stderr_overwrite:
        fields["stderr_overwrite"] = True
    return fields


def with_nodes(resreq: str, nodes: int | None, slots: int) -> str:
    """``-nnodes N`` (IBM CSM's form) as span[]: one host is ``span[hosts=1]``, N hosts ``span[ptile=slots/N]``."""
    if nodes is None:
        return resreq
    if "span[" in resreq:
        raise DirectiveError(f"-nnodes {nodes} and span[] in -R both place the slots; give one")
    if nodes == 1:
        span = "span[hosts=1]"
    elif slots % nodes == 0 and slots >= nodes:
        span = f"span[ptile={slots // nodes}]"
    else:
        raise DirectiveError(f"-nnodes {nodes}: -n {slots} slots cannot be spread evenly over {nodes} hosts")
    return f"{resreq} {span}".strip()


def _command(sub: Submission) -> list[str]:
    if sub.script is None:
        return list(sub.command)
    return list(sub.command) or [STDIN_NAME]


def apply_env(policy: EnvPolicy, environ: Mapping[str, str]) -> dict[str, str]:
    """``-env`` (an EnvPolicy; sbatch's --export maps to one) applied to the submitting environment."""
    if policy.mode == "none":
        env: dict[str, str] = {}
    elif policy.mode == "names":
        env = {k: environ[k] for k in policy.names if k in environ}
    else:
        env = {k: v for k, v in environ.items() if k not in policy.exclude}
    env.update(policy.values)
    return env
