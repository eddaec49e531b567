"""Reclaim: reclaiming jobs go when a host's owners want their memory back.

Run after a heartbeat updated a host's accounts (``on_usage``).  The rule -- when a host is
short, which reclaiming job goes, what its queue's ``reclaim_policy`` makes of it, when a
suspended one resumes -- is xce/core/reclaim.py's ``decide``, which the simulator applies
too.  This shell gathers its inputs (the host's OS figure, reclaimable memory and
``worker.mem_floor``), keeps a resend timer, and commits the decision: only the state
change is committed; the kill orders follow from it (orders.py), and so do SIGSTOP and
SIGCONT (the convergence of xce/reactors/signals.py).
"""

from __future__ import annotations

import logging

from xce.core import accounting, reclaim
from xce.core.model import Job
from xce.core.state import SysResume
from xce.core.units import parse_mem
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
    osa = accounting.os_figure(live.os_available.get(host), ctx.state.hosts[host].mem_total)
    floor = ctx.cfg.worker.mem_floor
    sent = ctx.book.reclaimed
    held = {key for j in jobs for key in (reclaim.decision_key(j, True), reclaim.decision_key(j, False))
            if now - sent.get(key, -RESEND_AFTER) < RESEND_AFTER}
    got = reclaim.decide(live.ledger, host, jobs, osa, live.reclaimable(host, now),
                         parse_mem(floor) if floor else 0, now, lambda j: policy_of(ctx, j), held)
    if got is None:
        return
    cmd, job = got
    resume = isinstance(cmd, SysResume)
    sent[reclaim.decision_key(job, resume)] = now
    if not resume:
        log.warning("reclaim: job %d (%s): %s", job.id, policy_of(ctx, job), getattr(cmd, "reason", ""))
    out.commit(cmd)


def policy_of(ctx: Context, job: Job) -> str:
    """The job's queue's reclaim_policy (requeue if its queue is gone)."""
    queue = ctx.state.queues.get(job.spec.queue)
    return queue.reclaim_policy if queue is not None else "requeue"
