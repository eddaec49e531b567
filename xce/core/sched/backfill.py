"""Backfill: reservations for blocked jobs, and the check that keeps lower jobs from delaying them.

EASY (the default): the first job in priority order that cannot start now gets a
reservation, its earliest start on the hosts that will first have room for it; a lower job
may start now only if it does not delay that reservation: it ends before the reserved
start, or it fits beside the reservation on the reserved hosts.  Conservative: the same for
the first ``depth`` blocked jobs.  ``off``: greedy, as XCE placed before.

The future is what XCE accounts now, moved forward (memory as accounting says, never a
second formula):

    a job's expected run   = run_estimate (-We), else run_limit (-W), else the queue's
                             default, else ``default_run_limit``, else unknown: it holds
                             what it takes for good, and is never planned around
    a running job's end    = max(now, start + expected run)       (an overrun is due now)
    what an end gives back = its slots and virtual resources; its actual memory to the OS
                             figure and its slack out of the slack term, so the host's memory
                             available for scheduling rises by charge = max(reserved, actual)

A reservation at ``T`` on a host is a *point*: the host as it will be at ``T``, with the
reservation already charged.  A job placed now that runs past ``T`` must also fit the point
(the same ``fit`` rule placement uses) and is charged to it.  A later reservation holds its
resources from its start on (its end is not credited: that errs towards honouring earlier
reservations).  Pure: no I/O, no clock (``now`` is a parameter).
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING

from xce.core.model import Alloc, Job, JobSpec

if TYPE_CHECKING:
    from xce.core.accounting import Ledger
    from xce.core.placement import Demand, HostCap

MODES = ("off", "easy", "conservative", "fcfs")
# "off": no reservation, any job that fits starts (greedy); "fcfs": strict first come, first
# served, no backfilling at all: the first job that cannot start holds every job behind it
# (the baseline the backfill literature compares EASY and conservative with).

Fit = Callable[["Demand", "HostCap", int, bool], "str | None"]
Fits = Callable[["Demand", "HostCap", int, bool], bool]  # ``Fit(...) is None``, without the words
UNEXPLAINED_VETO = "backfill: would delay a reservation"  # explain=False: the reason is never shown
# Sort keys as C calls, not a Python lambda an event: a conservative round sorts some 75 events
# in each of its ~6 sweeps (the same stable order: the key is the same (time, kind)).
_WHEN = itemgetter(0, 1)  # a stream event's (time, kind)
_START = attrgetter("start")  # a point's start
Place = Callable[["Demand", "list[HostCap]"], "list[Alloc] | None"]


@dataclass(frozen=True, slots=True)
class BackfillRules:
    mode: str = "easy"
    depth: int = 1  # conservative: how many blocked jobs hold a reservation
    default_run_limit: float | None = None  # None: a job without a run figure may run for ever
    queue_run_limit: Mapping[str, float] = field(default_factory=dict)

    @property
    def reservations(self) -> int:
        """How many blocked jobs hold a reservation in a round."""
        return 0 if self.mode in ("off", "fcfs") else 1 if self.mode == "easy" else self.depth

    def runtime(self, spec: JobSpec) -> float:
        """How long a job is expected to run (seconds; inf: unknown, it holds what it takes for
        good): the figure every backfill decision uses."""
        for t in (spec.run_estimate, spec.run_limit, self.queue_run_limit.get(spec.queue), self.default_run_limit):
            if t is not None and t > 0:
                return t
        return math.inf


@dataclass(frozen=True, slots=True)
class Release:
    """What a job gives back on one host when it ends."""

    end: float
    host: str
    slots: int
    actual: int   # back into the OS figure
    slack: int    # out of the slack term
    virtual: tuple[tuple[str, int], ...] = ()
    exclusive: bool = False  # an exclusive (-x) job's end: the host takes other jobs again
    leaves: bool = True      # the job is gone from the host (a suspended one stays, holding its memory)


def releases(running: Iterable[Job], rules: BackfillRules, now: float,
             ledger: Ledger | None = None) -> list[Release]:
    """The releases of running jobs, from their allocations, start times and the ledger."""
    out: list[Release] = []
    for j in running:
        if j.start_time is None:
            continue
        end = max(now, j.start_time + rules.runtime(j.spec))
        if end == math.inf:
            continue  # never gives back what it holds, as far as anyone knows
        out += job_releases(j, end, ledger)
    return out


class ReleaseBook:
    """The running jobs' releases kept from round to round, for a caller that knows when each
    changes (the simulator): a job's are made when it starts and again when its account moves
    (``changed``), not every round.  Their ends stay unclamped: ``Backfill`` takes an overdue
    end as due now, as ``releases`` gives it."""

    def __init__(self, rules: BackfillRules) -> None:
        self.rules = rules
        self.by_job: dict[int, list[Release]] = {}  # in start order, as ``releases`` walks the running jobs
        self.stale: dict[int, Job] = {}

    def started(self, job: Job) -> None:
        self.by_job[job.id] = []
        self.stale[job.id] = job

    def changed(self, job: Job) -> None:
        """The job's account moved (a usage report): its releases are made again before the next round."""
        if job.id in self.by_job:
            self.stale[job.id] = job

    def ended(self, job_id: int) -> None:
        self.by_job.pop(job_id, None)
        self.stale.pop(job_id, None)

    def current(self, ledger: Ledger | None = None) -> Iterator[Release]:
        """Every running job's releases as ``releases`` makes them, but for the clamp to now."""
        for j in self.stale.values():
            assert j.start_time is not None
            end = j.start_time + self.rules.runtime(j.spec)
            self.by_job[j.id] = job_releases(j, end, ledger) if end < math.inf else []
        self.stale.clear()
        return chain.from_iterable(self.by_job.values())


