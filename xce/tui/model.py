"""The console's data model: a Mirror of the controller plus what the screens need.

Owns: the Mirror (hard state + the Live ledger), cached views (computed by
xce.core.views through ``Live.host_view``/``Live.job_view``, lazily, for what a
frame shows), what changed since the last frame (hard changes per job, usage
per host), the header summary, and bounded memory histories for the detail
plots.  Pure
Python: no Textual, no sockets, no clock (``now`` and receive times are
parameters).  Every feed (live receiver, replay) goes through ``Sync`` into
``apply_snapshot``/``apply_event``, under ``lock``.

Samples reach the ledger when something reads them: a heartbeat event from the
leader carries the host's totals (``HostLive.mem``), and the batch waits in
``KeptSamples`` (kept.py) until a frame reads that host or one of its jobs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from xce.core import accounting
from xce.core.accounting import HostTotals
from xce.core.arrays import SHIFT
from xce.core.model import ACTIVE, Job, JobSpec
from xce.core.views import Figures, HostView, JobView, efficiency, host_state, live_figures
from xce.proto import schema as S
from xce.proto.schema import Event, Snapshot
from xce.replica.live import columns, event_samples
from xce.replica.mirror import Mirror
from xce.tui.arrays import ArrayIndex, ArrayRow, array_row
from xce.tui.history import HostHistory, summed
from xce.tui.kept import KeptSamples
from xce.tui.totals import Totals

HOST_STATES = ("ok", "full", "closed", "unavail")
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
    placed: set[str] = field(default_factory=set)  # hosts whose admin state or placements changed
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
        self.history = history
        self.hist: dict[str, HostHistory] = {}  # per host: its figures and its jobs' actual memory
        self._jv: dict[int, JobView] = {}
        self._hv: dict[str, HostView] = {}
        self._fixed_usage: dict[int, Usage] = {}  # jobs without live accounts (see usage)
        self._ch = Changes(reset=True)
        self.totals = Totals()
        self.kept = KeptSamples(self.mirror)  # samples the ledger takes when they are read
        self.arrays = ArrayIndex()  # the Mirror's array elements grouped by array (a row each)

    # ---- feeding ----------------------------------------------------------------------------

    @property
    def synced(self) -> bool:
        return self.mirror.synced

    def apply_snapshot(self, snap: Snapshot, received: float) -> None:
        self.mirror.apply_snapshot(snap)
        self.kept.clear()  # the snapshot's samples are the latest
        self._after_snapshot(snap, received)

    def prepare_snapshot(self, snap: Snapshot) -> Mirror:
        """The mirror a snapshot makes, built apart from this model and without its lock.

        At 100,000 jobs the mirror's build (every job's account in its ledger) takes 3 s on
        this machine and 7 s under load; built under the lock, it held a frame that long
        (docs/benchmarks.md, the fleet at 5,000 hosts).  ``install_snapshot`` swaps it in."""
        mirror = Mirror()
        mirror.apply_snapshot(snap)
        return mirror

    def install_snapshot(self, mirror: Mirror, snap: Snapshot, received: float) -> None:
        """``apply_snapshot`` with the mirror ``prepare_snapshot`` built (under the lock)."""
        self.mirror = mirror
        self.kept = KeptSamples(mirror)
        self._after_snapshot(snap, received)

    def _after_snapshot(self, snap: Snapshot, received: float) -> None:
        self.term = snap.term
        self._jv.clear()
        self._hv.clear()
        self._fixed_usage.clear()
        self.totals.reset_jobs(j.state.value for j in self.mirror.jobs.values())
        self.arrays.rebuild(self.mirror.jobs, self.mirror.arrays)
        self.totals.reset_hosts()
        self.totals.dirty = set(self.mirror.hosts)
        self._ch = Changes(reset=True)
        self.hist = {h: s for h, s in self.hist.items() if h in self.mirror.hosts}
        for hs in columns(snap.samples) if snap.samples else ():
            self._take_batch(hs, None, snap.time, applied=True)
        self._take_lives(snap.live, snap.time)
        self.snapshots += 1
        self.last_update = received
        self.link, self.problem = "live", ""

    def apply_event(self, ev: Event, received: float, term: int = 0) -> bool:
        """Apply one event; False on a gap or epoch change (the caller resnapshots)."""
        mirror = self.mirror
        if ev.epoch == mirror.epoch and ev.seq <= mirror.seq:
            return True  # already applied (or in the snapshot): its samples must not land again
        hard = bool(ev.jobs or ev.forget or ev.reasons or ev.hosts or ev.arrays)
        moves = self._moves(ev) if ev.jobs or ev.forget else ()
        if self.kept and ev.jobs:
            self.kept.settle_requeued(ev.jobs)
        if not mirror.apply_event(ev, samples=False):
            return False
        if term > self.term:
            self.term = term
        if hard:
            self._hard_changes(ev, moves)
        if ev.host_samples or ev.samples or ev.live:
            self._take_heartbeats(event_samples(ev), ev.live, ev.time)
        self.last_update = received
        return True

    def _take_heartbeats(self, samples: Sequence[S.HostSamples], lives: Sequence[S.HostLive], t: float) -> None:
        """An event's heartbeats: each host's samples with its ``HostLive``, then hosts with no samples."""
        if len(lives) == 1 and len(samples) == 1 and samples[0].host == lives[0].host:
            self._take_batch(samples[0], lives[0], t)  # one host's heartbeat: no map to build
            return
        by_host = {hl.host: hl for hl in lives}
        for hs in samples:
            self._take_batch(hs, by_host.pop(hs.host, None), t)
        if by_host:
            self._take_lives(by_host.values(), t)

    def _take_batch(self, hs: S.HostSamples, hl: S.HostLive | None, t: float, *, applied: bool = False) -> None:
        """Everything the console does with a host's batch of samples (and its heartbeat entry).

        The hot path (20,000 samples a second at scale) with no work per job but packing
        the values for the log: the batch is kept for the ledger (``KeptSamples``) when the
        entry has the host's totals, else applied; the host is marked (rows ask
        ``Changes.job_changed``); the batch and the host's figures are logged for the
        detail plots.  ``applied``: the Mirror has already applied it (a snapshot's).
        """
        mem = None if hl is None else hl.mem
        if mem is not None:
            self.kept.keep(hs, mem)
        elif not applied:
            self.kept.apply(hs)
        log = self.hist.get(hs.host) or self._new_history(hs.host)
        name, ch = hs.host if log is None else log.name, self._ch
        ch.sampled.add(name)
        ch.hosts.add(name)
        if log is None:  # a host the Mirror does not hold: marked, nothing logged
            self._hv.pop(name, None)
            return
        if self._hv:
            self._hv.pop(name, None)
        log.add_samples(t, hs.job_id, hs.actual)
        if hl is not None:
            self._log_figures(log, mem, t)

    def _take_lives(self, lives: Iterable[S.HostLive], t: float) -> None:
        """Heartbeat entries without samples: the host is marked and its figures logged."""
        hv, ch_hosts, hist = self._hv, self._ch.hosts, self.hist
        for hl in lives:
            if hl.mem is not None:
                self.kept.report(hl.host, hl.mem)
            elif self.kept:
                self.kept.flush(hl.host)
            log = hist.get(hl.host) or self._new_history(hl.host)
            name = hl.host if log is None else log.name
            ch_hosts.add(name)
            if hv:
                hv.pop(name, None)
            if log is not None:
                self._log_figures(log, hl.mem, t)

    def _log_figures(self, log: HostHistory, mem: S.HostMem | None, t: float) -> None:
        """The host's actual and reserved memory (its HostView's: reported, or the ledger's) and OS figure."""
        live, name = self.mirror.live, log.name
        tot = mem or live.ledger.totals.get(name) or NO_TOTALS
        os_available = accounting.os_figure(live.os_available.get(name), self.mirror.hosts[name].mem_total)
        log.add_figures(t, tot.mem_actual, tot.mem_reserved, os_available)

    def _moves(self, ev: Event) -> list[tuple[int, str | None, str | None]]:
        """Each changed job's (id, old state, new state), read before the Mirror applies the event."""
        jobs = self.mirror.jobs
        moves = [(j.id, jobs[j.id].state.value if j.id in jobs else None, j.state.value) for j in ev.jobs]
        return moves + [(jid, jobs[jid].state.value, None) for jid in ev.forget if jid in jobs]

    def _hard_changes(self, ev: Event, moves: Sequence[tuple[int, str | None, str | None]]) -> None:
        ch, jv, hv, fixed = self._ch, self._jv, self._hv, self._fixed_usage
        jobs, arrays = self.mirror.jobs, self.arrays
        for jid, old, new in moves:
            self.totals.job_moved(old, new)
            array_id = jid >> SHIFT  # an element's array (xce.core.arrays.element_id); 0 for a plain job
            if array_id:  # its array's row changed too
                arrays.moved(array_id, jid, old, jobs.get(jid) if new is not None else None)
                ch.hard.add(array_id)
                ch.jobs.add(array_id)
        if ev.arrays:  # the controller's counts of the arrays it moved (the Mirror keeps them)
            arrays.summarised(ev.arrays)
            for a in ev.arrays:
                ch.hard.add(a.id)
                ch.jobs.add(a.id)
        for jid in [*(j.id for j in ev.jobs), *ev.forget, *ev.reasons]:
            ch.hard.add(jid)
            ch.jobs.add(jid)
            jv.pop(jid, None)
        for jid in [*(j.id for j in ev.jobs), *ev.forget]:
            fixed.pop(jid, None)
        for j in ev.jobs:
            for a in j.allocs:
                ch.hosts.add(a.host)
                ch.placed.add(a.host)
                hv.pop(a.host, None)
        for h in ev.hosts:
            ch.hosts.add(h.name)
            ch.placed.add(h.name)
            hv.pop(h.name, None)

    def _new_history(self, name: str) -> HostHistory | None:
        """A known host's first history (None for a host the Mirror does not hold)."""
        if name not in self.mirror.hosts:
            return None
        log = self.hist[name] = HostHistory(name, self.history)
        return log

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
        self.totals.dirty |= ch.placed
        self.totals.mem_dirty |= bool(ch.hosts)
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
            if self.kept:
                self.kept.settle_job(job)
            v = self._jv[jid] = self.mirror.live.job_view(job)
        return v

    def host_view(self, name: str) -> HostView | None:
        v = self._hv.get(name)
        if v is None:
            host = self.mirror.hosts.get(name)
            if host is None:
                return None
            if self.kept:
                self.kept.flush(name)
            v = self._hv[name] = self.mirror.live.host_view(host)
        return v

    def summary(self) -> Summary:
        t = self.totals
        if t.dirty:
            t.refresh_states(t.dirty, self._host_state)
            t.dirty = set()
        if t.mem_dirty:
            t.sum_mem((h.mem_total for h in self.mirror.hosts.values() if not h.unavail),
                      self.kept.host_figures(self.mirror.live.ledger.totals))
        return Summary(dict(t.hosts), dict(t.jobs), t.mem_dict())

    def usage(self, jid: int) -> Usage:
        """A job's (reserved, actual, peak, charged, efficiency): its JobView's figures.

        Sorting 20,000 rows by a usage column reads these for every row, so a running
        job's are summed from its accounts as xce.core.views.job_view sums them, without
        building the view; any other job's are read from its view.
        """
        job = self.mirror.jobs.get(jid)
        if job is None and jid in self.arrays:
            v = self.row_view(jid)
            assert v is not None
            return v.mem_reserved, v.mem_actual, v.mem_peak, v.mem_charged, v.efficiency
        if job is not None and self.kept:
            self.kept.settle_job(job)
        accs = self.mirror.live.ledger.by_job.get(jid) if job is not None and job.state in ACTIVE else None
        if not accs:  # ended or pending: the figures move only with hard state, so they are kept
            got = self._fixed_usage.get(jid)
            if got is None:
                v = self.job_view(jid)
                if v is None:
                    return 0, None, 0, 0, None
                got = self._fixed_usage[jid] = (v.mem_reserved, v.mem_actual, v.mem_peak, v.mem_charged,
                                                v.efficiency)
            return got
        reserved, actual, peak, charged = live_figures(accs)
        return reserved, actual, peak, charged, efficiency(peak, reserved)

    def _host_state(self, name: str) -> str | None:
        """The header's state of one host: its HostView's, read from the ledger without building one."""
        host = self.mirror.hosts.get(name)
        if host is None:
            return None
        # a HostState is a str equal to (and hashing as) its value
        return host_state(host, self.mirror.live.ledger.totals.get(name) or NO_TOTALS)

    def job_series(self, jid: int) -> tuple[list[float], list[int]]:
        """The job's actual memory over time: per host as sampled, summed over its hosts."""
        job = self.mirror.jobs.get(jid)
        if job is None:
            return [], []
        logs = [self.hist[h] for h in job.hosts if h in self.hist]
        per_host = [s for s in (log.job(jid) for log in logs) if s[0]]
        if not per_host:
            v = self.job_view(jid)
            oldest = [t for t in (log.oldest_batch() for log in logs) if t is not None]
            if v is None or v.mem_actual is None or not oldest:
                return [], []
            # no report in the kept batches: its figure has not moved since before the oldest
            return [min(oldest)], [v.mem_actual]
        return summed(per_host)

    def host_series(self, name: str) -> tuple[list[float], list[int], list[int]]:
        """The host's actual and reserved memory at each heartbeat kept (its HostView's figures then)."""
        log = self.hist.get(name)
        if log is None:
            return [], [], []
        times, actual, reserved, _ = log.figure_series()
        return times, actual, reserved

    def reason(self, jid: int) -> str:
        v = self.row_view(jid)
        return v.reason if v else ""

    # ---- arrays: a row per array (arrays.py) ------------------------------------------------

    def row_view(self, key: int) -> JobView | ArrayRow | None:
        """A jobs-table row: a job's view, or an array's row (its key is the array id)."""
        if key in self.mirror.jobs:
            return self.job_view(key)
        g = self.arrays.get(key)
        if g is None:
            return None
        return array_row(g, self.mirror.jobs, self._array_figures(g.elements))

    def _array_figures(self, elements: Iterable[int]) -> list[Figures]:
        """The (reserved, actual, peak, charged) that add up to the live elements' JobView figures:
        their accounts (kept batches settled per host, not per element), or the view of one without."""
        jobs, by_job, kept = self.mirror.jobs, self.mirror.live.ledger.by_job, self.kept
        live = [jobs[j] for j in elements if j in jobs and jobs[j].state in ACTIVE]
        if kept:
            for host in {a.host for job in live for a in job.allocs}:
                kept.flush(host)
        out: list[Figures] = []
        for job in live:
            accs = by_job.get(job.id)
            if accs:
                out.extend((a.reserved, a.actual, a.peak, a.charged) for a in accs)
            else:
                out.append(self.usage(job.id)[:4])
        return out

    def row_spec(self, key: int) -> JobSpec:
        """The spec a row sorts and filters by: the job's, or an array element's (its array's fields)."""
        job = self.mirror.jobs.get(key)
        return job.spec if job is not None else self.arrays.groups[key].spec
