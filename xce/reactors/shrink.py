"""Shrink: a settled job's reservation in force is lowered, and raised back when it grows.

Run after a heartbeat updated a host's accounts (``on_usage``), before the reclaim rule, when
the site shrinks at all (``[reclaim] shrink_age`` below 1).  The rule -- which account moves, to
how much -- is xce/core/shrink.py's ``decide``, which the simulator applies too.  This shell
gathers its inputs (the host's jobs, its OS figure), keeps a resend guard, and commits each move
as a ``Reserve``: hard state, so every ledger (the scheduler's mirror too) makes the same charge
change when it applies, and a new leader starts from it.  Once one commits, the worker running
that share is told (orders.tell_reservation).
"""

from __future__ import annotations

import logging

from xce.core import accounting, shrink
from xce.core.result import Ok, Result
from xce.core.state import Reserve
from xce.reactors.context import Context
from xce.reactors.orders import tell_reservation
from xce.reactors.outbox import Outbox

log = logging.getLogger("xce.controller")
RESEND_AFTER = 5.0  # seconds before a move whose command has not taken effect is decided again


def on_usage(ctx: Context, host: str, now: float, out: Outbox) -> None:
    """After ``host``'s usage moved (or time passed): commit each shrink or restore due there."""
    live, st = ctx.live, ctx.state
    if shrink.never(live.rules):
        return
    h = st.hosts.get(host)
    if h is None:
        return
    jobs = [j for jid in live.ledger.jobs_on(host) if (j := st.jobs.get(jid)) is not None]
    osa = accounting.os_figure(live.os_available.get(host), h.mem_total)
    sent = ctx.book.resized
    for cmd in shrink.decide(live.ledger, host, jobs, osa, now, live.rules):
        key = (cmd.job_id, host)
        was = sent.get(key)
        if was is not None and was[:2] == (cmd.attempt, cmd.mem) and now - was[2] < RESEND_AFTER:
            continue
        sent[key] = (cmd.attempt, cmd.mem, now)
        log.info("job %d on %s: reservation %s to %d bytes (%s)", cmd.job_id, host, cmd.event, cmd.mem, cmd.detail)
        out.commit(cmd, lambda result, out, cmd=cmd: committed(ctx, cmd, result, out))


def committed(ctx: Context, cmd: Reserve, result: Result, out: Outbox) -> None:
    """A move applied: its worker is told; the guard is dropped (the ledger shows the move now)."""
    ctx.book.resized.pop((cmd.job_id, cmd.host), None)
    job = ctx.state.jobs.get(cmd.job_id)
    if isinstance(result, Ok) and job is not None:
        tell_reservation(ctx, job, cmd.host, out)
