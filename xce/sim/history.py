"""Right-sizing in the replay: the trace's history as it unfolds, sized by xce/core/autosize.py.

A job of a right-sizing policy is submitted as ``rusage[mem=auto]`` and sized by the
leader's own ``autosize.sized`` (and so ``recommend``: p95 of past peaks x (1 + the queue's
``mem_auto_margin``)) from the finished runs of its (user, executable, queue) -- the
``recommend.history_key`` with the trace's executable number as the job name -- that ended
before it was submitted.  Two differences from the daemons, both stated in
docs/simulation.md: the figures are per processor (the trace's unit: its jobs of one
executable run at many widths), so the placeholder is ``mem=auto`` per task; and a job
with fewer runs than the queue's ``mem_auto_min_runs`` keeps the trace's own request
instead of a queue fallback.  Only the last
``window`` runs of each key are read, as a cluster that cleans old jobs up keeps a window.
"""

from __future__ import annotations

from collections import deque

from xce.core.autosize import enough_history, sized
from xce.core.model import Job, Queue
from xce.core.recommend import history_key
from xce.core.resreq import ResReq, RusageItem
from xce.core.views import JobView

AUTO_PER_TASK = ResReq(text="rusage[mem=auto]", rusage=(RusageItem("mem", 0, "task"),), mem_auto=True)


def run_view(job: Job, reserved_slot: int, peak_slot: int) -> JobView:
    """A finished run as ``recommend`` reads it, its memory per processor."""
    s = job.spec
    return JobView(id=job.id, name=s.name, user=s.user, queue=s.queue, state=job.state.value, slots=s.slots,
                   hosts=[], command=s.command, resreq="", mem_reserved=reserved_slot, mem_actual=None,
                   mem_peak=peak_slot, mem_charged=max(reserved_slot, peak_slot), mem_limit=None,
                   efficiency=None, reason="", exit_code=job.exit_code, signal=job.signal,
                   submit_time=job.submit_time, start_time=job.start_time, end_time=job.end_time)


class History:
    def __init__(self, queues: dict[str, Queue], window: int) -> None:
        self.queues, self.window = queues, window
        self.runs: dict[tuple[str, str, str], deque[JobView]] = {}
        self.ends: dict[tuple[str, str, str], int] = {}  # runs ever added: the cache's version
        self.cache: dict[tuple[str, str, str], tuple[int, ResReq]] = {}
        self.sized = 0  # jobs whose reservation came from history

    def request(self, job: Job, given: ResReq) -> ResReq:
        """The job's request: sized from its history, else ``given`` (the trace's)."""
        s = job.spec
        key = history_key(s.user, s.name, s.command, s.queue)
        runs = self.runs.get(key)
        if not runs or not enough_history(len(runs), self.queues[s.queue]):
            return given
        self.sized += 1
        version = self.ends[key]
        hit = self.cache.get(key)
        if hit is not None and hit[0] == version:
            return hit[1]
        req = sized(AUTO_PER_TASK, f"{key[0]}/{key[1]}", self.queues[s.queue], runs)
        self.cache[key] = (version, req)
        return req

    def ended(self, job: Job, reserved_slot: int, peak_slot: int) -> None:
        """A job's last run ended (DONE or EXIT): one more run of its key."""
        s = job.spec
        key = history_key(s.user, s.name, s.command, s.queue)
        runs = self.runs.get(key)
        if runs is None:
            runs = self.runs[key] = deque(maxlen=self.window)
        runs.append(run_view(job, reserved_slot, peak_slot))
        self.ends[key] = self.ends.get(key, 0) + 1
