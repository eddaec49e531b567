"""Resource accounting: the one place the brief's formulas live.

Per job, per host there is one account.  For the real resource ``mem``::

    used   = overage = max(0, actual - reserved)   # 0 until a report arrives
    charge = reserved + used = max(reserved, actual)
    slack  = max(0, reserved - actual)              # whole reservation until reported
    available_for_scheduling(host) = os_available(host) - sum(slack of jobs on host)

Other batch systems' memory views, for the simulator's side-by-side policies
(``MEM_VIEWS``; XCE's own is ``mem_view_xce``)::

    flat (Slurm, PBS, Kubernetes): capacity(host)     - sum(reserved of jobs on host)
    lsf:                           os_available(host) - sum(reserved of jobs on host)

Reclaimable memory (docs/accounting.md "Reclaimable memory"): the slack a settled job has
never used even at its peak, less a safety margin, lent to jobs that accept reclamation::

    settled(job)        = run time >= min_run  and  no large rise of its peak for window
    large rise          = peak > settled peak + max(noise, margin x reserved if settled else 0)
    lendable(job)       = max(0, slack(reserved, peak) - margin x reserved)     # settled, not reclaiming
    reclaimable(host)   = sum(lendable of the settled jobs on host)             # <= sum(slack)
    reclaim_room(host)  = available_for_scheduling(host) + reclaimable(host)   # what a reclaiming job may take

A settled job whose peak rises within its margin stays settled and lends less by the rise
(lendable follows the peak); a large rise (past the margin, counted from the peak it settled
at) unsettles it, and it lends nothing for ``window``.  A reclaiming job is charged like any
other (its reservation is slack until it reports), so the room falls as it is placed; a room
below 0 (an owner grew; or a reclaiming job outgrew its reservation) sends reclaiming jobs away.

Shrinking (docs/accounting.md "Shrinking a settled reservation"; the replay's ``+shrink`` policies and
the daemons with ``[reclaim] shrink_age`` below 1, which xce/core/shrink.py applies to accounts): a job whose peak has held still for a share of its age has its reservation
in force lowered to its peak plus the margin of its peak, and raised back when it grows past it::

    shrink_moment(job)  = earliest now with settled(job) and now - peak_at >= shrink_age x (now - since)
    shrunk(job)         = min(asked, peak + margin x peak)
    restored(job)       = min(asked, actual + max(0, room))   # room: available_for_scheduling(host)
                                                              # + the reclaiming jobs' charges there

Memory pressure (the worker's MEMPRESSURE kill, the controller's reclaim) takes a reclaiming
job first, then the job furthest above its reservation in force, never one within it:
``pressure_victim``.

For virtual resources (slots, licences): available = total - sum(allocated).

``Ledger`` keeps host totals up to date by deltas: a usage report changes the
``used``/``actual`` of that one account and moves only the difference into its
host's totals; sibling resources in the account are never touched.  ``derive``
recomputes all totals from the accounts, and ``Ledger.audit`` compares the two.
The module does no I/O and reads no clock: ``now`` is always a parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import gt, sub
from typing import TypeVar

K = TypeVar("K")


def overage(reserved: int, actual: int | None) -> int:
    return 0 if actual is None else max(0, actual - reserved)


def slack(reserved: int, actual: int | None) -> int:
    return reserved if actual is None else max(0, reserved - actual)


def used(reserved: int, actual: int | None) -> int:
    """The overage an account carries: none for a job that reserved nothing, whose use is
    already inside the OS figure (there is nothing to reconcile)."""
    return overage(reserved, actual) if reserved > 0 else 0


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


def pressure_victim(overages: Iterable[tuple[K, int]], reclaiming: Container[K] = frozenset()) -> K | None:
    """The MEMPRESSURE victim: a reclaiming job first (the one furthest above, or least below, its
    reservation in force), else the key with the largest positive overage (actual minus the
    reservation in force); the first one on a tie; None when every job is within its reservation
    and none is reclaiming (the promise made to them is kept).  The worker, the controller's
    reclaim and the simulator all ask it."""
    best, best_over = None, 0
    lent, lent_over = None, 0
    for key, over in overages:
        if key in reclaiming:
            if lent is None or over > lent_over:
                lent, lent_over = key, over
        elif over > best_over:
            best, best_over = key, over
    return lent if lent is not None else best


@dataclass(frozen=True, slots=True)
class ReclaimRules:
    """When a job's slack may be lent (config ``[reclaim]``): seconds run, seconds of a stable
    peak, and the share of its reservation kept back as a safety margin."""

    min_run: float = 60.0
    window: float = 60.0
    margin: float = 0.1
    # A reservation is lowered once its peak held still this share of the job's run so far; 1 or more:
    # never, the daemons' default ([reclaim] shrink_age; the replay's is 0.6, xce/sim/policies.Knobs).
    shrink_age: float = 1.0


RECLAIM = ReclaimRules()
PEAK_STEP = 1 << 20  # below this, or 1 % of the reservation, a peak's rise is the noise of a steady job


def kept_back(reserved: int, rules: ReclaimRules) -> int:
    """A lender's safety margin: the part of its slack it never lends, and the rise it may take
    while settled (``large_rise``)."""
    return int(reserved * rules.margin)


def large_rise(settled_peak: int, peak: int, reserved: int, allowance: int = 0) -> bool:
    """Whether ``peak`` passed ``settled_peak`` (the peak the job last settled at) by more than the
    noise of a steady job and more than ``allowance``: the job's margin (``kept_back``) once it
    is settled, 0 while it settles.  A large rise restarts its settling window; a settled job's
    smaller one only lowers its loan (``lendable`` follows the peak)."""
    return peak > settled_peak + max(PEAK_STEP, reserved // 100, allowance)


def settled(since: float, peak_at: float, now: float, rules: ReclaimRules) -> bool:
    """A job that has run ``min_run`` seconds (``since`` its start) and whose peak has had no large
    rise for ``window`` seconds (``peak_at``: its last one)."""
    return now - since >= rules.min_run and now - peak_at >= rules.window


def lendable(reserved: int, peak: int, rules: ReclaimRules) -> int:
    """What a settled job lends: the slack it left even at its peak, less the margin."""
    return max(0, slack(reserved, peak) - kept_back(reserved, rules))


def shrink_moment(since: float, peak_at: float, rules: ReclaimRules) -> float:
    """The earliest time a job started at ``since`` whose peak last rose (large_rise) at ``peak_at`` is
    settled for shrinking, if its peak holds still: ``settled``, and still for ``shrink_age`` of its
    run so far.  Proportional to its age because a job growing in steps is settled by a fixed window
    between two steps of a long run; with ``shrink_age`` above 1/2, a job that rises in equal steps
    (any number, any width, any delay before the first) rises again before it is settled for
    shrinking (at 1/2 exactly the two meet at its second step).  Never with ``shrink_age`` >= 1."""
    age = rules.shrink_age
    if age >= 1.0:
        return float("inf")
    return max(since + rules.min_run, peak_at + rules.window, (peak_at - age * since) / (1.0 - age))


def shrink_settled(since: float, peak_at: float, now: float, rules: ReclaimRules) -> bool:
    """Whether a job's reservation in force may be lowered to ``shrunk`` now (``shrink_moment``)."""
    return now >= shrink_moment(since, peak_at, rules)


