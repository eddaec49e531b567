"""A read-only mirror of controller state: snapshot plus sequenced events.

Used by the scheduler and the console (and any client that wants live state).
``apply_event`` returns False on a sequence gap or an epoch change (a new
leader), and the owner must then fetch a new snapshot.
"""

from __future__ import annotations

from typing import Any

from xce.core.model import ACTIVE, Alloc, Host, Job, JobState, Queue, reclaim_queues
from xce.core.resreq import ResReq
from xce.core.sched.order import PendingIndex
from xce.core.views import ArrayView
from xce.proto.schema import Event, Snapshot, past_usage_book
from xce.replica.live import Live, event_samples


def placeable(j: Job) -> bool:
    """What the scheduler may place: pending, neither held by its user (PSUSP) nor by a dependency."""
    return j.state == JobState.PEND and not j.held


class SharedParts:
    """Equal parts of many jobs held as one object.

    A mirror holds every job the controller keeps: the running ones and up to
    ``keep_finished`` (100,000 by default) that ended.  Each arrives decoded with copies
    of its own, ~2.5 KB a job, though most jobs ask one of a few requests on a few hundred
    hosts: the parsed request, the allocations and the host names of the usage records
    are held once (~0.7 KB a job less; the console at 1,000 hosts x 20,000 jobs and the
    default retention: 571 -> 480 MB).  Only immutable parts are shared (frozen structs,
    strings); the Job and its lists stay the mirror's own.
    """

    LIMIT = 50_000  # distinct values kept before starting afresh (a site of unique requests)

    def __init__(self) -> None:
        self.reqs: dict[ResReq, ResReq] = {}
        self.allocs: dict[tuple[Any, ...], Alloc] = {}
        self.names: dict[str, str] = {}

    def share(self, job: Job) -> None:
        if len(self.reqs) + len(self.allocs) + len(self.names) > self.LIMIT:
            self.reqs, self.allocs, self.names = {}, {}, {}
        job.req = self.reqs.setdefault(job.req, job.req)
        allocs = self.allocs
        for i, a in enumerate(job.allocs):
            job.allocs[i] = allocs.setdefault((a.host, a.slots, a.mem, *a.virtual.items()), a)
        names = self.names
        for u in job.usage:
            u.host = names.setdefault(u.host, u.host)


class Mirror:
    def __init__(self, index: bool = False) -> None:
        """``index``: also keep the pending jobs in round order (``order``) and the ids of the
        jobs changed or forgotten since the owner last emptied ``touched`` (the scheduler)."""
        self.jobs: dict[int, Job] = {}
        # Kept with every change, so a round never scans the finished jobs a cluster keeps.
        # ``pending``: the placeable ones only (not PSUSP, not held by a dependency).
        self.pending: dict[int, Job] = {}
        self.running: dict[int, Job] = {}
        self.hosts: dict[str, Host] = {}
        self.queues: dict[str, Queue] = {}
        self.arrays: dict[int, ArrayView] = {}  # each array's summary as the controller last sent it
        self.default_queue = ""
        self.live = Live()
        self.shared = SharedParts()
        self.seq = -1
        self.epoch = ""
        self.leader: str | None = None
        self.term = 0
        self.time = 0.0
        self.usage_past: dict[tuple[str, str, str, str], list[float]] = {}  # forgotten jobs' fairshare usage
        self.usage_as_of = 0.0
        self.order: PendingIndex | None = PendingIndex() if index else None
        self.touched: set[int] | None = set() if index else None

    @property
    def synced(self) -> bool:
        return self.seq >= 0

    def apply_snapshot(self, snap: Snapshot, received: float = 0.0) -> None:
        self.shared = SharedParts()
        for j in snap.jobs:
            self.shared.share(j)
        self.jobs = {j.id: j for j in snap.jobs}
        self.pending = {j.id: j for j in snap.jobs if placeable(j)}
        self.running = {j.id: j for j in snap.jobs if j.state in ACTIVE}
        if self.order is not None:
            self.order = PendingIndex()
            for j in self.pending.values():
                self.order.put(j)
        self.hosts = {h.name: h for h in snap.hosts}
        self.queues = {q.name: q for q in snap.queues}
        self.arrays = {a.id: a for a in snap.arrays}
        self.default_queue = snap.default_queue
        self.seq, self.epoch, self.time = snap.seq, snap.epoch, snap.time
        self.leader, self.term = snap.leader, snap.term
        self.live = Live(self.live.rules)
        self.live.reclaim_queues = reclaim_queues(self.queues.values())
        self.live.rebuild(self.jobs.values(), snap.time)
        for h in snap.live:
            self.live.apply_live(h)
        self.live.apply_samples(snap.samples, snap.time)
        self.live.reasons = dict(snap.reasons)
        self.usage_past, self.usage_as_of = past_usage_book(snap.usage_past), snap.usage_as_of

    def apply_event(self, ev: Event, received: float = 0.0, term: int = 0, *, samples: bool = True) -> bool:
        """Apply one event; False means a gap (resnapshot needed).

        ``samples=False`` leaves the event's samples to the caller, who applies them right
        after (the console, which batches them with its own bookkeeping).
        """
        if ev.epoch != self.epoch or ev.seq != self.seq + 1:
            if ev.epoch == self.epoch and ev.seq <= self.seq:
                return True  # already in the snapshot
            return False
        self.seq = ev.seq
        self.time = ev.time
        for q in ev.queues:
            self.queues[q.name] = q
        if ev.queues:
            self.live.reclaim_queues = reclaim_queues(self.queues.values())
        for h in ev.hosts:
            self.hosts[h.name] = h
        for a in ev.arrays:
            self.arrays[a.id] = a
        for j in ev.jobs:
            self.shared.share(j)
            self.jobs[j.id] = j
            self._index(j)
            self.live.sync_job(j, ev.time)
        for jid in ev.forget:
            self.jobs.pop(jid, None)
            self.pending.pop(jid, None)
            self.running.pop(jid, None)
            self.live.forget_job(jid)
            if self.order is not None:
                self.order.drop(jid)
            if self.touched is not None:
                self.touched.add(jid)
        for hl in ev.live:
            self.live.apply_live(hl)
        if samples:
            for hs in event_samples(ev):
                self.live.apply_host_samples(hs, ev.time)
        for jid, why in ev.reasons.items():
            if why:
                self.live.reasons[jid] = why
            else:
                self.live.reasons.pop(jid, None)
        return True

    def _index(self, j: Job) -> None:
        self.pending.pop(j.id, None)
        self.running.pop(j.id, None)
        if placeable(j):
            self.pending[j.id] = j
        elif j.state in ACTIVE:
            self.running[j.id] = j
        if self.order is not None:
            if placeable(j):
                self.order.put(j)
            else:
                self.order.drop(j.id)
        if self.touched is not None:
            self.touched.add(j.id)
