"""The thin adapter between ClusterState and pysyncobj.

One replicated method, ``apply_batch``, carries a MessagePack-encoded list of
commands: the controller batches every command of one event-loop turn into one
log entry (the brief measured 200k+ updates/s that way).  pysyncobj pickles
its own log entries, so the Raft port must stay private and password-protected.

Attributes set before ``super().__init__`` are pysyncobj's "not replicated"
ones: the lock and the notification hook.  ``self.state`` is replicated and is
what snapshots (pysyncobj's full dump) persist.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pysyncobj import SyncObj, SyncObjConf, replicated

from xce.errors import XceError
from xce.state import ClusterState, decode_batch

Result = tuple[str, Any]  # ("ok", value) or ("err", (code, message))


class ReplicatedState(SyncObj):
    def __init__(self, self_addr: str, partners: list[str], conf: SyncObjConf,
                 on_applied: Callable[[], None]) -> None:
        self.lock = threading.RLock()
        self.on_applied = on_applied
        super().__init__(self_addr, partners, conf)
        self.state = ClusterState()

    @replicated
    def apply_batch(self, blob: bytes) -> list[Result]:
        results: list[Result] = []
        with self.lock:
            for cmd in decode_batch(blob):
                try:
                    results.append(("ok", self.state.apply(cmd)))
                except XceError as e:
                    results.append(("err", (e.code, e.message)))
        self.on_applied()
        return results

    # ---- status, read from pysyncobj without touching its internals' names elsewhere ----

    def is_leader(self) -> bool:
        return bool(self._isLeader())

    def leader(self) -> str | None:
        node = self._getLeader()
        return None if node is None else str(node.address if hasattr(node, "address") else node)

    def term(self) -> int:
        return int(self.raftCurrentTerm)

    def status(self) -> dict[str, Any]:
        return dict(self.getStatus())


def make_conf(journal: str | None, dump: str | None, password: str, append_period: float,
              tick_period: float, election: tuple[float, float],
              on_state: Callable[[int, int], None] | None = None) -> SyncObjConf:
    return SyncObjConf(
        journalFile=journal, fullDumpFile=dump, password=password or None,
        appendEntriesPeriod=append_period, autoTickPeriod=tick_period,
        raftMinTimeout=election[0], raftMaxTimeout=election[1],
        useFork=False,  # forking a process that runs ZeroMQ threads is not safe
        dynamicMembershipChange=True, commandsWaitLeader=False,
        logCompactionMinEntries=20000, logCompactionMinTime=60,
        onStateChanged=on_state,
    )
