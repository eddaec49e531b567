"""Preemption: which running jobs of lower queues make room for a blocked job, and how.

A queue may preempt the lower-priority queues its config names (``[queues.Q] preempt``, as
LSF's ``PREEMPTION = PREEMPTIVE[low]``); each queue says how its own jobs are preempted
(``preempt_action``, as Slurm's per-partition ``PreemptMode``): ``suspend`` (SSUSP), ``requeue``
or ``kill``.  A job runs at least ``min_run_time`` before it may be preempted, so a queue
cannot thrash (LSF's ``NO_PREEMPT_RUN_TIME``).

Memory is honest.  A suspended job's pages stay resident: suspending gives back its slots
(``credit_suspended``: an SSUSP share's slots are free to the round and to the leader's
re-check alike) but not its memory.  So the blocked job is first tried with its victims
suspended; if it still does not fit (it needs memory), the victims that were to be
suspended are requeued instead, and a requeue or kill gives back what an end gives back
(backfill.job_releases: memory available for scheduling rises by the job's charge,
max(reserved, actual)).

The walk, for each blocked job of a preempting queue, in the round's order (queue priority,
fairshare, job priority, submit: so ``-sp``, btop and bbot choose which blocked job preempts first)::

    victims   = RUN jobs of queues it may preempt, run >= min_run_time, evicted fewer times than
                their queue's ``max_preempt`` (LSF MAX_JOB_PREEMPT; a RECLAIMED eviction counts:
                Job.evictions), not taken yet; lowest queue priority first, then the lowest job
                priority (the job an operator put last goes first), then the youngest (the least
                work lost)
    credit    one victim at a time to a copy of the hosts (slots; memory too unless suspended)
              until ``fits`` places the job; suspend-victims upgraded to requeue if only
              memory would make it fit
    leaving   the room of jobs already on their way out (requeue or kill ordered, processes not
              ended) counts as given back: a job it is enough for preempts nothing more
    guard     the placement found must not delay a reservation of a job ahead of it
              (``reservation_guard``): a host where it would is left out and the job tried again
    keep      the victims on the hosts the job would land on; the rest are let go

Job priority orders; it never preempts: only a queue's ``preempt`` list makes a job a victim,
so a user's ``-sp`` cannot evict another user's job of the same queue.

Preempted jobs come back first: ``resumable`` picks the SSUSP jobs whose hosts have room
again, before a round places pending work.  Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from xce.core.accounting import Ledger
from xce.core.hostgroups import HostSet
from xce.core.model import Alloc, Job, JobState
from xce.core.placement import HostCap, schedule
from xce.core.sched.backfill import BackfillRules, Release, Reservation, give_back, job_releases

ACTIONS = ("suspend", "requeue", "kill")
MOST_VICTIMS = 64  # victims tried per blocked job: a round stays short on a big cluster
MOST_BLOCKED = 8   # blocked jobs that may preempt in one round
GREEDY = BackfillRules(mode="off")

Fits = Callable[[Job, dict[str, HostCap]], "list[Alloc] | None"]
# Why a placement of a job (found on its victims' room) may not be made: (host, reason), or None.
Guard = Callable[[Job, list[Alloc]], "tuple[str, str] | None"]


@dataclass(frozen=True, slots=True)
class PreemptRules:
    preempts: Mapping[str, frozenset[str]] = field(default_factory=dict)  # queue -> queues it may preempt
    action: Mapping[str, str] = field(default_factory=dict)               # queue -> how its jobs go
    priority: Mapping[str, int] = field(default_factory=dict)             # queue -> its priority
    min_run_time: float = 60.0
    max_preempt: Mapping[str, int] = field(default_factory=dict)          # queue -> evictions a job may take (0: any)

    def may_evict(self, v: Job) -> bool:
        """Whether the job's queue's budget (LSF MAX_JOB_PREEMPT) allows one more eviction."""
        cap = self.max_preempt.get(v.spec.queue, 0)
        return not cap or v.evictions < cap

    @property
    def on(self) -> bool:
        return any(self.preempts.values())

    @classmethod
    def from_config(cls, cfg: object) -> PreemptRules:
        """From an xce.site.config.Config (already validated)."""
        qs = cfg.queues  # type: ignore[attr-defined]
        return cls(preempts={n: frozenset(q.preempt) for n, q in qs.items()},
                   action={n: q.preempt_action for n, q in qs.items()},
                   priority={n: q.priority for n, q in qs.items()},
                   min_run_time=cfg.preemption.min_run_time,  # type: ignore[attr-defined]
                   max_preempt={n: q.max_preempt for n, q in qs.items() if q.max_preempt})


@dataclass(frozen=True, slots=True)
class Preemption:
    """An order: preempt ``job_id`` (at ``attempt``) by ``action`` to make room for ``for_job``."""

    job_id: int
    attempt: int
    action: str
    for_job: int

    def says(self, queue: str) -> str:
        return f"preempted by job {self.for_job} of queue {queue}"


def fitter(now: float, cluster_free: Mapping[str, int] | None = None, cluster_names: Iterable[str] = (),
           queue_hosts: Mapping[str, HostSet] | None = None) -> Fits:
    """``fits`` by the round's own placement (schedule() on the trial hosts, no reservations;
    a queue's host list as the round has it)."""
    names = tuple(cluster_names)

    def fits(job: Job, caps: dict[str, HostCap]) -> list[Alloc] | None:
        plan = schedule(caps, [job], now, dict(cluster_free or {}), names, backfill=GREEDY, explain=False,
                        queue_hosts=queue_hosts)
        return plan.placements[0][1] if plan.placements else None
    return fits


