"""xce recommend's figures (xce/core/recommend.py), from finished jobs' views: builders only."""

from __future__ import annotations

from builders import T0

from xce.core.recommend import percentile, recommend
from xce.core.views import JobView

G = 1 << 30


def view(id: int, peak: int, reserved: int = 4 * G, name: str = "align", user: str = "ann", state: str = "DONE",
         slack_integral: float = 0.0) -> JobView:
    return JobView(id=id, name=name, user=user, queue="normal", state=state, slots=1, hosts=["n1"],
                   command=["bwa", "mem"], resreq="", mem_reserved=reserved, mem_actual=None, mem_peak=peak,
                   mem_charged=max(reserved, peak), mem_limit=None, efficiency=None, reason="", exit_code=0,
                   signal=None, submit_time=T0, start_time=T0 + 1, end_time=T0 + 61,
                   mem_slack_integral=slack_integral)


def test_nearest_rank_percentile() -> None:
    assert percentile(list(range(1, 101)), 0.95) == 95
    assert percentile([7], 0.95) == 7


def test_requested_against_p95_and_max_peak_and_the_waste_per_user_job_queue() -> None:
    runs = [view(i, peak=(i + 1) * G // 10, slack_integral=3600.0 * G) for i in range(20)]  # 0.1G .. 2.0G
    runs += [view(100, peak=G, name="", user="bob"), view(101, peak=G, state="RUN")]   # bob's: by command
    ann, bob = recommend(runs)
    assert (ann.user, ann.job, ann.runs, ann.mem_requested) == ("ann", "align", 20, 4 * G)
    assert ann.mem_peak_p95 == 19 * G // 10 and ann.mem_peak_max == 2 * G
    assert ann.mem_recommended == int(19 * G // 10 * 1.1)
    assert ann.mem_wasted_hours == 20 * G   # byte-hours: 20 runs of 1G reserved-unused for an hour
    assert (bob.job, bob.runs) == ("bwa mem", 1)   # the running job is not history yet
