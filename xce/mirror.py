"""A read-only mirror of controller state: snapshot plus sequenced events.

Used by the scheduler and the console (and any client that wants live state).
``apply_event`` returns False on a sequence gap or an epoch change (a new
leader), and the owner must then fetch a new snapshot.
"""

from __future__ import annotations

from xce.live import Live, event_samples
from xce.model import ACTIVE, Host, Job, JobState, Queue
from xce.proto.schema import Event, Snapshot


class Mirror:
    def __init__(self) -> None:
        self.jobs: dict[int, Job] = {}
        # Kept with every change, so a round never scans the finished jobs a cluster keeps.
        self.pending: dict[int, Job] = {}
        self.running: dict[int, Job] = {}
        self.hosts: dict[str, Host] = {}
        self.queues: dict[str, Queue] = {}
        self.default_queue = ""
        self.live = Live()
        self.seq = -1
        self.epoch = ""
        self.leader: str | None = None
        self.term = 0
        self.time = 0.0

    @property
    def synced(self) -> bool:
        return self.seq >= 0

    def apply_snapshot(self, snap: Snapshot) -> None:
        self.jobs = {j.id: j for j in snap.jobs}
        self.pending = {j.id: j for j in snap.jobs if j.state == JobState.PEND}
        self.running = {j.id: j for j in snap.jobs if j.state in ACTIVE}
        self.hosts = {h.name: h for h in snap.hosts}
        self.queues = {q.name: q for q in snap.queues}
        self.default_queue = snap.default_queue
        self.seq, self.epoch, self.time = snap.seq, snap.epoch, snap.time
        self.leader, self.term = snap.leader, snap.term
        self.live = Live()
        self.live.rebuild(self.jobs.values(), snap.time)
        for h in snap.live:
            self.live.apply_live(h)
        self.live.apply_samples(snap.samples)
        self.live.reasons = dict(snap.reasons)

    def apply_event(self, ev: Event, *, samples: bool = True) -> bool:
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
        for h in ev.hosts:
            self.hosts[h.name] = h
        for j in ev.jobs:
            self.jobs[j.id] = j
            self._index(j)
            self.live.sync_job(j, ev.time)
        for jid in ev.forget:
            self.jobs.pop(jid, None)
            self.pending.pop(jid, None)
            self.running.pop(jid, None)
            self.live.forget_job(jid)
        for hl in ev.live:
            self.live.apply_live(hl)
        if samples:
            for hs in event_samples(ev):
                self.live.apply_host_samples(hs)
        for jid, why in ev.reasons.items():
            if why:
                self.live.reasons[jid] = why
            else:
                self.live.reasons.pop(jid, None)
        return True

    def _index(self, j: Job) -> None:
        self.pending.pop(j.id, None)
        self.running.pop(j.id, None)
        if j.state == JobState.PEND:
            self.pending[j.id] = j
        elif j.state in ACTIVE:
            self.running[j.id] = j
