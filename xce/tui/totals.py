"""The header's cluster-wide figures, so a frame costs what can have changed.

Hosts by state are the hosts' view states (xce.core.views.host_state), and a state
moves only with hard changes (a host's admin state, placements that fill or
free its slots): they are kept by deltas over the hosts whose hard state
changed.  The memory sums (capacity, reserved, actual, slack, overage) are sums
of the hosts' view figures, which are the ledger's host totals: they move with
every sample, so when any host changed they are summed afresh, which at 1,000
hosts costs a tenth of re-reading and comparing each host's figures.  Jobs by
state move with each job's transitions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable
from operator import attrgetter

from xce.core.accounting import HostTotals
from xce.proto.schema import HostMem

MEM_KEYS = ("capacity", "reserved", "actual", "slack", "overage")
_FIGURES = tuple(attrgetter(f"mem_{k}") for k in MEM_KEYS[1:])


class Totals:
    def __init__(self) -> None:
        self.jobs: Counter[str] = Counter()
        self.hosts: Counter[str] = Counter()
        self.states: dict[str, str] = {}
        self.mem = [0] * len(MEM_KEYS)
        self.dirty: set[str] = set()  # hosts whose state may have moved
        self.mem_dirty = True         # any host's figures may have moved

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
        self.hosts, self.states, self.mem, self.mem_dirty = Counter(), {}, [0] * len(MEM_KEYS), True

    def refresh_states(self, names: Iterable[str], state: Callable[[str], str | None]) -> None:
        """Re-read the state of ``names`` (None: the host is gone)."""
        states, hosts = self.states, self.hosts
        for name in names:
            old, new = states.get(name), state(name)
            if old == new:
                continue
            if old is not None:
                hosts[old] -= 1
                if not hosts[old]:
                    del hosts[old]
            if new is None:
                del states[name]
            else:
                states[name] = new
                hosts[new] += 1

    def sum_mem(self, capacities: Iterable[int], figures: Collection[HostTotals | HostMem]) -> None:
        """Capacity of every host given (the caller leaves unavail ones out), and the other sums over the hosts' totals (the ledger's, or
        as a heartbeat event reported them for a host whose samples the ledger has not taken)."""
        self.mem = [sum(capacities), *(sum(map(get, figures)) for get in _FIGURES)]
        self.mem_dirty = False

    def mem_dict(self) -> dict[str, int]:
        return dict(zip(MEM_KEYS, self.mem, strict=True))
