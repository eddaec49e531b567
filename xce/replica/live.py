"""Soft state beside the hard model: usage, OS-available memory, pending reasons.

``Live`` holds what the leader keeps only in memory (rebuilt within a heartbeat
after a failover) and the ledger of accounts derived from the hard job records.
The controller keeps one next to its replicated ClusterState; every mirror (the
scheduler's, the console's) keeps one too, fed by the event stream, so all of
them compute views with the same code.

Samples arrive as per-host columns (``HostSamples``: a heartbeat's); ``Ledger.observe_host``
applies each batch with the same arithmetic the controller used.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from xce.core import accounting
from xce.core.accounting import HostTotals, Ledger
from xce.core.model import ACTIVE, Host, Job, reclaiming
from xce.core.resreq import rusage_amount
from xce.core.shrink import in_force, never
from xce.core.views import OWN, HostView, JobView, host_view, job_view
from xce.proto.schema import Event, HostLive, HostMem, HostSamples, JobSample


def columns(samples: Sequence[JobSample]) -> list[HostSamples]:
    """JobSamples (a snapshot's, or an older stream's) as per-host columns, each in order."""
    runs: dict[str, HostSamples] = {}
    for s in samples:
        hs = runs.get(s.host)
        if hs is None:
            hs = runs[s.host] = HostSamples(s.host, [], [], [], [])
        hs.job_id.append(s.job_id)
        hs.actual.append(s.actual)
        hs.peak.append(s.peak)
        hs.cpu_time.append(s.cpu_time)
    return list(runs.values())


def event_samples(ev: Event) -> list[HostSamples]:
    """An event's samples as columns, whichever way it carried them."""
    return ev.host_samples + columns(ev.samples) if ev.samples else ev.host_samples


def host_mem(t: HostTotals) -> HostMem:
    """A host's totals as a heartbeat event carries them (``HostLive.mem``)."""
    return HostMem(t.mem_reserved, t.mem_actual, t.mem_slack, t.mem_overage)


def mem_decay(job: Job) -> tuple[int | None, bool]:
    item = rusage_amount(job.req, "mem")
    return (item.duration_s, item.decay) if item else (None, False)


