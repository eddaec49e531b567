"""The placement core: pending jobs and a cluster view in, placements and reasons out.

Pure: no sockets, no clock (``now`` is a parameter), no randomness.  A round is
a short pipeline, as in Nomad and the Kubernetes scheduler:

    order pending (queue priority, fairshare, job priority, submit: xce/core/sched/order.py)
      -> for each job: LIMITS of its user/group/project/queue (xce/core/sched/limits.py)
      -> FILTER hosts (whole tasks, schedulable, queue hosts, exclusive, select, slots, mem or, for a reclaiming job,
         reclaim, virtual)
      -> VETO a host where it would delay a reservation, or pass a host limit
      -> RANK the survivors (order[], default: most memory available first)
      -> take the first that fit, charge a tentative overlay, go on;
         the first job(s) that cannot start get a reservation (xce/core/sched/backfill.py).

Each filter returns ``None`` or the reason it rejected the host, in words an
operator reads ("mem: needs 4.0G, node2 has 3.1G available for scheduling
(OS 6.2G - slack 3.1G)").  The same ``fit_reason`` is what the controller runs
again before committing a placement (one fit rule, used twice).

Jobs with identical demands form a class; within one round resources only
shrink, so a class that failed once fails again with the same reason and its
ranked candidate list is only ever walked forward.  ``schedule(explain=False)`` (the
simulator's, which discards reasons) places the same without building the words of a
misfit, lets a failed plain demand rule out every wider, hungrier one (``_Beaten``), and,
with no reservation to sweep for, passes over each later job of a failed class at one
look-up (``_Round.place_quietly``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain

from xce.core import accounting
from xce.core.accounting import Ledger
from xce.core.hostgroups import HostSet, of_queue
from xce.core.model import Alloc, Host, Job, JobState, Queue, reclaiming
from xce.core.resreq import ResReq, select_matches
from xce.core.sched.backfill import UNEXPLAINED_VETO, Backfill, BackfillRules, Release, Reservation, Point
from xce.core.sched.fairshare import Fairshare
from xce.core.sched.limits import LimitBook
from xce.core.sched.order import Ordering
from xce.core.units import fmt_bytes


@dataclass(frozen=True, slots=True)
class Demand:
    """What one job needs, in placement terms."""

    slots: int
    mem_task: int = 0    # per slot
    mem_host: int = 0    # per host used
    mem_job: int = 0     # whole job, charged on its first host
    virtual: tuple[tuple[str, int], ...] = ()  # host-level virtual, per host
    cluster: tuple[tuple[str, int], ...] = ()  # cluster-wide virtual, whole job
    span_hosts: int | None = None
    ptile: int | None = None
    select: str | None = None
    order: tuple[tuple[str, bool], ...] = ()
    reclaim: bool = False  # runs on reclaimable memory (accounting.reclaim_room), not on available alone
    exclusive: bool = False  # -x: only on hosts that run no job, and none beside it
    hosts: tuple[str, HostSet] | None = None  # (queue, the hosts it may use: LSF HOSTS); None: any host
    task: int = 1  # slots of one task (sbatch -c): a host's share holds whole tasks (``whole_tasks``)

    def mem_for(self, slots_here: int, first: bool) -> int:
        return self.mem_task * slots_here + self.mem_host + (self.mem_job if first else 0)


def job_demand(job: Job, cluster_resources: Mapping[str, int] | None = None,
               reclaim_queues: Container[str] = frozenset()) -> Demand:
    return demand_of(job.spec.slots, job.req, cluster_resources or {}, reclaiming(job.spec, reclaim_queues),
                     job.spec.exclusive, task=job.spec.cpus_per_task)


def demand_of(slots: int, req: ResReq, cluster_resources: Mapping[str, int], reclaim: bool = False,
              exclusive: bool = False, hosts: tuple[str, HostSet] | None = None, task: int = 1) -> Demand:
    return _demand(slots, req, frozenset(cluster_resources) if cluster_resources else frozenset(), reclaim,
                   exclusive, hosts, task)


def queue_host_sets(queues: Iterable[Queue]) -> dict[str, HostSet]:
    """The host lists of the queues that have one (LSF HOSTS): what ``schedule`` and the re-check take."""
    return {q.name: hs for q in queues if (hs := of_queue(q.hosts, q.hosts_not)) is not None}


def job_hosts(job: Job, sets: Mapping[str, HostSet]) -> tuple[str, HostSet] | None:
    """(queue, its host list) for the job's queue, or None where its queue may use any host."""
    hs = sets.get(job.spec.queue) if sets else None
    return (job.spec.queue, hs) if hs is not None else None


@lru_cache(maxsize=4096)  # pure, of immutable arguments: a round asks it per (slots, request), rounds repeat them
def _demand(slots: int, req: ResReq, cluster_resources: frozenset[str], reclaim: bool,
            exclusive: bool = False, hosts: tuple[str, HostSet] | None = None, task: int = 1) -> Demand:
    mem = {"task": 0, "host": 0, "job": 0}
    virtual: dict[str, int] = {}
    cluster: dict[str, int] = {}
    for item in req.rusage:
        if item.name == "mem":
            mem[item.method] += item.amount
        elif item.name in cluster_resources:
            cluster[item.name] = cluster.get(item.name, 0) + item.amount
        elif item.name != "slots":
            per = item.amount * (slots if item.method == "task" else 1)
            virtual[item.name] = virtual.get(item.name, 0) + per
    return Demand(slots=slots, mem_task=mem["task"], mem_host=mem["host"], mem_job=mem["job"],
                  virtual=tuple(sorted(virtual.items())), cluster=tuple(sorted(cluster.items())),
                  span_hosts=req.span_hosts, ptile=req.span_ptile, select=req.select,
                  order=tuple((k.name, k.descending) for k in req.order), reclaim=reclaim, exclusive=exclusive,
                  hosts=hosts, task=task)


def total_mem(d: Demand, hosts_used: int) -> int:
    return d.mem_task * d.slots + d.mem_host * max(1, hosts_used) + d.mem_job


