"""Orders to workers: RUN_JOB for each share of a placed job, KILL_JOB for a killed one, and their follow-up.

Dispatch is keyed by (job, attempt) and re-sent until the worker confirms
(``Book.unconfirmed``); a kill of a share no worker confirmed started is chased, then the
share ended (``chase_kills``), so a job no worker runs cannot stay RUN.
"""

from __future__ import annotations

import logging

from xce.core.arrays import split_id
from xce.core.limits import body_limit
from xce.core.model import ACTIVE, Alloc, HostUsage, Job, JobState, reclaiming
from xce.core.state import Finish
from xce.proto import schema as S
from xce.proto.codec import encode
from xce.proto.opcodes import Op
from xce.reactors.context import Context
from xce.reactors.jobrun import release_order
from xce.reactors.outbox import Outbox
from xce.replica.live import mem_decay
from xce.security.launch import make_token

log = logging.getLogger("xce.controller")
RESEND_AFTER = 2.0  # seconds an order may go unconfirmed before it is sent again


def orders(ctx: Context, job: Job, now: float, out: Outbox) -> None:
    """What a changed job needs its workers to do: start its shares, or kill them."""
    if job.state in ACTIVE and (job.kill_requested or release_order(job)):
        # Killed or requeued (also when suspended), or its command ended on its first host:
        # the other shares end too.
        for host in job.hosts:
            if host not in job.finished_hosts:
                order_kill(ctx, job, host, now, out)
        return
    if job.state != JobState.RUN:
        return
    book = ctx.book
    for a in job.allocs:
        key = (job.id, a.host)
        u = book.unconfirmed.get(key)
        if book.confirmed.get(key) != job.attempt and (u is None or u[0] != job.attempt):
            dispatch(ctx, job, a.host, now, out)


def dispatch(ctx: Context, job: Job, host: str, now: float, out: Outbox) -> None:
    """RUN_JOB for the job's share on ``host``; an order over its size limit ends that share."""
    if job.kill_requested:
        return  # a killed job is never started: the kill's orders end it (order_kill)
    alloc = next(a for a in job.allocs if a.host == host)
    u = ctx.book.unconfirmed.get((job.id, host))
    if u is None or u[0] != job.attempt:
        ctx.book.suspended.pop((job.id, host), None)  # a new attempt starts running
    ctx.book.unconfirmed[(job.id, host)] = (job.attempt, now)
    if host not in ctx.book.workers:
        return  # re-sent once its worker registers
    order = run_order(ctx, job, alloc)
    data = encode(Op.RUN_JOB, 0, order, term=ctx.raft.term())
    limit = body_limit(Op.RUN_JOB.name)
    if len(data) > limit:  # a worker would refuse it: end the share now, not re-send it forever
        end_share(ctx, job, host, now, f"cannot dispatch to {host}: its RUN_JOB order is {len(data):,} "
                                       f"bytes, over the limit of {limit:,} bytes", out)
        return
    out.order(host, Op.RUN_JOB, order, data)


def run_order(ctx: Context, job: Job, alloc: Alloc) -> S.RunJob:
    """The RUN_JOB of the job's share ``alloc``, as the state says it now."""
    duration, decay = mem_decay(job)
    return S.RunJob(job_id=job.id, attempt=job.attempt, spec=job.spec, alloc=alloc, hosts=job.hosts,
                    mem_duration_s=duration, mem_decay=decay, slots=[a.slots for a in job.allocs],
                    element=array_element(job), reclaiming=reclaiming(job.spec, ctx.live.reclaim_queues),
                    launch_token=make_token(ctx.launch_key, job.id, job.attempt),
                    preexec_timeout=_preexec_timeout(ctx, job), mem_in_force=job.mem_in_force.get(alloc.host))


def tell_reservation(ctx: Context, job: Job, host: str, out: Outbox) -> None:
    """Tell the worker running the job's share on ``host`` its reservation in force (shrunk or restored):
    its RUN_JOB again, which a worker takes for a task it runs as news of that task (as of ``-M``).  A
    share not confirmed yet needs nothing: its dispatch, re-sent until confirmed, carries it; a worker
    that registers again is told at its registration (workers.reconcile)."""
    alloc = next((a for a in job.allocs if a.host == host), None)
    if alloc is None or job.state not in ACTIVE or host in job.finished_hosts or host not in ctx.book.workers \
            or ctx.book.confirmed.get((job.id, host)) != job.attempt:
        return
    out.order(host, Op.RUN_JOB, run_order(ctx, job, alloc))


def _preexec_timeout(ctx: Context, job: Job) -> float | None:
    """Seconds the job's -E may run on its first host: its queue's preexec_timeout (None: no limit)."""
    queue = ctx.state.queues.get(job.spec.queue) if job.spec.pre_exec else None
    return queue.preexec_timeout if queue is not None else None


def array_element(job: Job) -> S.ArrayElement | None:
    """Where an array element sits (LSB_JOBINDEX, _STEP, _END), from its id and spec."""
    array_id, index = split_id(job.id)
    if index is None or job.spec.array is None:
        return None
    return S.ArrayElement(array_id=array_id, index=index, step=job.spec.array.step_of(index),
                          end=job.spec.array.end)


def order_kill(ctx: Context, job: Job, host: str, now: float, out: Outbox) -> None:
    book = ctx.book
    reason = job.reason or ("killed by user" if job.kill_requested
                            else f"the job's command ended on {job.hosts[0]}")
    if host in book.workers:
        out.order(host, Op.KILL_JOB, S.KillJob(job_id=job.id, attempt=job.attempt, reason=reason))
    if host in book.registered_at and book.confirmed.get((job.id, host)) != job.attempt:
        # Its worker listed its tasks to this leader and never confirmed this one: chase_kills
        # re-sends, then ends the share.  (An unregistered host's worker tells at registration.)
        first, _ = book.unstarted_kills.get((job.id, host), (now, now))
        book.unstarted_kills[(job.id, host)] = (first, now)


def chase_kills(ctx: Context, now: float, out: Outbox) -> None:
    """Kills of shares no worker confirmed started: re-sent every 2 s, and after ``kill_wait``
    the share is ended (the worker, which gets the kill after any order for the same job,
    reports a task it never started as ended)."""
    book, jobs = ctx.book, ctx.state.jobs
    for key, (first, sent) in list(book.unstarted_kills.items()):
        job = jobs.get(key[0])
        if job is None or job.state != JobState.RUN or key[1] in job.finished_hosts \
                or book.confirmed.get(key) == job.attempt:
            del book.unstarted_kills[key]
        elif now - first > ctx.kill_wait:
            end_share(ctx, job, key[1], now, f"killed before it started: {key[1]} never confirmed it", out)
        elif now - sent > RESEND_AFTER:
            order_kill(ctx, job, key[1], now, out)


def end_share(ctx: Context, job: Job, host: str, now: float, reason: str, out: Outbox) -> None:
    """Commit the end of the job's share on ``host``, which no worker runs."""
    log.warning("job %d on %s: %s", job.id, host, reason)
    ctx.book.unstarted_kills.pop((job.id, host), None)
    reserved = next((a.mem for a in job.allocs if a.host == host), 0)
    out.commit(Finish(time=now, job_id=job.id, attempt=job.attempt, host=host, reason=reason,
                      usage=HostUsage(host=host, reserved=reserved)))
