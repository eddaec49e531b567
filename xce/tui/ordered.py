"""Row keys kept in sort order, in blocks, so moving a row costs a block, not the table.

``SortedRows`` holds each row's sort key ``(key, row)`` (unique: the row breaks
ties) in blocks of at most ``2 * LOAD``, with each block's last sort key for
finding a block by bisection.  Adding or removing a row shifts one block (a
memmove of a few KB); with one flat list, the 300 rows a second that end or
start at 20,000 jobs cost two copies of the whole list (each copy touching all
20,000 rows to count references) and a bisection through cold tuples per row.
It reads as a Sequence of rows, ascending or reversed, with ``in`` and
``index`` found by the sort key instead of a scan.  (The layout is
sortedcontainers.SortedList's, cut to what the console needs.)
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import Any, overload

LOAD = 256
SortKey = tuple[Any, Any]  # (the column's key, the row)


class SortedRows(Sequence[Any]):
    def __init__(self, sort_keys: Iterable[SortKey] = (), reverse: bool = False) -> None:
        ks = sorted(sort_keys)
        self.reverse = reverse
        self._sk: dict[Any, SortKey] = {sk[1]: sk for sk in ks}
        self._kb = [ks[i:i + LOAD] for i in range(0, len(ks), LOAD)]  # blocks of sort keys
        self._rb = [[sk[1] for sk in b] for b in self._kb]             # the same blocks' rows
        self._maxes = [b[-1] for b in self._kb]
        self._len = len(ks)
        self._starts: list[int] | None = None  # each block's first position (rebuilt when needed)

    def sort_key(self, row: Any) -> SortKey | None:
        return self._sk.get(row)

    def add(self, sk: SortKey) -> None:
        """Place a row that is not here by its sort key."""
        self._starts = None
        self._sk[sk[1]] = sk
        self._len += 1
        if not self._kb:
            self._kb, self._rb, self._maxes = [[sk]], [[sk[1]]], [sk]
            return
        i = min(bisect_left(self._maxes, sk), len(self._maxes) - 1)
        kb, rb = self._kb[i], self._rb[i]
        j = bisect_left(kb, sk)
        kb.insert(j, sk)
        rb.insert(j, sk[1])
        self._maxes[i] = kb[-1]
        if len(kb) > 2 * LOAD:  # split in two
            self._kb[i:i + 1] = [kb[:LOAD], kb[LOAD:]]
            self._rb[i:i + 1] = [rb[:LOAD], rb[LOAD:]]
            self._maxes[i:i + 1] = [kb[LOAD - 1], kb[-1]]

    def discard(self, row: Any) -> bool:
        """Take a row out; False if it was not here."""
        sk = self._sk.pop(row, None)
        if sk is None:
            return False
        self._starts = None
        self._len -= 1
        i, j = self._find(sk)
        kb = self._kb[i]
        del kb[j]
        del self._rb[i][j]
        if kb:
            self._maxes[i] = kb[-1]
        else:
            del self._kb[i], self._rb[i], self._maxes[i]
        return True

    def _find(self, sk: SortKey) -> tuple[int, int]:
        i = bisect_left(self._maxes, sk)
        return i, bisect_left(self._kb[i], sk)

    def _block_starts(self) -> list[int]:
        if self._starts is None:
            self._starts, n = [], 0
            for b in self._rb:
                self._starts.append(n)
                n += len(b)
        return self._starts

    # ---- the Sequence -------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._len

    def __contains__(self, row: object) -> bool:
        return row in self._sk

    def __iter__(self) -> Iterator[Any]:
        if self.reverse:
            return chain.from_iterable(reversed(b) for b in reversed(self._rb))
        return chain.from_iterable(self._rb)

    def _ascending(self, start: int, stop: int) -> list[Any]:
        """Rows at ascending positions ``start``..``stop`` - 1."""
        out: list[Any] = []
        if start >= stop:
            return out
        starts = self._block_starts()
        i = bisect_right(starts, start) - 1
        while i < len(self._rb) and starts[i] < stop:
            b = self._rb[i]
            out += b[max(0, start - starts[i]): stop - starts[i]]
            i += 1
        return out

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> list[Any]: ...

    def __getitem__(self, i: int | slice) -> Any:
        n = self._len
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            if step != 1:
                return list(self)[i]
            if not self.reverse:
                return self._ascending(start, stop)
            return self._ascending(n - stop, n - start)[::-1]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        got = self._ascending(n - 1 - i, n - i) if self.reverse else self._ascending(i, i + 1)
        return got[0]

    def index(self, row: Any, start: int = 0, stop: int | None = None) -> int:
        sk = self._sk.get(row)
        if sk is None:
            raise ValueError(f"{row!r} is not in the rows")
        i, j = self._find(sk)
        pos = self._block_starts()[i] + j
        pos = self._len - 1 - pos if self.reverse else pos
        if pos < start or (stop is not None and pos >= stop):
            raise ValueError(f"{row!r} is not in the rows between {start} and {stop}")
        return pos

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"SortedRows({list(self)!r})"
