"""What ``Client.wait`` still waits for: plain jobs by id, job arrays by their summaries.

An array is waited for as a whole: its elements are materialised lazily (xce/core/arrays.py),
so the ids of the elements that exist now are not all of it; its summary (``ArrayView``:
elements by state, the unmaterialised counted as PEND) says when every element has ended.
Pure bookkeeping: the client asks, this keeps the count.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from xce.core.arrays import SHIFT
from xce.core.model import TERMINAL
from xce.core.views import ArrayView, JobView

ENDED = tuple(s.value for s in TERMINAL)


def ended_elements(a: ArrayView) -> int:
    return sum(a.counts.get(s, 0) for s in ENDED)


@dataclass
class Waiting:
    plain: set[int]                   # jobs (or elements) not seen ended yet
    arrays: dict[int, int]            # array id -> its elements, while some have not ended
    total: int                        # everything waited for, arrays counted by element
    ended_in: dict[int, int] = field(default_factory=dict)  # array id -> elements ended so far
    plain_total: int = 0

    @classmethod
    def of(cls, ids: Sequence[int], arrays: Iterable[ArrayView]) -> Waiting:
        sizes = {a.id: a.elements for a in arrays}
        plain = {i for i in ids if i not in sizes}
        return cls(plain, sizes, len(plain) + sum(sizes.values()), plain_total=len(plain))

    def jobs_seen(self, views: Iterable[JobView]) -> None:
        self.plain -= {v.id for v in views if v.state in ENDED}

    def states_seen(self, states: Iterable[tuple[int, str]]) -> None:
        """(id, state) pairs, as a JOBS naming those fields answers."""
        self.plain -= {i for i, state in states if state in ENDED}

    def arrays_seen(self, summaries: Iterable[ArrayView]) -> None:
        for a in summaries:
            self.ended_in[a.id] = ended_elements(a)
            if self.ended_in[a.id] >= a.elements:
                self.arrays.pop(a.id, None)

    def element_of(self, job_id: int) -> bool:
        """Whether an event about ``job_id`` may end an array waited for (its summary is worth asking)."""
        return (job_id >> SHIFT) in self.arrays

    @property
    def done(self) -> int:
        return self.plain_total - len(self.plain) + sum(self.ended_in.values())

    @property
    def finished(self) -> bool:
        return not self.plain and not self.arrays
