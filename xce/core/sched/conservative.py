"""Conservative backfill as the literature defines it: every job holds a reservation from its
arrival, on an availability profile kept from round to round.

Mu'alem and Feitelson (IEEE TPDS 12(6), 2001): a job gets a reservation when it arrives, the
earliest start at which it fits beside the running jobs and every reservation already made;
it starts at that start (which may be now: that is its backfilling).  When a job ends before
its estimate, the schedule is *compressed*: the reservations are walked in reservation order,
and each moves to the earliest start it now fits, never later than it was.  So no job ever
delays a job that arrived before it.

``backfill.Backfill`` (EASY, and the daemons' ``mode = "conservative"`` with ``depth``) makes
its reservations again each round; this ``Profile`` keeps them, and each host's future:

    a host at time t = the host now (the caller's ``caps``, what accounting says)
                     + what each running job gives back at its end, start + expected run
                       (``backfill.job_releases``; an end already past is due now)
                     - what each reservation holds over [start, start + expected run)

kept per host as a list of states, each from an instant on, made again only for a host
something changed on.  A search for a start walks the candidate hosts' instants in time order
and tries a placement (the same ``place`` rule as ``Backfill``) on each host as it is *at its
worst* over the job's run: the least slots, memory and virtual resources over the window, so
a placement found holds for the whole run.

Two things the literature's setting lacks, and what this does about them:

- A job that runs past its estimate holds hosts a reservation counted on.  The reservation
  whose start has come and cannot start waits, holding from now on (it *slides*).  When a
  job's start comes and a later-arrived reservation's hold now overlaps it, that one is made
  again after it (moved later: by the overrun, never by a later job); if an earlier one's
  overlaps it, it is made again itself.
- Memory moves with usage: a reservation is checked against the hosts as accounting has them
  when its start comes, and waits (slides) if they cannot take it then.

Compression asks no search of a job that cannot have gained: each reservation keeps the most
slots its hosts could give it over any window before its start when it was last searched
(``Hold.most``), and the slots given back since (an early end's, a moved reservation's) can
raise that by no more than their sum (``Profile.gained``).  Pure: no I/O, no clock.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xce.core.model import Alloc, Job
from xce.core.placement import Demand, HostCap, candidates, fits, job_demand, place_fresh
from xce.core.sched.backfill import BackfillRules, Release, give_back, job_releases

if TYPE_CHECKING:
    from xce.core.accounting import Ledger

NEVER = math.inf


@dataclass(slots=True)
class Hold:
    """A pending job's reservation: ``allocs`` over [start, end); no allocs: none found yet."""

    job: Job
    d: Demand
    order: int
    start: float = NEVER
    end: float = NEVER
    allocs: list[Alloc] = field(default_factory=list)
    most: int = 0    # the most slots any window before ``start`` offered, at its last search
    gained: int = 0  # Profile.gained then

    def says(self, now: float) -> str:
        if not self.allocs:
            return f"conservative: job {self.job.id} has no reservation: the known ends never make room for it"
        hosts = ", ".join(a.host for a in self.allocs)
        return f"conservative: job {self.job.id} reserved at t+{max(0, int(self.start - now))} on {hosts}"


@dataclass(slots=True)
class Round:
    placements: list[tuple[int, list[Alloc]]] = field(default_factory=list)
    reasons: dict[int, str] = field(default_factory=dict)
    moved_earlier: int = 0  # reservations compression moved
    moved_later: int = 0    # reservations made again behind an overrun


