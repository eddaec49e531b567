"""`xce launch` (blaunch) and srun's steps inside a job: start tasks of this job on its hosts,
relay their output here, and give back their exit codes.

Only a process inside a running job can launch: it shows the job's ``XCE_LAUNCH_TOKEN``
(the worker puts it in every job's environment).  Each task is started through the leader
(LAUNCH, which checks the token and the host) on its host's worker, inside the job's share
there, then polled for the output past what was already relayed, until it ended: one LAUNCH_POLL a
round for all the caller's tasks (``LaunchPoll.more``), not one a task.  A poll that brings nothing waits a little longer before the next, up to POLL_MAX_S;
one that brings output polls again at once.  Interrupted (Ctrl-C, SIGTERM), the caller's
running tasks are sent SIGTERM first.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from xce.core.errors import InvalidRequest, Unavailable
from xce.proto import schema as S
from xce.proto import writes
from xce.proto.opcodes import Op

TOKEN_VAR = "XCE_LAUNCH_TOKEN"
POLL_MIN_S = 0.02
POLL_MAX_S = 0.25
CHUNK = 256 * 1024
CHUNK_MIN = 4 * 1024  # a stream's share of CHUNK when one poll reads many tasks


@dataclass
class TaskRun:
    """One task to start and follow: where, what, and where its output goes here."""

    host: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    stdout: BinaryIO | None = None  # None: this process's stdout
    stderr: BinaryIO | None = None
    cwd: str = ""
    n: int = 0                      # its number on its host, once started
    out_at: int = 0
    err_at: int = 0
    exit_code: int | None = None
    done: bool = False


def launch_token(environ: dict[str, str] | None = None) -> str:
    """This job's launch token; a clear refusal outside a job."""
    token = (os.environ if environ is None else environ).get(TOKEN_VAR, "")
    if not token:
        raise InvalidRequest(f"not inside an XCE job: {TOKEN_VAR} is not set (launch runs tasks of the "
                             "job it is called from, on that job's hosts)")
    return token


def parse_blaunch(words: Sequence[str]) -> tuple[list[str], list[str]]:
    """(hosts, command) of ``blaunch [-n] [-z "host ..."] [-u hostfile] host command [argument ...]``
    (LSF's syntax; ``-n``, stdin not read, is what XCE always does; ``-no-shell`` likewise)."""
    hosts: list[str] = []
    i = 0
    while i < len(words) and words[i].startswith("-"):
        w = words[i]
        if w in ("-n", "-no-shell", "-use-login-shell"):
            i += 1
        elif w in ("-z", "-u"):
            if i + 1 >= len(words):
                raise InvalidRequest(f"blaunch: {w} needs a value")
            hosts += _hostfile(words[i + 1]) if w == "-u" else words[i + 1].split()
            i += 2
        elif w == "--":
            i += 1
            break
        else:
            raise InvalidRequest(f"blaunch: unknown option {w} (XCE reads -n, -z \"host ...\", -u hostfile)")
    rest = list(words[i:])
    if not hosts:
        if not rest:
            raise InvalidRequest("blaunch: no host given")
        hosts, rest = [rest[0]], rest[1:]
    if not rest:
        raise InvalidRequest("blaunch: no command given")
    return hosts, rest


def _hostfile(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return [w for line in f for w in line.split()[:1]]
    except OSError as e:
        raise InvalidRequest(f"blaunch: cannot read host file {path}: {e.strerror}") from None


def run_tasks(client: Any, runs: list[TaskRun], token: str | None = None,
              sleep: Callable[[float], None] = time.sleep) -> list[int | None]:
    """Start every task, relay their output until all ended; their exit codes (None: lost)."""
    token = token or launch_token()
    started: list[TaskRun] = []
    try:
        for r in runs:
            reply = client.request(Op.LAUNCH, S.LaunchRequest(token=token, host=r.host, command=r.command,
                                                              key=writes.new_key(), cwd=r.cwd or os.getcwd(),
                                                              env=r.env))
            r.n = reply.task
            started.append(r)
        wait = POLL_MIN_S
        while not all(r.done for r in runs):
            moved = _poll_all(client, token, [r for r in runs if not r.done])
            wait = POLL_MIN_S if moved else min(wait * 2, POLL_MAX_S)
            if not moved:
                sleep(wait)
    except BaseException:
        _terminate(client, token, [r for r in started if not r.done])
        raise
    return [r.exit_code for r in runs]


def _poll_all(client: Any, token: str, runs: list[TaskRun]) -> bool:
    """One poll for every task still running (not one each: a round costs one request, whatever the
    tasks); their output relayed, at most CHUNK a stream in all; whether anything came."""
    first, *rest = runs
    reply = client.request(Op.LAUNCH_POLL, S.LaunchPoll(
        token=token, host=first.host, task=first.n, stdout_offset=first.out_at, stderr_offset=first.err_at,
        max_bytes=max(CHUNK_MIN, CHUNK // len(runs)), more=[S.TaskAt(r.host, r.n, r.out_at, r.err_at) for r in rest]))
    return any([_took(r, a) for r, a in zip(runs, [reply, *reply.more], strict=True)])


def _poll(client: Any, token: str, r: TaskRun, sig: int = 0) -> bool:
    """One poll of ``r`` (with a signal to send it first); whether anything came."""
    reply = client.request(Op.LAUNCH_POLL, S.LaunchPoll(token=token, host=r.host, task=r.n, stdout_offset=r.out_at,
                                                        stderr_offset=r.err_at, max_bytes=CHUNK, signal=sig))
    return _took(r, reply)


def _took(r: TaskRun, reply: S.LaunchReply) -> bool:
    """``reply``'s output relayed to ``r``'s sinks; whether it brought anything."""
    _write(r.stdout or sys.stdout.buffer, reply.stdout)
    _write(r.stderr or sys.stderr.buffer, reply.stderr)
    r.out_at += len(reply.stdout)
    r.err_at += len(reply.stderr)
    if reply.ended:
        r.done, r.exit_code = True, reply.exit_code
    return bool(reply.stdout or reply.stderr or reply.ended)


def _write(sink: BinaryIO, data: bytes) -> None:
    if data:
        sink.write(data)
        sink.flush()


def _terminate(client: Any, token: str, runs: list[TaskRun]) -> None:
    """Best effort: SIGTERM to tasks still running when the caller is interrupted."""
    for r in runs:
        try:
            _poll(client, token, r, signal.SIGTERM)
        except (Unavailable, Exception):  # noqa: BLE001 - the caller is going away anyway
            pass


def exit_status(codes: list[int | None]) -> int:
    """The caller's exit code: the highest of its tasks' (as srun), 1 for a task whose end was lost."""
    return max((1 if c is None else c for c in codes), default=0)


def with_sigterm(fn: Callable[[], int]) -> int:
    """Run ``fn`` with SIGTERM raised as KeyboardInterrupt, so the tasks are ended first; 143 after a
    SIGTERM, 130 after a Ctrl-C."""
    got: list[int] = []

    def raise_it(signum: int, _: Any) -> None:
        got.append(signum)
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, raise_it)
    try:
        return fn()
    except KeyboardInterrupt:
        return 128 + got[0] if got else 130
    finally:
        signal.signal(signal.SIGTERM, old)
