"""The header's cluster-wide figures, kept by deltas so a frame costs what changed.

Hosts by state and the memory sums (capacity, reserved, actual, slack,
overage) are sums of the hosts' views (xce.views), re-read only for hosts that
changed since the last frame; jobs by state move with each job's transitions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from xce.views import HostView

MEM_KEYS = ("capacity", "reserved", "actual", "slack", "overage")
Row = tuple[str, int, int, int, int, int]


def _row(v: HostView) -> Row:
    return (v.state, v.mem_total, v.mem_reserved, v.mem_actual, v.mem_slack, v.mem_overage)


class Totals:
    def __init__(self) -> None:
        self.jobs: Counter[str] = Counter()
        self.hosts: Counter[str] = Counter()
        self.mem = [0] * len(MEM_KEYS)
        self.rows: dict[str, Row] = {}
        self.dirty: set[str] = set()

    def reset_jobs(self, states: Iterable[str]) -> None:
        self.jobs = Counter(states)

    def job_moved(self, old: str | None, new: str | None) -> None:
        if old is not None:
            self.jobs[old] -= 1
            if not self.jobs[old]:
                del self.jobs[old]
        if new is not None:
            self.jobs[new] += 1

    def reset_hosts(self) -> None:
        self.hosts, self.mem, self.rows = Counter(), [0] * len(MEM_KEYS), {}

    def refresh(self, names: Iterable[str], view: Callable[[str], HostView | None]) -> None:
        """Re-read the views of ``names`` (hosts that changed) into the sums."""
        for name in names:
            old = self.rows.pop(name, None)
            if old is not None:
                self._add(old, -1)
            v = view(name)
            if v is not None:
                new = self.rows[name] = _row(v)
                self._add(new, 1)

    def _add(self, row: Row, sign: int) -> None:
        self.hosts[row[0]] += sign
        if not self.hosts[row[0]]:
            del self.hosts[row[0]]
        for i in range(len(MEM_KEYS)):
            self.mem[i] += sign * row[i + 1]

    def mem_dict(self) -> dict[str, int]:
        return dict(zip(MEM_KEYS, self.mem, strict=True))
