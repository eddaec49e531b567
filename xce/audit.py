"""Invariant checks on a live controller: what `xce admin audit` reports.

Checks, naming every violation:
- the delta-maintained host totals equal a from-scratch re-derivation;
- each host's totals equal the sum of the job accounts on it (same thing, per host);
- no host has negative availability of a virtual resource (overcommit);
- every running job has an account on each of its hosts whose share still runs, with its
  allocation, and none on a host whose share ended;
- no account belongs to a job that is not running.
"""

from __future__ import annotations

from xce.live import Live
from xce.model import ACTIVE
from xce.state import ClusterState


def audit(state: ClusterState, live: Live) -> tuple[list[str], dict[str, int]]:
    problems = list(live.ledger.audit())
    ledger = live.ledger
    running = 0
    for job in state.jobs.values():
        if job.state not in ACTIVE:
            if job.id in ledger.by_job:
                problems.append(f"job {job.id} is {job.state.value} but still has accounts")
            continue
        running += 1
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
    for jid in ledger.by_job:
        if jid not in state.jobs:
            problems.append(f"account for unknown job {jid}")
    for name, host in state.hosts.items():
        t = ledger.host_totals(name)
        used = t.allocated.get("slots", 0)
        if used > host.slots_total:
            problems.append(f"host {name}: {used} slots allocated of {host.slots_total}")
        for res, total in host.virtual.items():
            if t.allocated.get(res, 0) > total:
                problems.append(f"host {name}: {res} allocated {t.allocated[res]} of {total}")
        for field in ("mem_reserved", "mem_slack", "mem_overage", "mem_actual"):
            if getattr(t, field) < 0:
                problems.append(f"host {name}: negative {field} {getattr(t, field)}")
    checked = {"hosts": len(state.hosts), "running_jobs": running, "accounts": len(ledger.accounts)}
    return problems, checked