def job_releases(j: Job, end: float, ledger: Ledger | None = None) -> list[Release]:
    """What one job gives back on each of its hosts when it ends at ``end``."""
    accs = {a.host: a for a in ledger.by_job.get(j.id, [])} if ledger is not None else {}
    out: list[Release] = []
    for a in j.allocs:
        acc = accs.get(a.host)
        actual, slack = ((acc.actual or 0), acc.slack) if acc is not None else (0, a.mem)
        out.append(Release(end, a.host, a.slots, actual, slack, _virtual(a), j.spec.exclusive))
    return out


def when(t: float, now: float) -> str:
    """A start time as an operator reads it: local clock time, and how far off."""
    wait = max(0, int(t - now))
    h, m = divmod(wait // 60, 60)
    return f"{time.strftime('%H:%M', time.localtime(t))} (in {h}h{m:02d}m)" if h else \
        f"{time.strftime('%H:%M', time.localtime(t))} (in {m}m)"


@dataclass(slots=True)
class Reservation:
    job_id: int
    start: float
    allocs: list[Alloc]
    now: float
    exclusive: bool = False  # the job's -x: its hosts take no other job from its start

    def says(self) -> str:
        hosts = ", ".join(a.host for a in self.allocs)
        return f"reserved to start at {when(self.start, self.now)} on {hosts}"


@dataclass(slots=True)
class Point:
    start: float
    cap: HostCap
    reservation: Reservation
    # What the reservation holds on this host from ``start`` (its alloc here): a sweep charges it
    # at every point it passes, so it is kept here rather than looked up among the allocs.
    slots: int = 0
    mem: int = 0
    virtual: tuple[tuple[str, int], ...] = ()


class Backfill:
    """One round's reservations and the future they hold (mutated as the round places jobs)."""

    def __init__(self, rules: BackfillRules, now: float, fit: Fit, place: Place,
                 releases: Iterable[Release] = (), fits: Fits | None = None, explain: bool = True) -> None:
        """``fits``: the same rule as ``fit`` without building reasons; ``explain=False``: a
        veto's reason is a fixed word (the caller keeps no reasons, only that one was given)."""
        self.rules = rules
        self.now = now
        self.fit = fit
        self.ok: Fits = fits or (lambda d, h, slots, first: fit(d, h, slots, first) is None)
        self.explain = explain
        self.place = place
        self.timeline: dict[str, list[Release]] = {}
        self.points: dict[str, list[Point]] = {}
        self.earliest = math.inf  # the earliest start of a point
        self.reservations: list[Reservation] = []
        self.most = rules.reservations
        for r in releases:
            self.timeline.setdefault(r.host, []).append(r)

    @property
    def wants(self) -> bool:
        return len(self.reservations) < self.most

    def end_of(self, job: Job) -> float:
        return self.now + self.rules.runtime(job.spec)

    # ---- a job placed now ----------------------------------------------------------------

    def veto(self, d: Demand, h: HostCap, slots: int, first: bool, end: float) -> str | None:
        """Why this share would delay a reservation on ``h``; None if it would not."""
        for p in self.points.get(h.name, ()):
            if p.start < end and not self.ok(d, p.cap, slots, first):
                if not self.explain:
                    return UNEXPLAINED_VETO
                r = p.reservation
                return f"backfill: would delay job {r.job_id}, {r.says()}"
        return None

    def placed(self, d: Demand, allocs: list[Alloc], end: float) -> None:
        """A job placed now: charge the points it overlaps, and give it back at its end (for the
        reservations still to come this round)."""
        later = end < math.inf and self.wants
        for a in allocs:
            pts = self.points.get(a.host)
            if pts is None and not later:
                continue
            virtual = _virtual(a)
            for p in pts or ():
                if p.start < end:
                    p.cap.charge(a.slots, a.mem, virtual, d.exclusive)
            if later:
                self.timeline.setdefault(a.host, []).append(Release(end, a.host, a.slots, 0, a.mem, virtual,
                                                                    d.exclusive))

    # ---- a blocked job -------------------------------------------------------------------

    def reserve(self, job: Job, d: Demand, cands: list[HostCap], single: bool) -> Reservation | None:
        """The earliest start for ``job`` on ``cands`` (ranked), held from then on; None if the
        known ends never make room.  One sweep over the hosts' releases and holds in time order."""
        by_name = {h.name: h for h in cands}
        now = self.now  # a release's end as given, or now when it is overdue (the caller may keep them unclamped)
        points = self.points  # (none before the round's first reservation: no look-up a host then)
        stream = sorted([(e if (e := r.end) > now else now, 0, r.host, r) for h in by_name
                         for r in self.timeline.get(h, ())]
                        + ([(p.start, 1, h, p) for h in by_name for p in points.get(h, ())] if points else []),
                        key=_WHEN)  # at one instant releases first: they are due
        n = len(stream)
        future: dict[str, HostCap] = {}
        run = self.rules.runtime(job.spec)
        free = sum([f for h in cands if (f := h.slots_free) > 0])  # each host's max(0, free), without a call a host
        tries = 0
        touched: list[HostCap] = []
        for k, (t, kind, name, ev) in enumerate(stream):
            h = future.get(name)
            if h is None:
                h = future[name] = by_name[name].clone()
            free += give_back(h, ev) if kind == 0 else _hold_point(h, ev)
            if single:  # (only a one-host job tries the hosts changed at an instant)
                touched.append(h)
            if k + 1 < n and stream[k + 1][0] == t:
                continue  # settle every change at this instant first
            allocs = None
            if single:
                allocs = next((self.place(d, [c]) for c in touched if self.ok(d, c, d.slots, True)
                               and self._fits_later(d, c, d.slots, True, t, t + run)), None)
            elif free >= d.slots:  # a spread over hosts: try the whole ranked list, at most 8 times
                tries += 1
                allocs = self.place(d, [future.get(c.name, c) for c in cands])
                if allocs and not all(self._fits_later(d, future.get(a.host, by_name[a.host]), a.slots, i == 0, t,
                                                       t + run) for i, a in enumerate(allocs)):
                    allocs = None
                if not allocs and tries >= 8:
                    return None  # the rest of the sweep would try nothing more
            touched.clear()
            if allocs:
                return self._hold(job, t, t + run, allocs, {a.host: future.get(a.host, by_name[a.host])
                                                            for a in allocs})
        return None

    def _fits_later(self, d: Demand, h: HostCap, slots: int, first: bool, t: float, end: float) -> bool:
        """Whether a reservation over [t, end) on ``h`` fits the later ones that start meanwhile."""
        return all(self.ok(d, p.cap, slots, first) for p in self.points.get(h.name, ()) if t < p.start < end)

    def _hold(self, job: Job, t: float, end: float, allocs: list[Alloc], at_t: dict[str, HostCap]) -> Reservation:
        """Hold ``allocs`` over [t, end): a point at ``t``, charged to the points it overlaps,
        and given back at ``end`` (when known) for the reservations after it."""
        r = Reservation(job.id, t, allocs, self.now, job.spec.exclusive)
        self.reservations.append(r)
        self.earliest = min(self.earliest, t)
        for a in allocs:
            virtual = _virtual(a)
            pts = self.points.setdefault(a.host, [])
            for p in pts:
                if t < p.start < end:
                    p.cap.charge(a.slots, a.mem, virtual, r.exclusive)
            cap = at_t[a.host].clone()
            cap.charge(a.slots, a.mem, virtual, r.exclusive)
            bisect.insort(pts, Point(t, cap, r, a.slots, a.mem, virtual), key=_START)
            if end < math.inf:
                self.timeline.setdefault(a.host, []).append(Release(end, a.host, a.slots, 0, a.mem, virtual,
                                                                    r.exclusive))
        return r


def _virtual(a: Alloc) -> tuple[tuple[str, int], ...]:
    return tuple((k, n) for k, n in a.virtual.items() if k != "slots")


def give_back(h: HostCap, ev: Release | Point) -> int:
    """Move ``h`` past a release (an end; preemption's too); returns the change of its free slots."""
    assert isinstance(ev, Release)
    h.slots_free += ev.slots
    h.os_available += ev.actual
    h.slack -= ev.slack
    for name, n in ev.virtual:
        h.virtual_free[name] = h.virtual_free.get(name, 0) + n
    if ev.leaves:
        h.jobs -= 1
        h.held = h.held and not ev.exclusive
    return ev.slots


def _hold_point(h: HostCap, ev: Release | Point) -> int:
    """Move ``h`` past a reservation's start; returns the change of its free slots."""
    assert isinstance(ev, Point)
    h.charge(ev.slots, ev.mem, ev.virtual, ev.reservation.exclusive)
    return -ev.slots
