"""Resource accounting: the one place the brief's formulas live.

Per job, per host there is one account.  For the real resource ``mem``::

    used   = overage = max(0, actual - reserved)   # 0 until a report arrives
    charge = reserved + used = max(reserved, actual)
    slack  = max(0, reserved - actual)              # whole reservation until reported
    available_for_scheduling(host) = os_available(host) - sum(slack of jobs on host)

For virtual resources (slots, licences): available = total - sum(allocated).

``Ledger`` keeps host totals up to date by deltas: a usage report changes the
``used``/``actual`` of that one account and moves only the difference into its
host's totals; sibling resources in the account are never touched.  ``derive``
recomputes all totals from the accounts, and ``Ledger.audit`` compares the two.
The module does no I/O and reads no clock: ``now`` is always a parameter.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import repeat
from dataclasses import dataclass, field


def overage(reserved: int, actual: int | None) -> int:
    return 0 if actual is None else max(0, actual - reserved)


def slack(reserved: int, actual: int | None) -> int:
    return reserved if actual is None else max(0, reserved - actual)


def charge(reserved: int, actual: int | None) -> int:
    return reserved + overage(reserved, actual)


def reserved_in_force(amount: int, duration_s: int | None, decay: bool, start: float | None,
                      now: float) -> int:
    """The reservation in force at ``now`` (LSF duration= and decay=1)."""
    if duration_s is None or start is None:
        return amount
    elapsed = max(0.0, now - start)
    if elapsed >= duration_s:
        return 0
    if not decay:
        return amount
    return int(amount * (duration_s - elapsed) / duration_s)


@dataclass(slots=True)
class Account:
    """One job's account on one host."""

    job_id: int
    host: str
    reserved: int = 0          # mem reservation in force, bytes
    actual: int | None = None  # latest reported mem, bytes; None until the first report
    peak: int = 0
    used: int = 0              # overage, kept equal to overage(reserved, actual)
    allocated: dict[str, int] = field(default_factory=dict)  # virtual: slots, licences
    attempt: int = 0           # the placement it belongs to: older reports are ignored
    cpu_time: float = 0.0      # latest reported, seconds

    @property
    def slack(self) -> int:
        return slack(self.reserved, self.actual)

    @property
    def charged(self) -> int:
        return self.reserved + self.used


@dataclass(slots=True)
class HostTotals:
    mem_reserved: int = 0
    mem_actual: int = 0
    mem_slack: int = 0
    mem_overage: int = 0
    allocated: dict[str, int] = field(default_factory=dict)

    @property
    def mem_charged(self) -> int:
        return self.mem_reserved + self.mem_overage

    def add(self, acc: Account, sign: int = 1) -> None:
        self.mem_reserved += sign * acc.reserved
        self.mem_actual += sign * (acc.actual or 0)
        self.mem_slack += sign * acc.slack
        self.mem_overage += sign * acc.used
        for name, n in acc.allocated.items():
            self.allocated[name] = self.allocated.get(name, 0) + sign * n
            if self.allocated[name] == 0:
                del self.allocated[name]

    def as_tuple(self) -> tuple[int, int, int, int, tuple[tuple[str, int], ...]]:
        return (self.mem_reserved, self.mem_actual, self.mem_slack, self.mem_overage,
                tuple(sorted(self.allocated.items())))


def available_mem(os_available: int, totals: HostTotals) -> int:
    """Memory available for scheduling: the OS figure minus only the unused slack."""
    return os_available - totals.mem_slack


def available_virtual(total: int, totals: HostTotals, name: str) -> int:
    return total - totals.allocated.get(name, 0)


def derive(accounts: Iterable[Account]) -> dict[str, HostTotals]:
    """Host totals recomputed from scratch from the job accounts.

    The same sums as ``HostTotals.add``, unrolled: this runs over every running
    job at each round boundary and in every audit.
    """
    out: dict[str, HostTotals] = {}
    for acc in accounts:
        t = out.get(acc.host)
        if t is None:
            t = out[acc.host] = HostTotals()
        r, a = acc.reserved, acc.actual
        t.mem_reserved += r
        if a is None:
            t.mem_slack += r
        else:
            t.mem_actual += a
            if r > a:
                t.mem_slack += r - a
        t.mem_overage += acc.used
        alloc = t.allocated
        for name, n in acc.allocated.items():
            alloc[name] = alloc.get(name, 0) + n
    for t in out.values():
        for name in [k for k, v in t.allocated.items() if v == 0]:
            del t.allocated[name]
    return out