def shrunk(asked: int, peak: int, rules: ReclaimRules) -> int:
    """A shrink-settled job's reservation in force: its peak plus the margin of its peak, never
    more than it asked."""
    return min(asked, peak + kept_back(peak, rules))


def restored(asked: int, actual: int, room: int) -> int:
    """A shrunk job's reservation in force once its use passes it: back towards what it asked, as far
    as ``room`` (the host's memory available for scheduling, with the reclaiming jobs' charges, which
    go first) reaches; the rest stays over its reservation, the pressure victim if the host runs out."""
    return min(asked, actual + max(0, room))


def reclaim_room(available_mem: int, reclaimable: int) -> int:
    """Memory a reclaiming job may take on a host; below 0, reclaiming jobs must go."""
    return available_mem + reclaimable


NO_OVERAGE = 1 << 62  # a reservation of 0 carries no overage: its "overage base" is out of reach


class HostBook:
    """One host's accounts as columns: slot i of every list is the job ``ids[i]``.

    Columns because a heartbeat reconciles a host's reports at once, with C-level
    ``map``/``sum`` over lists, instead of touching one object per report: a big
    cluster sends hosts x jobs reports a second.  ``actual`` holds 0 for a job not yet
    reported (``unreported``), which gives every formula its "whole reservation is
    slack" answer; ``over_base`` is the reservation, or NO_OVERAGE where it is 0.
    Settling (``settled``): ``since`` the job's start, ``peak_at`` when its peak last rose
    (a ``large_rise``) to ``settled_peak``; ``reclaiming`` holds the jobs that borrow (and so lend nothing).
    """

    __slots__ = ("ids", "index", "attempt", "reserved", "over_base", "actual", "peak", "cpu", "allocated",
                 "unreported", "since", "peak_at", "settled_peak", "reclaiming")

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.index: dict[int, int] = {}
        self.attempt: list[int] = []
        self.reserved: list[int] = []
        self.over_base: list[int] = []
        self.actual: list[int] = []
        self.peak: list[int] = []
        self.cpu: list[float] = []
        self.allocated: list[dict[str, int]] = []  # the accounts' own dicts: virtual resources
        self.unreported: set[int] = set()
        self.since: list[float] = []
        self.peak_at: list[float] = []
        self.settled_peak: list[int] = []
        self.reclaiming: set[int] = set()

    def add(self, job_id: int, reserved: int, attempt: int, allocated: dict[str, int], since: float = 0.0,
            reclaiming: bool = False) -> None:
        reserved = _shared(reserved)
        self.index[job_id] = len(self.ids)
        self.ids.append(job_id)
        self.attempt.append(attempt)
        self.reserved.append(reserved)
        self.over_base.append(reserved or NO_OVERAGE)
        self.actual.append(0)
        self.peak.append(0)
        self.cpu.append(0.0)
        self.allocated.append(allocated)
        self.unreported.add(job_id)
        self.since.append(since)
        self.peak_at.append(since)
        self.settled_peak.append(0)
        if reclaiming:
            self.reclaiming.add(job_id)

    def reorder(self, order: list[int]) -> None:
        """Slots in ``order`` (a permutation of them) become slots 0, 1, 2, ..."""
        for name in _COLUMNS:
            col = getattr(self, name)
            setattr(self, name, list(map(col.__getitem__, order)))
        self.index = dict(zip(self.ids, range(len(self.ids))))

    def remove(self, job_id: int) -> None:
        """Keeps the others in order (the order a worker reports in: see observe_host)."""
        i = self.index.pop(job_id)
        for name in _COLUMNS:
            del getattr(self, name)[i]
        if i < len(self.ids):  # the later slots moved up by one
            self.index.update(zip(self.ids[i:], range(i, len(self.ids))))
        self.unreported.discard(job_id)
        self.reclaiming.discard(job_id)

    def rose(self, i: int, now: float | None, rules: ReclaimRules) -> None:
        """Slot ``i``'s peak moved: a large rise (``large_rise``) restarts its settling window."""
        if now is None:
            return
        r = self.reserved[i]
        lends = self.ids[i] not in self.unreported and settled(self.since[i], self.peak_at[i], now, rules)
        allow = kept_back(r, rules) if lends else 0  # a first report dates its peak, whatever the time
        if large_rise(self.settled_peak[i], self.peak[i], r, allow):
            self.settled_peak[i], self.peak_at[i] = self.peak[i], now

    def rose_all(self, before: list[int], now: float, rules: ReclaimRules) -> None:
        """``rose`` for every slot whose peak is above ``before``'s (a whole heartbeat's batch),
        the slots found by one C-level pass."""
        for i in compress(range(len(self.peak)), map(gt, self.peak, before)):
            self.rose(i, now, rules)

    def reclaimable(self, now: float, rules: ReclaimRules) -> int:
        """Σ lendable of the settled jobs that do not borrow themselves (reported ones only)."""
        skip = self.unreported | self.reclaiming
        total = 0
        for jid, r, p, since, at in zip(self.ids, self.reserved, self.peak, self.since, self.peak_at):
            if r and jid not in skip and settled(since, at, now, rules):
                total += lendable(r, p, rules)
        return total