@dataclass(slots=True)
class HostCap:
    """One host as a round sees it; a tentative overlay mutated as jobs are placed."""

    name: str
    schedulable: str | None  # None, or why the host takes no jobs ("closed", "unavail")
    slots_total: int
    slots_free: int
    mem_total: int
    os_available: int
    slack: int
    virtual_free: dict[str, int] = field(default_factory=dict)
    attrs: dict[str, int | str] = field(default_factory=dict)
    reclaimable: int = 0  # accounting's reclaimable(host), fixed for the round: lenders' figures do not move in it
    jobs: int = 0        # jobs holding an allocation here (an exclusive job wants none)
    held: bool = False   # an exclusive job runs here: no other job may land

    @property
    def mem_available(self) -> int:
        return accounting.available(self.os_available, self.slack)

    @property
    def reclaim_room(self) -> int:
        return accounting.reclaim_room(self.mem_available, self.reclaimable)

    def mem_room(self, d: Demand) -> int:
        """The memory ``d`` may take here: the room of reclaimable memory for a reclaiming job."""
        return self.reclaim_room if d.reclaim else self.mem_available

    def select_attrs(self) -> dict[str, int | str]:
        return {**self.attrs, "mem": self.mem_available, "slots": self.slots_free,
                "maxmem": self.mem_total, "maxslots": self.slots_total, "hname": self.name}

    def clone(self) -> HostCap:
        """A copy to move forward on its own (backfill's view of the host at a later time)."""
        return HostCap(self.name, self.schedulable, self.slots_total, self.slots_free, self.mem_total,
                       self.os_available, self.slack, dict(self.virtual_free), self.attrs, self.reclaimable,
                       self.jobs, self.held)

    def charge(self, slots: int, mem: int, virtual: Iterable[tuple[str, int]], exclusive: bool = False) -> None:
        # A fresh placement is unreported: its whole reservation is slack.
        self.slots_free -= slots
        self.slack += mem
        self.jobs += 1
        self.held = self.held or exclusive
        for name, n in virtual:
            if name != "slots":
                self.virtual_free[name] = self.virtual_free.get(name, 0) - n


def host_caps(hosts: Iterable[Host], ledger: Ledger, os_available: Mapping[str, int],
              mem_view: accounting.MemView = accounting.mem_view_xce,
              reclaim: tuple[float, accounting.ReclaimRules] | None = None,
              jobs: Mapping[int, Job] | None = None) -> dict[str, HostCap]:
    """Build the round's view from hard host state, the ledger and soft OS figures.

    ``mem_view`` says what memory a host offers: XCE's (OS-available minus slack) in the
    daemons; the simulator also replays other batch systems' views (accounting.MEM_VIEWS),
    whose deduction (Σ reserved) then sits where XCE's slack does.  ``reclaim`` (now, rules)
    gives each host its reclaimable memory; None: none (reclaiming jobs take only what is available).
    ``jobs`` (by id) tells which of the jobs on a host are exclusive (-x); None: none is.
    """
    caps: dict[str, HostCap] = {}
    for h in hosts:
        t = ledger.host_totals(h.name)
        why = "unavail" if h.unavail else "closed" if h.closed else None
        free = {k: v - t.allocated.get(k, 0) for k, v in h.virtual.items()}
        base, deducted = mem_view(h.mem_total, accounting.os_figure(os_available.get(h.name), h.mem_total), t)
        caps[h.name] = HostCap(
            name=h.name, schedulable=why, slots_total=h.slots_total,
            slots_free=h.slots_total - t.allocated.get("slots", 0), mem_total=h.mem_total,
            os_available=base, slack=deducted,
            virtual_free=free, attrs={"ncpus": h.ncpus, **h.attrs},
            reclaimable=ledger.reclaimable(h.name, *reclaim) if reclaim is not None else 0)
        on = ledger.jobs_on(h.name)
        caps[h.name].jobs = len(on)
        caps[h.name].held = jobs is not None and any(i in jobs and jobs[i].spec.exclusive for i in on)
    return caps


# ---- filters: each returns None (fits) or the reason it does not -------------------------
# A filter is a cheap check (ok_*) and the words for its "no" (f_*): a round asks ``fits``
# of most hosts and formats a reason only where one is kept.

def whole_tasks(d: Demand, slots: int) -> int:
    """The most of ``slots`` a host's share may take: whole tasks of ``d.task`` slots (sbatch -c),
    so no task's CPUs are split between hosts."""
    return slots - slots % d.task


def ok_tasks(d: Demand, h: HostCap, slots: int, first: bool) -> bool:
    return slots % d.task == 0


def f_tasks(d: Demand, h: HostCap, slots: int, first: bool) -> str | None:
    if ok_tasks(d, h, slots, first):
        return None
    return (f"tasks: a share of {slots} slots on {h.name} would split a task of {d.task} slots "
            f"(-c {d.task}: each host holds whole tasks)")


def ok_schedulable(d: Demand, h: HostCap, slots: int, first: bool) -> bool:
    return h.schedulable is None


def f_schedulable(d: Demand, h: HostCap, slots: int, first: bool) -> str | None:
    return None if ok_schedulable(d, h, slots, first) else f"host {h.name} is {h.schedulable}"


def ok_hosts(d: Demand, h: HostCap, slots: int, first: bool) -> bool:
    return d.hosts is None or h.name in d.hosts[1]


def f_hosts(d: Demand, h: HostCap, slots: int, first: bool) -> str | None:
    """The queue's host list (LSF HOSTS, host groups resolved at config load)."""
    if ok_hosts(d, h, slots, first):
        return None
    return f"queue {d.hosts[0]}: {h.name} is not in its hosts" if d.hosts else None


def ok_exclusive(d: Demand, h: HostCap, slots: int, first: bool) -> bool:
    return not h.held and (not d.exclusive or not h.jobs)


def f_exclusive(d: Demand, h: HostCap, slots: int, first: bool) -> str | None:
    """-x (LSF's exclusive execution): the job takes hosts that run nothing, and keeps them to itself."""
    if ok_exclusive(d, h, slots, first):
        return None
    if h.held:
        return f"exclusive: {h.name} runs an exclusive job"
    return f"exclusive: {h.name} runs {h.jobs} job{'' if h.jobs == 1 else 's'}"


def ok_select(d: Demand, h: HostCap, slots: int, first: bool) -> bool:
    return d.select is None or select_matches(d.select, h.select_attrs())


def f_select(d: Demand, h: HostCap, slots: int, first: bool) -> str | None:
    if ok_select(d, h, slots, first):
        return None
    return f"select: {h.name} does not match {d.select}"


def ok_slots(d: Demand, h: HostCap, slots: int, first: bool) -> bool:
    return h.slots_free >= slots