class Ledger:
    """Accounts per (job, host) and delta-maintained totals per host."""

    def __init__(self) -> None:
        self.accounts: dict[tuple[int, str], Account] = {}
        self.by_job: dict[int, list[Account]] = {}
        # The same accounts by host then job id: a heartbeat's reports are one host's, and
        # an int key in a small dict is cheaper than building a (job, host) tuple per report.
        self.by_host: dict[str, dict[int, Account]] = {}
        self.totals: dict[str, HostTotals] = {}

    def _totals(self, host: str) -> HostTotals:
        t = self.totals.get(host)
        if t is None:
            t = self.totals[host] = HostTotals()
        return t

    def open(self, job_id: int, host: str, reserved: int, allocated: dict[str, int],
             attempt: int = 0) -> Account:
        """Charge a placement: the whole reservation counts as slack until a report arrives."""
        if (job_id, host) in self.accounts:
            return self.accounts[(job_id, host)]
        acc = Account(job_id, host, reserved=reserved, allocated=dict(allocated), attempt=attempt)
        self.accounts[(job_id, host)] = acc
        self.by_job.setdefault(job_id, []).append(acc)
        self.by_host.setdefault(host, {})[job_id] = acc
        self._totals(host).add(acc)
        return acc

    def report(self, job_id: int, host: str, actual: int, peak: int | None = None) -> bool:
        """Apply one usage report as a delta; False if the account is unknown.

        The hottest call of a big cluster, so ``_update`` is inlined for the case of
        an unchanged reservation; the arithmetic is the same as the module's formulas.
        """
        acc = self.accounts.get((job_id, host))
        if acc is None:
            return False
        self.observe(acc, actual, peak)
        return True

    def observe(self, acc: Account, actual: int, peak: int | None = None) -> None:
        """``report`` for a caller that already holds the account."""
        self.observe_host(acc.host, (acc.job_id,), (acc.attempt,), (actual,), (peak or 0,), (acc.cpu_time,))

    def observe_host(self, host: str, job_ids: Sequence[int], attempts: Sequence[int] | None,
                     actuals: Sequence[int], peaks: Sequence[int], cpu_times: Sequence[float]) -> list[Account]:
        """Apply one host's usage reports (columns: the same index is the same task) as deltas.

        The hottest loop of a big cluster (hosts x jobs reports a second), so the formulas
        (``overage``, ``slack``) are inlined here, once, and the host's totals take one
        summed delta per batch.  A report for an account this ledger does not hold, or for
        another attempt of the job, is skipped (``attempts`` None: samples a controller
        already checked).  Returns the accounts whose actual or peak moved (the samples
        worth publishing).
        """
        accs = self.by_host.get(host)
        if not accs:
            return []
        moved: list[Account] = []
        d_actual = d_slack = d_over = 0
        for jid, att, actual, peak, cpu in zip(job_ids, attempts or repeat(None), actuals, peaks, cpu_times):
            acc = accs.get(jid)
            if acc is None or (att is not None and acc.attempt != att):
                continue
            acc.cpu_time = cpu
            old = acc.actual
            if actual == old and peak <= acc.peak:
                continue
            r = acc.reserved
            # A job that reserved nothing has nothing to reconcile: its use is already
            # inside the OS figure, so it carries no slack and no overage.
            new_used = actual - r if actual > r and r > 0 else 0
            old_slack = r if old is None else (r - old if r > old else 0)
            d_actual += actual - (old or 0)
            d_slack += (r - actual if r > actual else 0) - old_slack
            d_over += new_used - acc.used
            acc.actual = actual
            acc.used = new_used
            if peak < actual:
                peak = actual
            if peak > acc.peak:
                acc.peak = peak
            moved.append(acc)
        if moved:
            t = self.totals.get(host) or self._totals(host)
            t.mem_actual += d_actual
            t.mem_slack += d_slack
            t.mem_overage += d_over
        return moved

    def set_reserved(self, job_id: int, host: str, reserved: int) -> None:
        """A decaying reservation moved; apply the delta it causes."""
        acc = self.accounts.get((job_id, host))
        if acc is not None and acc.reserved != reserved:
            self._update(acc, reserved, acc.actual)

    def _update(self, acc: Account, reserved: int, actual: int | None) -> None:
        t = self._totals(acc.host)
        # A job that reserved nothing has nothing to reconcile: its use is already
        # inside the OS figure, so it carries no slack and no overage.
        new_used = overage(reserved, actual) if reserved > 0 else 0
        new_slack = slack(reserved, actual)
        t.mem_reserved += reserved - acc.reserved
        t.mem_actual += (actual or 0) - (acc.actual or 0)
        t.mem_slack += new_slack - acc.slack
        t.mem_overage += new_used - acc.used
        acc.reserved, acc.actual, acc.used = reserved, actual, new_used

    def close(self, job_id: int) -> list[Account]:
        """Release every account of a job; returns them for the accounting record."""
        accs = self.by_job.pop(job_id, [])
        for acc in accs:
            del self.accounts[(job_id, acc.host)]
            self._unindex(acc)
            self._totals(acc.host).add(acc, -1)
        return accs

    def close_host(self, job_id: int, host: str) -> Account | None:
        """Release one host's share of a job (its part ended while others still run)."""
        acc = self.accounts.pop((job_id, host), None)
        if acc is not None:
            self._unindex(acc)
            self.by_job[job_id].remove(acc)
            if not self.by_job[job_id]:
                del self.by_job[job_id]
            self._totals(host).add(acc, -1)
        return acc

    def _unindex(self, acc: Account) -> None:
        accs = self.by_host[acc.host]
        del accs[acc.job_id]
        if not accs:
            del self.by_host[acc.host]

    def host_totals(self, host: str) -> HostTotals:
        return self.totals.get(host) or HostTotals()

    def rederive(self) -> None:
        """Round boundary: recompute every host's totals from the accounts."""
        self.totals = derive(self.accounts.values())

    def audit(self) -> list[str]:
        """Differences between delta-maintained totals and a from-scratch derivation."""
        fresh = derive(self.accounts.values())
        problems = []
        for host in sorted(set(fresh) | set(self.totals)):
            a = self.totals.get(host) or HostTotals()
            b = fresh.get(host) or HostTotals()
            if a.as_tuple() != b.as_tuple():
                problems.append(f"host {host}: delta totals {a.as_tuple()} != derived {b.as_tuple()}")
        return problems