_COLUMNS = ("ids", "attempt", "reserved", "over_base", "actual", "peak", "cpu", "allocated", "since", "peak_at",
            "settled_peak")


_SHARED: dict[int, int] = {}


def _shared(n: int) -> int:
    """One int object per reservation value: most jobs ask the same few, and a heartbeat's
    column passes then read one object that stays in cache instead of one per account."""
    got = _SHARED.get(n)
    if got is None:
        if len(_SHARED) > 10_000:  # decaying reservations take many values: stay bounded
            _SHARED.clear()
        got = _SHARED[n] = n
    return got


def column_sums(reserved: Sequence[int], over_base: Sequence[int], actual: Sequence[int]) -> tuple[int, int, int]:
    """Σ actual, Σ slack and Σ overage of accounts given as columns (an unreported actual as 0).

    The module's formulas summed: overage where the actual passes the reservation (an
    ``over_base`` of NO_OVERAGE never is); and as slack - overage = reserved - actual for
    an account that reserved something (0 - 0 for one that did not), Σ slack follows.
    C-level passes only: it runs for every heartbeat of every host.
    """
    total = sum(actual)
    over = sum(filter(_positive, map(sub, actual, over_base))) if any(map(gt, actual, over_base)) else 0
    reserving = sum(compress(actual, reserved)) if 0 in reserved else total
    return total, over + sum(reserved) - reserving, over


