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

The walk, for each blocked job of a preempting queue, in the round's order::

    victims   = RUN jobs of queues it may preempt, run >= min_run_time, not taken yet,
                lowest queue priority first, then the youngest (the least work lost)
    credit    one victim at a time to a copy of the hosts (slots; memory too unless suspended)
              until ``fits`` places the job; suspend-victims upgraded to requeue if only
              memory would make it fit
    keep      the victims on the hosts the job would land on; the rest are let go

Preempted jobs come back first: ``resumable`` picks the SSUSP jobs whose hosts have room
again, before a round places pending work.  Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from xce.core.accounting import Ledger
from xce.core.hostgroups import HostSet
from xce.core.model import Alloc, Job, JobState
from xce.core.placement import HostCap, schedule
from xce.core.sched.backfill import BackfillRules, Release, give_back, job_releases

ACTIONS = ("suspend", "requeue", "kill")
MOST_VICTIMS = 64  # victims tried per blocked job: a round stays short on a big cluster
MOST_BLOCKED = 8   # blocked jobs that may preempt in one round
GREEDY = BackfillRules(mode="off")

Fits = Callable[[Job, dict[str, HostCap]], "list[Alloc] | None"]


@dataclass(frozen=True, slots=True)
class PreemptRules:
    preempts: Mapping[str, frozenset[str]] = field(default_factory=dict)  # queue -> queues it may preempt
    action: Mapping[str, str] = field(default_factory=dict)               # queue -> how its jobs go
    priority: Mapping[str, int] = field(default_factory=dict)             # queue -> its priority
    min_run_time: float = 60.0

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
                   min_run_time=cfg.preemption.min_run_time)  # type: ignore[attr-defined]


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


def preempt(blocked: Iterable[Job], running: Iterable[Job], caps: Mapping[str, HostCap], rules: PreemptRules,
            now: float, fits: Fits, ledger: Ledger | None = None) -> list[Preemption]:
    """The preemption orders that make room for the round's blocked jobs (see the docstring)."""
    if not rules.on:
        return []
    running = [j for j in running if j.state == JobState.RUN and not j.kill_requested
               and j.start_time is not None and now - j.start_time >= rules.min_run_time]
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
        victims = sorted((v for v in running if v.spec.queue in may and v.id not in taken),
                         key=lambda v: (rules.priority.get(v.spec.queue, 0), -(v.start_time or 0.0), -v.id))
        got = _room_for(job, victims[:MOST_VICTIMS], caps, rules, fits, ledger)
        for v, action in got:
            taken.add(v.id)
            out.append(Preemption(v.id, v.attempt, action, job.id))
    return out


def _room_for(job: Job, victims: list[Job], caps: Mapping[str, HostCap], rules: PreemptRules, fits: Fits,
              ledger: Ledger | None) -> list[tuple[Job, str]]:
    """The fewest victims (in the given order) whose preemption lets ``job`` fit, each with its action."""
    chosen: list[Job] = []
    for v in victims:
        chosen.append(v)
        for honest in (True, False):  # suspend as configured; then, memory wanted, requeue instead
            actions = [(c, _action(c, rules, honest)) for c in chosen]
            allocs = fits(job, _after(caps, actions, ledger))
            if allocs is not None:
                on = {a.host for a in allocs}
                return [(c, act) for c, act in actions if any(a.host in on for a in c.allocs)]
            if all(act != "suspend" for _, act in actions):
                break  # nothing to upgrade: the second try would be the first
    return []


def _action(v: Job, rules: PreemptRules, honest: bool) -> str:
    act = rules.action.get(v.spec.queue, "suspend")
    return act if honest or act != "suspend" else "requeue"


def _after(caps: Mapping[str, HostCap], actions: list[tuple[Job, str]], ledger: Ledger | None) -> dict[str, HostCap]:
    """The hosts that could take the job once the victims are preempted: theirs, and those with free slots."""
    out = {n: h.clone() for n, h in caps.items() if h.slots_free > 0}
    for v, act in actions:
        for r in job_releases(v, 0.0, ledger):
            h = out.get(r.host)
            if h is None and r.host in caps:
                h = out[r.host] = caps[r.host].clone()
            if h is not None:
                give_back(h, r if act != "suspend" else Release(r.end, r.host, r.slots, 0, 0, leaves=False))
    return out
