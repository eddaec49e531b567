"""The leader's periodic work: silent hosts unknown then lost, orders and stops/continues re-sent,
kills chased, old records cleaned up.

``on_tick`` runs every loop turn and does its work at most every CHECK_PERIOD; the shell
only calls it (and keeps the GC upkeep and the allow-list file reads to itself).
"""

from __future__ import annotations

import itertools
import logging

from xce.core.model import ACTIVE, JobState
from xce.core.result import Ok, Result
from xce.core.state import Cleanup, HostLost, HostUnknown
from xce.reactors.context import Book, Context
from xce.reactors.jobrun import expire_peeks, release_order
from xce.reactors.launch import expire_launches
from xce.reactors.orders import RESEND_AFTER, chase_kills, dispatch
from xce.reactors.outbox import Outbox
from xce.reactors.signals import resignal

CHECK_PERIOD = 0.25   # seconds between passes
PRUNE_PERIOD = 60.0   # seconds between prunes of confirmations
REDISPATCH_SCAN = 20_000  # unconfirmed orders looked at per pass...
REDISPATCH_MAX = 2_000    # ...and re-sent at most: a burst of silent workers cannot starve the loop
log = logging.getLogger("xce.controller")
CLEANUP_SLACK = 1000  # finished jobs past keep_finished before a Cleanup is worth a command


def on_tick(ctx: Context, now: float, out: Outbox) -> None:
    if now < ctx.next_check or not ctx.raft.caught_up():  # table.serve: a new leader's state may be behind
        return
    ctx.next_check = now + CHECK_PERIOD
    hosts_silent(ctx, now, out)
    ctx.live.refresh_decay(ctx.state.jobs, now)
    redispatch(ctx, now, out)
    chase_kills(ctx, now, out)
    resignal(ctx, now, out)
    if now >= ctx.next_prune:
        ctx.next_prune = now + PRUNE_PERIOD
        prune_confirmed(ctx)
    expire_peeks(ctx, now, out)
    expire_launches(ctx, now, out)
    keep = ctx.cfg.controller.keep_finished
    if len(ctx.state.finished_order) > keep + CLEANUP_SLACK:
        out.commit(Cleanup(time=now, keep_finished=keep, half_life=ctx.cfg.fairshare.half_life))


def hosts_silent(ctx: Context, now: float, out: Outbox) -> None:
    """A host silent past ``unknown_after`` goes unavail and its jobs UNKWN (HostUnknown: its worker
    may only be hung, and a registration brings them back as they were); one still silent past
    ``lost_after`` is lost (HostLost: its jobs are requeued or end EXIT by queue policy).  Each is
    committed once: until it commits, the host is in ``lost_sent``.

    A host with no record yet gets the new leader's grace from now: a restarted leader may
    apply the hosts of its restored log after it took office (and gave the grace to those it had).

    After a failover every worker registers again, and a leader takes them at its own pace
    (5,000 hosts took 38 s on a 2-core machine): the grace alone timed out the last half of
    them, and their jobs ended EXIT, lost to a slow queue and not to a dead host.  So a host
    that has not registered with this leader yet counts as seen when the last one did: while
    the wave goes on, nobody is timed; once it has been still for ``unknown_after``, the hosts
    that did not come are, as ever.  Nor is any host timed on a pass after a turn that read as
    many messages as a turn may (``ctx.behind``): after a stall of the loop, the heartbeats of
    the stalled seconds are still waiting, and every host would look silent.
    """
    if ctx.behind:
        return  # a silent host's heartbeat may be among the messages not read yet
    unknown, lost = ctx.cfg.unknown_after() + 0.1, ctx.cfg.lost_after() + 0.1
    book, last_seen = ctx.book, ctx.live.last_seen
    for name, host in ctx.state.hosts.items():
        seen = last_seen.get(name)
        if seen is None:
            last_seen[name] = now + ctx.reregister_grace
            continue
        if name in book.lost_sent:
            continue
        if book.wave > seen and name not in book.registered_at:
            seen = book.wave
        if not host.unavail and now - seen > unknown:
            book.lost_sent.add(name)
            out.commit(HostUnknown(time=now, name=name), lambda r, o, n=name: _undecided(book, n, r))
        elif host.unavail and name in book.undecided and now - seen > lost:
            book.lost_sent.add(name)
            book.undecided.discard(name)
            out.commit(HostLost(time=now, name=name), lambda r, o, n=name: book.lost_sent.discard(n))


def _undecided(book: Book, name: str, result: Result) -> None:
    book.lost_sent.discard(name)
    if isinstance(result, Ok):
        book.undecided.add(name)


def redispatch(ctx: Context, now: float, out: Outbox) -> None:
    """Re-send orders nobody confirmed; drop those of jobs that ended or were killed (chase_kills
    follows a kill up)."""
    book, jobs = ctx.book, ctx.state.jobs
    redo = [k for k, (_, sent) in itertools.islice(book.unconfirmed.items(), REDISPATCH_SCAN)
            if now - sent > RESEND_AFTER][:REDISPATCH_MAX]
    for jid, host in redo:
        job = jobs.get(jid)
        if job is not None and job.state == JobState.RUN and host not in job.finished_hosts \
                and not job.kill_requested and not release_order(job):
            dispatch(ctx, job, host, now, out)
        else:
            del book.unconfirmed[(jid, host)]


def prune_confirmed(ctx: Context) -> None:
    """Drop confirmations of jobs that ended another way."""
    jobs = ctx.state.jobs
    book = ctx.book
    book.confirmed = {k: a for k, a in book.confirmed.items()
                      if (j := jobs.get(k[0])) is not None and j.state in ACTIVE and j.attempt == a}
    book.suspended = {k: v for k, v in book.suspended.items() if k in book.confirmed}
    book.started = {k: v for k, v in book.started.items()
                    if (j := jobs.get(k)) is not None and j.state in ACTIVE and j.attempt == v[0]}
    book.reclaimed = {k: t for k, t in book.reclaimed.items()
                      if (j := jobs.get(k[0])) is not None and j.state in ACTIVE}
    book.resized = {k: v for k, v in book.resized.items() if (j := jobs.get(k[0])) is not None and j.state in ACTIVE}


def on_keys_changed(ctx: Context, names: set[str]) -> None:
    """The allow-list changed: a worker whose key was revoked is cut off.

    No more orders to it; its next heartbeat is refused, so the host goes unavail after the
    usual misses and its jobs follow queue policy.
    """
    book = ctx.book
    for host, key in list(book.worker_keys.items()):
        if key not in names:
            log.warning("key %r of host %s was revoked: the worker is cut off", key, host)
            del book.worker_keys[host]
            book.workers.pop(host, None)
            book.registered_at.pop(host, None)