def suspended_slots(jobs: Iterable[Job]) -> dict[str, int]:
    """The slots SSUSP shares give back, per host (never their memory): the one rule the
    round, the leader's re-check and the audit apply."""
    out: dict[str, int] = {}
    for j in jobs:
        if j.state == JobState.SSUSP:
            for a in j.allocs:
                if a.host not in j.finished_hosts:
                    out[a.host] = out.get(a.host, 0) + a.slots
    return out


def credit_suspended(caps: Mapping[str, HostCap], jobs: Iterable[Job]) -> None:
    """A preempted job's slots are free to the round and to the leader's re-check."""
    for host, n in suspended_slots(jobs).items():
        h = caps.get(host)
        if h is not None:
            h.slots_free += n


def resumable(suspended: Iterable[Job], caps: Mapping[str, HostCap], rules: PreemptRules,
              waiting: Iterable[str] = ()) -> list[int]:
    """SSUSP jobs whose every host has room for their slots again (their own credit aside),
    highest queue first, then the longest suspended; each one resumed is charged to ``caps``.
    A job stays suspended while a queue that may preempt its own has pending work
    (``waiting``): that work goes first, or the two would take turns preempting each other."""
    out: list[int] = []
    waiting = set(waiting)
    held = {low for q in waiting for low in rules.preempts.get(q, ())}
    order = sorted((j for j in suspended if j.state == JobState.SSUSP and j.spec.queue not in held),
                   key=lambda j: (-rules.priority.get(j.spec.queue, 0), j.start_time or 0.0, j.id))
    for j in order:
        shares = [(caps.get(a.host), a.slots) for a in j.allocs if a.host not in j.finished_hosts]
        # The credit already counts the job's slots as free: room means nothing else took them.
        if shares and all(h is not None and h.slots_free >= n for h, n in shares):
            for h, n in shares:
                h.slots_free -= n  # type: ignore[union-attr]
            out.append(j.id)
    return out


def reservation_guard(reservations: Iterable[Reservation], rank: Callable[[int], Any], rules: BackfillRules,
                      now: float) -> Guard | None:
    """The round's reservations as preemption must keep them: a job placed on its victims' room
    may not run past the start of a reservation, on its hosts, held by a job ranked ahead of it
    (``rank``: job id -> the round's sort key; the reserved job itself and jobs ahead of it may
    take it).  Host by host, as backfill's veto but without its point: a share that would fit
    beside the reservation is refused too (errs towards the reservation).  None: no reservation."""
    held: dict[str, list[Reservation]] = {}
    for r in reservations:
        for a in r.allocs:
            held.setdefault(a.host, []).append(r)
    if not held:
        return None

    def guard(job: Job, allocs: list[Alloc]) -> tuple[str, str] | None:
        end = now + rules.runtime(job.spec)
        mine = rank(job.id)
        for a in allocs:
            for r in held.get(a.host, ()):
                if r.start < end and r.job_id != job.id and rank(r.job_id) < mine:
                    return a.host, f"backfill: would delay job {r.job_id}, {r.says()}"
        return None
    return guard


def blocked_preemptors(pending: Iterable[Job], placed: Container[int], reasons: Mapping[int, str],
                       rules: PreemptRules, held: str) -> Iterator[Job]:
    """The round's jobs that may preempt, in its order: of a preempting queue, not placed, and
    not held by a limit (``held``: how a limit's reason starts; preempting would not help).
    Lazy: ``preempt`` takes the first few, so a round of 100,000 pending jobs looks at few."""
    preempts = rules.preempts
    for j in pending:
        if preempts.get(j.spec.queue) and j.id not in placed and not reasons.get(j.id, "").startswith(held):
            yield j


