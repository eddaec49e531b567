"""Invariant checks on a live controller: what `xce admin audit` reports.

Checks, naming every violation:
- the delta-maintained host totals equal a from-scratch re-derivation;
- each host's totals equal the sum of the job accounts on it (same thing, per host);
- no host has negative availability of a virtual resource (overcommit; a preempted, SSUSP,
  job's slots count as free, as the round counts them);
- every running job has an account on each of its hosts whose share still runs, with its
  allocation, and none on a host whose share ended;
- every running job's allocations are what its own request gives (placement.allocation_reason);
- a share whose reservation in force moved (shrunk or restored: xce/core/shrink.py) keeps it within
  [0, what it was placed with], and its account reserves exactly that;
- every RUN job has a task on each host whose share still runs, one heartbeat after it was
  placed or its host registered with this leader, whichever is later (given the leader's
  dispatch records: ``Dispatch``);
- no account belongs to a job that is not running;
- each host's reclaimable memory (accounting's term) is between 0 and its slack, equals the
  account-by-account sum of what its settled, non-reclaiming jobs lend, and nothing is lent
  by a job that runs on reclaimable memory itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from xce.core import accounting
from xce.core.model import ACTIVE, Job, JobState
from xce.core.placement import allocation_reason, job_demand
from xce.core.sched.preempt import suspended_slots
from xce.core.state import ClusterState
from xce.replica.live import Live


@dataclass(frozen=True)
class Dispatch:
    """What the leader knows of the tasks its workers run (soft state)."""

    started: Mapping[tuple[int, str], int]  # (job, host) -> the attempt its worker confirmed
    registered: Mapping[str, float]  # host -> when its worker registered with this leader, listing
    #                                  every task it runs: from then on ``started`` is complete
    now: float
    grace: float  # one heartbeat: how long a placement may go unconfirmed


@dataclass
class _Counts:
    running: int = 0
    dispatches: int = 0
    problems: list[str] = field(default_factory=list)


def audit(state: ClusterState, live: Live, cluster_resources: Mapping[str, int] | None = None,
          dispatch: Dispatch | None = None) -> tuple[list[str], dict[str, int]]:
    c = _Counts(problems=list(live.ledger.audit()))
    ledger = live.ledger
    for job in state.jobs.values():
        if job.state not in ACTIVE:
            if job.id in ledger.by_job:
                c.problems.append(f"job {job.id} is {job.state.value} but still has accounts")
            continue
        c.running += 1
        _accounts(job, live, c.problems)
        why = allocation_reason(job_demand(job, cluster_resources), job.allocs)
        if why is not None:
            c.problems.append(f"job {job.id}: {why}")
        if dispatch is not None and job.state == JobState.RUN:
            c.dispatches += _tasks(job, dispatch, c.problems)
    for jid in ledger.by_job:
        if jid not in state.jobs:
            c.problems.append(f"account for unknown job {jid}")
    _hosts(state, live, c.problems)
    lending = _reclaim(state, live, dispatch.now if dispatch is not None else None, c.problems)
    checked = {"hosts": len(state.hosts), "running_jobs": c.running, "accounts": len(ledger.accounts),
               "dispatches": c.dispatches, "lending_hosts": lending}
    return c.problems, checked


def _accounts(job: Job, live: Live, problems: list[str]) -> None:
    ledger = live.ledger
    for a in job.allocs:
        if a.host in job.finished_hosts:
            if (job.id, a.host) in ledger.accounts:
                problems.append(f"job {job.id}: its share on {a.host} ended but is still charged")
            continue
        acc = ledger.accounts.get((job.id, a.host))
        if acc is None:
            problems.append(f"job {job.id} runs on {a.host} but has no account there")
        elif acc.allocated.get("slots", 0) != a.slots:
            problems.append(f"job {job.id} on {a.host}: account holds "
                            f"{acc.allocated.get('slots', 0)} slots, allocation {a.slots}")
        moved = job.mem_in_force.get(a.host)
        if moved is not None and not 0 <= moved <= a.mem:
            problems.append(f"job {job.id} on {a.host}: reservation in force {moved} outside [0, {a.mem} placed]")
        if acc is not None and moved is not None and acc.reserved != moved:
            problems.append(f"job {job.id} on {a.host}: account reserves {acc.reserved}, its reservation in "
                            f"force is {moved}")


def _tasks(job: Job, d: Dispatch, problems: list[str]) -> int:
    """Check one RUN job's shares against the confirmed tasks; how many shares were checked."""
    checked = 0
    for host in job.hosts:
        registered = d.registered.get(host)
        if host in job.finished_hosts or registered is None \
                or d.now - max(job.start_time or 0.0, registered) <= d.grace:
            continue
        checked += 1
        if d.started.get((job.id, host)) != job.attempt:
            problems.append(f"job {job.id} is RUN on {host} but no task runs there (placed "
                            f"{d.now - (job.start_time or d.now):.1f} s ago; the worker never confirmed it)")
    return checked


def _hosts(state: ClusterState, live: Live, problems: list[str]) -> None:
    freed = suspended_slots(state.jobs.values())  # a preempted job's slots are free (not its memory)
    for name, host in state.hosts.items():
        t = live.ledger.host_totals(name)
        used = t.allocated.get("slots", 0) - freed.get(name, 0)
        if used > host.slots_total:
            problems.append(f"host {name}: {used} slots allocated of {host.slots_total}")
        for res, total in host.virtual.items():
            if t.allocated.get(res, 0) > total:
                problems.append(f"host {name}: {res} allocated {t.allocated[res]} of {total}")
        for fld in ("mem_reserved", "mem_slack", "mem_overage", "mem_actual"):
            if getattr(t, fld) < 0:
                problems.append(f"host {name}: negative {fld} {getattr(t, fld)}")


def _reclaim(state: ClusterState, live: Live, now: float | None, problems: list[str]) -> int:
    """Reclaimable memory per host against its slack and an account-by-account sum; how many hosts lend."""
    lending = 0
    for name in state.hosts:
        at = live.last_seen.get(name, 0.0) if now is None else now
        got = live.reclaimable(name, at)
        slack = live.ledger.host_totals(name).mem_slack
        book = live.ledger.books.get(name)
        fresh = 0
        for jid in book.ids if book is not None else ():
            acc = live.ledger.accounts[(jid, name)]
            if acc.actual is None or not acc.reserved:
                continue
            i = book.index[jid]
            if acc.job_id not in book.reclaiming and accounting.settled(book.since[i], book.peak_at[i], at,
                                                                         live.rules):
                fresh += accounting.lendable(acc.reserved, acc.peak, live.rules)
        if not 0 <= got <= slack:
            problems.append(f"host {name}: reclaimable {got} outside [0, slack {slack}]")
        if got != fresh:
            problems.append(f"host {name}: reclaimable {got} != {fresh} summed account by account")
        lending += got > 0
    return lending