def running_max(old: list[int], *new: Sequence[int]) -> list[int]:
    """Element-wise max of ``old`` and each of ``new``: peaks, which only ever rise.

    Mostly nothing rises (a peak is steady, an actual stays under it), so each column
    is compared before any element-wise max is built.
    """
    out = old
    for col in new:
        if col != out and any(map(gt, col, out)):
            out = list(map(max, out, col))
    return out


_positive = (0).__lt__


class Account:
    """One job's account on one host.

    A live account is a window onto its host's ``HostBook`` slot; one the ledger has
    closed (or one built directly) keeps its own figures.
    """

    __slots__ = ("job_id", "host", "allocated", "_book", "_own")

    def __init__(self, job_id: int, host: str, reserved: int = 0, actual: int | None = None, peak: int = 0,
                 allocated: dict[str, int] | None = None, attempt: int = 0, cpu_time: float = 0.0,
                 book: HostBook | None = None) -> None:
        self.job_id = job_id
        self.host = host
        self.allocated: dict[str, int] = allocated if allocated is not None else {}
        self._book = book
        self._own = (reserved, actual, peak, attempt, cpu_time)

    def _figures(self) -> tuple[int, int | None, int, int, float]:
        b = self._book
        if b is None:
            return self._own
        i = b.index[self.job_id]
        actual = None if self.job_id in b.unreported else b.actual[i]
        return b.reserved[i], actual, b.peak[i], b.attempt[i], b.cpu[i]

    def detach(self) -> None:
        """Keep the figures as they are now: the book slot is about to go."""
        self._own = self._figures()
        self._book = None

    @property
    def reserved(self) -> int:
        return self._figures()[0]

    @property
    def actual(self) -> int | None:
        return self._figures()[1]

    @property
    def peak(self) -> int:
        return self._figures()[2]

    @property
    def attempt(self) -> int:
        return self._figures()[3]

    @property
    def cpu_time(self) -> float:
        return self._figures()[4]

    @property
    def used(self) -> int:
        r, a = self._figures()[:2]
        return used(r, a)

    @property
    def slack(self) -> int:
        r, a = self._figures()[:2]
        return slack(r, a)

    @property
    def charged(self) -> int:
        return self.reserved + self.used

    def __repr__(self) -> str:
        r, a, p, att, cpu = self._figures()
        return f"Account(job {self.job_id} on {self.host}: reserved {r}, actual {a}, peak {p}, attempt {att})"


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
        r, a = acc._figures()[:2]
        self.mem_reserved += sign * r
        self.mem_actual += sign * (a or 0)
        self.mem_slack += sign * slack(r, a)
        self.mem_overage += sign * used(r, a)
        for name, n in acc.allocated.items():
            self.allocated[name] = self.allocated.get(name, 0) + sign * n
            if self.allocated[name] == 0:
                del self.allocated[name]

    def as_tuple(self) -> tuple[int, int, int, int, tuple[tuple[str, int], ...]]:
        return (self.mem_reserved, self.mem_actual, self.mem_slack, self.mem_overage,
                tuple(sorted(self.allocated.items())))


def os_figure(reported: int | None, mem_total: int) -> int:
    """A host's OS-available memory; one that has not reported yet counts its capacity."""
    return mem_total if reported is None else reported


