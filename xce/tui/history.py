"""Bounded histories for the detail plots: per host, packed bytes in a few buffers.

``HostHistory`` keeps one host's memory figures at each heartbeat and its
jobs' actual memory per sample batch.  Both are appended on the receiver's hot
path (at 1,000 hosts, a heartbeat from each every second), where what costs is
touching memory the rest of the second has pushed out of the caches: a ring of
small objects per host (a deque of arrays, one allocated and one freed per
batch) cost ~5 µs a host.  So nothing here is an object per point: figures are
records packed in one bytearray; batches that sampled the same jobs form a
``Block`` (one packed ids column, then each batch's values row after row), and
the batch's values are packed right after the ledger has read them.

Bounds: the last ``cap`` figures (trimmed by half when they reach twice that)
and exactly the last ``cap`` batches as read (the buffers keep up to an eighth
more between trims): the console at 20,000 jobs sampled every second holds
181 MB after 260 s (docs/benchmarks.md), as with the arrays before.
"""

from __future__ import annotations

import struct
from array import array
from collections import deque
from collections.abc import Callable, Sequence
from functools import lru_cache

FIGURES = struct.Struct("=dqqq")  # time, actual, reserved, OS-available


@lru_cache(maxsize=256)
def packer(n: int) -> Callable[..., bytes]:
    """``pack(*ints)`` for ``n`` signed 64-bit integers (a host's batches are mostly one size)."""
    return struct.Struct(f"={n}q").pack


class Block:
    """Consecutive batches of one host that sampled the same jobs, in that order."""

    __slots__ = ("ids", "n", "t", "vals")

    def __init__(self, ids: bytes, n: int) -> None:
        self.ids = ids            # the job ids, packed
        self.n = n
        self.t = array("d")       # one time per batch
        self.vals = bytearray()   # n packed values per batch

    def drop(self, k: int) -> None:
        del self.t[:k]
        del self.vals[: 8 * self.n * k]


class HostHistory:
    __slots__ = ("name", "cap", "figures", "_fig_t", "blocks", "batches", "_batch_t")

    def __init__(self, name: str, cap: int = 240) -> None:
        # The host's name as the console first met it: the model marks changes with this one
        # object, so its sets and dicts find it by identity instead of comparing strings.
        self.name = name
        self.cap = cap
        self.figures = bytearray()
        self._fig_t = float("-inf")
        self.blocks: deque[Block] = deque()
        self.batches = 0  # held in blocks (up to cap + cap // 8)
        self._batch_t = float("-inf")

    # ---- the host's figures ------------------------------------------------------------------

    def add_figures(self, t: float, actual: int, reserved: int, os_available: int) -> None:
        buf = self.figures
        if t <= self._fig_t:  # same instant: keep the latest figures
            buf[-FIGURES.size:] = FIGURES.pack(self._fig_t, actual, reserved, os_available)
            return
        self._fig_t = t
        buf += FIGURES.pack(t, actual, reserved, os_available)
        if len(buf) >= 2 * self.cap * FIGURES.size:
            del buf[: self.cap * FIGURES.size]

    def figure_series(self) -> tuple[list[float], list[int], list[int], list[int]]:
        """Times, actual, reserved and OS-available memory, oldest first."""
        cols = list(zip(*FIGURES.iter_unpack(bytes(self.figures)), strict=True))
        if not cols:
            return [], [], [], []
        return list(cols[0]), list(cols[1]), list(cols[2]), list(cols[3])

    # ---- its jobs' samples -------------------------------------------------------------------

    def add_samples(self, t: float, ids: Sequence[int], vals: Sequence[int]) -> None:
        """One batch: ``vals[i]`` is job ``ids[i]``'s actual memory at ``t``."""
        pack = packer(len(ids))
        col = pack(*ids)
        block = self.blocks[-1] if self.blocks else None
        if block is None or block.ids != col:  # not the same jobs as the last batch (one memcmp)
            block = Block(col, len(ids))
            self.blocks.append(block)
        if t < self._batch_t:
            t = self._batch_t  # a batch never goes back in time: the plot's steps stay ordered
        self._batch_t = t
        block.t.append(t)
        block.vals += pack(*vals)
        self.batches += 1
        if self.batches >= self.cap + self.cap // 8 + 1:
            self._trim()

    def _trim(self) -> None:
        """Drop batches from the oldest end down to ``cap`` (in bulk: an eighth of cap at a time)."""
        excess = self.batches - self.cap
        blocks = self.blocks
        while excess > 0:
            first = blocks[0]
            k = min(excess, len(first.t))
            if k == len(first.t):
                blocks.popleft()
            else:
                first.drop(k)
            excess -= k
            self.batches -= k

    def oldest_batch(self) -> float | None:
        """The time of the oldest batch kept (as read: the last ``cap``)."""
        skip = max(0, self.batches - self.cap)
        for block in self.blocks:
            if skip < len(block.t):
                return block.t[skip]
            skip -= len(block.t)
        return None

    def job(self, jid: int) -> tuple[list[float], list[int]]:
        """The job's (times, values) in the last ``cap`` batches, oldest first."""
        skip = max(0, self.batches - self.cap)  # held beyond cap until the next trim
        times: list[float] = []
        values: list[int] = []
        for block in self.blocks:
            k = len(block.t)
            first, skip = min(skip, k), max(0, skip - k)
            if first == k:
                continue
            col = struct.unpack(f"={block.n}q", block.ids)
            if jid not in col:
                continue
            at, n = col.index(jid), block.n
            times.extend(block.t[first:])
            with memoryview(block.vals) as raw, raw.cast("q") as row_major:  # released: the buffer grows
                values.extend(row_major[n * first + at:: n].tolist())
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
