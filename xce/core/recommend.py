"""Right-sizing from history: what finished jobs asked, what they peaked at, what they wasted.

``xce recommend`` (issue 18 item 2, its report half).  From finished jobs' records (JobView:
the reservation, the peak and the slack integral the workers measured), per (user, job name
or else command, queue): how many ran, the largest reservation asked, the p95 and max peak,
a recommended reservation (p95 peak plus ``margin``), and the memory·hours the estimates
wasted (the slack integral, reserved but unused).  ``rusage[mem=auto]`` is sized at submit
by this same function (xce/core/autosize.py).  Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import msgspec

from xce.core.views import JobView

HOUR = 3600.0


class Recommendation(msgspec.Struct, kw_only=True):
    user: str
    job: str      # the job name, or its command when it has none
    queue: str
    runs: int
    mem_requested: int   # the largest reservation asked
    mem_peak_p95: int
    mem_peak_max: int
    mem_recommended: int  # p95 peak x (1 + margin)
    mem_wasted_hours: float  # byte-hours reserved but unused (Σ slack integral / 3600)


def percentile(values: list[int], q: float) -> int:
    """Nearest-rank percentile of ``values`` (not empty)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def history_key(user: str, name: str, command: list[str], queue: str) -> tuple[str, str, str]:
    """What jobs are "the same job" for right-sizing: (user, job name or else command, queue)."""
    return user, name or " ".join(command), queue


def job_key(v: JobView) -> tuple[str, str, str]:
    return history_key(v.user, v.name, v.command, v.queue)


def recommend(jobs: Iterable[JobView], margin: float = 0.1) -> list[Recommendation]:
    """One row per (user, job, queue) of the finished jobs, the most wasteful first."""
    groups: dict[tuple[str, str, str], list[JobView]] = {}
    for v in jobs:
        if v.state in ("DONE", "EXIT") and v.start_time is not None:
            groups.setdefault(job_key(v), []).append(v)
    out = []
    for (user, name, queue), runs in groups.items():
        peaks = [v.mem_peak for v in runs]
        p95 = percentile(peaks, 0.95)
        out.append(Recommendation(user=user, job=name, queue=queue, runs=len(runs),
                                  mem_requested=max(v.mem_reserved for v in runs), mem_peak_p95=p95,
                                  mem_peak_max=max(peaks), mem_recommended=int(p95 * (1 + margin)),
                                  mem_wasted_hours=sum(v.mem_slack_integral for v in runs) / HOUR))
    out.sort(key=lambda r: (-r.mem_wasted_hours, r.user, r.job, r.queue))
    return out