def f_slots(d: Demand, h: HostCap, slots: int, first: bool) -> str | None:
    if ok_slots(d, h, slots, first):
        return None
    return f"slots: needs {slots}, {h.name} has {max(0, h.slots_free)} free of {h.slots_total}"


def ok_mem(d: Demand, h: HostCap, slots: int, first: bool) -> bool:
    if d.reclaim:
        return True  # its memory is the reclaim step's
    need = d.mem_for(slots, first)
    return need == 0 or h.mem_available >= need


def f_mem(d: Demand, h: HostCap, slots: int, first: bool) -> str | None:
    if ok_mem(d, h, slots, first):
        return None
    need = d.mem_for(slots, first)
    return (f"mem: needs {fmt_bytes(need)}, {h.name} has {fmt_bytes(h.mem_available)} available "
            f"for scheduling (OS {fmt_bytes(h.os_available)} - slack {fmt_bytes(h.slack)})")


def ok_reclaim(d: Demand, h: HostCap, slots: int, first: bool) -> bool:
    if not d.reclaim:
        return True
    need = d.mem_for(slots, first)
    return need == 0 or h.reclaim_room >= need


def f_reclaim(d: Demand, h: HostCap, slots: int, first: bool) -> str | None:
    """A reclaiming job takes what is available plus what settled jobs lend (accounting.reclaim_room)."""
    if ok_reclaim(d, h, slots, first):
        return None
    return (f"reclaim: needs {fmt_bytes(d.mem_for(slots, first))}, {h.name} has {fmt_bytes(max(0, h.reclaim_room))} "
            f"reclaimable (available {fmt_bytes(h.mem_available)} + settled slack {fmt_bytes(h.reclaimable)})")


def ok_virtual(d: Demand, h: HostCap, slots: int, first: bool) -> bool:
    return all(h.virtual_free.get(name, 0) >= n for name, n in d.virtual)


def f_virtual(d: Demand, h: HostCap, slots: int, first: bool) -> str | None:
    for name, n in d.virtual:
        have = h.virtual_free.get(name, 0)
        if have < n:
            return f"{name}: needs {n}, {h.name} has {max(0, have)}"
    return None


FILTERS: tuple[Callable[[Demand, HostCap, int, bool], str | None], ...] = (
    f_tasks, f_schedulable, f_hosts, f_exclusive, f_select, f_slots, f_mem, f_reclaim, f_virtual)


def fits(d: Demand, h: HostCap, slots: int, first: bool = True) -> bool:
    """``fit_reason(...) is None`` without building the reason: the filters' checks, cheapest
    first (they have no side effects, so the order changes only the cost)."""
    return (ok_schedulable(d, h, slots, first) and not h.held and (not d.exclusive or not h.jobs)
            and (d.task == 1 or ok_tasks(d, h, slots, first))
            and (d.hosts is None or h.name in d.hosts[1])
            and ok_slots(d, h, slots, first) and ok_mem(d, h, slots, first)
            and (not d.reclaim or ok_reclaim(d, h, slots, first))
            and (not d.virtual or ok_virtual(d, h, slots, first))
            and (d.select is None or ok_select(d, h, slots, first)))


def fit_reason(d: Demand, h: HostCap, slots: int, first: bool = True) -> str | None:
    """The one fit rule: the scheduler's filters and the controller's re-check."""
    for f in FILTERS:
        why = f(d, h, slots, first)
        if why is not None:
            return why
    return None


def never_fits(d: Demand, hosts: Iterable[HostCap]) -> str | None:
    """Why no host could run the job even when empty, or None if some host could.

    A job without span[hosts=1] may spread as ``_place_one`` does: in chunks of ptile slots
    (the last one smaller), or in shares of any size.  Never errs towards "never".
    Unavail hosts are left out (the reason says which): a host of an earlier layout that
    is gone for good must not make a job look runnable, nor be what a refusal names.
    With every host unavail there is nothing to judge by: None.
    """
    everyone = list(hosts)
    hosts = [h for h in everyone if h.schedulable != "unavail"]
    if not hosts:
        return None
    why = _never_on(d, hosts)
    gone = [h.name for h in everyone if h.schedulable == "unavail"]
    if why is None or not gone:
        return why
    names = ", ".join(gone[:5]) + (", ..." if len(gone) > 5 else "")
    return f"{why} ({len(gone)} unavail host{'' if len(gone) == 1 else 's'} left out: {names})"


def _never_on(d: Demand, hosts: list[HostCap]) -> str | None:
    best_mem = max((h.mem_total for h in hosts), default=0)
    best_slots = max((h.slots_total for h in hosts), default=0)
    single = d.span_hosts == 1 or (d.ptile is None and d.slots == 1)
    if single:
        if any(h.slots_total >= d.slots and h.mem_total >= d.mem_for(d.slots, True) for h in hosts):
            return None
        return (f"no host could ever run it: needs {d.slots} slot(s) and {fmt_bytes(d.mem_for(d.slots, True))}"
                f" per host; the largest host has {best_slots} slots and {fmt_bytes(best_mem)}")
    if d.ptile is not None and d.ptile % d.task:
        return (f"no host could ever run it: span[ptile={d.ptile}] would split its tasks of {d.task} slots "
                f"(-c {d.task}): give a ptile that is a multiple of {d.task}")
    shares = [_most_slots(d, h) for h in hosts]
    if d.ptile is None:
        if sum(shares) >= d.slots:
            return None
    else:
        chunk = min(d.ptile, d.slots)
        full, rest = divmod(d.slots, chunk)
        n_full = sum(k >= chunk for k in shares)
        n_rest = sum(rest <= k < chunk for k in shares) if rest else 0
        if n_full >= full and (not rest or n_full + n_rest > full):
            return None
    per = min(d.slots, d.ptile or d.task)
    return (f"no host could ever run it: needs {d.slots} slot(s), at least {per} and "
            f"{fmt_bytes(d.mem_for(per, False))} per host used; the largest host has {best_slots} slots "
            f"and {fmt_bytes(best_mem)}")


