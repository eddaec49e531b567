"""The console's data model: a Mirror of the controller plus what the screens need.

Owns: the Mirror (hard state + the Live ledger), cached views (computed by
xce.views through ``Live.host_view``/``Live.job_view`` and recomputed only for
what changed), the sets of changed jobs and hosts since the last frame, the
header summary, and bounded memory histories for the detail plots.  Pure
Python: no Textual, no sockets, no clock (``now`` and receive times are
parameters).  Every feed (live receiver, replay) goes through ``Sync`` into
``apply_snapshot``/``apply_event``, under ``lock``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from xce.mirror import Mirror
from xce.model import Job
from xce.proto.schema import Event, Snapshot
from xce.tui.history import Series, Steps
from xce.tui.totals import Totals
from xce.views import HostView, JobView

HOST_STATES = ("ok", "full", "closed", "unavail")
JOB_STATES = ("RUN", "PEND", "PSUSP", "USUSP", "SSUSP", "UNKWN", "DONE", "EXIT")


@dataclass(slots=True)
class Changes:
    """What changed since the previous frame."""

    jobs: set[int] = field(default_factory=set)    # any change (usage included)
    hard: set[int] = field(default_factory=set)    # state/placement/reason changes, new, forgotten
    hosts: set[str] = field(default_factory=set)
    reset: bool = False                            # a snapshot replaced everything

    @property
    def any(self) -> bool:
        return self.reset or bool(self.jobs or self.hosts)


@dataclass(slots=True)
class Summary:
    hosts_by_state: dict[str, int]
    jobs_by_state: dict[str, int]
    mem: dict[str, int]  # capacity, reserved, actual, slack, overage


class ConsoleModel:
    def __init__(self, history: int = 240) -> None:
        self.lock = threading.RLock()
        self.mirror = Mirror()
        self.cluster = ""
        self.heartbeat = 1.0
        self.term = 0
        self.mode = "live"             # live | replay
        self.link = "connecting"       # connecting | live | unreachable
        self.problem = ""
        self.last_update: float | None = None
        self.snapshots = 0
        self.gaps = 0
        self.history = history
        self.job_hist: dict[int, Steps] = {}
        self.host_hist: dict[str, Series] = {}
        self._jv: dict[int, JobView] = {}
        self._hv: dict[str, HostView] = {}
        self._ch = Changes(reset=True)
        self.totals = Totals()

    # ---- feeding ----------------------------------------------------------------------------

    @property
    def synced(self) -> bool:
        return self.mirror.synced

    def apply_snapshot(self, snap: Snapshot, received: float) -> None:
        self.mirror.apply_snapshot(snap)
        self.term = snap.term
        self._jv.clear()
        self._hv.clear()
        self.totals.reset_jobs(j.state.value for j in self.mirror.jobs.values())
        self.totals.reset_hosts()
        self.totals.dirty = set(self.mirror.hosts)
        self._ch = Changes(reset=True)
        self.job_hist = {j: s for j, s in self.job_hist.items() if j in self.mirror.jobs}
        for jid in {s.job_id for s in snap.samples}:
            self._record_job(jid, snap.time)
        for hl in snap.live:
            self._record_host(hl.host, snap.time)
        self.snapshots += 1
        self.last_update = received
        self.link, self.problem = "live", ""

    def apply_event(self, ev: Event, received: float, term: int = 0) -> bool:
        """Apply one event; False on a gap or epoch change (the caller resnapshots)."""
        jobs = self.mirror.jobs
        moves = [(jobs[j.id].state.value if j.id in jobs else None, j.state.value) for j in ev.jobs]
        moves += [(jobs[jid].state.value, None) for jid in ev.forget if jid in jobs]
        if not self.mirror.apply_event(ev):
            return False
        ch, jv, hv = self._ch, self._jv, self._hv
        if term:
            self.term = max(self.term, term)
        for old, new in moves:
            self.totals.job_moved(old, new)
        if ev.jobs or ev.forget or ev.reasons:
            for j in ev.jobs:
                ch.hard.add(j.id)
                jv.pop(j.id, None)
                for a in j.allocs:
                    ch.hosts.add(a.host)
                    hv.pop(a.host, None)
            for jid in ev.forget:
                ch.hard.add(jid)
                jv.pop(jid, None)
                self.job_hist.pop(jid, None)
            for jid in ev.reasons:
                ch.hard.add(jid)
                jv.pop(jid, None)
            ch.jobs |= ch.hard
        for h in ev.hosts:
            ch.hosts.add(h.name)
            hv.pop(h.name, None)
        for hl in ev.live:
            ch.hosts.add(hl.host)
            hv.pop(hl.host, None)
        if ev.samples:  # the hot path: 20,000 a second at scale
            samples = ev.samples
            ch.jobs.update([smp.job_id for smp in samples])
            hosts = {smp.host for smp in samples}
            ch.hosts |= hosts
            for h in hosts:
                hv.pop(h, None)
            by_job, hist, t = self.mirror.live.ledger.by_job, self.job_hist, ev.time
            for smp in samples:
                accs = by_job.get(smp.job_id)
                if not accs:
                    continue
                h = hist.get(smp.job_id)
                if h is None:
                    h = hist[smp.job_id] = Steps(self.history)
                h.add(t, smp.actual if len(accs) == 1 else sum(a.actual or 0 for a in accs))
        for hl in ev.live:  # a heartbeat: the host's figures at that moment, for its history
            self._record_host(hl.host, ev.time)
        self.last_update = received
        return True

    def _record_host(self, name: str, t: float) -> None:
        self._hv.pop(name, None)
        v = self.host_view(name)
        if v is None:
            return
        s = self.host_hist.get(name)
        if s is None:
            s = self.host_hist[name] = Series(3, self.history)
        s.add(t, v.mem_actual, v.mem_reserved, v.mem_os_available)

    def _record_job(self, jid: int, t: float) -> None:
        """Append the job's actual memory: the same per-host sum JobView.mem_actual is."""
        accs = self.mirror.live.ledger.by_job.get(jid)
        if not accs:
            return
        s = self.job_hist.get(jid)
        if s is None:
            s = self.job_hist[jid] = Steps(self.history)
        s.add(t, sum(a.actual or 0 for a in accs))

    def tick(self, now: float) -> None:
        """Move decaying reservations to ``now`` (Live does the arithmetic)."""
        live = self.mirror.live
        if not live.decaying:
            return
        live.refresh_decay(self.mirror.jobs, now)
        for jid in live.decaying:
            self._ch.jobs.add(jid)
            self._jv.pop(jid, None)
            for acc in live.ledger.by_job.get(jid, []):
                self._ch.hosts.add(acc.host)
                self._hv.pop(acc.host, None)

    def take_changes(self) -> Changes:
        """The changes since the last call; the cached views of changed jobs are dropped."""
        ch, self._ch = self._ch, Changes()
        jv = self._jv
        for jid in ch.jobs:
            jv.pop(jid, None)
        self.totals.dirty |= ch.hosts
        return ch

    # ---- reading ----------------------------------------------------------------------------

    def job(self, jid: int) -> Job | None:
        return self.mirror.jobs.get(jid)

    def job_view(self, jid: int) -> JobView | None:
        v = self._jv.get(jid)
        if v is None:
            job = self.mirror.jobs.get(jid)
            if job is None:
                return None
            v = self._jv[jid] = self.mirror.live.job_view(job)
        return v

    def host_view(self, name: str) -> HostView | None:
        v = self._hv.get(name)
        if v is None:
            host = self.mirror.hosts.get(name)
            if host is None:
                return None
            v = self._hv[name] = self.mirror.live.host_view(host)
        return v

    def summary(self) -> Summary:
        t = self.totals
        if t.dirty:
            t.refresh(t.dirty, self.host_view)
            t.dirty = set()
        return Summary(dict(t.hosts), dict(t.jobs), t.mem_dict())

    def reason(self, jid: int) -> str:
        v = self.job_view(jid)
        return v.reason if v else ""