class Live:
    def __init__(self, rules: accounting.ReclaimRules = accounting.RECLAIM) -> None:
        self.ledger = Ledger(rules)
        self.os_available: dict[str, int] = {}
        self.last_seen: dict[str, float] = {}
        self.reasons: dict[int, str] = {}
        self.decaying: set[int] = set()
        self.attempts: dict[int, int] = {}
        # Reclamation: the reclaimable queues (from the hard queues, set by the owner before it
        # syncs jobs); when a job has settled is the site's [reclaim] (``rules``, kept by the ledger).
        self.reclaim_queues: frozenset[str] = frozenset()

    @property
    def rules(self) -> accounting.ReclaimRules:
        return self.ledger.rules

    @property
    def shrinking(self) -> bool:
        """Whether the site shrinks settled reservations (``[reclaim] shrink_age`` below 1)."""
        return not never(self.ledger.rules)

    @rules.setter
    def rules(self, rules: accounting.ReclaimRules) -> None:
        self.ledger.rules = rules

    def sync_job(self, job: Job, now: float) -> None:
        """Open or close the job's accounts to match its hard state."""
        if job.state in ACTIVE and job.allocs:
            self.reasons.pop(job.id, None)
            if self.attempts.get(job.id) == job.attempt:
                for host in job.finished_hosts:  # a share that ended frees its host at once
                    self.ledger.close_host(job.id, host)
                for host, mem in job.mem_in_force.items():  # shrunk or restored (state.Reserve): a charge change
                    self.ledger.set_reserved(job.id, host, mem)
                return
            self.forget_job(job.id)  # an older placement's accounts, if any
            self.attempts[job.id] = job.attempt
            duration, _ = mem_decay(job)
            borrows = reclaiming(job.spec, self.reclaim_queues)
            for a in job.allocs:
                if a.host in job.finished_hosts:
                    continue
                reserved = in_force(job, a, now)
                self.ledger.open(job.id, a.host, reserved, a.virtual, job.attempt,
                                 since=job.start_time or now, reclaiming=borrows)
            if duration is not None:
                self.decaying.add(job.id)
        else:
            self.forget_job(job.id)

    def forget_job(self, job_id: int) -> None:
        self.ledger.close(job_id)
        self.decaying.discard(job_id)
        self.attempts.pop(job_id, None)
        if job_id in self.reasons:
            del self.reasons[job_id]

    def refresh_decay(self, jobs: dict[int, Job], now: float) -> None:
        for jid in list(self.decaying):
            job = jobs.get(jid)
            if job is None:
                self.decaying.discard(jid)
                continue
            for a in job.allocs:
                self.ledger.set_reserved(jid, a.host, in_force(job, a, now))

    def apply_sample(self, s: JobSample, now: float | None = None) -> bool:
        acc = self.ledger.accounts.get((s.job_id, s.host))
        if acc is None:
            return False
        self.ledger.observe(acc, s.actual, s.peak, s.cpu_time, now)
        return True

    def apply_samples(self, samples: Sequence[JobSample], now: float | None = None) -> int:
        """``apply_sample`` for many; returns how many found an account."""
        n = 0
        for hs in columns(samples):
            book = self.ledger.books.get(hs.host)
            n += sum(map(book.index.__contains__, hs.job_id)) if book else 0
            self.apply_host_samples(hs, now)
        return n

    def apply_host_samples(self, hs: HostSamples, now: float | None = None) -> None:
        """One host's batch: a mirror's hottest call (20,000 samples a second on a big cluster).
        ``now``: when they were taken (a peak's rise restarts the job's settling then)."""
        self.ledger.observe_host(hs.host, hs.job_id, None, hs.actual, hs.peak, hs.cpu_time, now)

    def reclaimable(self, host: str, now: float | None = None) -> int:
        """The host's reclaimable memory at ``now`` (default: its last heartbeat)."""
        return self.ledger.reclaimable(host, self.last_seen.get(host, 0.0) if now is None else now, self.rules)

    def apply_live(self, h: HostLive) -> None:
        self.os_available[h.host] = h.os_available
        self.last_seen[h.host] = h.last_seen

    def samples(self) -> list[JobSample]:
        return [JobSample(a.job_id, a.host, a.actual, a.peak, a.cpu_time)
                for a in self.ledger.accounts.values() if a.actual is not None]

    def lives(self) -> list[HostLive]:
        return [HostLive(h, osa, self.last_seen.get(h, 0.0)) for h, osa in self.os_available.items()]

    def host_view(self, host: Host, now: float | None = None) -> HostView:
        return host_view(host, self.ledger, self.os_available.get(host.name),
                         self.last_seen.get(host.name), self.reclaimable(host.name, now))

    def job_view(self, job: Job) -> JobView:
        v = job_view(job, self.ledger)
        if job.id in self.reasons and not v.reason:
            v.reason = self.reasons[job.id]
        return v

    def job_rows(self, jobs: Sequence[Job], fields: Sequence[str]) -> list[list[Any]]:
        """The JobView's ``fields`` of each job, in that order: straight off the job when they are
        all its own (OWN), so 10,000 rows of ``id state`` cost no views.  What a row needs is
        looked up once, not once a job: for 10,000 jobs those look-ups were a third of the reply."""
        if not all(f in OWN for f in fields):
            views = (self.job_view(j) for j in jobs)
            return [[getattr(v, f) for f in fields] for v in views]
        getters = [OWN[f] for f in fields]
        rows = [[get(j) for get in getters] for j in jobs]
        if "reason" in fields and self.reasons:  # the round's reason, where the job has none
            i, reasons = fields.index("reason"), self.reasons
            for job, row in zip(jobs, rows):
                if not row[i] and job.id in reasons:
                    row[i] = reasons[job.id]
        return rows

    def rebuild(self, jobs: Iterable[Job], now: float) -> None:
        """Re-derive every account from hard job state (after a snapshot or failover)."""
        self.ledger = Ledger(self.ledger.rules)
        self.decaying.clear()
        self.attempts.clear()
        for job in jobs:
            self.sync_job(job, now)
