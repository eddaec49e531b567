"""What follows a Raft apply: leadership changes, the ledger synced, events published, orders sent.

``on_applied`` runs once per loop turn (and before a snapshot is served).  It takes the
``Changes`` the applied batches accumulated (xce/core/state.py) and turns them into one
event and the orders the changed jobs need.  When pysyncobj installed a snapshot the state
object is a new one: then everything is rebuilt and the stream gets a new epoch, so every
follower of it re-snapshots.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from xce.core.hostgroups import queue_fields
from xce.core.model import Job, JobState, Queue, reclaim_queues
from xce.core.state import ClusterState, SetQueues
from xce.core.units import parse_mem
from xce.core.views import array_view
from xce.proto import schema as S
from xce.reactors.context import Context
from xce.reactors.orders import orders
from xce.reactors.outbox import Outbox
from xce.reactors.signals import converge

log = logging.getLogger("xce.controller")
SOFT_PERIOD = 0.05  # seconds between soft events (see publish_soft)


def public(job: Job) -> Job:
    """A job as the event stream and snapshots show it: without its environment (secrets)."""
    if not job.spec.env:
        return job
    return msgspec.structs.replace(job, spec=msgspec.structs.replace(job.spec, env={}))


def on_applied(ctx: Context, now: float, out: Outbox) -> None:
    leadership(ctx, now, out)
    st = ctx.state
    changes = ctx.raft.take_changes()
    ctx.live.reclaim_queues = reclaim_queues(st.queues.values())  # before any account opens
    if st is not ctx.known_state:  # a snapshot was installed: rebuild everything
        ctx.known_state = st
        ctx.live.rebuild(st.jobs.values(), now)
        ctx.stream.epoch = ctx.new_epoch()
        return  # what the old state's commands changed is in the rebuild (and the new epoch)
    if not changes:
        return
    leading = ctx.raft.caught_up()  # leadership(): orders wait until the inherited log is applied
    jobs = [j for jid in changes.jobs if (j := st.jobs.get(jid)) is not None]
    if leading:  # a follower's ledger is rebuilt when it takes over
        for job in jobs:
            ctx.live.sync_job(job, now)
    for jid in changes.forgotten:
        ctx.live.forget_job(jid)
    if changes.removed_hosts:
        forget_hosts(ctx, changes.removed_hosts)
    hosts = [st.hosts[n] for n in changes.hosts if n in st.hosts]
    if not (jobs or hosts or changes.forgotten or changes.removed_hosts or changes.arrays):
        return
    if ctx.stream.subscribers:
        # Job environments stay in the journal; the event stream does not carry them.  An array
        # moved goes out as one summary, however many of its elements moved.
        arrays = [array_view(a) for aid in changes.arrays if (a := st.arrays.get(aid)) is not None]
        ctx.stream.emit(S.Event(seq=0, epoch=ctx.stream.epoch, time=now, jobs=[public(j) for j in jobs],
                                hosts=hosts, forget=changes.forgotten, arrays=arrays), out)
    else:
        ctx.stream.seq += 1  # nobody listens: skip the encoding, keep the sequence honest
    if leading:
        for job in jobs:
            orders(ctx, job, now, out)  # the real job: its environment goes to the worker
            converge(ctx, job, now, out)  # stopped or continued as its state says


def forget_hosts(ctx: Context, names: list[str]) -> None:
    """Removed hosts: drop their soft state, and start a new event epoch.

    Events carry whole entities but no host removal, so every follower of the stream
    (scheduler, console, REST) re-snapshots, as after a failover; removals are rare.
    """
    for name in names:
        ctx.live.os_available.pop(name, None)
        ctx.live.last_seen.pop(name, None)
        ctx.book.workers.pop(name, None)
        ctx.book.lost_sent.discard(name)
        ctx.book.undecided.discard(name)
    ctx.stream.epoch = ctx.new_epoch()


def queue_sizing(q: Any, cluster_fallback: str) -> dict[str, Any]:
    """A queue's right-sizing fields (xce/core/autosize.py) from its config and the cluster's fallback."""
    fallback = q.mem_auto_fallback or cluster_fallback
    return {"mem_default_auto": q.mem_default == "auto",
            "mem_default": parse_mem(q.mem_default) if q.mem_default not in ("", "auto") else 0,
            "mem_auto_fallback": parse_mem(fallback) if fallback else 0, "mem_auto_margin": q.mem_auto_margin,
            "mem_auto_min_runs": q.mem_auto_min_runs}


def leadership(ctx: Context, now: float, out: Outbox) -> None:
    """On becoming leader: a new epoch, the ledger rebuilt, a grace period, the configured queues.

    A leader takes office once it has applied the log it was elected with (``caught_up``):
    before that its state may lack the old leader's last placements and ends, and an order
    from it could start a job again that had already ended (table.serve says why)."""
    leader = ctx.raft.caught_up()
    # A leader again in a later term is a new leader too, even if this loop never saw it lose
    # the office (a step-down and an election between two turns, under load): its hosts went
    # to other controllers meanwhile and must have the grace to come back, or their silence
    # of the leaderless seconds counts against them (hosts lost at 5,000 hosts).
    if leader and (not ctx.was_leader or ctx.raft.term() != ctx.leader_term):
        ctx.leader_term = ctx.raft.term()
        st, cfg = ctx.state, ctx.cfg
        log.info("became leader (term %d; %d hosts, %d jobs applied so far)", ctx.raft.term(), len(st.hosts),
                 len(st.jobs))
        ctx.stream.epoch = ctx.new_epoch()
        ctx.live.rebuild(st.jobs.values(), now)
        grace = ctx.reregister_grace
        for name in st.hosts:
            ctx.live.last_seen[name] = now + grace
        queues = [Queue(name=n, priority=q.priority, rerunnable=q.rerunnable, description=q.description,
                        run_limit_default=q.run_limit_default or None, run_limit_max=q.run_limit or None,
                        dep_never=q.dep_never, reclaimable=q.reclaimable, reclaim_policy=q.reclaim_policy,
                        mem_retries=q.mem_retries, mem_retry_factor=q.mem_retry_factor,
                        max_preexec_retry=q.max_preexec_retry, preexec_retry_action=q.preexec_retry_action,
                        preexec_timeout=q.preexec_timeout or None,
                        mem_retry_max=parse_mem(q.mem_retry_max) if q.mem_retry_max else 0,
                        mem_limit_max=parse_mem(q.mem_limit) if q.mem_limit else None,
                        mem_limit_default=parse_mem(q.mem_limit_default) if q.mem_limit_default else None,
                        **queue_sizing(q, cfg.cluster.mem_auto_fallback),
                        **queue_fields(cfg.queue_hosts(n)))
                  for n, q in cfg.queues.items()]
        if (sorted(st.queues.values(), key=lambda q: q.name) != sorted(queues, key=lambda q: q.name)
                or st.default_queue != cfg.default_queue()):
            out.commit(SetQueues(time=now, queues=queues, default_queue=cfg.default_queue()))
        ctx.book.forget_leadership()
        ctx.book.undecided = undecided_hosts(st)
    ctx.was_leader = leader


def undecided_hosts(state: ClusterState) -> set[str]:
    """The unavail hosts of UNKWN jobs: what a new leader still has to decide."""
    return {h for j in state.jobs.values() if j.state == JobState.UNKWN for h in j.hosts
            if (host := state.hosts.get(h)) is not None and host.unavail}


def publish_soft(ctx: Context, now: float, out: Outbox, force: bool = False) -> None:
    """Soft news (heartbeats, samples, reasons) goes out at most every SOFT_PERIOD.

    A loop turn often handles one heartbeat; an event per turn would cost an encode
    and a send per heartbeat.  50 ms is far inside the console's 1 s budget.
    """
    stream = ctx.stream
    if not force and now < stream.next_soft:
        return
    stream.next_soft = now + SOFT_PERIOD
    p = stream.news
    if not (p["live"] or p["samples"] or p["reasons"]):
        return
    news = stream.take_news()
    stream.emit(S.Event(seq=0, epoch=stream.epoch, time=now, live=news["live"],
                        host_samples=news["samples"], reasons=news["reasons"]), out)