def available(base: int, deduction: int) -> int:
    """Memory a host offers a placement under a view (``MEM_VIEWS``): its base less the deduction."""
    return base - deduction


def available_mem(os_available: int, totals: HostTotals) -> int:
    """Memory available for scheduling: the OS figure minus only the unused slack."""
    return available(*mem_view_xce(0, os_available, totals))


def mem_view_xce(mem_total: int, os_available: int, totals: HostTotals) -> tuple[int, int]:
    """XCE: (base, deduction) = (OS-available, Σ slack); available = base - deduction."""
    return os_available, totals.mem_slack


def mem_view_lsf(mem_total: int, os_available: int, totals: HostTotals) -> tuple[int, int]:
    """LSF's default: live OS-available minus every full reservation (grown jobs counted twice)."""
    return os_available, totals.mem_reserved


def mem_view_flat(mem_total: int, os_available: int, totals: HostTotals) -> tuple[int, int]:
    """Slurm, PBS, Kubernetes: capacity minus the requests, whatever is really used."""
    return mem_total, totals.mem_reserved


MemView = Callable[[int, int, HostTotals], tuple[int, int]]
MEM_VIEWS: dict[str, MemView] = {"xce": mem_view_xce, "lsf": mem_view_lsf, "flat": mem_view_flat}


def available_virtual(total: int, totals: HostTotals, name: str) -> int:
    return total - totals.allocated.get(name, 0)


def derive(accounts: Iterable[Account]) -> dict[str, HostTotals]:
    """Host totals recomputed from scratch, account by account, with the scalar formulas.

    What ``Ledger.audit`` checks the delta-maintained totals against: independent of
    the column sums that the deltas and ``Ledger.rederive`` use.
    """
    out: dict[str, HostTotals] = {}
    for acc in accounts:
        t = out.get(acc.host)
        if t is None:
            t = out[acc.host] = HostTotals()
        t.add(acc)
    for t in out.values():
        for name in [k for k, v in t.allocated.items() if v == 0]:
            del t.allocated[name]
    return out


