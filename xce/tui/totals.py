"""The header's cluster-wide figures, kept by deltas so a frame costs what changed.

Hosts by state and the memory sums (capacity, reserved, actual, slack,
overage) are sums of the hosts' view figures (xce.views: state, capacity and
the ledger's host totals), re-read only for hosts that changed since the last
frame; jobs by state move with each job's transitions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

MEM_KEYS = ("capacity", "reserved", "actual", "slack", "overage")
Row = tuple[str, int, int, int, int, int]  # a host's state, then MEM_KEYS


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

    def refresh(self, names: Iterable[str], row: Callable[[str], Row | None]) -> None:
        """Re-read the rows (state, capacity, reserved, actual, slack, overage) of ``names``.

        A thousand hosts a second at scale: the differences are summed in locals and
        moved into the totals once.
        """
        rows, hosts = self.rows, self.hosts
        cap = res = act = sla = ove = 0
        for name in names:
            old = rows.get(name)
            new = row(name)
            if old == new:
                continue
            if old is not None:
                hosts[old[0]] -= 1
                cap, res, act, sla, ove = (cap - old[1], res - old[2], act - old[3], sla - old[4],
                                           ove - old[5])
            if new is None:
                del rows[name]
            else:
                rows[name] = new
                hosts[new[0]] += 1
                cap, res, act, sla, ove = (cap + new[1], res + new[2], act + new[3], sla + new[4],
                                           ove + new[5])
        for st in [st for st, n in hosts.items() if not n]:
            del hosts[st]
        m = self.mem
        m[0] += cap
        m[1] += res
        m[2] += act
        m[3] += sla
        m[4] += ove

    def mem_dict(self) -> dict[str, int]:
        return dict(zip(MEM_KEYS, self.mem, strict=True))
