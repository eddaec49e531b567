"""Bounded time series for the detail plots: compact arrays, amortised trimming.

A host's memory figures are appended at each heartbeat (``Series``); its jobs'
actual memory is kept per host, one column of job ids and one of values per
sample batch (``HostSamples``), so a batch costs two array copies rather than
a step per job.  Only the last ``cap`` points (trimmed by half when they reach
twice that) or batches (exactly) are kept: 20,000 jobs at one sample a second
cost about 70 MB.
"""

from __future__ import annotations

from array import array
from collections import deque


class Series:
    """Parallel arrays: times (float) and one or more integer channels."""

    __slots__ = ("cap", "t", "ch")

    def __init__(self, channels: int = 1, cap: int = 240) -> None:
        self.cap = cap
        self.t = array("d")
        self.ch = [array("q") for _ in range(channels)]

    def add(self, t: float, *values: int) -> None:
        if self.t and t <= self.t[-1]:
            # same instant: keep the latest figures
            for c, v in zip(self.ch, values, strict=True):
                c[-1] = v
            return
        self.t.append(t)
        for c, v in zip(self.ch, values, strict=True):
            c.append(v)
        if len(self.t) >= 2 * self.cap:
            del self.t[: self.cap]
            for c in self.ch:
                del c[: self.cap]

    def __len__(self) -> int:
        return len(self.t)

    def last(self, n: int) -> tuple[list[float], list[list[int]]]:
        return list(self.t[-n:]), [list(c[-n:]) for c in self.ch]


class HostSamples:
    """One host's job samples over time, columnar: per batch, the job ids and their values.

    A batch holds only the jobs sampled then (the controller sends only values that
    moved); a job's series is the batches that name it.  While a host runs the same
    jobs, consecutive batches share one ids array.  Exactly the last ``cap`` batches
    are kept (no amortised doubling: at 20,000 jobs they are most of the console's
    memory).
    """

    __slots__ = ("cap", "t", "ids", "vals", "_last")

    def __init__(self, cap: int = 240) -> None:
        self.cap = cap
        self.t: deque[float] = deque(maxlen=cap)
        self.ids: deque[array[int]] = deque(maxlen=cap)
        self.vals: deque[array[int]] = deque(maxlen=cap)
        self._last: list[int] = []  # the last batch's ids, as given

    def add(self, t: float, ids: list[int], vals: array[int]) -> None:
        tt = self.t
        if tt and ids == self._last:  # the same jobs as the last batch: share its ids
            col = self.ids[-1]
        else:
            col = array("q", ids)
            self._last = ids
        if tt:
            t = max(t, tt[-1])  # a batch never goes back in time: the plot's steps stay ordered
        tt.append(t)
        self.ids.append(col)
        self.vals.append(vals)

    def __len__(self) -> int:
        return len(self.t)

    def job(self, jid: int) -> tuple[list[float], list[int]]:
        """The job's (times, values) here, oldest first."""
        times: list[float] = []
        values: list[int] = []
        last_ids: array[int] | None = None
        at = -1
        for t, ids, vals in zip(self.t, self.ids, self.vals, strict=True):
            if ids is not last_ids:
                last_ids, at = ids, (ids.index(jid) if jid in ids else -1)
            if at >= 0:
                times.append(t)
                values.append(vals[at])
        return times, values


def summed(series: list[tuple[list[float], list[int]]]) -> tuple[list[float], list[int]]:
    """Step functions added up: at each time, the sum of every series' latest value (0 before its first)."""
    if len(series) == 1:
        return series[0]
    points = sorted((t, i, v) for i, (ts, vs) in enumerate(series) for t, v in zip(ts, vs, strict=True))
    latest = [0] * len(series)
    times: list[float] = []
    values: list[int] = []
    for t, i, v in points:
        latest[i] = v
        if times and times[-1] == t:
            values[-1] = sum(latest)
        else:
            times.append(t)
            values.append(sum(latest))
    return times, values