class Ledger:
    """Accounts per (job, host), kept per host as columns, and delta-maintained host totals."""

    def __init__(self, rules: ReclaimRules = RECLAIM) -> None:
        self.rules = rules  # which rise of a peak unsettles a job (HostBook.rose)
        self.accounts: dict[tuple[int, str], Account] = {}
        self.by_job: dict[int, list[Account]] = {}
        self.books: dict[str, HostBook] = {}
        self.totals: dict[str, HostTotals] = {}
        # The hosts with a reclaiming account (a book whose ``reclaiming`` is not empty): the
        # one test a heartbeat makes before the reclaim rule is asked (reactors/reclaim.py).
        self.borrowing: set[str] = set()

    def _totals(self, host: str) -> HostTotals:
        t = self.totals.get(host)
        if t is None:
            t = self.totals[host] = HostTotals()
        return t

    def open(self, job_id: int, host: str, reserved: int, allocated: dict[str, int],
             attempt: int = 0, since: float = 0.0, reclaiming: bool = False) -> Account:
        """Charge a placement: the whole reservation counts as slack until a report arrives.

        ``since``: the job's start (its settling starts there); ``reclaiming``: it runs on
        reclaimable memory, so it lends none."""
        acc = self.accounts.get((job_id, host))
        if acc is not None:
            return acc
        book = self.books.get(host)
        if book is None:
            book = self.books[host] = HostBook()
        acc = Account(job_id, host, allocated=dict(allocated), book=book)
        book.add(job_id, reserved, attempt, acc.allocated, since, reclaiming)
        if reclaiming:
            self.borrowing.add(host)
        self.accounts[(job_id, host)] = acc
        self.by_job.setdefault(job_id, []).append(acc)
        self._totals(host).add(acc)
        return acc

    def report(self, job_id: int, host: str, actual: int, peak: int | None = None,
               now: float | None = None) -> bool:
        """Apply one usage report as a delta; False if the account is unknown."""
        acc = self.accounts.get((job_id, host))
        if acc is None:
            return False
        self.observe(acc, actual, peak, now=now)
        return True

    def observe(self, acc: Account, actual: int, peak: int | None = None, cpu_time: float | None = None,
                now: float | None = None) -> None:
        """``report`` for a caller that already holds the account."""
        self.observe_host(acc.host, [acc.job_id], None, [actual], [peak or 0],
                          [acc.cpu_time if cpu_time is None else cpu_time], now)

    def observe_host(self, host: str, job_ids: list[int], attempts: list[int] | None,
                     actuals: list[int], peaks: list[int],
                     cpu_times: list[float],
                     now: float | None = None) -> tuple[list[int], list[int], list[int], list[float]] | None:
        """Apply one host's usage reports (columns: the same index is the same task) as deltas.

        The hottest call of a big cluster (hosts x jobs reports a second).  A batch that
        lists every job of the host in the book's order (a worker whose tasks all moved)
        is applied as whole columns with ``column_sums``: C-level passes, no per-report
        Python.  Any other batch goes report by report.  Either way only the differences
        move into the host's totals; reserved and allocated (slots, licences) are never
        touched.  A report for an account this ledger does not hold, or for another
        attempt of the job, is dropped (``attempts`` None: samples a controller already
        checked).  Returns the reports whose figures moved (job ids, actuals, peaks, CPU):
        the samples worth publishing; None when nothing moved.  ``now`` (the reports' time) dates
        a rise of a peak for settling (``HostBook.rose``); None leaves settling as it was.
        """
        b = self.books.get(host)
        if b is None:
            return None
        if job_ids == b.ids and (attempts is None or attempts == b.attempt):
            return self._observe_all(host, b, actuals, peaks, cpu_times, now)
        index, held, r_col, o_col = b.index, b.attempt, b.reserved, b.over_base
        a_col, p_col, c_col = b.actual, b.peak, b.cpu
        unreported = b.unreported
        d_actual = d_slack = d_over = 0
        out: tuple[list[int], list[int], list[int], list[float]] = ([], [], [], [])
        for jid, att, actual, peak, cpu in zip(job_ids, attempts or repeat(None), actuals, peaks, cpu_times):
            i = index.get(jid)
            if i is None or (att is not None and held[i] != att):
                continue
            c_col[i] = cpu
            old = a_col[i]  # 0 while unreported, which the formulas read as "whole reservation is slack"
            old_peak = p_col[i]
            first = unreported and jid in unreported
            if actual == old and peak <= old_peak and not first:
                continue
            # ``column_sums`` for one account, inline (a call per report costs as much as the
            # rest): overage past the base; slack - overage = reserved - actual if reserved.
            base = o_col[i]
            moved_over = (actual - base if actual > base else 0) - (old - base if old > base else 0)
            d_over += moved_over
            if r_col[i]:
                d_slack += moved_over - (actual - old)
            d_actual += actual - old
            a_col[i] = actual
            if actual > peak:
                peak = actual
            if old_peak > peak:
                peak = old_peak
            p_col[i] = peak
            if peak > old_peak:
                b.rose(i, now, self.rules)
            if first:
                unreported.discard(jid)
            out[0].append(jid)
            out[1].append(actual)
            out[2].append(peak)
            out[3].append(cpu)
        if len(job_ids) == len(b.ids) and index.keys() == set(job_ids):
            b.reorder([index[j] for j in job_ids])  # the worker's order: its next batch goes whole
        if not out[0]:
            return None
        t = self.totals.get(host) or self._totals(host)
        t.mem_actual += d_actual
        t.mem_slack += d_slack
        t.mem_overage += d_over
        return out

    def _observe_all(self, host: str, b: HostBook, actuals: list[int], peaks: list[int], cpu_times: list[float],
                     now: float | None) -> tuple[list[int], list[int], list[int], list[float]] | None:
        """``observe_host`` for a batch of every account on the host, in the book's order."""
        new_peak = running_max(b.peak, peaks, actuals)
        first = bool(b.unreported)
        moved = first or actuals != b.actual or new_peak is not b.peak
        # Copied into the book's own lists, in place: the caller may publish its lists, and a
        # new list a heartbeat would be a long-lived container for the cyclic GC to count
        # (at thousands a second it set off full collections over the whole model).
        b.cpu[:] = cpu_times
        if not moved:
            return None
        t = self.totals.get(host) or self._totals(host)
        # The batch is every account on the host, so their old sums are its totals.
        a1, s1, o1 = column_sums(b.reserved, b.over_base, actuals)
        t.mem_actual += a1 - t.mem_actual
        t.mem_slack += s1 - t.mem_slack
        t.mem_overage += o1 - t.mem_overage
        b.actual[:] = actuals
        if new_peak is b.peak:
            new_peak = b.peak.copy()  # published: the next heartbeat's update must not reach it
        else:
            before = b.peak.copy() if now is not None else None
            b.peak[:] = new_peak
            if before is not None:
                b.rose_all(before, now, self.rules)
        b.unreported.clear()
        return b.ids.copy(), actuals, new_peak, cpu_times

    def set_reserved(self, job_id: int, host: str, reserved: int) -> None:
        """A decaying reservation moved; apply the delta it causes."""
        acc = self.accounts.get((job_id, host))
        if acc is None or acc._book is None or acc.reserved == reserved:
            return
        b = acc._book
        t = self._totals(host)
        t.add(acc, -1)
        i = b.index[job_id]
        b.reserved[i] = reserved = _shared(reserved)
        b.over_base[i] = reserved or NO_OVERAGE
        t.add(acc)

    def close(self, job_id: int) -> list[Account]:
        """Release every account of a job; returns them for the accounting record."""
        accs = self.by_job.pop(job_id, [])
        for acc in accs:
            del self.accounts[(job_id, acc.host)]
            self._release(acc)
        return accs

    def close_host(self, job_id: int, host: str) -> Account | None:
        """Release one host's share of a job (its part ended while others still run)."""
        acc = self.accounts.pop((job_id, host), None)
        if acc is not None:
            self.by_job[job_id].remove(acc)
            if not self.by_job[job_id]:
                del self.by_job[job_id]
            self._release(acc)
        return acc

    def _release(self, acc: Account) -> None:
        self._totals(acc.host).add(acc, -1)
        acc.detach()
        book = self.books[acc.host]
        book.remove(acc.job_id)
        if not book.reclaiming:
            self.borrowing.discard(acc.host)
        if not book.ids:
            del self.books[acc.host]

    def host_totals(self, host: str) -> HostTotals:
        return self.totals.get(host) or HostTotals()

    def jobs_on(self, host: str) -> list[int]:
        """The jobs with an open account on ``host`` (its book's order)."""
        book = self.books.get(host)
        return list(book.ids) if book is not None else []

    def reclaimable(self, host: str, now: float, rules: ReclaimRules | None = None) -> int:
        """The host's reclaimable memory at ``now`` (the module docstring's term; the ledger's rules by default)."""
        b = self.books.get(host)
        return b.reclaimable(now, rules or self.rules) if b is not None else 0

    def reclaiming(self, host: str) -> set[int]:
        """The jobs on ``host`` that run on reclaimable memory."""
        b = self.books.get(host)
        return b.reclaiming if b is not None else set()

    def rederive(self) -> None:
        """Round boundary: recompute every host's totals from the accounts.

        From the books' columns with the same ``column_sums`` the deltas
        use: a 100,000-account cluster takes milliseconds, so every round can afford it.
        """
        totals: dict[str, HostTotals] = {}
        for host, b in self.books.items():
            a, slk, over = column_sums(b.reserved, b.over_base, b.actual)
            t = totals[host] = HostTotals(sum(b.reserved), a, slk, over)
            alloc = t.allocated
            for held in b.allocated:
                for name, n in held.items():
                    alloc[name] = alloc.get(name, 0) + n
            for name in [k for k, v in alloc.items() if v == 0]:
                del alloc[name]
        self.totals = totals

    def audit(self) -> list[str]:
        """Differences between delta-maintained totals and a from-scratch derivation.

        ``derive`` goes account by account with the scalar formulas: a path independent
        of the column arithmetic the deltas and ``rederive`` use.
        """
        fresh = derive(self.accounts.values())
        problems = []
        for host in sorted(set(fresh) | set(self.totals)):
            a = self.totals.get(host) or HostTotals()
            b = fresh.get(host) or HostTotals()
            if a.as_tuple() != b.as_tuple():
                problems.append(f"host {host}: delta totals {a.as_tuple()} != derived {b.as_tuple()}")
        lending = {h for h, book in self.books.items() if book.reclaiming}
        if lending != self.borrowing:
            problems.append(f"hosts with a reclaiming job {sorted(lending)} != those a heartbeat asks the "
                            f"reclaim rule for {sorted(self.borrowing)}")
        return problems
