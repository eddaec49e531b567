"""The thin adapter between ClusterState and pysyncobj.

One replicated method, ``apply_batch``, carries a MessagePack-encoded list of
commands: the controller batches every command of one event-loop turn into one
log entry (the brief measured 200k+ updates/s that way).  pysyncobj pickles
its own log entries, so the Raft port must stay private and password-protected.

Attributes set before ``super().__init__`` are pysyncobj's "not replicated"
ones: the lock, the notification hook and ``changes``, what applied batches changed
since the shell last took them (``take_changes``).  ``self.state`` is replicated and is
what snapshots (pysyncobj's full dump) persist.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from pysyncobj import SyncObj, SyncObjConf, replicated
from pysyncobj.journal import dumps

from xce.core.result import Result
from xce.core.state import Changes, ClusterState, decode_batch


class ReplicatedState(SyncObj):
    def __init__(self, self_addr: str, partners: list[str], conf: SyncObjConf,
                 on_applied: Callable[[], None]) -> None:
        self.lock = threading.RLock()
        self.on_applied = on_applied
        self.changes = Changes()  # accumulated across batches until the shell takes them
        super().__init__(self_addr, partners, conf)
        self.state = ClusterState()
        if not partners:
            self.addOnTickCallback(self._commit_alone)

    def _commit_alone(self) -> None:
        """A lone controller commits its own entries: tick again at once rather than sleep.

        pysyncobj counts the commit index before it appends the entries queued in a tick,
        and only a peer's answer (a socket event) or the tick period ends the wait after
        it.  With no peers a new entry would wait a whole tick period per commit.  Reads
        pysyncobj's private names, pinned by the version range in pyproject.toml.
        """
        if self._SyncObj__raftCommitIndex < self._SyncObj__getCurrentLogIndex() and self._isLeader():
            self._SyncObj__pipeNotifier.notify()

    @replicated
    def apply_batch(self, blob: bytes) -> list[Result]:
        with self.lock:
            results, changes = self.state.apply_batch(decode_batch(blob))
            self.changes.merge(changes)
        self.on_applied()
        return results

    def take_changes(self) -> Changes:
        """What was applied since the last call (call under ``lock``)."""
        changes, self.changes = self.changes, Changes()
        return changes

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
              tick_period: float, election: tuple[float, float], leader_fallback: float = 1.0,
              on_state: Callable[[int, int], None] | None = None, bind: str | None = None,
              compact_entries: int = 20000, compact_seconds: float = 60) -> SyncObjConf:
    return SyncObjConf(
        journalFile=journal, fullDumpFile=dump, password=password or None,
        appendEntriesPeriod=append_period, autoTickPeriod=tick_period,
        # Not pysyncobj's batching: the controller already makes one entry of a loop turn's
        # commands.  Without it, a queued entry wakes the Raft thread through a pipe at once,
        # so the tick period bounds only timers, not commit latency, and can be long enough
        # that an idle tick thread costs next to nothing.
        appendEntriesUseBatch=False,
        raftMinTimeout=election[0], raftMaxTimeout=election[1],
        useFork=False,  # forking a process that runs ZeroMQ threads is not safe
        # Membership is configuration (controller.peers), never what a dump restores.
        # pysyncobj's full dump keeps the node set it had when written, and with dynamic
        # membership it adopts that set on load: a state directory restarted on other
        # Raft ports then counts the old addresses as peers and can never win a majority
        # (docs/ha.md, "Membership").  XCE never issues membership changes.
        dynamicMembershipChange=False, commandsWaitLeader=False,
        # The journal is compacted into a full dump once it holds more than this many
        # entries, or this long after the last dump: it stays bounded.
        logCompactionMinEntries=compact_entries, logCompactionMinTime=compact_seconds,
        leaderFallbackTimeout=leader_fallback,
        bindAddress=bind,  # only the configured interface, never 0.0.0.0
        # Reconnect to a restarted peer quickly, so it hears from the leader before its
        # election timer fires and it does not depose a healthy leader (no pre-vote here).
        connectionRetryTime=0.3, connectionTimeout=max(1.5, election[1]),
        # A batch of thousands of submits is one entry of several MB.  Above this size
        # pysyncobj splits an entry into "transmission" chunks that it reassembles with
        # the pure-Python unpickler (seconds per MB on a follower); below it the entry
        # travels in one message through the C unpickler.
        appendEntriesBatchSizeBytes=2**26,
        onStateChanged=on_state,
    )


def fsync_journal(obj: SyncObj, path: str) -> None:
    """durability = "fsync": every journal append reaches the disk before Raft acts on it.

    pysyncobj's journal is an mmap it never syncs.  Wrapping its ``add`` makes a
    follower fsync before it answers append-entries and the leader before it
    counts itself, so a committed entry is on the disks of a majority; the Raft
    term/vote file is synced too (``store_meta_durably``).  This reaches into
    pysyncobj's private journal attributes, pinned by the version range in
    pyproject.toml.
    """
    journal = getattr(obj, "_SyncObj__raftLog")
    fd = os.open(path, os.O_RDWR)
    original = journal.add

    def add(command: bytes, idx: int, term: int) -> None:
        original(command, idx, term)
        os.fsync(fd)

    journal.add = add
    storer = getattr(journal, "_FileJournal__metaStorer", None)
    if storer is not None:
        storer.storeMeta = lambda meta: store_meta_durably(storer.getPath(), meta)


def store_meta_durably(path: str, meta: dict) -> None:
    """pysyncobj's term/vote file, written as it does (temporary file, rename) but synced.

    Raft's safety needs the current term and the vote on disk before any message that
    shows them leaves; pysyncobj only flushes Python's buffer, so after a power cut a
    node could vote twice in one term.
    """

    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(dumps(meta))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)  # the rename itself
    finally:
        os.close(dfd)
