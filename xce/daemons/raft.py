"""The thin adapter between ClusterState and pysyncobj.

One replicated method, ``apply_batch``, carries a MessagePack-encoded list of
commands: the controller batches every command of one event-loop turn into one
log entry (the brief measured 200k+ updates/s that way).  pysyncobj pickles
its own log entries, so the Raft port must stay private and password-protected.

Attributes set before ``super().__init__`` are pysyncobj's "not replicated"
ones: the locks, the notification hook, ``elected`` and ``changes``, what applied batches
changed since the shell last took them (``take_changes``).  ``self.state`` and ``self.backlog``
are replicated and are what snapshots (pysyncobj's full dump) persist.

The Raft thread never waits for the controller's loop.  The loop holds ``lock`` while it
reads the state (a reactor, ``on_applied``, the timers), for seconds at a time when a
batch of thousands of placements is carried out or a new leader takes over; an apply
that waited for it left the node silent (no append-entries sent, no vote read) and the
followers elected another leader, whose own take-over then did the same.  So a committed
entry is applied at once only when ``lock`` is free, nothing waits before it, and it is
small (``APPLY_IN_RAFT_THREAD``); otherwise it joins ``backlog`` and the loop applies it
(``apply_backlog``) before it next reads.  Either way entries apply
in log order, and the controller's continuations get each command's result.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from pysyncobj import SyncObj, SyncObjConf, replicated
from pysyncobj.journal import dumps
from pysyncobj.serializer import SERIALIZER_STATE

from xce.core.result import Result
from xce.core.state import Changes, ClusterState, decode_batch

log = logging.getLogger("xce.raft")


# The largest entry the Raft thread applies itself.  A scheduler's PLACE of 50,000 placements
# is one entry of several MB; applied in the Raft thread it held every controller's thread for
# 5-7 s at 5,000 hosts (about 100 us a placement, holding the GIL between two ticks), so the
# followers answered nothing and elected again.  The loop applies such an entry instead: the
# interpreter hands the GIL to the Raft thread every few milliseconds meanwhile, and a 64 KiB
# entry (some 700 placements) applies within a fraction of the shortest election timeout.
APPLY_IN_RAFT_THREAD = 64 * 1024


class Pending:
    """The results of a committed entry that waited in the backlog: set when the loop applies it."""

    __slots__ = ("results",)

    def __init__(self) -> None:
        self.results: list[Result] | None = None


class ReplicatedState(SyncObj):
    def __init__(self, self_addr: str, partners: list[str], conf: SyncObjConf,
                 on_applied: Callable[[], None]) -> None:
        self.lock = threading.RLock()  # the state's readers (the loop) against its writers
        # Held while the state changes, by either thread, and across the dump's fork: the
        # forked copy is never taken in the middle of an apply (the loop's, from the backlog).
        self.apply_lock = threading.Lock()
        self.gate = DumpGate(self.apply_lock)
        self.on_applied = on_applied
        self.changes = Changes()  # accumulated across batches until the shell takes them
        self.stall_warn = conf.raftMinTimeout  # a tick gap this long lets a follower's election timer fire
        self.last_tick = 0.0
        # (term, index of its no-op) of this node's last election; before super().__init__,
        # whose Raft thread may elect this node at once
        self.elected: tuple[int, int] = (-1, 0)
        super().__init__(self_addr, partners, conf)
        if conf.useFork and conf.autoTick:
            detach_dump_children(getattr(self, "_SyncObj__thread"), self.gate)
        self.state = ClusterState()
        self.backlog: list[tuple[bytes, Pending]] = []  # committed, not yet applied (see the module doc)
        if not partners:
            self.addOnTickCallback(self._commit_alone)
        self.addOnTickCallback(self._watch_ticks)

    def _watch_ticks(self) -> None:
        """Say when the Raft thread went quiet long enough to cost an election: it then sent
        no append-entries and read no votes (a starved process, or a long apply)."""
        now = time.monotonic()
        if self.last_tick and now - self.last_tick > self.stall_warn:
            log.warning("the Raft thread did not tick for %.2f s; a follower's election timer fires from %.2f s",
                        now - self.last_tick, self.stall_warn)
        self.last_tick = now

    def _commit_alone(self) -> None:
        """A lone controller commits and applies its own entries in the tick that appended them.

        pysyncobj counts the commit index before it appends the entries queued in a tick,
        and only a peer's answer (a socket event) or the tick period ends the wait after
        it.  With no peers a new entry would wait a whole tick period per commit.  It used
        to be woken for a second tick through its pipe; that tick's wake-up, poll and walk
        were a third of the Raft thread's CPU per entry.  Alone, the majority is this node:
        an entry of the current term commits once appended (journalled; synced first with
        durability "fsync"), and every entry before it with it, pysyncobj's own rule (the
        leader's loop in ``_onTick``); an older term's last entry still waits for the tick.
        Reads pysyncobj's private names, pinned by the version range in pyproject.toml.
        """
        last = self._SyncObj__getCurrentLogIndex()
        if self._SyncObj__raftCommitIndex >= last or not self._isLeader():
            return
        if self._SyncObj__getCurrentLogTerm() != self.raftCurrentTerm:
            self._SyncObj__pipeNotifier.notify()
            return
        self._SyncObj__raftCommitIndex = last
        self._SyncObj__raftLog.setRaftCommitIndex(last)
        self._SyncObj__applyLogEntries()

    @replicated
    def apply_batch(self, blob: bytes) -> list[Result] | Pending:
        """Apply a small committed entry now if the loop is not reading; leave a large one, or
        any while the loop has entries waiting, to the loop."""
        results: list[Result] | Pending
        if len(blob) <= APPLY_IN_RAFT_THREAD and not self.backlog and self.lock.acquire(blocking=False):
            try:
                with self.apply_lock:
                    results = self._apply(blob)
            finally:
                self.lock.release()
        else:
            # No apply_lock: the dump forks from this thread, never during this append.
            results = Pending()
            self.backlog.append((blob, results))
        self.on_applied()
        return results

    def apply_backlog(self) -> None:
        """Apply the committed entries that waited (call under ``lock``)."""
        while self.backlog:
            self.gate.open.wait(1.0)  # a dump about to fork goes first: at most one apply before it
            with self.apply_lock:
                blob, pending = self.backlog[0]
                pending.results = self._apply(blob)
                del self.backlog[0]

    def _apply(self, blob: bytes) -> list[Result]:
        """Under ``lock`` and ``apply_lock``."""
        results, changes = self.state.apply_batch(decode_batch(blob))
        self.changes.merge(changes)
        return results

    def take_changes(self) -> Changes:
        """What was applied since the last call (call under ``lock``)."""
        changes, self.changes = self.changes, Changes()
        return changes

    def _SyncObj__onMessageReceived(self, node: Any, message: dict[str, Any]) -> None:
        """pysyncobj's handler, with Raft's append rule in front of its append-entries (``raft_append``)."""
        if message.get("type") == "append_entries" and "prevLogIdx" in message and "transmission" not in message:
            message = raft_append(message, self._term_at, self._SyncObj__getCurrentLogIndex())
        SyncObj._SyncObj__onMessageReceived(self, node, message)  # type: ignore[attr-defined]

    def _term_at(self, idx: int) -> int | None:
        got = self._SyncObj__getEntries(idx, 1)
        return int(got[0][2]) if got else None

    # ---- status, read from pysyncobj without touching its internals' names elsewhere ----

    def is_leader(self) -> bool:
        return bool(self._isLeader())

    def inherited_applied(self) -> bool:
        """Whether this leader has applied its term's first entry (pysyncobj's no-op, appended on
        election) and every entry before it, the backlog included: from then on its state holds
        everything any earlier leader committed (Raft sec. 8).  Reads pysyncobj's private names,
        pinned by the version range in pyproject.toml."""
        term, noop = self.elected
        return term == self.raftCurrentTerm and self._SyncObj__raftLastApplied >= noop and not self.backlog

    def _SyncObj__onBecomeLeader(self) -> None:
        """pysyncobj's, noting the term and index of the no-op it appends (one assignment, read
        by the loop's thread: a leader's state flag is set before its no-op's index is)."""
        SyncObj._SyncObj__onBecomeLeader(self)  # type: ignore[attr-defined]
        self.elected = (self.raftCurrentTerm, self._SyncObj__noopIDx)

    def leader(self) -> str | None:
        node = self._getLeader()
        return None if node is None else str(node.address if hasattr(node, "address") else node)

    def term(self) -> int:
        return int(self.raftCurrentTerm)

    def status(self) -> dict[str, Any]:
        return dict(self.getStatus())