def _most_slots(d: Demand, h: HostCap) -> int:
    """The most slots of the job an empty ``h`` could hold (as a later, not the first, share)."""
    if h.mem_total < d.mem_host:
        return 0
    k = min(h.slots_total, d.slots)
    return whole_tasks(d, k if d.mem_task == 0 else min(k, (h.mem_total - d.mem_host) // d.mem_task))


# ---- ranking -------------------------------------------------------------------------------

def rank_key(d: Demand) -> Callable[[HostCap], tuple]:
    """order[r] prefers more of r available; order[-r] prefers less. Ties by name."""
    if not d.order:
        if d.reclaim:
            return lambda h: (-h.reclaim_room, h.name)
        return lambda h: (-h.mem_available, h.name)
    keys = d.order

    def key(h: HostCap) -> tuple:
        attrs = h.select_attrs()
        out: list = []
        for name, descending in keys:
            v = attrs.get(name, 0)
            v = v if isinstance(v, int) else 0
            out.append(-v if descending else v)
        out.append(h.name)
        return tuple(out)

    return key


# ---- a round -------------------------------------------------------------------------------

@dataclass(slots=True)
class Plan:
    placements: list[tuple[int, list[Alloc]]] = field(default_factory=list)
    reasons: dict[int, str] = field(default_factory=dict)
    reservations: list[Reservation] = field(default_factory=list)
    # schedule(stop_when_full=True) stopped with no slot left: each job it did not reach is
    # held for ``room_reason(its slots, 0)``, which the walk would have given it.
    stopped: bool = False


def room_reason(slots: int, free: int) -> str:
    """Why a job of ``slots`` waits when the round has only ``free`` slots left anywhere."""
    return f"slots: needs {slots}; the cluster has {free} free"


@dataclass(slots=True)
class _Class:
    candidates: list[HostCap]
    pos: int = 0         # hosts before it cannot take the whole job any more this round
    spread_pos: int = 0  # hosts before it cannot take even the smallest share
    failed: str | None = None
    # Hosts a veto (backfill, a host limit) turned away: walked apart, since a veto depends
    # on the job (its run time), not the class, and must not stop the pointers.
    vetoed: list[HostCap] = field(default_factory=list)
    vetoed_names: set[str] = field(default_factory=set)
    reservable: bool = True  # False once a reservation sweep found no start for it
    # (end, why): a job of the class ending that late failed on a veto, so any ending as late
    # or later fails too (a later end overlaps more reservations; resources only shrink).
    vetoed_from: tuple[float, str] | None = None
    widest: int = 1 << 62  # the most slots any candidate has: a wider job never fits one host
    plain: tuple | None = None  # _Beaten.key of the class's demand
    # The round's (slots free, memory room) of each ranking's hosts by id(candidates), emptied on
    # every commit: the classes sharing a ranking share it (``_capacity``).  None: not kept.
    rooms: dict[int, list[tuple[int, int]]] | None = None
    # Each ranking's hosts' places in it, by id(candidates): the round's, kept for its life.
    where: dict[int, dict[str, int]] = field(default_factory=dict)


UNEXPLAINED = "not placed"  # a misfit's reason under explain=False (truthy: a class's failed mark), never shown


class _Beaten:
    """Failed plain demands of a round, as (slots, mem per task) by (select, order, span[hosts]).

    A plain demand (memory per task only, no per-host or per-job memory, no virtual or
    cluster resources, no ptile) places iff the hosts' capacities for it, min(slots free,
    memory available // mem per task), sum to its slots (or, with span[hosts=1], one host's
    does); each capacity only falls as the memory per task rises, and resources only shrink
    within a round.  So once (s, m) failed on capacity alone (no veto said no), any demand
    with the same key, >= s slots and >= m per task fails too, vetoes or not.
    """

    def __init__(self) -> None:
        self.front: dict[tuple, list[tuple[int, int]]] = {}

    @staticmethod
    def key(d: Demand) -> tuple | None:
        if d.mem_host or d.mem_job or d.virtual or d.cluster or d.ptile is not None or d.exclusive:
            return None
        return (d.select, d.order, d.span_hosts, d.reclaim, d.hosts, d.task)

    def beats(self, d: Demand, k: tuple | None) -> bool:
        """Whether ``d`` (of key ``k``) is as wide and as hungry as a failed demand of its key."""
        front = self.front.get(k) if k is not None else None
        return front is not None and any(d.slots >= s and d.mem_task >= m for s, m in front)

    def failed(self, d: Demand, k: tuple | None) -> None:
        if k is not None:
            # Entries as wide and as hungry as this one are implied by it: the front stays short.
            s, m = d.slots, d.mem_task
            front = self.front.get(k, [])
            self.front[k] = [(s0, m0) for s0, m0 in front if s0 < s or m0 < m] + [(s, m)]


Veto = Callable[[Demand, HostCap, int, bool], str | None]
Reserved = tuple[Mapping[str, list[Point]], float]  # backfill's points by host, and a job's end
EASY = BackfillRules()


def pending_order(jobs: Iterable[Job], queue_priority: Mapping[str, int],
                  fairshare: Mapping[str | None, Fairshare] | None = None) -> list[Job]:
    """Pending jobs in round order: queue, fairshare, job priority, submit (xce/core/sched/order.py)."""
    return Ordering(queue_priority, fairshare).order(jobs)


def schedule(caps: Mapping[str, HostCap], pending: Iterable[Job], now: float,
             cluster_free: Mapping[str, int] | None = None,
             cluster_names: Iterable[str] = (), *, backfill: BackfillRules = EASY,
             releases: Iterable[Release] = (), limits: LimitBook | None = None,
             explain: bool = True, reclaim_queues: Container[str] = frozenset(),
             queue_hosts: Mapping[str, HostSet] | None = None, stop_when_full: bool = False) -> Plan:
    """Place ``pending`` (already in priority order) onto ``caps`` (mutated as an overlay).

    ``backfill`` gives blocked jobs reservations that lower jobs may not delay (``releases``
    say when running jobs give back what they hold; without them they hold it for good);
    ``limits`` (mutated too) holds jobs that would pass a limit.  ``explain=False``: the
    same placements and reservations and no reasons, which lets the round skip building
    words, walks whose only product is words, and jobs it could only hold.  A job of
    ``reclaim_queues``, or one that asks (``model.reclaiming``), runs on reclaimable memory.
    ``queue_hosts`` (``queue_host_sets``) keeps a queue's jobs on its host list.
    ``stop_when_full``: read ``pending`` no further once no slot is left and no reservation
    can be made (``Plan.stopped``): every later job would only be held, for its slots.
    """
    plan = Plan()
    rnd = _Round(caps, now, cluster_free, cluster_names, backfill, releases, limits, explain, reclaim_queues,
                 queue_hosts or {})
    fcfs = backfill.mode == "fcfs"
    jobs = iter(pending)
    for job in jobs:
        # Once holding a job can no longer give it a reservation, holding it only gives its reason.
        if not explain and not fcfs and not rnd.may_reserve():
            rnd.place_quietly(chain((job,), jobs), plan)
            break
        if stop_when_full and rnd.free_slots <= 0 and not rnd.may_reserve():
            plan.stopped = True
            break
        placed = len(plan.placements)
        rnd.place(job, plan)
        if fcfs and len(plan.placements) == placed:
            fcfs_hold(job, jobs, plan, explain)
            break
    plan.reservations = rnd.bf.reservations
    return plan


def fcfs_hold(head: Job, behind: Iterable[Job], plan: Plan, explain: bool) -> None:
    """Strict FCFS: every job behind a head that cannot start waits for it, whatever fits."""
    if explain:
        why = f"fcfs: waiting behind job {head.id}"
        for job in behind:
            plan.reasons[job.id] = why


class _Round:
    """One round's overlay: demands, classes and their rankings, free slots, reservations."""

    def __init__(self, caps: Mapping[str, HostCap], now: float, cluster_free: Mapping[str, int] | None,
                 cluster_names: Iterable[str], backfill: BackfillRules, releases: Iterable[Release],
                 limits: LimitBook | None, explain: bool = True,
                 reclaim_queues: Container[str] = frozenset(),
                 queue_hosts: Mapping[str, HostSet] | None = None) -> None:
        self.caps = caps
        self.queue_hosts = queue_hosts or {}
        self.reclaim_queues = reclaim_queues
        self.explain = explain
        self.beaten = _Beaten() if not explain else None
        self.classes: dict[Demand, _Class] = {}
        # by the job's (slots, request, reclaiming): its demand, and its class once asked for (hashing a
        # Demand is dearer)
        self.keyed: dict[tuple, list] = {}
        self.ranked: dict[tuple, tuple[list[HostCap], int]] = {}  # classes differing only in size share
        # one ranking (and its widest host)
        self.cfree = dict(cluster_free or {})
        self.cnames = {n: 0 for n in cluster_names}
        self.free_slots = sum(max(0, h.slots_free) for h in caps.values() if h.schedulable is None)
        self.rooms: dict[int, list[tuple[int, int]]] = {}  # _Class.rooms
        self.where: dict[int, dict[str, int]] = {}  # _Class.where
        self.no_room: dict[tuple[int, int], str] = {}  # (slots needed, slots free) -> that reason
        self.bf = Backfill(backfill, now, fit_reason, place_fresh, releases, fits, explain)
        self.limits = limits
        self.sweeps = 16 if self.bf.most else 0  # reservation sweeps a round may try (each sorts the releases)

    def may_reserve(self) -> bool:
        """Whether holding a job may still give it a reservation: sweeps left, reservations
        wanted, and a known future to find a start in (releases or reservations; with no slot
        left no placement adds one)."""
        return self.sweeps > 0 and self.bf.wants and (self.free_slots > 0 or bool(self.bf.timeline or self.bf.points))

    def demand(self, job: Job) -> list:
        """[demand, class or None, its ``_Beaten.key``] of the job: ``job_class`` fills the class in."""
        rec = reclaiming(job.spec, self.reclaim_queues)
        hosts = job_hosts(job, self.queue_hosts)
        dk = (job.spec.slots, job.req, rec, job.spec.exclusive, hosts, job.spec.cpus_per_task)
        dc = self.keyed.get(dk)
        if dc is None:
            d = demand_of(job.spec.slots, job.req, self.cnames, rec, job.spec.exclusive, hosts, job.spec.cpus_per_task)
            dc = self.keyed[dk] = [d, None, _Beaten.key(d)]
        return dc

    def job_class(self, dc: list) -> _Class:
        """``klass`` of a ``demand`` entry, made no earlier than it is asked for: a class's
        ranking is taken from the hosts as they are when it is first needed."""
        cls = dc[1]
        if cls is None:
            cls = dc[1] = self.klass(dc[0])
        return cls

    def klass(self, d: Demand) -> _Class:
        cls = self.classes.get(d)
        if cls is None:
            rk = (d.select, d.order, d.reclaim, d.hosts)
            if rk not in self.ranked:
                cands = ranked_hosts(d, self.caps)
                self.ranked[rk] = cands, max((h.slots_total for h in cands), default=0)
            cands, widest = self.ranked[rk]
            cls = self.classes[d] = _Class(cands, widest=widest, plain=_Beaten.key(d), rooms=self.rooms,
                                                where=self.where)
            if not cls.candidates:
                cls.failed = (never_fits(d, self.caps.values()) or _no_candidate(d, self.caps.values()))
                cls.reservable = False
        return cls

    def place_quietly(self, pending: Iterable[Job], plan: Plan) -> None:
        """``place`` each job where holding one does nothing (no reason to give, no reservation
        to sweep for), passing over the jobs ``place`` could only hold.

        Free slots only fall in a round, and a class once failed (``_Class.failed``, or beaten
        by a failed plain demand: ``_Beaten``) stays failed in it: so a job wider than the free
        slots, or of a (slots, request) whose class failed, is passed at one look-up, without
        its demand, limits or class, and the round ends when no slot is left.
        """
        # Keyed finer than ``demand``: the queue and the job's own flags give its reclaiming and
        # its queue's hosts without a call per job; the first job of each key still asks its class.
        dead: set[tuple[int, ResReq, str, bool, bool]] = set()
        # Each key's ``demand`` entry: a job of a class that failed on a veto ending as late
        # (``_Class.vetoed_from``) is held by ``place`` at once; it is passed here at one look-up.
        # No reservation is made from here on, so the veto is asked exactly when ``veto`` would ask
        # it: reservations hold points and the job ends after the first, or a host limit is set.
        # (None where no veto can be asked: a greedy round pays nothing for it.)
        bf = self.bf
        limited = bool(self.limits and self.limits.host_limits)
        known: dict[tuple[int, ResReq, str, bool, bool], list] | None = {} if bf.points or limited else None
        for job in pending:
            spec = job.spec
            slots = spec.slots
            if slots > self.free_slots:
                if self.free_slots <= 0:
                    break  # every job needs a slot (model.validate)
                continue
            key = (slots, job.req, spec.queue, spec.reclaim, spec.exclusive)
            if key in dead:
                continue
            if known is not None:
                dc = known.get(key)
                if dc is None:
                    dc = known[key] = self.demand(job)
                elif dc[1] is not None and (vf := dc[1].vetoed_from) is not None:
                    end = bf.end_of(job)
                    if end >= vf[0] and (limited or end > bf.earliest):
                        continue
            if self.place(job, plan):
                dead.add(key)

    def place(self, job: Job, plan: Plan) -> bool:
        """Place ``job`` or hold it; True if its class failed in this round (every later job of
        the same demand is held too)."""
        slots = job.spec.slots  # a demand's slots are the job's: checked before the (dearer) demand
        if self.free_slots < slots:
            why = self.no_room.get((slots, self.free_slots)) if self.explain else UNEXPLAINED
            if why is None:
                why = self.no_room[(slots, self.free_slots)] = room_reason(slots, self.free_slots)
            self.hold(job, None, why, plan)
            return False
        dc = self.demand(job)
        d = dc[0]
        short = cluster_short(d, self.cfree) if d.cluster else None
        short = short or (self.limits.job_reason(job, slots, total_mem(d, 1)) if self.limits else None)
        if short:
            if self.explain:
                plan.reasons[job.id] = short
            return False
        # Beaten before its class is made: a demand of a failed one's key (whose class made the
        # key's ranking already) needs none, and a class made later starts just as it would now.
        if self.beaten is not None and self.beaten.beats(d, dc[2]):
            self.hold(job, d, UNEXPLAINED, plan)
            return True
        cls = self.job_class(dc)
        if cls.failed:
            self.hold(job, d, cls.failed, plan)
            return True
        veto = self.veto(job)
        end = self.bf.end_of(job) if veto else 0.0
        if veto and cls.vetoed_from and end >= cls.vetoed_from[0]:
            self.hold(job, d, cls.vetoed_from[1], plan)
            return False  # a veto depends on the job's end: a later job of the class may end sooner
        reserved = (self.bf.points, end) if veto is not None and self.bf.points else None
        allocs, why, vetoed = _place_one(d, cls, veto, self.explain, reserved)
        if allocs is None:
            if not vetoed:
                cls.failed = why
                if self.beaten is not None:
                    self.beaten.failed(d, cls.plain)
            else:
                self.vetoed(cls, end, why)
            self.hold(job, d, why, plan)
            return not vetoed
        if self.limits:  # the exact charge, now that the hosts (and so the per-host memory) are known
            over = self.limits.job_reason(job, slots, sum(a.mem for a in allocs))
            if over:
                if self.explain:
                    plan.reasons[job.id] = over
                return False
        self.commit(job, d, allocs, plan)
        return False

    def vetoed(self, cls: _Class, end: float, why: str) -> None:
        """A job of ``cls`` ending at ``end`` failed on a veto: so does any that ends as late.

        Without words and host limits, a veto is a backfill point that starts before the job
        ends (``Backfill.veto``), so two ends past the same points' starts meet the same vetoes
        (and bounds): the failure holds from just past the last start before ``end``.  A later
        end meets more points, and resources and points only shrink in a round.
        """
        if not self.explain and not (self.limits and self.limits.host_limits):
            last = max((r.start for r in self.bf.reservations if r.start < end), default=None)
            if last is not None:
                end = min(end, math.nextafter(last, math.inf))
        if cls.vetoed_from is None or end < cls.vetoed_from[0]:
            cls.vetoed_from = (end, why)

    def veto(self, job: Job) -> Veto | None:
        """The job-specific checks beside the fit rule: reservations it must not delay, host limits."""
        bf = self.bf if self.bf.points else None
        lim = self.limits if self.limits and self.limits.host_limits else None
        if bf is None and lim is None:
            return None
        end = self.bf.end_of(job)
        if bf is not None and end <= bf.earliest:  # it ends before every reservation starts: delays none
            bf = None
            if lim is None:
                return None

        def veto(d: Demand, h: HostCap, slots: int, first: bool) -> str | None:
            why = lim.host_reason(h.name, slots, d.mem_for(slots, first)) if lim else None
            return why or (bf.veto(d, h, slots, first, end) if bf else None)

        return veto

    def commit(self, job: Job, d: Demand, allocs: list[Alloc], plan: Plan) -> None:
        self.rooms.clear()  # the hosts' rooms move
        for a in allocs:
            self.caps[a.host].charge(a.slots, a.mem, a.virtual.items(), d.exclusive)
            self.free_slots -= a.slots
        for name, n in d.cluster:
            self.cfree[name] = self.cfree.get(name, 0) - n
        if self.limits:
            self.limits.charge(job, allocs)
        if self.bf.most:
            self.bf.placed(d, allocs, self.bf.end_of(job))
        plan.placements.append((job.id, allocs))

    def hold(self, job: Job, d: Demand | None, why: str, plan: Plan) -> None:
        """A job that cannot start now: the first blocked ones get a reservation."""
        if self.sweeps > 0 and self.bf.wants:
            dc = self.demand(job)
            d, cls = dc[0], self.job_class(dc)
            if cls.reservable:
                self.sweeps -= 1
                r = self.bf.reserve(job, d, cls.candidates, _single(d))
                cls.reservable = r is not None
                if r is not None and self.explain:
                    why = f"{why}; {r.says()}"
                    self.sweeps *= self.bf.wants  # none left to hold: no more sweeps
        if self.explain:
            plan.reasons[job.id] = why


def _no_candidate(d: Demand, hosts: Iterable[HostCap]) -> str:
    """Why a class has no candidate host: none of its queue's hosts, none open, none matching select[]."""
    prefix = ""
    if d.hosts is not None:
        hosts = [h for h in hosts if h.name in d.hosts[1]]
        prefix = f"queue {d.hosts[0]}: "
        if not hosts:
            return f"{prefix}none of its hosts ({d.hosts[1].says()}) has registered"
    states = sorted({h.schedulable for h in hosts if h.schedulable})
    if d.select:
        return f"select: no host matches {d.select}"
    return prefix + "no host is open" + (f" ({', '.join(states)})" if states else "")


def cluster_free(jobs: Iterable[Job], totals: Mapping[str, int]) -> dict[str, int]:
    """What is left of each cluster-wide resource after the running jobs' requests: the
    scheduler's round and the leader's re-check both start from it."""
    if not totals:  # no cluster-wide resource: nothing to add up over the running jobs
        return {}
    used: dict[str, int] = {}
    for job in jobs:
        if job.state == JobState.RUN:
            for item in job.req.rusage:
                if item.name in totals:
                    used[item.name] = used.get(item.name, 0) + item.amount
    return {n: t - used.get(n, 0) for n, t in totals.items()}


def cluster_short(d: Demand, cfree: Mapping[str, int]) -> str | None:
    """Why the cluster-wide resources left cannot take the demand, or None."""
    for name, n in d.cluster:
        have = cfree.get(name, 0)
        if have < n:
            return f"{name}: needs {n}; the cluster has {max(0, have)} free"
    return None


def _single(d: Demand) -> bool:
    return d.span_hosts == 1 or (d.ptile is None and d.slots == 1)


def ranked_hosts(d: Demand, caps: Mapping[str, HostCap]) -> list[HostCap]:
    """The hosts that may ever take ``d`` (open, of its queue, matching select[]), in its rank order."""
    cands = [h for h in caps.values() if h.schedulable is None and ok_hosts(d, h, 0, True)
             and (d.select is None or f_select(d, h, 0, True) is None)]
    cands.sort(key=rank_key(d))
    return cands


def candidates(d: Demand, caps: Mapping[str, HostCap]) -> list[str]:
    """``ranked_hosts``' names."""
    return [h.name for h in ranked_hosts(d, caps)]


def place_fresh(d: Demand, hosts: list[HostCap]) -> list[Alloc] | None:
    """Where ``d`` would go on ``hosts`` (ranked) as they are: backfill's look at a later time.
    Only the placement is kept, so no words are made (a fresh class has no ``plain`` key, so
    no bound is taken either: the walks alone decide, as with words)."""
    return _place_one(d, _Class(hosts), explain=False)[0]


def _place_one(d: Demand, cls: _Class, veto: Veto | None = None, explain: bool = True,
               reserved: Reserved | None = None) -> tuple[list[Alloc] | None, str, bool]:
    """Walk the class's ranked candidates forward; (allocs or None, why not, whether a veto said no).

    Resources only shrink within a round, so a host that cannot take this class
    now never will: both pointers skip such hosts for good, which keeps a round
    linear in hosts plus jobs instead of their product.  A host a veto turns away is set
    aside (``cls.vetoed``) and tried again by each later job of the class.  Without
    ``explain`` the reason is only ``UNEXPLAINED`` (or a veto's).
    """
    cands = cls.candidates
    if not explain and cls.plain is not None and d.select is None:
        if _capacity(d, cls) < d.slots:
            # Both walks below take at most each host's capacity: short of the slots in all, they
            # fail (no words to give), and the class is marked failed for the round.  A veto only
            # turns hosts away, so they fail with one too: on capacity alone, which stays short for
            # the rest of the round (resources only shrink) whatever a later job's end.
            return None, UNEXPLAINED, False
        if reserved is not None and _capacity(d, cls, reserved) < d.slots:
            # Nor can they take more of a host than each reservation the job would overlap
            # leaves (backfill's veto): short with those, the job fails on the veto, as the
            # walks would (a later job of the class that ends as late fails too: vetoed_from).
            return None, UNEXPLAINED_VETO, True
    single = _single(d)
    best_reason = vetoed = ""
    if not single and d.ptile is None and d.slots > cls.widest:
        # No host holds every slot: the one-host walk would fail on each host (and so never
        # ask a veto or set one aside), moving the pointer to the end.  Its reason is never the
        # one given either: _best_reason's host cannot hold every slot, so it has its own.
        cls.pos = len(cands)
    elif single or d.ptile is None:
        # Prefer one host with room for every slot.  Every host walked past is one the class
        # cannot use whole any more (it did not fit, or is set aside): the pointer follows ``i``.
        slots, names = d.slots, cls.vetoed_names
        i, n = cls.pos, len(cands)
        while i < n:
            h = cands[i]
            if names and h.name in names:
                i += 1
                continue
            if h.slots_free >= slots and fits(d, h, slots, True):  # (the slot test first: a full host's no, cheaply)
                no = veto(d, h, slots, True) if veto else None
                if no is None:
                    cls.pos = i
                    return [_alloc(d, h, slots, True)], "", False
                vetoed = vetoed or no
                cls.vetoed.append(h)
                names.add(h.name)
            elif explain and not best_reason:
                best_reason = fit_reason(d, h, slots, True) or ""
            i += 1
        cls.pos = i
        for h in cls.vetoed:
            if fits(d, h, d.slots, True):
                no = veto(d, h, d.slots, True) if veto else None
                if no is None:
                    return [_alloc(d, h, d.slots, True)], "", False
                vetoed = vetoed or no
        if single:
            return None, vetoed or (_best_reason(d, cands, best_reason) if explain else UNEXPLAINED), bool(vetoed)
    chunk = d.ptile or 0
    least = (d.slots % chunk or chunk) if chunk else d.task  # the smallest share any host may take
    allocs: list[Alloc] = []
    remaining = d.slots
    i = sp = cls.spread_pos
    n, mem_job = len(cands), d.mem_job
    while i < n:
        h = cands[i]
        # (first=True differs from False only by the per-job memory; a host without ``least``
        # slots free fails ok_slots either way, told apart without a call)
        if h.slots_free < least or (not fits(d, h, least, False) and (not mem_job or not fits(d, h, least, True))):
            if i == sp:
                sp += 1
            i += 1
            continue
        i += 1
        if chunk:
            take = min(chunk, remaining)
            if remaining % chunk and not fits(d, h, take, not allocs):
                take = remaining % chunk  # the one smaller chunk may go to any host
        else:  # as many slots as are free here and memory per task allows
            take = min(h.slots_free, remaining)
            if d.mem_task:
                room = h.mem_room(d) - d.mem_host - (0 if allocs else d.mem_job)
                take = min(take, max(0, room // d.mem_task))
            take = whole_tasks(d, take)
        if take <= 0:
            continue
        if fits(d, h, take, not allocs):
            no = veto(d, h, take, not allocs) if veto else None
            if no is not None:
                vetoed = vetoed or no
                continue
            allocs.append(_alloc(d, h, take, not allocs))
            remaining -= take
            if remaining == 0:
                cls.spread_pos = sp
                return allocs, "", False
    cls.spread_pos = sp
    if vetoed or not explain:
        return None, vetoed or UNEXPLAINED, bool(vetoed)
    return None, _best_reason(d, cands, best_reason or f"slots: needs {d.slots} across hosts"), False


def _capacity(d: Demand, cls: _Class, reserved: Reserved | None = None) -> int:
    """For a plain demand (memory per task only, no select): the slots the walks could take
    from the class's candidates past ``spread_pos``, each host min(slots free, memory room //
    memory per task).

    That is what ``fits`` lets a share of such a demand have on each host (the spread walk
    takes exactly that much of each), and the hosts before ``spread_pos`` could not take even
    one slot earlier in the round (resources only shrink).  A bound, never a second fit rule:
    a walk still makes every placement.  ``reserved`` (backfill's points by host, and the
    job's end): each host's share is bounded also by what each point the job would overlap
    leaves, which a share must fit too (``Backfill.veto``).
    """
    if cls.spread_pos or cls.rooms is None:
        rooms = _rooms(d, cls.candidates, cls.spread_pos)
    else:  # the classes of a ranking share its hosts' rooms until the next commit
        rooms = cls.rooms.get(id(cls.candidates))
        if rooms is None:
            rooms = cls.rooms[id(cls.candidates)] = _rooms(d, cls.candidates, 0)
    m = d.mem_task
    total = sum(k for k, _ in rooms) if not m else sum(min(k, room // m) for k, room in rooms if room >= m)
    if reserved is None:
        return total
    # Less, on each of the few hosts with a point the job would overlap, what that point takes off.
    points, end = reserved
    cands, start = cls.candidates, cls.spread_pos
    where = cls.where.get(id(cands))
    if where is None:
        where = cls.where[id(cands)] = {h.name: i for i, h in enumerate(cands)}
    for name, pts in points.items():
        i = where.get(name)
        if i is None or i < start:
            continue  # not counted above
        h = cands[i]
        room = h.mem_room(d)
        if h.slots_free <= 0 or (m and room < m):
            continue
        k = min(h.slots_free, room // m) if m else h.slots_free
        left = k
        for p in pts:
            if p.start < end:
                c = p.cap
                left = 0 if c.held else min(left, c.slots_free, c.mem_room(d) // m if m else left)
        total -= k - max(0, left)
    return total


def _rooms(d: Demand, cands: list[HostCap], start: int) -> list[tuple[int, int]]:
    """(slots free, memory room) of the hosts of ``cands[start:]`` with a slot free.  The room
    depends on the demand only by ``reclaim``, which its ranking (``cands``) shares."""
    return [(h.slots_free, h.mem_room(d)) for h in cands[start:] if h.slots_free > 0]


def _alloc(d: Demand, h: HostCap, slots: int, first: bool) -> Alloc:
    return alloc_for(d, h.name, slots, first)


def alloc_for(d: Demand, host: str, slots: int, first: bool) -> Alloc:
    """The one allocation rule: a share of ``slots`` on ``host`` holds what the request gives it
    (per-job amounts on the first host only)."""
    return Alloc(host=host, slots=slots, mem=d.mem_for(slots, first),
                 virtual={"slots": slots, **dict(d.virtual)})


def build_allocs(d: Demand, shares: Iterable[tuple[str, int]]) -> list[Alloc]:
    """The allocations of a job that takes ``shares`` ((host, slots), first host first)."""
    return [alloc_for(d, host, slots, i == 0) for i, (host, slots) in enumerate(shares)]


def _best_reason(d: Demand, cands: list[HostCap], fallback: str) -> str:
    """The reason against the host that came closest (most memory available for scheduling)."""
    if not cands:
        return fallback
    best = max(cands, key=lambda h: (h.slots_free >= min(d.slots, d.ptile or d.slots), h.mem_room(d)))
    return fit_reason(d, best, min(d.slots, d.ptile or d.slots), True) or fallback


def allocation_reason(d: Demand, allocs: list[Alloc]) -> str | None:
    """Why ``allocs`` are not what the job's own request gives, or None.

    The shape (slots in all, span[]) and each share's sizes, as ``alloc_for`` builds them:
    the leader refuses any other placement, and the audit checks every stored one.
    """
    if sum(a.slots for a in allocs) != d.slots:
        return f"placement gives {sum(a.slots for a in allocs)} slots, job needs {d.slots}"
    if len({a.host for a in allocs}) != len(allocs) or any(a.slots < 1 for a in allocs):
        return "a placement names each host once and gives each at least one slot"
    if d.span_hosts == 1 and len(allocs) != 1:
        return f"span[hosts=1]: the placement uses {len(allocs)} hosts"
    split = next((a for a in allocs if a.slots % d.task), None)
    if split is not None:
        return f"tasks: a share of {split.slots} slots on {split.host} splits a task of {d.task} slots (-c {d.task})"
    if d.ptile is not None:
        wide = next((a for a in allocs if a.slots > d.ptile), None)
        if wide is not None:
            return f"span[ptile={d.ptile}]: a share of {wide.slots} slots on {wide.host}"
        need = -(-d.slots // d.ptile)
        if len(allocs) != need:
            return f"span[ptile={d.ptile}]: {d.slots} slots take {need} hosts, the placement uses {len(allocs)}"
    for i, a in enumerate(allocs):
        want = alloc_for(d, a.host, a.slots, i == 0)
        if a.mem != want.mem:
            return f"allocation on {a.host}: mem {fmt_bytes(a.mem)}, the job's request gives {fmt_bytes(want.mem)}"
        if a.virtual != want.virtual:
            return (f"allocation on {a.host}: virtual {dict(sorted(a.virtual.items()))}, "
                    f"the job's request gives {dict(sorted(want.virtual.items()))}")
    return None


def check_placement(d: Demand, allocs: list[Alloc], caps: Mapping[str, HostCap]) -> str | None:
    """The controller's re-check of a proposed placement: the request's own sizes, and the same fit rule."""
    why = allocation_reason(d, allocs)
    if why is not None:
        return why
    for i, a in enumerate(allocs):
        h = caps.get(a.host)
        if h is None:
            return f"unknown host {a.host}"
        why = fit_reason(d, h, a.slots, i == 0)
        if why is not None:
            return why
    return None
