"""Keeping CPython's cyclic GC off a daemon's big, long-lived model.

A controller or scheduler at 100,000 jobs holds several hundred thousand GC-tracked
containers (each job's lists, each account).  A full collection walks them all
(~150 ms on a small VM), and the steady churn of heartbeats sets one off every few
seconds: CPU spent, and a stall in the request loop each time.  None of that model
is cyclic garbage: it is freed by reference counting when a job goes.

So the model is moved out of the collector's sight now and then (``gc.freeze``:
frozen objects are still freed by reference counting, only the cycle search skips
them), and handed back rarely (``gc.unfreeze``), so that a cycle that became garbage
after its freeze is still found within ``thaw_every``.
"""

from __future__ import annotations

import gc


class HeapUpkeep:
    def __init__(self, freeze_every: float = 1.0, thaw_every: float = 3600.0) -> None:
        self.freeze_every = freeze_every
        self.thaw_every = thaw_every
        self.next_freeze = 0.0
        self.next_thaw: float | None = None

    def tick(self, now: float) -> None:
        """Called from a daemon's loop with its clock; cheap when nothing is due."""
        if now < self.next_freeze:
            return
        if self.next_thaw is None:
            self.next_thaw = now + self.thaw_every
        elif now >= self.next_thaw:
            gc.unfreeze()  # the next full collection walks everything once
            self.next_thaw = now + self.thaw_every
            self.next_freeze = now + self.freeze_every
            return
        gc.freeze()
        self.next_freeze = now + self.freeze_every
