"""The console's data model: a Mirror of the controller plus what the screens need.

Owns: the Mirror (hard state + the Live ledger), cached views (computed by
xce.views through ``Live.host_view``/``Live.job_view``, lazily, for what a
frame shows), what changed since the last frame (hard changes per job, usage
per host), the header summary, and bounded memory histories for the detail
plots.  Pure
Python: no Textual, no sockets, no clock (``now`` and receive times are
parameters).  Every feed (live receiver, replay) goes through ``Sync`` into
``apply_snapshot``/``apply_event``, under ``lock``.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field

from xce.accounting import HostTotals
from xce.live import columns, event_samples
from xce.mirror import Mirror
from xce.model import Job, JobState
from xce.proto import schema as S
from xce.proto.schema import Event, Snapshot
from xce.tui.history import HostSamples, Series, summed
from xce.tui.totals import Row, Totals
from xce.views import HostView, JobView, host_state

HOST_STATES = ("ok", "full", "closed", "unavail")
# The states whose figures xce.views.job_view reads from the live accounts.
ACCOUNTED = frozenset({JobState.RUN, JobState.USUSP, JobState.SSUSP, JobState.UNKWN})
# Views are kept for what frames show; beyond this many (a sort by reason read them all) they go.
VIEW_CACHE = 2000
NO_TOTALS = HostTotals()
Usage = tuple[int, int | None, int, int, float | None]
JOB_STATES = ("RUN", "PEND", "PSUSP", "USUSP", "SSUSP", "UNKWN", "DONE", "EXIT")


@dataclass(slots=True)
class Changes:
    """What changed since the previous frame.

    Samples are marked per host (``sampled``), not per job: a second of a big
    cluster's samples is 20,000 jobs but only 1,000 hosts, and a frame needs to
    know about the jobs it shows, which it asks with ``job_changed``.
    """

    jobs: set[int] = field(default_factory=set)    # hard changes and moved reservations
    hard: set[int] = field(default_factory=set)    # state/placement/reason changes, new, forgotten
    hosts: set[str] = field(default_factory=set)   # host rows that changed (samples included)
    sampled: set[str] = field(default_factory=set)  # hosts whose jobs' usage was reported
    reset: bool = False                            # a snapshot replaced everything

    @property
    def any(self) -> bool:
        return self.reset or bool(self.jobs or self.hosts)

    @property
    def usage(self) -> bool:
        """Any job's figures may have moved (a usage column may need re-sorting)."""
        return bool(self.jobs or self.sampled)

    def job_changed(self, job: Job | None, jid: int) -> bool:
        if self.reset or jid in self.jobs or job is None:
            return True
        sampled = self.sampled
        return bool(sampled) and any(a.host in sampled for a in job.allocs)


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
        self.job_hist: dict[str, HostSamples] = {}  # per host: its jobs' actual memory
        self.host_hist: dict[str, Series] = {}
        self._jv: dict[int, JobView] = {}
        self._hv: dict[str, HostView] = {}
        self._fixed_usage: dict[int, Usage] = {}  # jobs without live accounts (see usage)
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
        self._fixed_usage.clear()
        self.totals.reset_jobs(j.state.value for j in self.mirror.jobs.values())
        self.totals.reset_hosts()
        self.totals.dirty = set(self.mirror.hosts)
        self._ch = Changes(reset=True)
        self.job_hist = {h: s for h, s in self.job_hist.items() if h in self.mirror.hosts}
        if snap.samples:
            self._take_samples(columns(snap.samples), snap.time, applied=True)
        for hl in snap.live:
            self._record_host(hl.host, snap.time)
        self.snapshots += 1
        self.last_update = received
        self.link, self.problem = "live", ""

    def apply_event(self, ev: Event, received: float, term: int = 0) -> bool:
        """Apply one event; False on a gap or epoch change (the caller resnapshots)."""
        if ev.epoch == self.mirror.epoch and ev.seq <= self.mirror.seq:
            return True  # already applied (or in the snapshot): its samples must not land again
        moves: list[tuple[str | None, str | None]] = []
        if ev.jobs or ev.forget:
            jobs = self.mirror.jobs
            moves = [(jobs[j.id].state.value if j.id in jobs else None, j.state.value) for j in ev.jobs]
            moves += [(jobs[jid].state.value, None) for jid in ev.forget if jid in jobs]
        if not self.mirror.apply_event(ev, samples=False):
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
                self._fixed_usage.pop(j.id, None)
                for a in j.allocs:
                    ch.hosts.add(a.host)
                    hv.pop(a.host, None)
            for jid in ev.forget:
                ch.hard.add(jid)
                jv.pop(jid, None)
                self._fixed_usage.pop(jid, None)
            for jid in ev.reasons:
                ch.hard.add(jid)
                jv.pop(jid, None)
            ch.jobs |= ch.hard
        for h in ev.hosts:
            ch.hosts.add(h.name)
            hv.pop(h.name, None)
        if ev.host_samples or ev.samples:
            self._take_samples(event_samples(ev), ev.time)
        for hl in ev.live:  # a heartbeat: the host's figures at that moment, for its history
            ch.hosts.add(hl.host)
            self._record_host(hl.host, ev.time)
        self.last_update = received
        return True

    def _take_samples(self, samples: Sequence[S.HostSamples], t: float, *, applied: bool = False) -> None:
        """Everything the console does with a batch of samples, in one place.

        The hot path (20,000 samples a second at scale), so the work per job is the
        ledger's delta (``Live.apply_host_samples``) and an array copy; the rest is per
        host: the host is marked (rows ask ``Changes.job_changed``) and its batch logged
        for the detail plots.  ``applied``: the Mirror has already applied them (a
        snapshot's).
        """
        live, ch, hv, logs = self.mirror.live, self._ch, self._hv, self.job_hist
        for hs in samples:
            host = hs.host
            if not applied:
                live.apply_host_samples(hs)
            ch.sampled.add(host)
            ch.hosts.add(host)
            hv.pop(host, None)
            log = logs.get(host)
            if log is None:
                log = logs[host] = HostSamples(self.history)
            log.add(t, hs.job_id, array("q", hs.actual))

    def _record_host(self, name: str, t: float) -> None:
        """Append the host's actual and reserved memory: the HostView figures, read from the ledger."""
        self._hv.pop(name, None)
        host = self.mirror.hosts.get(name)
        if host is None:
            return
        live = self.mirror.live
        tot = live.ledger.host_totals(name)
        s = self.host_hist.get(name)
        if s is None:
            s = self.host_hist[name] = Series(3, self.history)
        s.add(t, tot.mem_actual, tot.mem_reserved, live.os_available.get(name, host.mem_total))

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
        if len(jv) > VIEW_CACHE:
            jv.clear()
        elif ch.sampled:  # the views of the sampled hosts' jobs moved
            sampled, hard = ch.sampled, ch.jobs
            for jid in [j for j, v in jv.items() if j in hard or any(h in sampled for h in v.hosts)]:
                del jv[jid]
        else:
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
            t.refresh(t.dirty, self._totals_row)
            t.dirty = set()
        return Summary(dict(t.hosts), dict(t.jobs), t.mem_dict())

    def usage(self, jid: int) -> Usage:
        """A job's (reserved, actual, peak, charged, efficiency): its JobView's figures.

        Sorting 20,000 rows by a usage column reads these for every row, so a running
        job's are summed from its accounts as xce.views.job_view sums them, without
        building the view; any other job's are read from its view.
        """
        job = self.mirror.jobs.get(jid)
        accs = self.mirror.live.ledger.by_job.get(jid) if job is not None and job.state in ACCOUNTED else None
        if not accs:  # ended or pending: the figures move only with hard state, so they are kept
            got = self._fixed_usage.get(jid)
            if got is None:
                v = self.job_view(jid)
                if v is None:
                    return 0, None, 0, 0, None
                got = self._fixed_usage[jid] = (v.mem_reserved, v.mem_actual, v.mem_peak, v.mem_charged,
                                                v.efficiency)
            return got
        if len(accs) == 1:
            a = accs[0]
            reserved, actual, peak, charged = a.reserved, a.actual, a.peak, a.charged
        else:
            reserved, peak = sum(a.reserved for a in accs), sum(a.peak for a in accs)
            charged = sum(a.charged for a in accs)
            reported = [a.actual for a in accs if a.actual is not None]
            actual = sum(reported) if reported else None
        return reserved, actual, peak, charged, (peak / reserved) if reserved and peak else None

    def _totals_row(self, name: str) -> Row | None:
        """The header's figures of one host: its HostView's, read from the ledger without building one."""
        host = self.mirror.hosts.get(name)
        if host is None:
            return None
        t = self.mirror.live.ledger.totals.get(name) or NO_TOTALS
        # a HostState is a str equal to (and hashing as) its value
        return (host_state(host, t), host.mem_total, t.mem_reserved, t.mem_actual, t.mem_slack, t.mem_overage)

    def job_series(self, jid: int) -> tuple[list[float], list[int]]:
        """The job's actual memory over time: per host as sampled, summed over its hosts."""
        job = self.mirror.jobs.get(jid)
        if job is None:
            return [], []
        per_host = [s for s in (self.job_hist[h].job(jid) for h in job.hosts if h in self.job_hist) if s[0]]
        if not per_host:
            v = self.job_view(jid)
            logs = [self.job_hist[h] for h in job.hosts if self.job_hist.get(h)]
            if v is None or v.mem_actual is None or not logs:
                return [], []
            # no report in the kept batches: its figure has not moved since before the oldest
            return [min(log.t[0] for log in logs)], [v.mem_actual]
        return summed(per_host)

    def reason(self, jid: int) -> str:
        v = self.job_view(jid)
        return v.reason if v else ""
