"""A job wrapper started before its job arrives: its session and its cgroup are paid for while idle.

Two steps of a launch cost wall time, not CPU, on a Linux host, and both used to sit between
RUN_JOB and the command's exec with the worker blocked in them (measured on the 2-core VM,
docs/benchmarks.md "Idle latency"):

- ``setsid``: the kernel makes the session its own scheduler autogroup (~5 ms);
- writing the pid into a cgroup v1 ``cgroup.procs``: the kernel waits for an RCU grace
  period unless another move happened within the last one (~0.4 ms back to back, ~15 ms
  after 0.2 s of quiet: the "idle path wakes too slowly" of issue 19).

So the runner keeps one *spare*: the ``sh`` of the wrapper, already a session leader in a
cgroup of its own, with its task record open as fd 1, waiting on its go pipe.  A job that
the spare can run exactly as a fresh wrapper would (the worker's own user, an absolute cwd,
an environment ``sh`` can ``export`` without changing its own behaviour) gets it: the runner
writes the job's record and then sends the rest of the wrapper through the pipe, which the
spare sources::

    trap k=1 TERM
    . /dev/stdin                     # the job's program, one { ... } group (below)
    exit 125                         # EOF with nothing sent: the worker died, or discard()

    {
    cd -P -- '<cwd>' || { echo "126 ..."; exit 126; }
    unset OLDPWD                     # the spare's cd set it; a fresh sh would not have it
    export 'K=V' ...                 # the job's environment, PWD as sh itself would keep it
    set -- <output paths> <command>
    <the wrapper's body, the same text as a fresh wrapper's>
    }

The program is one brace group, so a worker dying half-way through writing it leaves a
syntax error (exit 2, nothing run) rather than half a job.  Everything re-attach needs is
the same as for a fresh wrapper: the record names the job's cgroup (the spare's: ``spare-...``
or a kept one, measure.CgroupPool; not the job key), the wrapper still writes the exit status
into the record.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from xce.worker.measure import Meter, proc_stat

SPARE_SCRIPT = "trap k=1 TERM\n. /dev/stdin\nexit 125\n"
# Names sh gives a meaning of its own: exporting them from inside the spare would not do what
# a fresh sh started with them in its environment does, so such a job starts a fresh wrapper.
SHELL_OWN = frozenset({"IFS", "PPID", "OPTIND", "LINENO", "ENV", "CDPATH", "PS4"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_PROGRAM = 60 * 1024  # under a pipe's buffer: the write never waits on the spare
_serial = itertools.count(1)


@dataclass(eq=False)
class Spare:
    """One waiting wrapper: its process, its record file (open as its fd 1), its go pipe."""

    proc: subprocess.Popen[bytes]
    name: str             # of its record file (``<name>.rec``) and of its cgroup, if it made one
    rec_path: Path
    rec_fd: int
    go_w: int
    meter: Meter
    proc_start: int


def start_spare(task_dir: Path, meter_of: Callable[[str, int], Meter]) -> Spare:
    """Start a spare: a session leader in a cgroup of its own (``meter_of(name, pid)``: the
    runner's, CgroupPool.meter), blocked on its pipe."""
    name = f"spare-{os.getpid()}-{next(_serial)}"
    rec_path = task_dir / f"{name}.rec"
    rec_fd = os.open(rec_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC, 0o644)
    go_r, go_w = os.pipe()
    try:
        proc = subprocess.Popen(["/bin/sh", "-c", SPARE_SCRIPT, "xce-job[spare]"], stdin=go_r, stdout=rec_fd,
                                stderr=subprocess.DEVNULL, cwd="/", env={}, start_new_session=True)
    except BaseException:
        for fd in (rec_fd, go_w):
            os.close(fd)
        rec_path.unlink(missing_ok=True)
        raise
    finally:
        os.close(go_r)
    meter = meter_of(name, proc.pid)
    st = proc_stat(proc.pid)
    return Spare(proc, name, rec_path, rec_fd, go_w, meter, st.start if st else 0)


def program(body: str, params: list[str], env: dict[str, str], cwd: str) -> bytes | None:
    """What the spare sources to become this job's wrapper; None when it cannot be exactly that."""
    if not os.path.isabs(cwd) or not os.access(cwd, os.X_OK) or any(not _NAME.fullmatch(k) or k in SHELL_OWN for k in env):
        return None
    q = shlex.quote
    lines = ["{", f"cd -P -- {q(cwd)} || {{ echo '126 cannot change to the working directory'; exit 126; }}",
             "unset OLDPWD"]
    lines += [f"export {q(f'{k}={v}')}" for k, v in env.items() if k != "PWD"]
    if "PWD" in env:  # sh keeps an inherited PWD that names its cwd, and else sets the physical path
        pwd = q(env["PWD"])
        lines.append(f"case {pwd} in /*) [ {pwd} -ef . ] && PWD={pwd};; esac")
    lines += [f"set -- {' '.join(q(p) for p in params)}", body, "}", ""]
    text = "\n".join(lines).encode()
    return text if len(text) <= MAX_PROGRAM else None


def usable(spare: Spare) -> bool:
    """Whether the spare still waits (nobody killed it meanwhile)."""
    return spare.proc.poll() is None


def discard(spare: Spare) -> None:
    """End a spare that no job took: EOF makes it exit 125; reap it, drop its record."""
    os.close(spare.go_w)
    os.close(spare.rec_fd)
    try:
        spare.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        spare.proc.kill()
        spare.proc.wait()
    spare.rec_path.unlink(missing_ok=True)
