"""The controller's part in running jobs beyond start and end: signals to a job's processes
(``xce kill -s``), what workers observed of them (suspended or not), and peek (bpeek).

None of these changes replicated state: a signal is an order to the workers of a running
job, and the suspensions they report are soft state (``suspended``), kept for the job
control of issue 14 to confirm USUSP/SSUSP.  A peek is forwarded to the job's first host
(where its command runs) under a ticket, and answered when that worker's JOB_OUTPUT comes
back, or with an error after PEEK_WAIT seconds.  Each handler is one function, so that it
can move to the reactors (issue 13) as it is.
"""

from __future__ import annotations

import itertools
import logging
import time
from typing import TYPE_CHECKING

from xce.core.errors import InvalidRequest, NotFound, Unavailable
from xce.core.model import ACTIVE, TERMINAL, Job, JobState
from xce.proto import schema as S
from xce.proto.codec import error_reply
from xce.proto.opcodes import Op

if TYPE_CHECKING:
    from xce.daemons.controller import Controller

log = logging.getLogger("xce.controller")
PEEK_WAIT = 5.0        # seconds a client waits for the worker's answer to its peek
PEEK_MAX = 1 << 20     # bytes of each file a peek may ask for
_tickets = itertools.count(1)


def release_order(job: Job) -> bool:
    """Whether the job's other shares are to be ended: its command ran on its first host
    (LSF's parallel job ends when that does), and some other share still runs."""
    return bool(job.hosts) and job.hosts[0] in job.finished_hosts \
        and any(h not in job.finished_hosts for h in job.hosts)


def signal_results(jobs: dict[int, Job], ids: list[int], sig: int) -> tuple[dict[int, str], list[Job]]:
    """Per id what ``kill -s`` does, and the jobs to send the signal to."""
    out: dict[int, str] = {}
    send: list[Job] = []
    for jid in ids:
        job = jobs.get(jid)
        if job is None:
            out[jid] = "not found"
        elif job.state not in ACTIVE:
            out[jid] = f"not running: {job.state.value}"
        else:
            out[jid] = f"signal {sig} sent"
            send.append(job)
    return out, send


class JobRunDoor:
    """Mixed into Controller: signals, observed suspensions, peeks."""

    def h_signal(self: Controller, ident: bytes, rid: int, body: S.KillRequest) -> None:
        """``xce kill -s SIGNAL``: the signal to every running share; nothing is committed."""
        assert body.signal is not None
        if not 0 < body.signal < 65:
            raise InvalidRequest(f"signal must be 1-64, got {body.signal}")
        with self.raft.lock:
            results, jobs = signal_results(self.state.jobs, body.ids, body.signal)
            for job in jobs:
                for host in job.hosts:
                    if host not in job.finished_hosts:
                        self.send_worker(host, Op.SIGNAL_JOB, S.SignalJob(job_id=job.id, attempt=job.attempt,
                                                                          signal=body.signal))
        self.ok(ident, rid, S.KillReply(results=results))

    def h_job_signalled(self: Controller, ident: bytes, rid: int, body: S.JobSignalled) -> None:
        if body.detail:
            log.info("signal %d to job %d on %s: %s", body.signal, body.job_id, body.host, body.detail)
        self.suspended[(body.job_id, body.host)] = body.suspended
        self.ok(ident, rid, S.Ack())

    def h_peek(self: Controller, ident: bytes, rid: int, body: S.PeekRequest) -> None:
        if not 0 < body.max_bytes <= PEEK_MAX:
            raise InvalidRequest(f"peek: max_bytes must be 1-{PEEK_MAX}, got {body.max_bytes}")
        self.expire_peeks(time.time())
        with self.raft.lock:
            job = self.state.jobs.get(body.id)
            if job is None:
                raise NotFound(f"job {body.id} not found")
            if job.state not in ACTIVE or not job.hosts:
                self.ok(ident, rid, unpeekable(job))
                return
            host, attempt = job.hosts[0], job.attempt
        if host not in self.workers:
            raise Unavailable(f"job {body.id}: its host {host} is not connected")
        ticket = next(_tickets)
        self.peeks[ticket] = (ident, rid, body.id, job.state.value, time.time())
        self.send_worker(host, Op.PEEK_JOB, S.PeekJob(job_id=body.id, attempt=attempt, ticket=ticket,
                                                      max_bytes=body.max_bytes))

    def h_job_output(self: Controller, ident: bytes, rid: int, body: S.JobOutput) -> None:
        self.ok(ident, rid, S.Ack())
        waiting = self.peeks.pop(body.ticket, None)
        if waiting is None or waiting[2] != body.job_id:
            return  # expired, or not ours
        client, crid, jid, state, _ = waiting
        if body.error:
            self.send(client, error_reply(crid, Unavailable(f"peek: {body.error}"), self.raft.term()))
            return
        self.ok(client, crid, S.PeekReply(job_id=jid, state=state, host=body.host, stdout_path=body.stdout_path,
                                          stderr_path=body.stderr_path, stdout=body.stdout, stderr=body.stderr))

    def expire_peeks(self: Controller, now: float) -> None:
        for ticket, (client, crid, jid, _, at) in list(self.peeks.items()):
            if now - at > PEEK_WAIT:
                del self.peeks[ticket]
                self.send(client, error_reply(crid, Unavailable(
                    f"peek: job {jid}'s host did not answer within {PEEK_WAIT:g} s"), self.raft.term()))


def unpeekable(job: Job) -> S.PeekReply:
    """The answer for a job that runs nowhere: pending, or ended (its output is in its files)."""
    if job.state == JobState.PEND:
        note = f"job {job.id} is PEND: it has no output yet"
    elif job.state in TERMINAL:
        where = job.spec.stdout or "the worker's output directory (<state_dir>/worker-<host>/output)"
        note = f"job {job.id} is {job.state.value}: its output is in {where}"
    else:
        note = f"job {job.id} is {job.state.value}"
    return S.PeekReply(job_id=job.id, state=job.state.value, stdout_path=job.spec.stdout or "",
                       stderr_path=job.spec.stderr or "", note=note)