def raft_append(message: dict[str, Any], term_at: Callable[[int], int | None], last: int) -> dict[str, Any]:
    """An append-entries message as pysyncobj should take it under Raft's rule.

    Raft (Ongaro and Ousterhout, fig. 2): a follower deletes its entries only from the first
    one that *conflicts* with the leader's (same index, other term).  pysyncobj deletes every
    entry after ``prevLogIdx`` whenever its log is longer, and then appends the message's.  A
    message that arrives after a later one did (the leader sends from ``nextIndex`` every
    period without waiting for the answer, and resets it after a refusal) so cut entries the
    follower had already acknowledged: the leader counted them towards a commit and never
    lowers its match index, so for a while a committed entry was on fewer controllers than
    the leader believed, and a leader dying then could take an acknowledged write with it
    (seen at 5,000 hosts as pysyncobj's "truncating already-applied log entries").

    So the entries the follower already holds with the same term are left out of the message,
    and ``prevLogIdx`` names the last of them:
    - some conflict: pysyncobj deletes from the first conflicting one, as Raft does;
    - the rest are new: they are appended after the follower's last, nothing is deleted;
    - every one is held already, and the follower's last entry is of the leader's term: the
      message names that last entry, so nothing is deleted and the answer acknowledges the
      follower's log to its end.  An entry of the leader's term was made by that leader,
      and two logs holding the same index and term are the same up to it (Log Matching), so
      the follower's whole log is the leader's up to there;
    - every one is held, and the tail beyond is of an older term: it may differ from the
      leader's, so it goes, as pysyncobj had it (none of it can have counted towards a
      commit: this leader commits only at an entry of its own term).
    A message whose ``prevLogIdx`` the follower cannot match is left to pysyncobj's refusal.
    """
    entries = message.get("entries") or []
    if term_at(message["prevLogIdx"]) != message["prevLogTerm"]:
        return message
    k = 0
    while k < len(entries) and term_at(entries[k][1]) == entries[k][2]:
        k += 1
    if k == len(entries) and last > message["prevLogIdx"] + k and term_at(last) == message["term"]:
        return {**message, "prevLogIdx": last, "prevLogTerm": message["term"], "entries": []}
    if k == 0:
        return message
    return {**message, "prevLogIdx": entries[k - 1][1], "prevLogTerm": entries[k - 1][2], "entries": entries[k:]}


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
        # The full dump is written by a forked child (pysyncobj's own path): pickling the state
        # in the Raft thread took seconds at 40,000 jobs (~75 us a job), during which the node
        # sent and answered nothing, so every compaction cost the leadership (followers
        # elected, or a follower woke past its election deadline and started one); the fork
        # snapshots the state copy-on-write in ~10 ms.  The child touches no ZeroMQ (see
        # ``install_dump_child_hook``); it pickles, writes raft.dump.tmp, renames, exits.
        useFork=True,
        # Each node compacts only in its own slice of the compaction period, so the three
        # children's pickling does not land on the same seconds of a shared machine.
        logCompactionSplit=True,
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


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
class DumpGate:
    """The dump's fork against the loop's applies of the backlog.

    The fork takes ``apply_lock``; a lock goes to whoever asks first, and the loop, applying
    a long backlog entry after entry, asked again at once: the Raft thread waited for the
    whole backlog (7-11 s at 2,000 hosts x 20 jobs).  While ``open`` is clear the loop
    starts no new apply."""

    def __init__(self, apply_lock: threading.Lock) -> None:
        self.lock = apply_lock
        self.open = threading.Event()
        self.open.set()

    def before_fork(self) -> None:
        self.open.clear()
        self.lock.acquire()

    def after_fork(self) -> None:
        self.lock.release()
        self.open.set()


