"""Reclaim: reclaiming jobs go when a host's owners want their memory back.

Run after a heartbeat updated a host's accounts (``on_usage``).  A host that runs
reclaiming jobs is *short* when its reclaim room (accounting.reclaim_room: available for
scheduling plus reclaimable) is below 0 -- an owner's peak rose, so it is no longer settled
and lends nothing, or a reclaiming job outgrew its reservation -- or when its OS-available
memory is under ``worker.mem_floor``.  Then one reclaiming job a heartbeat goes, the one
``accounting.pressure_victim`` picks, as its queue's ``reclaim_policy`` says:

    requeue -> Requeue (killed, then PEND; its memory comes back)    reason RECLAIMED
    suspend -> SysSuspend (SSUSP; a stopped process keeps its pages)
    kill    -> Kill (EXIT)

Only the state change is committed: the kill orders follow from it (orders.py), and so do
SIGSTOP and SIGCONT (the convergence of xce/reactors/signals.py).

Jobs already on their way out count as gone (their charge is added back to the room), so
one owner's growth does not send more reclaiming jobs away than it needs.  A job within its
reservation is never touched here: only reclaiming jobs are candidates.  A job suspended
for it resumes (SysResume) once the host is no longer short.
"""

from __future__ import annotations

import logging

from xce.core import accounting
from xce.core.model import RECLAIMED, Job, JobState, reclaim_suspended
from xce.core.state import Cmd, Kill, Requeue, SysResume, SysSuspend
from xce.core.units import fmt_bytes, parse_mem
from xce.reactors.context import Context
from xce.reactors.outbox import Outbox

log = logging.getLogger("xce.controller")
RESEND_AFTER = 5.0  # seconds before a decision whose command has not taken effect is made again


def on_usage(ctx: Context, host: str, now: float, out: Outbox) -> None:
    """After ``host``'s usage moved: send a reclaiming job away, or resume one, if due."""
    live = ctx.live
    lent = live.ledger.reclaiming(host)
    if not lent:
        return
    jobs = [j for jid in sorted(lent) if (j := ctx.state.jobs.get(jid)) is not None]
    room, floor_short = shortage(ctx, host, jobs, now)
    if room >= 0 and not floor_short:
        resume_one(ctx, host, jobs, now, out)
        return
    victim = pick(ctx, host, jobs, now)
    if victim is not None:
        why = (f"{RECLAIMED}: host {host}'s owners want their memory back "
               f"(reclaim room {fmt_bytes(room)}{', OS-available under the floor' if floor_short else ''})")
        send_away(ctx, victim, why, now, out)


def shortage(ctx: Context, host: str, jobs: list[Job], now: float) -> tuple[int, bool]:
    """(the host's reclaim room counting the jobs on their way out as gone, whether it is under the floor)."""
    live, ledger = ctx.live, ctx.live.ledger
    osa = accounting.os_figure(live.os_available.get(host), ctx.state.hosts[host].mem_total)
    room = accounting.reclaim_room(accounting.available_mem(osa, ledger.host_totals(host)),
                                   live.reclaimable(host, now))
    going = sum(acc.charged for j in jobs if j.kill_requested
                and (acc := ledger.accounts.get((j.id, host))) is not None)
    floor = ctx.cfg.worker.mem_floor
    return room + going, bool(floor) and osa < parse_mem(floor)


def pick(ctx: Context, host: str, jobs: list[Job], now: float) -> Job | None:
    """The running reclaiming job to go first (accounting.pressure_victim), or None."""
    ledger, sent = ctx.live.ledger, ctx.book.reclaimed
    cands = [j for j in jobs if j.state == JobState.RUN and not j.kill_requested
             and now - sent.get((j.id, j.attempt), -RESEND_AFTER) >= RESEND_AFTER]
    overs = [(j.id, acc.used - acc.slack) for j in cands if (acc := ledger.accounts.get((j.id, host))) is not None]
    victim = accounting.pressure_victim(overs, {jid for jid, _ in overs})
    return next((j for j in cands if j.id == victim), None)


def send_away(ctx: Context, job: Job, why: str, now: float, out: Outbox) -> None:
    """Commit what the job's queue's reclaim_policy says; a suspension also stops its processes."""
    queue = ctx.state.queues.get(job.spec.queue)
    policy = queue.reclaim_policy if queue is not None else "requeue"
    ctx.book.reclaimed[(job.id, job.attempt)] = now
    log.warning("reclaim: job %d (%s): %s", job.id, policy, why)
    cmd: Cmd = (SysSuspend(time=now, job_ids=[job.id], reason=why) if policy == "suspend"
                else Kill(time=now, job_ids=[job.id], reason=why, by="controller", evict=True) if policy == "kill"
                else Requeue(time=now, job_ids=[job.id], reason=why, by="controller", evict=True))
    out.commit(cmd)


def resume_one(ctx: Context, host: str, jobs: list[Job], now: float, out: Outbox) -> None:
    """The first job suspended for reclaim on ``host`` runs again."""
    job = next((j for j in jobs if reclaim_suspended(j)), None)
    if job is None or now - ctx.book.reclaimed.get((job.id, -1), -RESEND_AFTER) < RESEND_AFTER:
        return
    ctx.book.reclaimed[(job.id, -1)] = now
    out.commit(SysResume(time=now, job_ids=[job.id]))
