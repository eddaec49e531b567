"""Soft state beside the hard model: usage, OS-available memory, pending reasons.

``Live`` holds what the leader keeps only in memory (rebuilt within a heartbeat
after a failover) and the ledger of accounts derived from the hard job records.
The controller keeps one next to its replicated ClusterState; every mirror (the
scheduler's, the console's) keeps one too, fed by the event stream, so all of
them compute views with the same code.

Samples arrive in per-host batches (a heartbeat's).  ``apply_host_samples``
keeps, per host, the accounts its last batch named, so a host that runs the
same jobs finds them without a lookup each; that cache relies on accounts
being opened and closed only through ``Live`` (every such call drops the
host's entry; ``rebuild`` drops them all).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import attrgetter

from xce import accounting
from xce.accounting import Account, Ledger
from xce.model import ACTIVE, Host, Job
from xce.proto.schema import HostLive, JobSample
from xce.resreq import rusage_amount
from xce.views import HostView, JobView, host_view, job_view


_host, _job_id = attrgetter("host"), attrgetter("job_id")


def by_host(samples: Sequence[JobSample]) -> list[tuple[str, Sequence[JobSample]]]:
    """The samples as per-host batches, each in its original order (usually there is one)."""
    hosts = list(map(_host, samples))
    if hosts.count(hosts[0]) == len(hosts):
        return [(hosts[0], samples)]
    runs: dict[str, list[JobSample]] = {}
    for s in samples:
        runs.setdefault(s.host, []).append(s)
    return list(runs.items())


def mem_decay(job: Job) -> tuple[int | None, bool]:
    item = rusage_amount(job.req, "mem")
    return (item.duration_s, item.decay) if item else (None, False)


class Live:
    def __init__(self) -> None:
        self.ledger = Ledger()
        self.os_available: dict[str, int] = {}
        self.last_seen: dict[str, float] = {}
        self.reasons: dict[int, str] = {}
        self.decaying: set[int] = set()
        self.attempts: dict[int, int] = {}
        # per host: the job ids of its last sample batch and their accounts (None: none)
        self._plans: dict[str, tuple[list[int], list[Account | None]]] = {}

    def sync_job(self, job: Job, now: float) -> None:
        """Open or close the job's accounts to match its hard state."""
        if job.state in ACTIVE and job.allocs:
            self.reasons.pop(job.id, None)
            if self.attempts.get(job.id) == job.attempt:
                for host in job.finished_hosts:  # a share that ended frees its host at once
                    if self.ledger.close_host(job.id, host) is not None:
                        self._plans.pop(host, None)
                return
            self.forget_job(job.id)  # an older placement's accounts, if any
            self.attempts[job.id] = job.attempt
            duration, decay = mem_decay(job)
            for a in job.allocs:
                if a.host in job.finished_hosts:
                    continue
                reserved = accounting.reserved_in_force(a.mem, duration, decay, job.start_time, now)
                self.ledger.open(job.id, a.host, reserved, a.virtual, job.attempt)
                self._plans.pop(a.host, None)
            if duration is not None:
                self.decaying.add(job.id)
        else:
            self.forget_job(job.id)

    def forget_job(self, job_id: int) -> None:
        for acc in self.ledger.close(job_id):
            self._plans.pop(acc.host, None)
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
            duration, decay = mem_decay(job)
            for a in job.allocs:
                r = accounting.reserved_in_force(a.mem, duration, decay, job.start_time, now)
                self.ledger.set_reserved(jid, a.host, r)

    def apply_sample(self, s: JobSample) -> bool:
        acc = self.ledger.accounts.get((s.job_id, s.host))
        if acc is None:
            return False
        self.ledger.observe(acc, s.actual, s.peak)
        acc.cpu_time = s.cpu_time
        return True

    def apply_samples(self, samples: Sequence[JobSample]) -> int:
        """``apply_sample`` for a whole event's samples; returns how many found an account."""
        if not samples:
            return 0
        return sum(self.apply_host_samples(host, list(map(_job_id, batch)), batch)
                   for host, batch in by_host(samples))

    def apply_host_samples(self, host: str, ids: list[int], batch: Sequence[JobSample]) -> int:
        """One host's batch (``ids`` are its job ids, in order); returns how many found an account.

        A mirror's hottest loop (20,000 samples a second on a big cluster), bound by
        memory lookups: while a host's batches name the same jobs, their accounts are
        taken from the last batch's plan; the arithmetic stays in ``Ledger.observe``.
        """
        plan = self._plans.get(host)
        if plan is None or plan[0] != ids:
            get = self.ledger.accounts.get
            plan = self._plans[host] = (ids, [get((jid, host)) for jid in ids])
        observe = self.ledger.observe
        n = 0
        for acc, s in zip(plan[1], batch, strict=True):
            if acc is not None:
                observe(acc, s.actual, s.peak)
                acc.cpu_time = s.cpu_time
                n += 1
        return n

    def apply_live(self, h: HostLive) -> None:
        self.os_available[h.host] = h.os_available
        self.last_seen[h.host] = h.last_seen

    def samples(self) -> list[JobSample]:
        return [JobSample(a.job_id, a.host, a.actual, a.peak, a.cpu_time)
                for a in self.ledger.accounts.values() if a.actual is not None]

    def lives(self) -> list[HostLive]:
        return [HostLive(h, osa, self.last_seen.get(h, 0.0)) for h, osa in self.os_available.items()]

    def host_view(self, host: Host) -> HostView:
        return host_view(host, self.ledger, self.os_available.get(host.name),
                         self.last_seen.get(host.name))

    def job_view(self, job: Job) -> JobView:
        v = job_view(job, self.ledger)
        if job.id in self.reasons and not v.reason:
            v.reason = self.reasons[job.id]
        return v

    def rebuild(self, jobs: Iterable[Job], now: float) -> None:
        """Re-derive every account from hard job state (after a snapshot or failover)."""
        self.ledger = Ledger()
        self._plans.clear()
        self.decaying.clear()
        self.attempts.clear()
        for job in jobs:
            self.sync_job(job, now)