_dump_threads: dict[threading.Thread, tuple[int, DumpGate]] = {}  # a Raft thread -> (PID, its gate)


def detach_dump_children(thread: threading.Thread, gate: DumpGate) -> None:
    """Fork the dump writer of Raft thread ``thread`` between two applies, and make it hold
    nothing of its parent's but memory.

    pysyncobj forks the child from its Raft thread to write the full dump; the loop may be
    applying the backlog then, so the fork waits for the apply under way (``DumpGate``).
    In the child only the forking thread exists.  It closes every inherited
    descriptor -- ZeroMQ's sockets, the Raft port, the journal -- so a connection the
    parent drops is not held open by the child, and asks the kernel for SIGKILL when the
    forking thread ends, so a killed or stopped controller leaves no writer behind (its
    raft.dump.tmp is never renamed).  A fork from any other thread is left alone.
    """
    if not _dump_threads:
        os.register_at_fork(before=_before_dump_fork, after_in_parent=_after_dump_fork,
                            after_in_child=_detach_dump_child)
    _dump_threads[thread] = (os.getpid(), gate)


def _before_dump_fork() -> None:
    mine = _dump_threads.get(threading.current_thread())  # the object: a new thread may reuse an ident
    if mine is not None:
        mine[1].before_fork()


def _after_dump_fork() -> None:
    mine = _dump_threads.get(threading.current_thread())
    if mine is not None:
        mine[1].after_fork()