def preempt(blocked: Iterable[Job], running: Iterable[Job], caps: Mapping[str, HostCap], rules: PreemptRules,
            now: float, fits: Fits, ledger: Ledger | None = None, guard: Guard | None = None,
            said: dict[int, str] | None = None) -> list[Preemption]:
    """The preemption orders that make room for the round's blocked jobs (see the docstring).
    ``said`` gets the reason of a blocked job that only victims at their queue's budget
    (``max_preempt``) would have made room for."""
    if not rules.on:
        return []
    prey = {low for lows in rules.preempts.values() for low in lows}
    running = [j for j in running if j.state == JobState.RUN]
    # Jobs on their way out (a requeue or kill ordered, the processes not ended yet): their room
    # is coming back, so a job it serves preempts no more (else every round until they end would).
    leaving = [(j, "kill") for j in running if j.kill_requested]
    # Every candidate, in victim order once (the order does not depend on the preemptor).
    order = sorted((j for j in running if j.spec.queue in prey and not j.kill_requested
                    and j.start_time is not None and now - j.start_time >= rules.min_run_time),
                   key=lambda v: (rules.priority.get(v.spec.queue, 0), v.spec.priority,
                                  -(v.start_time or 0.0), -v.id))
    running = [j for j in order if rules.may_evict(j)]
    spent = len(running) < len(order)  # some are at their queue's budget
    taken: set[int] = set()
    out: list[Preemption] = []
    tried = 0
    for job in blocked:
        may = rules.preempts.get(job.spec.queue)
        if not may:
            continue
        tried += 1
        if tried > MOST_BLOCKED:
            break
        victims = [v for v in running if v.spec.queue in may and v.id not in taken][:MOST_VICTIMS]
        got = _room_for(job, victims, caps, rules, fits, ledger, guard, leaving)
        for v, action in got:
            taken.add(v.id)
            out.append(Preemption(v.id, v.attempt, action, job.id))
        if not got and spent and said is not None:
            why = _spent_says(job, [v for v in order if v.spec.queue in may and v.id not in taken][:MOST_VICTIMS],
                              caps, rules, fits, ledger, guard, leaving)
            if why:
                said[job.id] = why
    return out


def _spent_says(job: Job, victims: list[Job], caps: Mapping[str, HostCap], rules: PreemptRules, fits: Fits,
                ledger: Ledger | None, guard: Guard | None, leaving: Sequence[tuple[Job, str]]) -> str | None:
    """Why a job that found no victim waits, where victims at their queue's budget would have
    made room: "preemption: job 18 of queue low was evicted 2 times, its queue's max_preempt"."""
    would = [v for v, _ in _room_for(job, victims, caps, rules, fits, ledger, guard, leaving)
             if not rules.may_evict(v)]
    if not would:
        return None
    v = would[0]
    return (f"preemption: job {v.id} of queue {v.spec.queue} was evicted {v.evictions} times, its queue's "
            f"max_preempt" + (f" (and {len(would) - 1} more)" if len(would) > 1 else ""))


def _room_for(job: Job, victims: list[Job], caps: Mapping[str, HostCap], rules: PreemptRules, fits: Fits,
              ledger: Ledger | None, guard: Guard | None = None,
              leaving: Sequence[tuple[Job, str]] = ()) -> list[tuple[Job, str]]:
    """The fewest victims (in the given order) whose preemption lets ``job`` fit where ``guard``
    allows, each with its action; none where the room of the jobs ``leaving`` is enough."""
    chosen: list[Job] = []
    banned: set[str] = set()  # hosts where the job would delay a reservation ahead of it
    if leaving and _fit_guarded(job, _after(caps, list(leaving), ledger, banned), fits, guard, banned) is not None:
        return []
    for v in victims:
        chosen.append(v)
        if all(a.host in banned for a in v.allocs):
            continue  # its room is on hosts the job may not take
        for honest in (True, False):  # suspend as configured; then, memory wanted, requeue instead
            actions = [(c, _action(c, rules, honest)) for c in chosen]
            allocs = _fit_guarded(job, _after(caps, [*leaving, *actions], ledger, banned), fits, guard, banned)
            if allocs is not None:
                on = {a.host for a in allocs}
                return [(c, act) for c, act in actions if any(a.host in on for a in c.allocs)]
            if all(act != "suspend" for _, act in actions):
                break  # nothing to upgrade: the second try would be the first
    return []


def _fit_guarded(job: Job, after: dict[str, HostCap], fits: Fits, guard: Guard | None,
                 banned: set[str]) -> list[Alloc] | None:
    """``fits`` on ``after``, leaving out (and adding to ``banned``) each host the guard refuses."""
    while True:
        allocs = fits(job, after)
        no = guard(job, allocs) if allocs is not None and guard is not None else None
        if no is None:
            return allocs
        banned.add(no[0])
        after.pop(no[0], None)


def _action(v: Job, rules: PreemptRules, honest: bool) -> str:
    act = rules.action.get(v.spec.queue, "suspend")
    return act if honest or act != "suspend" else "requeue"


def _after(caps: Mapping[str, HostCap], actions: list[tuple[Job, str]], ledger: Ledger | None,
           banned: Container[str] = ()) -> dict[str, HostCap]:
    """The hosts that could take the job once the victims are preempted: theirs, and those with
    free slots; none of ``banned``."""
    out = {n: h.clone() for n, h in caps.items() if h.slots_free > 0 and n not in banned}
    for v, act in actions:
        for r in job_releases(v, 0.0, ledger):
            h = out.get(r.host)
            if h is None and r.host in caps and r.host not in banned:
                h = out[r.host] = caps[r.host].clone()
            if h is not None:
                give_back(h, r if act != "suspend" else Release(r.end, r.host, r.slots, 0, 0, leaves=False))
    return out
