"""Running jobs beyond start and end: signals to a job's processes (``xce kill -s``), what
workers observed of them (suspended or not), and peek (bpeek).

None of these changes replicated state: a signal is an order to the workers of a running
job, and the suspensions they report (JOB_SIGNALLED) are soft state, compared with the state
by xce/reactors/signals.py.  A peek is forwarded to the job's first host
(where its command runs) under a ticket, and answered when that worker's JOB_OUTPUT comes
back, or with an error after PEEK_WAIT seconds (``expire_peeks``, from the timer).
"""

from __future__ import annotations

from collections.abc import Container

from xce.core.arrays import SHIFT, element_text
from xce.core.errors import InvalidRequest, NotFound, Unavailable
from xce.core.model import ACTIVE, TERMINAL, WARN_TO, Job, JobState
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.reactors.context import Context, Peek
from xce.reactors.outbox import Outbox, Request
from xce.reactors.relay import expire, settle

PEEK_WAIT = 5.0        # seconds a client waits for the worker's answer to its peek
PEEK_MAX = 1 << 20     # bytes of each file a peek may ask for


def release_order(job: Job) -> bool:
    """Whether the job's other shares are to be ended: its command ran on its first host
    (LSF's parallel job ends when that does), and some other share still runs."""
    return bool(job.hosts) and job.hosts[0] in job.finished_hosts \
        and any(h not in job.finished_hosts for h in job.hosts)


def signal_results(jobs: dict[int, Job], ids: list[int], sig: int,
                   arrays: Container[int] = ()) -> tuple[dict[int, str], list[Job]]:
    """Per id what ``kill -s`` does, and the jobs to send the signal to; an array's id (in
    ``arrays``) is each of its running elements (a scan: a signal to a whole array is rare)."""
    out: dict[int, str] = {}
    send: list[Job] = []
    for jid in ids:
        job = jobs.get(jid)
        if job is None and jid in arrays:
            running = [e for e in jobs.values() if e.id >> SHIFT == jid and e.state in ACTIVE]
            out[jid] = f"signal {sig} sent to {len(running)} running elements" if running else \
                "not running: no element of array runs"
            send += running
        elif job is None:
            out[jid] = "not found"
        elif job.state not in ACTIVE:
            out[jid] = f"not running: {job.state.value}"
        else:
            out[jid] = f"signal {sig} sent"
            send.append(job)
    return out, send


def on_signal(ctx: Context, req: Request, body: S.KillRequest, out: Outbox) -> None:
    """``xce kill -s SIGNAL``: the signal to every running share; nothing is committed."""
    assert body.signal is not None
    if not 0 < body.signal < 65:
        raise InvalidRequest(f"signal must be 1-64, got {body.signal}")
    if body.to not in WARN_TO:
        raise InvalidRequest(f"kill: to must be one of {', '.join(repr(w) for w in WARN_TO)} (every process, "
                             f"the batch shell, the steps), got {body.to!r}")
    results, jobs = signal_results(ctx.state.jobs, body.ids, body.signal, ctx.state.arrays)
    for job in jobs:
        for host in job.hosts:
            if host not in job.finished_hosts and host in ctx.book.workers:
                out.order(host, Op.SIGNAL_JOB, S.SignalJob(job_id=job.id, attempt=job.attempt, signal=body.signal,
                                                           to=body.to))
    out.reply(req, S.KillReply(results=results))


def on_peek(ctx: Context, req: Request, body: S.PeekRequest, out: Outbox) -> None:
    if not 0 < body.max_bytes <= PEEK_MAX:
        raise InvalidRequest(f"peek: max_bytes must be 1-{PEEK_MAX}, got {body.max_bytes}")
    expire_peeks(ctx, req.now, out)
    job = ctx.state.jobs.get(body.id)
    if job is None and body.id in ctx.state.arrays:
        raise InvalidRequest(f"job {body.id} is an array: peek at one of its elements, {body.id}[INDEX]")
    if job is None:
        raise NotFound(f"job {element_text(body.id)} not found")
    if job.state not in ACTIVE or not job.hosts:
        out.reply(req, unpeekable(job))
        return
    host = job.hosts[0]
    if host not in ctx.book.workers:
        raise Unavailable(f"job {element_text(body.id)}: its host {host} is not connected")
    ticket = ctx.book.ticket()
    ctx.book.peeks[ticket] = Peek(req, body.id, job.state.value, req.now)
    out.order(host, Op.PEEK_JOB, S.PeekJob(job_id=body.id, attempt=job.attempt, ticket=ticket,
                                           max_bytes=body.max_bytes))


def on_job_output(ctx: Context, req: Request, body: S.JobOutput, out: Outbox) -> None:
    out.reply(req, S.Ack())
    waiting = settle(ctx.book.peeks, body.ticket, body.job_id)
    if waiting is None:
        return  # expired, or not ours
    if body.error:
        out.error(waiting.client, Unavailable(f"peek: {body.error}"))
        return
    out.reply(waiting.client, S.PeekReply(job_id=waiting.job_id, state=waiting.state, host=body.host,
                                          stdout_path=body.stdout_path, stderr_path=body.stderr_path,
                                          stdout=body.stdout, stderr=body.stderr))


def expire_peeks(ctx: Context, now: float, out: Outbox) -> None:
    expire(ctx.book.peeks, now, PEEK_WAIT, "peek", out)


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
