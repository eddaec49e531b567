"""The figures of one replay (or of the trace's own record), from job records and integrals.

    wait               = start - submit
    bounded slowdown   = max(1, (wait + run) / max(run, TAU))        TAU = 10 s
    utilisation(slots) = ∫ slots in use dt / (slots x makespan)
    utilisation(mem)   = ∫ Σ actual dt / (memory x makespan)
    slack share        = ∫ Σ slack dt / ∫ Σ reserved dt   (Autopilot's (limit - usage) / limit,
                         time-weighted, with accounting.slack's max(0, reserved - actual))
    held share         = ∫ Σ_hosts (min(capacity, Σ charged) - Σ actual) dt / (memory x makespan):
                         memory a promise holds that nobody uses
    oversubscription   = host-minutes with Σ actual > the host's memory
    fairness           = Jain's index over users' mean bounded slowdowns (1 = all alike)

makespan runs from the first submit to the last end.  Jobs the controller would refuse
(no host could ever run them) are counted apart and left out of waits.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from xce.sim.engine import JobRecord, Outcome

TAU = 10.0


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values (0 for none)."""
    if not sorted_values:
        return 0.0
    k = max(0, min(len(sorted_values) - 1, int(-(-q * len(sorted_values) // 100)) - 1))
    return float(sorted_values[k])


def bounded_slowdown(wait: float, run: float, tau: float = TAU) -> float:
    return max(1.0, (wait + run) / max(run, tau))


def jain(values: Sequence[float]) -> float:
    if not values:
        return 1.0
    sq = sum(v * v for v in values)
    return (sum(values) ** 2) / (len(values) * sq) if sq else 1.0


def job_figures(records: Sequence[JobRecord]) -> dict[str, Any]:
    """Waits, slowdowns and per-user fairness of the jobs that started."""
    ran = [r for r in records if r.start is not None]
    waits = sorted(r.start - r.submit for r in ran)  # type: ignore[operator]
    bsd = [bounded_slowdown(r.start - r.submit, r.run) for r in ran]  # type: ignore[operator]
    per_user: dict[str, list[float]] = {}
    for r, b in zip(ran, bsd):
        per_user.setdefault(r.user, []).append(b)
    user_means = [sum(v) / len(v) for v in per_user.values()]
    return {
        "jobs": len(records), "started": len(ran),
        "rejected": sum(1 for r in records if r.rejected),
        "wait_mean_s": sum(waits) / len(waits) if waits else 0.0,
        "wait_median_s": percentile(waits, 50), "wait_p95_s": percentile(waits, 95),
        "bounded_slowdown_mean": sum(bsd) / len(bsd) if bsd else 0.0,
        "users": len(per_user), "fairness_jain": jain(user_means),
        "worst_user_slowdown": max(user_means, default=0.0),
    }


def summary(o: Outcome) -> dict[str, Any]:
    """Every figure of one policy's replay, in JSON's units (bytes, seconds)."""
    span = max(o.end - o.start, 1e-9)
    a, m = o.integrals, o.machine
    out = {"policy": o.policy, "hosts": m.hosts, "slots_per_host": m.slots, "mem_per_host": m.mem,
           **job_figures(o.records),
           "makespan_s": o.end - o.start,
           "util_slots": a.slots / (m.slots_total * span),
           "util_mem": a.actual / (m.mem * m.hosts * span) if m.mem else 0.0,
           "reserved_share": a.reserved / (m.mem * m.hosts * span) if m.mem else 0.0,
           "slack_share": a.slack / a.reserved if a.reserved else 0.0,
           "held_share": a.held / (m.mem * m.hosts * span) if m.mem else 0.0,
           **loss_figures(o.records),
           "runlimit_kills": sum(1 for r in o.records if r.timed_out),
           "oversubscribed_host_minutes": a.over_hosts / 60.0,
           "events": o.events, "rounds": o.rounds}
    return out


def digest(o: Outcome) -> str:
    """A hash of every decision of a replay: each job's start, end and fate, in submit order, and the
    events and time integrals that follow from them (not the rounds: a round that could place nothing
    may be skipped).  Two replays with the same digest decided alike; its timings are not in it."""
    h = hashlib.sha256()
    for r in o.records:
        h.update(repr((r.submit, r.start, r.end, r.slots, r.killed, r.timed_out, r.rejected, r.kills,
                       r.evictions, r.retries, r.lent, r.sized, r.mem_seconds)).encode())
    a = o.integrals
    h.update(repr((o.events, o.end, a.slots, a.reserved, a.actual, a.slack, a.over_hosts, a.held)).encode())
    return h.hexdigest()[:16]


def loss_figures(records: Sequence[JobRecord]) -> dict[str, Any]:
    """Work lost to memory: the worker's pressure kills, reclaim's evictions, and retries."""
    return {"mem_kills": sum(r.kills for r in records),  # runs killed by memory pressure
            "jobs_lost": sum(1 for r in records if r.killed),  # jobs whose last run was such a kill
            "mem_seconds_lost": sum(r.kill_mem_s for r in records),
            "slot_seconds_lost": sum(r.kill_slot_s for r in records),
            "evictions": sum(r.evictions for r in records),  # runs sent away by reclaim (requeued)
            "evicted_mem_seconds": sum(r.evict_mem_s for r in records),
            "evicted_slot_seconds": sum(r.evict_slot_s for r in records),
            "retries": sum(r.retries for r in records), "jobs_retried": sum(1 for r in records if r.retries),
            "jobs_lent": sum(1 for r in records if r.lent), "jobs_sized": sum(1 for r in records if r.sized)}


def record_summary(records: Sequence[JobRecord], slots_total: int) -> dict[str, Any]:
    """The trace's own figures (its recorded waits), for the check against the record."""
    ran = [r for r in records if r.start is not None]
    start = min((r.submit for r in records), default=0.0)
    end = max((r.end for r in ran if r.end is not None), default=start)
    span = max(end - start, 1e-9)
    busy = sum(r.run * r.slots for r in ran)
    return {"policy": "record", **job_figures(records), "makespan_s": end - start,
            "util_slots": busy / (slots_total * span)}