class Profile:
    """The reservations of every pending job and the hosts' futures, kept between rounds.

    The caller tells it what happens (``arrive`` through ``round``, ``started``, ``changed``,
    ``ended``, ``touched``) and reads each round's starts.  ``caps`` is the caller's live view
    of the hosts now (by name, replaced or charged as it moves).  The fit rule, the trial
    placement and the host ranking are placement's own.
    """

    def __init__(self, rules: BackfillRules, caps: Mapping[str, HostCap],
                 reclaim_queues: Container[str] = frozenset()) -> None:
        self.rules, self.caps, self.reclaim_queues = rules, caps, reclaim_queues
        self.holds: dict[int, Hold] = {}  # in reservation (arrival) order
        self.seq = 0
        self.due: list[tuple[float, int, int]] = []  # (start, order, job id): a min-heap, lazily pruned
        self.blocked: dict[int, Hold] = {}  # due, and its hosts could not take it: tried each round
        self.rel: dict[str, dict[int, Release]] = {}  # host -> running job -> what it gives back
        self.held: dict[str, dict[int, Alloc]] = {}   # host -> reserved job -> its share there
        self.snaps: dict[str, tuple[list[float], list[HostCap], list[int]]] = {}  # host -> _states
        self.stale: dict[int, Job] = {}  # running jobs whose releases are to be made again
        self.gained = 0  # slots given back early, in all: compression's bound
        self.compress_wanted = False

    # ---- what happened -------------------------------------------------------------------

    def started(self, job: Job) -> None:
        """The job runs (placed by ``round``, or by the caller): its releases are made at the next round."""
        self.stale[job.id] = job

    changed = started  # its account moved: what its end gives back is made again

    def ended(self, job: Job, now: float) -> None:
        """The job is gone: ahead of its expected end, it gives back slots (compression's cue)."""
        self.stale.pop(job.id, None)
        for h in {a.host for a in job.allocs}:
            if self.rel.get(h, {}).pop(job.id, None) is not None:
                self.snaps.pop(h, None)
        expected = (job.start_time or now) + self.rules.runtime(job.spec)
        if expected > now:
            self.gained += job.spec.slots
            self.compress_wanted = True

    def forget(self, job_id: int) -> None:
        """A pending job left the queue without running: its reservation is given back."""
        h = self.holds.pop(job_id, None)
        if h is not None and h.allocs:
            self._unhold(h)
            self.gained += h.job.spec.slots
            self.compress_wanted = True

    def touched(self, hosts: Iterable[str]) -> None:
        """These hosts moved now (the caller's ``caps`` for them are new): their futures are made again."""
        for h in hosts:
            self.snaps.pop(h, None)

    def _sync(self, ledger: Ledger | None) -> None:
        for j in self.stale.values():
            assert j.start_time is not None
            end = j.start_time + self.rules.runtime(j.spec)
            for h in {a.host for a in j.allocs}:
                self.rel.setdefault(h, {}).pop(j.id, None)
                self.snaps.pop(h, None)
            if end < NEVER:
                for r in job_releases(j, end, ledger):
                    self.rel.setdefault(r.host, {})[j.id] = r
        self.stale.clear()

    # ---- a round ---------------------------------------------------------------------------

    def round(self, arrivals: Iterable[Job], now: float, ledger: Ledger | None = None, freed: bool = False,
              explain: bool = False) -> Round:
        """Compress (after an early end, or with ``freed``: memory given back), reserve each
        arrival, then start every job whose reservation has come and whose hosts can take it."""
        self._sync(ledger)
        out = Round()
        if self.compress_wanted or freed:
            self.compress_wanted = False
            self._compress(now, out)
        for job in arrivals:
            self.seq += 1
            h = self.holds[job.id] = Hold(job, job_demand(job, reclaim_queues=self.reclaim_queues), self.seq)
            self._reserve(h, now)
        self._start_due(now, out)
        if explain:
            out.reasons = {jid: h.says(now) for jid, h in self.holds.items()}
        return out

    def _compress(self, now: float, out: Round) -> None:
        """Each reservation, in reservation order, to the earliest start it fits before its own."""
        for h in list(self.holds.values()):
            if h.start <= now or h.most + self.gained - h.gained < h.job.spec.slots:
                continue  # due already, or no window before its start can have room for it
            old = h.start
            if h.allocs:
                self._unhold(h)
            got = self._search(h, now, old)
            if got is None:
                if h.allocs:
                    self._hold(h, old, h.allocs, push=False)
                continue
            self.gained += h.job.spec.slots if h.allocs else 0  # its old window is given back
            h.gained = self.gained
            self._hold(h, *got)
            out.moved_earlier += 1

    def _reserve(self, h: Hold, now: float) -> None:
        got = self._search(h, now, NEVER)
        if got is not None:
            self._hold(h, *got)
        else:
            h.start, h.end, h.allocs = NEVER, NEVER, []

    def _start_due(self, now: float, out: Round) -> None:
        due, self.blocked = self.blocked, {}
        while self.due and self.due[0][0] <= now:
            start, _, jid = heapq.heappop(self.due)
            h = self.holds.get(jid)
            if h is not None and h.start == start and h.allocs:
                due[jid] = h
        again: dict[int, Hold] = {}
        for h in sorted(due.values(), key=lambda h: h.order):
            if h.job.id not in self.holds or h.job.id in again:
                continue  # made again behind an earlier one's start (below)
            if not self._can_start_now(h):
                self._slide(h, now)
                continue
            self._unhold(h)
            if not self._window_fits(h, now):
                later = self._overlapping_later(h, now)
                for o in later:
                    self._unhold(o)
                if not self._window_fits(h, now):  # an earlier reservation, slid, holds it: it goes after
                    for o in later:
                        self._hold(o, o.start, o.allocs, push=False)
                    self._again([h], now, out)
                    continue
                self.gained += sum(o.job.spec.slots for o in later)
                again.update((o.job.id, o) for o in later)
            self._run(h, now, out)
        self._again(list(again.values()), now, out)

    def _again(self, holds: list[Hold], now: float, out: Round) -> None:
        """Reservations an overrun made invalid, made again in reservation order (later, as a rule)."""
        for o in sorted(holds, key=lambda h: h.order):
            if o.job.id not in self.holds:
                continue
            self._unhold(o)
            self._reserve(o, now)
            out.moved_later += 1
            if o.allocs and o.start <= now and self._can_start_now(o):
                self._unhold(o)
                self._run(o, now, out)

    def _run(self, h: Hold, now: float, out: Round) -> None:
        """Start ``h``'s job now on its reserved hosts: the caller's hosts are charged (an overlay
        until it rebuilds them) and the job's end is given back at now + its expected run."""
        del self.holds[h.job.id]
        end = now + self.rules.runtime(h.job.spec)
        for a in h.allocs:
            virtual = tuple((k, n) for k, n in a.virtual.items() if k != "slots")
            self.caps[a.host].charge(a.slots, a.mem, virtual, h.d.exclusive)
            if end < NEVER:
                self.rel.setdefault(a.host, {})[h.job.id] = Release(end, a.host, a.slots, 0, a.mem, virtual,
                                                                    h.d.exclusive)
            self.snaps.pop(a.host, None)
        out.placements.append((h.job.id, h.allocs))

    def _can_start_now(self, h: Hold) -> bool:
        """Whether the hosts as they are now (not as planned: a job may have overrun) take it."""
        return all(fits(h.d, self.caps[a.host], a.slots, i == 0) for i, a in enumerate(h.allocs))

    def _slide(self, h: Hold, now: float) -> None:
        """A reservation whose start came and whose hosts are still busy holds them from now on."""
        self._unhold(h)
        self._hold(h, now, h.allocs, push=False)
        self.blocked[h.job.id] = h

    def next_start(self, now: float) -> float | None:
        """The next instant a reservation is due to start (after ``now``), or None."""
        while self.due:
            start, _, jid = self.due[0]
            h = self.holds.get(jid)
            if h is not None and h.start == start and h.allocs:
                if start > now:
                    return start
                self.blocked[jid] = h  # made again behind an overrun at now, and its hosts are busy
            heapq.heappop(self.due)
        return None

    def _window_fits(self, h: Hold, now: float) -> bool:
        """Whether ``h`` (not held) fits its hosts' futures over [now, now + its run)."""
        end = now + self.rules.runtime(h.job.spec)
        for i, a in enumerate(h.allocs):
            times, states, _ = self._states(a.host)
            k = bisect.bisect_right(times, now) - 1
            worst = _worst(times, states, k, end)
            if not fits(h.d, worst, a.slots, i == 0):
                return False
        return True

    def _overlapping_later(self, h: Hold, now: float) -> list[Hold]:
        end = now + self.rules.runtime(h.job.spec)
        out: dict[int, Hold] = {}
        for a in h.allocs:
            for jid in self.held.get(a.host, {}):
                o = self.holds.get(jid)
                if o is not None and o.order > h.order and o.start < end and o.end > now:
                    out[jid] = o
        return list(out.values())

    # ---- holding ---------------------------------------------------------------------------

    def _hold(self, h: Hold, start: float, allocs: list[Alloc], push: bool = True) -> None:
        """Hold ``allocs`` for ``h`` from ``start``; ``push=False``: put back where it was (already due there)."""
        h.start, h.allocs = start, allocs
        h.end = start + self.rules.runtime(h.job.spec)
        for a in allocs:
            self.held.setdefault(a.host, {})[h.job.id] = a
            self.snaps.pop(a.host, None)
        if push:
            heapq.heappush(self.due, (start, h.order, h.job.id))

    def _unhold(self, h: Hold) -> None:
        for a in h.allocs:
            held = self.held.get(a.host)
            if held is not None and held.pop(h.job.id, None) is not None:
                self.snaps.pop(a.host, None)

    def _states(self, host: str) -> tuple[list[float], list[HostCap], list[int]]:
        """The host's states: ``states[i]`` holds from ``times[i]`` until the next instant, with
        ``free[i]`` slots free (never below 0)."""
        got = self.snaps.get(host)
        if got is not None:
            return got
        events: list[tuple[float, int, object]] = []
        for r in self.rel.get(host, {}).values():
            events.append((r.end, 0, r))
        for jid, a in self.held.get(host, {}).items():
            h = self.holds[jid]
            virtual = tuple((k, n) for k, n in a.virtual.items() if k != "slots")
            events.append((h.start, 1, (a.slots, a.mem, virtual, h.d.exclusive)))
            if h.end < NEVER:
                events.append((h.end, 0, Release(h.end, host, a.slots, 0, a.mem, virtual, h.d.exclusive)))
        events.sort(key=lambda e: e[0])
        cur = self.caps[host].clone()
        times, states, free = [-NEVER], [cur], [0]
        for t, kind, ev in events:
            if t != times[-1]:
                cur = cur.clone()
                times.append(t)
                states.append(cur)
                free.append(0)
            if kind == 0:
                give_back(cur, ev)  # type: ignore[arg-type]
            else:
                cur.charge(*ev)  # type: ignore[misc]
        for i, c in enumerate(states):
            free[i] = max(0, c.slots_free)
        got = self.snaps[host] = (times, states, free)
        return got

    # ---- the search ------------------------------------------------------------------------

    def _search(self, h: Hold, now: float, before: float) -> tuple[float, list[Alloc]] | None:
        """The earliest start in [now, ``before``) at which ``h``'s job fits its whole run, and
        where; sets ``h.most`` (the bound compression reads) on the way."""
        d, need = h.d, h.job.spec.slots
        run = self.rules.runtime(h.job.spec)
        names = candidates(d, self.caps)
        h.gained, h.most = self.gained, 0
        if not names:
            return None
        tracks = [self._states(n) for n in names]
        at = [bisect.bisect_right(times, now) - 1 for times, _, _ in tracks]
        free = sum(fr[k] for (_, _, fr), k in zip(tracks, at))
        nexts = [(times[k + 1], i) for i, ((times, _, _), k) in enumerate(zip(tracks, at)) if k + 1 < len(times)]
        heapq.heapify(nexts)
        t = now
        while t < before:
            if free >= need:
                end = t + run
                # The least slots each host has over the run: too few in all, no trial placement.
                least = []
                for (times, _, fr), k in zip(tracks, at):
                    j = bisect.bisect_left(times, end, k + 1)
                    least.append(min(fr[k:j]) if j > k + 1 else fr[k])
                room = sum(least)
                h.most = max(h.most, room)
                if room >= need:
                    window = [_worst(times, states, k, end) for (times, states, _), k, n in zip(tracks, at, least) if n]
                    allocs = place_fresh(d, window)
                    if allocs:
                        return t, allocs
            else:
                h.most = max(h.most, free)
            if not nexts:
                return None
            t = nexts[0][0]
            while nexts and nexts[0][0] == t:
                _, i = heapq.heappop(nexts)
                times, _, fr = tracks[i]
                k = at[i]
                free += fr[k + 1] - fr[k]
                at[i] = k + 1
                if k + 2 < len(times):
                    heapq.heappush(nexts, (times[k + 2], i))
        return None


def _worst(times: list[float], states: list[HostCap], k: int, end: float) -> HostCap:
    """The host at its worst over [times[k], end): the least of each resource, the most jobs."""
    first = states[k]
    j = k + 1
    if j >= len(times) or times[j] >= end:
        return first  # nothing changes in the window (read only: placement never writes it)
    w = first.clone()
    w.os_available, w.slack = first.mem_available, 0
    while j < len(times) and times[j] < end:
        s = states[j]
        w.slots_free = min(w.slots_free, s.slots_free)
        w.os_available = min(w.os_available, s.mem_available)
        for name, n in s.virtual_free.items():
            w.virtual_free[name] = min(w.virtual_free.get(name, n), n)
        w.jobs = max(w.jobs, s.jobs)
        w.held = w.held or s.held
        j += 1
    return w