def _detach_dump_child() -> None:
    mine = _dump_threads.get(threading.current_thread())
    if mine is None:
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the child still ends when its dump is written
        pass
    if os.getppid() != mine[0]:  # the controller died before prctl took effect
        os._exit(1)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))


def make_durable(obj: SyncObj, journal: str, dump: str) -> None:
    """durability = "fsync": the journal's appends (``fsync_journal``) and the full dumps that
    replace its entries (``SyncedDumps``) reach the disk before Raft relies on them."""
    fsync_journal(obj, journal)
    setattr(obj, "_SyncObj__serializer", SyncedDumps(getattr(obj, "_SyncObj__serializer"), dump))


class SyncedDumps:
    """pysyncobj's full-dump writer, whose success waits until the dump is on disk.

    pysyncobj's forked child writes raft.dump.tmp and renames it over raft.dump; on the
    child's success the Raft thread deletes the journal entries the dump holds.  Neither
    fsyncs, so after a power cut the journal could be cut while the dump's blocks (or its
    rename) were still in the page cache: committed entries gone.  Here the child's success
    is reported as still serializing while a thread syncs the dump and its directory, and as
    success once they are synced (failure if the sync fails: the journal is kept, and the
    next compaction tries again).  The Raft thread itself never waits on the disk.  Reads
    pysyncobj's private serializer interface, pinned by the version range in pyproject.toml.
    """

    def __init__(self, inner: Any, path: str) -> None:
        self.inner, self.path = inner, path
        self.syncing: tuple[threading.Thread, Any, list[OSError]] | None = None

    def checkSerializing(self) -> tuple[int, Any]:  # noqa: N802 - pysyncobj's name
        if self.syncing is not None:
            thread, sid, errors = self.syncing
            if thread.is_alive():
                return SERIALIZER_STATE.SERIALIZING, sid
            self.syncing = None
            if errors:
                log.warning("the full dump %s could not be synced (%s); its journal entries are kept",
                            self.path, errors[0])
                return SERIALIZER_STATE.FAILED, sid
            return SERIALIZER_STATE.SUCCESS, sid
        status, sid = self.inner.checkSerializing()
        if status != SERIALIZER_STATE.SUCCESS:
            return status, sid
        errors: list[OSError] = []
        thread = threading.Thread(target=_sync_file, args=(self.path, errors), name="xce-dump-sync", daemon=True)
        self.syncing = (thread, sid, errors)
        thread.start()
        return SERIALIZER_STATE.SERIALIZING, sid

    def serialize(self, data: Any, id: Any) -> None:  # noqa: A002 - pysyncobj's signature
        if self.syncing is None:  # pysyncobj starts one only when told it is not serializing
            self.inner.serialize(data, id)

    def __getattr__(self, name: str) -> Any:  # transmissions to followers, deserialize: the inner's
        return getattr(self.inner, name)


def _sync_file(path: str, errors: list[OSError]) -> None:
    """fsync ``path`` and then its directory (the rename that put it there)."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError as e:
        errors.append(e)


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
