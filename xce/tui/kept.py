"""The samples the console keeps until a frame reads them.

A heartbeat's entry on the event stream (``HostLive.mem``) carries the host's totals
from the leader's ledger; the console logs those and keeps the host's batch here.
The Live ledger (``Live.apply_host_samples``: the same arithmetic as the controller's
and the scheduler's) takes a kept batch only when something reads that host's
accounts (``ConsoleModel.job_view``/``host_view``/``usage``, a re-sort by a usage
column).  A frame shows a few dozen rows of 20,000, so most batches are superseded by
the next one unread.  Until then the header counts the host at its reported totals.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from xce.core.accounting import HostTotals
from xce.core.model import Job
from xce.proto.schema import HostMem, HostSamples
from xce.replica.mirror import Mirror


class KeptSamples:
    """Per host, the latest batch its accounts have not taken, and the totals reported with it."""

    def __init__(self, mirror: Mirror) -> None:
        self.mirror = mirror
        self.batches: dict[str, HostSamples] = {}
        self.reported: dict[str, HostMem] = {}

    def __bool__(self) -> bool:
        return bool(self.batches)

    def clear(self) -> None:
        self.batches.clear()
        self.reported.clear()

    def keep(self, hs: HostSamples, mem: HostMem) -> None:
        """Keep a heartbeat's batch (its entry carried the host's totals ``mem``).

        A newer batch supersedes an older one job by job: the leader publishes a job's
        latest actual and CPU time and its peak so far, which only rises.  A job the older
        batch sampled and the newer one does not (its figures did not move since) has its
        older sample applied now, so nothing is lost (a job that ended since has no account
        to take it).
        """
        old = self.batches.get(hs.host)
        if old is not None and old.job_id != hs.job_id:
            book = self.mirror.live.ledger.books.get(hs.host)
            held, newer = book.index if book else {}, set(hs.job_id)
            left = [i for i, jid in enumerate(old.job_id) if jid in held and jid not in newer]
            if left:
                self.mirror.live.apply_host_samples(HostSamples(
                    old.host, [old.job_id[i] for i in left], [old.actual[i] for i in left],
                    [old.peak[i] for i in left], [old.cpu_time[i] for i in left]), self.mirror.time)
        self.batches[hs.host] = hs
        self.reported[hs.host] = mem

    def report(self, host: str, mem: HostMem) -> None:
        """A heartbeat with no samples (none moved): the host's totals, if its batch waits."""
        if host in self.batches:
            self.reported[host] = mem

    def apply(self, hs: HostSamples) -> None:
        """Apply a batch now, after any older one of its host that was kept."""
        if self.batches:
            self.flush(hs.host)
        self.mirror.live.apply_host_samples(hs, self.mirror.time)

    def flush(self, host: str) -> None:
        hs = self.batches.pop(host, None)
        if hs is not None:
            self.mirror.live.apply_host_samples(hs, self.mirror.time)

    def settle(self) -> None:
        """Let the ledger take every kept batch (before reading every job's or host's figures)."""
        live = self.mirror.live
        for hs in self.batches.values():
            live.apply_host_samples(hs, self.mirror.time)
        self.batches.clear()

    def settle_job(self, job: Job) -> None:
        batches = self.batches
        for a in job.allocs:
            if a.host in batches:
                self.flush(a.host)

    def settle_requeued(self, jobs: Iterable[Job]) -> None:
        """A job placed again (a new attempt) must not get its old attempt's samples: the kept
        batches of its old hosts go to the old accounts before the Mirror closes them."""
        known = self.mirror.jobs
        for j in jobs:
            old = known.get(j.id)
            if old is not None and old.attempt != j.attempt:
                self.settle_job(old)

    def host_figures(self, totals: Mapping[str, HostTotals]) -> Collection[HostTotals | HostMem]:
        """Each known host's totals for the header: reported while its batch waits, else the ledger's."""
        hosts, batches, reported = self.mirror.hosts, self.batches, self.reported
        if batches:
            return [reported[h] if h in batches else f for h, f in totals.items() if h in hosts]
        if totals.keys() <= hosts.keys():
            return totals.values()
        return [f for h, f in totals.items() if h in hosts]
