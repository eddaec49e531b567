"""Bounded time series for the detail plots: compact arrays, amortised trimming.

A job's actual memory and a host's memory figures are appended as they arrive;
only the last ``cap`` points are kept (the arrays are trimmed by half when they
reach twice that), so 20,000 jobs cost a few tens of MB at most.
"""

from __future__ import annotations

from array import array


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


class Steps:
    """One channel kept as a step function: a point only when the value changes.

    The cheap path for 20,000 jobs' samples a second (a plot resamples it with
    "last value at or before t", so unchanged samples carry no information).
    """

    __slots__ = ("cap", "t", "v")

    def __init__(self, cap: int = 240) -> None:
        self.cap = cap
        self.t = array("d")
        self.v = array("q")

    def add(self, t: float, v: int) -> None:
        tt = self.t
        if tt:
            if v == self.v[-1]:
                return
            if t <= tt[-1]:
                self.v[-1] = v
                return
        tt.append(t)
        self.v.append(v)
        if len(tt) >= 2 * self.cap:
            del tt[: self.cap]
            del self.v[: self.cap]

    def __len__(self) -> int:
        return len(self.t)

    def last(self, n: int) -> tuple[list[float], list[list[int]]]:
        return list(self.t[-n:]), [list(self.v[-n:])]
