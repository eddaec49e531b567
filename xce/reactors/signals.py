"""Stop and continue as a convergence: each running share's processes end up as its job's state says.

The state is what is wanted (desired): a job USUSP or SSUSP has its processes stopped on
every host, a RUN job has them running.  What a worker last said (observed) is soft state,
``Book.suspended``: from its JOB_SIGNALLED answers and from the tasks it lists when it
registers.  Where the two differ the leader orders SIGSTOP or SIGCONT (SIGNAL_JOB) and keeps
the intent in ``Book.signals`` until a worker's word matches: ``resignal`` (from the timer)
sends it again after RESEND_AFTER (as any order), so an order lost on the way, to a worker that was away,
or by a leader that failed over, still takes effect (a new leader learns every share's word
at registration).  This is LSF's "retries the most recent signal request".

A JOB_SIGNALLED that answers a raw ``xce kill -s`` (no intent in flight for that share) is
kept as the worker's word but not corrected: ``kill -s`` changes no job state.  A worker
that registers again is corrected, though: a RUN job it says is stopped is continued.

What is sent per observation (``wanted``)::

    state            observed not suspended   observed suspended
    RUN              -                        SIGCONT
    USUSP, SSUSP     SIGSTOP                  -
    UNKWN, killed    -                        -    (its host is silent; a kill continues it itself)
"""

from __future__ import annotations

import logging
import signal

from xce.core.model import ACTIVE, Job, JobState
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.reactors.context import Context
from xce.reactors.orders import RESEND_AFTER
from xce.reactors.outbox import Outbox, Request

log = logging.getLogger("xce.controller")
STOPPED = frozenset({JobState.USUSP, JobState.SSUSP})


def wanted(job: Job) -> bool | None:
    """Whether the job's processes should be stopped; None: not the leader's to say now."""
    if job.state not in ACTIVE or job.state == JobState.UNKWN or job.kill_requested:
        return None
    return job.state in STOPPED


def converge(ctx: Context, job: Job, now: float, out: Outbox) -> None:
    """Order each share whose worker's last word differs from the state to stop or continue."""
    stop = wanted(job)
    if stop is None:
        return
    book = ctx.book
    for host in job.hosts:
        if host in job.finished_hosts:
            continue
        key = (job.id, host)
        asked = book.signals.get(key)
        if asked is not None and asked[:2] == (job.attempt, stop):
            continue  # already asked: resignal sends it again if need be
        if asked is not None or book.suspended.get(key, False) != stop:  # the other way in flight, or not as wanted
            send(ctx, job, host, stop, now, out)


def send(ctx: Context, job: Job, host: str, stop: bool, now: float, out: Outbox) -> None:
    ctx.book.signals[(job.id, host)] = (job.attempt, stop, now)
    if host in ctx.book.workers:  # else at its registration
        out.order(host, Op.SIGNAL_JOB, S.SignalJob(job_id=job.id, attempt=job.attempt,
                                                   signal=signal.SIGSTOP if stop else signal.SIGCONT))


def on_job_signalled(ctx: Context, req: Request, body: S.JobSignalled, out: Outbox) -> None:
    if body.detail:
        log.info("signal %d to job %d on %s: %s", body.signal, body.job_id, body.host, body.detail)
    observed(ctx, body)
    out.reply(req, S.Ack())


def observed(ctx: Context, body: S.JobSignalled) -> None:
    """A worker's word on a share: kept, and, if the leader asked something of
    that share, compared with the state.  A match ends the intent; a mismatch (a stop's answer
    arriving after a resume, a signal that did not take) leaves it to ``resignal``, never an
    immediate order back: a worker that cannot comply must not make the two ping-pong."""
    key = (body.job_id, body.host)
    book = ctx.book
    book.suspended[key] = body.suspended
    job = ctx.state.jobs.get(body.job_id)
    asked = book.signals.get(key)
    if job is None or asked is None or asked[0] != body.attempt or job.attempt != body.attempt:
        return  # a raw `kill -s`, or an older attempt's
    if body.detail or wanted(job) in (None, body.suspended):
        del book.signals[key]  # as wanted, or nothing to signal there (no such task: not ours to fix)


def resignal(ctx: Context, now: float, out: Outbox) -> None:
    """Send again what no worker confirmed; drop what the state no longer wants."""
    book, jobs = ctx.book, ctx.state.jobs
    for key, (attempt, stop, sent) in list(book.signals.items()):
        job = jobs.get(key[0])
        if job is None or job.attempt != attempt or wanted(job) != stop or key[1] in job.finished_hosts:
            del book.signals[key]
        elif now - sent > RESEND_AFTER:
            send(ctx, job, key[1], stop, now, out)
