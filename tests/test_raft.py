"""The Raft adapter on its own: batches apply through pysyncobj, the journal stays bounded,
and a restarted node recovers every committed entry from its dump and journal."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from conftest import wait_for

from xce.cli.up import free_port
from xce.core.model import JobSpec, Queue
from xce.core.resreq import parse_resreq
from xce.core.state import SetQueues, Submit, encode_batch
from xce.daemons.raft import ReplicatedState, make_conf


class LoopStandIn:
    """The controller's loop as the Raft adapter sees it: woken by each apply, it applies what
    waits in the backlog, under the state lock, from its own thread."""

    def __init__(self) -> None:
        self.woken = threading.Event()
        self.stopped = False

    def wake(self) -> None:
        self.woken.set()

    def start(self, r: ReplicatedState) -> ReplicatedState:
        def run() -> None:
            while not self.stopped and not getattr(r, "_SyncObj__destroying", False):  # ends with the node
                if self.woken.wait(0.05):
                    self.woken.clear()
                    with r.lock:
                        r.apply_backlog()
        threading.Thread(target=run, daemon=True, name="loop").start()
        return r


def node(tmp: Path, port: int, **conf_kw: float) -> ReplicatedState:
    kw = {"compact_entries": 50, "compact_seconds": 0.01, **conf_kw}
    conf = make_conf(str(tmp / "raft.journal"), str(tmp / "raft.dump"), "pw", 0.02, 0.001, (0.1, 0.2),
                     bind=f"127.0.0.1:{port}", **kw)
    loop = LoopStandIn()
    return loop.start(ReplicatedState(f"127.0.0.1:{port}", [], conf, loop.wake))


def commit(r: ReplicatedState, cmds: list) -> list:
    from xce.daemons.raft import Pending

    done = threading.Event()
    out: list = []
    r.apply_batch(encode_batch(cmds), callback=lambda res, err: (out.append((res, err)), done.set()))
    assert done.wait(10), "no commit"
    assert out[0][1] == 0, out
    res = out[0][0]
    if isinstance(res, Pending):  # a large entry: the loop applies it
        wait_for(lambda: res.results is not None, 10, "the loop to apply it")
        return res.results
    return res


def tick_gaps() -> tuple[list[float], Callable[[], None]]:
    """A tick callback for the Raft thread, and the seconds between its calls as it records them."""
    gaps: list[float] = []
    last = [time.monotonic()]

    def tick() -> None:
        now = time.monotonic()
        gaps.append(now - last[0])
        last[0] = now
    return gaps, tick


def test_journal_is_compacted_and_a_restart_recovers_every_entry(tmp_path: Path) -> None:
    port = free_port()
    r = node(tmp_path, port)
    try:
        wait_for(r.is_leader, 10, "a leader")
        commit(r, [SetQueues(time=1.0, queues=[Queue(name="normal")], default_queue="normal")])
        spec, req = JobSpec(command=["true"]), parse_resreq("")
        for i in range(400):
            commit(r, [Submit(time=2.0 + i, specs=[spec], reqs=[req], key=f"k{i}")])
        # 400 entries went in; compaction keeps the journal near its 50-entry threshold.
        wait_for(lambda: r.status()["log_len"] < 200, 20, "the journal to be compacted")
        assert (tmp_path / "raft.dump").exists()
        before = r.state.__getstate__()
    finally:
        r.destroy()
        wait_for(lambda: not r.tick_thread_alive(), 10, "the old node to stop")
    again = node(tmp_path, port)
    try:
        wait_for(lambda: again.state.applied >= before["applied"], 20, "the restarted node to replay")
        assert again.state.__getstate__() == before
        assert len(again.state.jobs) == 400
    finally:
        again.destroy()


def test_fsync_durability_syncs_the_term_and_vote_file_too(tmp_path: Path, monkeypatch) -> None:
    import os

    from xce.daemons.raft import fsync_journal

    port = free_port()
    r = node(tmp_path, port)
    try:
        fsync_journal(r, str(tmp_path / "raft.journal"))
        synced: list[int] = []
        real = os.fsync
        monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
        journal = getattr(r, "_SyncObj__raftLog")
        journal.setCurrentTerm(7, None)
        assert len(synced) >= 2  # the file and its directory (the rename)
        from pysyncobj.journal import loads

        meta = loads((tmp_path / "raft.journal.meta").read_bytes())
        assert meta["currentTerm"] == 7
    finally:
        r.destroy()


def test_a_batch_answers_each_command_with_a_tagged_result_holding_the_error_whole(tmp_path: Path) -> None:
    from xce.core.errors import NotFound
    from xce.core.result import Err, Ok
    from xce.core.state import Modify

    r = node(tmp_path, free_port())
    try:
        wait_for(r.is_leader, 10, "a leader")
        ok, err = commit(r, [SetQueues(time=1.0, queues=[Queue(name="normal")], default_queue="normal"),
                             Modify(time=2.0, job_id=9, mem_limit=None, key="k", by="alice")])
        assert ok == Ok("ok")
        assert isinstance(err, Err) and type(err.error) is NotFound and err.error.message == "job 9 is not known"
    finally:
        r.destroy()


def test_a_full_dump_of_a_large_state_does_not_stall_the_raft_thread(tmp_path: Path) -> None:
    """The full dump is written by a forked child: the Raft thread keeps ticking meanwhile.

    Fails on the old code, which pickled the state in the Raft thread: at 40,000 jobs a dump
    took 24-35 s there (docs/benchmarks.md, the fleet), and a node that does not tick sends
    no append-entries, so every compaction cost the leadership."""
    import gzip
    import pickle

    r = node(tmp_path, free_port(), compact_entries=10**6, compact_seconds=0.5)
    dump = tmp_path / "raft.dump"
    try:
        wait_for(r.is_leader, 10, "a leader")
        commit(r, [SetQueues(time=1.0, queues=[Queue(name="normal")], default_queue="normal")])
        spec, req = JobSpec(command=["true"]), parse_resreq("")
        n = 20_000  # its pickling in the Raft thread takes 1-3 s on this machine
        for i in range(0, n, 2000):
            commit(r, [Submit(time=2.0 + i, specs=[spec] * 2000, reqs=[req] * 2000, key=f"k{i}")])
        with r.lock:  # what a dump in the Raft thread would cost it, on this machine, now
            t0 = time.perf_counter()
            pickle.dumps(r.state)
            in_thread = time.perf_counter() - t0
        committed = time.time()
        gaps, tick = tick_gaps()
        r.addOnTickCallback(tick)
        wait_for(lambda: dump.exists() and dump.stat().st_mtime > committed and r.status()["log_len"] <= 3, 60,
                 "a full dump holding every job")
        r.removeOnTickCallback(tick)
        assert max(gaps) < in_thread / 2, (max(gaps), in_thread)
    finally:
        r.destroy()
    with gzip.open(dump) as f:
        assert len(pickle.load(f)[0]["state"].jobs) == n


def test_a_dump_writer_forked_from_the_raft_thread_holds_none_of_its_parents_descriptors(tmp_path: Path) -> None:
    """It keeps no socket of the controller open (a dropped peer stays dropped) and ends with
    the thread that forked it; a fork from any other thread is left alone."""
    import json
    import os
    import signal

    from xce.daemons.raft import DumpGate, detach_dump_children

    held = os.open(tmp_path / "held", os.O_CREAT | os.O_RDWR)  # stands for a socket of the parent

    def fork_and_list(out: Path) -> None:
        pid = os.fork()
        if pid == 0:  # the child: its descriptors and the signal it gets when the forking thread ends
            import ctypes

            fds = [int(fd) for fd in os.listdir("/proc/self/fd")]  # the listing's own fd included
            sig = ctypes.c_int(0)
            ctypes.CDLL(None).prctl(2, ctypes.byref(sig))  # PR_GET_PDEATHSIG
            out.write_text(json.dumps({"fds": fds, "pdeathsig": sig.value}))
            os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0

    def raft_thread() -> None:
        detach_dump_children(threading.current_thread(), DumpGate(threading.Lock()))
        fork_and_list(tmp_path / "dump-child")

    try:
        t = threading.Thread(target=raft_thread)
        t.start()
        t.join()
        other = threading.Thread(target=fork_and_list, args=(tmp_path / "other-child",))
        other.start()
        other.join()
        dump = json.loads((tmp_path / "dump-child").read_text())
        assert held not in dump["fds"] and len(dump["fds"]) <= 4, dump  # 0, 1, 2 and the listing's
        assert dump["pdeathsig"] == signal.SIGKILL
        other = json.loads((tmp_path / "other-child").read_text())
        assert held in other["fds"] and other["pdeathsig"] == 0, other
    finally:
        os.close(held)


def test_a_commit_while_the_loop_reads_waits_in_the_backlog_and_the_raft_thread_keeps_ticking(tmp_path: Path) -> None:
    """The loop holds the state lock while it reads (seconds, when a new leader takes over):
    the Raft thread commits and ticks meanwhile, and the loop applies the backlog in order.

    Fails on the old code: its apply waited for the lock, so nothing committed and no
    append-entries went out while the loop read (the followers elected another leader)."""
    from xce.core.result import Ok
    from xce.daemons.raft import Pending

    r = node(tmp_path, free_port())
    try:
        wait_for(r.is_leader, 10, "a leader")
        commit(r, [SetQueues(time=1.0, queues=[Queue(name="normal")], default_queue="normal")])
        spec, req = JobSpec(command=["true"]), parse_resreq("")
        got: list = []
        gaps, tick = tick_gaps()
        with r.lock:  # the loop, reading
            r.addOnTickCallback(tick)
            for i in range(3):
                r.apply_batch(encode_batch([Submit(time=2.0 + i, specs=[spec], reqs=[req], key=f"k{i}")]),
                              callback=lambda res, err: got.append((res, err)))
            wait_for(lambda: len(got) == 3, 10, "three commits while the lock is held")
            time.sleep(0.5)  # a long read: the Raft thread must keep ticking through it
            r.removeOnTickCallback(tick)
            assert all(isinstance(res, Pending) and res.results is None and err == 0 for res, err in got)
            assert r.state.jobs == {}  # nothing applied under the reader's feet
            r.apply_backlog()
        assert max(gaps) < 0.25, max(gaps)
        assert [res.results for res, _ in got] == [[Ok([1])], [Ok([2])], [Ok([3])]]
        assert sorted(r.state.jobs) == [1, 2, 3] and r.backlog == []
        assert commit(r, [Submit(time=9.0, specs=[spec], reqs=[req], key="k9")]) == [Ok([4])]  # applied at once
    finally:
        r.destroy()



def follower(tmp: Path) -> tuple[ReplicatedState, object, list[dict]]:
    """A controller's Raft node that never ticks (no election of its own), with one peer that
    does not exist: the messages a leader would send are handed to it directly, and what it
    answers is recorded."""
    port, peer = free_port(), free_port()
    conf = make_conf(str(tmp / "raft.journal"), str(tmp / "raft.dump"), "pw", 0.02, 0.001, (5.0, 10.0),
                     bind=f"127.0.0.1:{port}")
    conf.autoTick = False
    r = ReplicatedState(f"127.0.0.1:{port}", [f"127.0.0.1:{peer}"], conf, lambda: None)
    answers: list[dict] = []
    r._SyncObj__transport.send = lambda node, msg: answers.append(msg) or True  # type: ignore[attr-defined]
    return r, next(iter(r._SyncObj__otherNodes)), answers  # type: ignore[attr-defined]


def append(r: ReplicatedState, leader: object, prev: tuple[int, int], entries: range, term: int, commit: int,
           entry_term: int | None = None) -> None:
    r._SyncObj__onMessageReceived(leader, {  # type: ignore[attr-defined]
        "type": "append_entries", "term": term, "commit_index": commit, "prevLogIdx": prev[0],
        "prevLogTerm": prev[1], "entries": [(b"", i, entry_term or term) for i in entries]})


def log_of(r: ReplicatedState) -> list[tuple[int, int]]:
    return [(e[1], e[2]) for e in r._SyncObj__raftLog]  # type: ignore[attr-defined]


def test_a_late_append_never_cuts_entries_the_follower_acknowledged(tmp_path: Path) -> None:
    # Fails on pysyncobj's own rule: the late message (entries 9-12) deleted 13-15, which the
    # follower had acknowledged and the leader had committed (commit index 15).
    r, leader, answers = follower(tmp_path)
    try:
        append(r, leader, (1, 0), range(2, 16), term=1, commit=1)
        assert answers[-1]["next_node_idx"] == 16
        append(r, leader, (8, 1), range(9, 13), term=1, commit=15)
        assert log_of(r)[-1] == (15, 1) and len(log_of(r)) == 15
        assert answers[-1]["success"] and answers[-1]["next_node_idx"] == 16
        append(r, leader, (5, 1), range(0), term=1, commit=15)  # a late heartbeat: the same
        assert log_of(r)[-1] == (15, 1)
        append(r, leader, (15, 1), range(16, 18), term=1, commit=15)  # new entries still come in
        assert log_of(r)[-1] == (17, 1)
    finally:
        r.destroy()


def test_a_conflicting_entry_is_still_replaced_with_everything_after_it(tmp_path: Path) -> None:
    r, leader, answers = follower(tmp_path)
    try:
        append(r, leader, (1, 0), range(2, 11), term=1, commit=1)  # 2-10 of term 1, 2-4 committed
        # A leader of term 2 whose log has 2-6 of term 1 and 7-8 of its own.
        append(r, leader, (4, 1), range(5, 7), term=2, commit=4, entry_term=1)
        # 5-6 match; 7-10 of term 1 may differ from the new leader's log, and go.
        assert log_of(r)[-1] == (6, 1) and answers[-1]["next_node_idx"] == 7
        append(r, leader, (6, 1), range(7, 9), term=2, commit=4)
        assert log_of(r)[6:] == [(7, 2), (8, 2)]
        append(r, leader, (6, 1), range(7, 8), term=3, commit=8)  # a leader of term 3: a conflict at 7
        assert log_of(r)[6:] == [(7, 3)]
    finally:
        r.destroy()


def test_a_large_entry_is_applied_by_the_loop_not_the_raft_thread(tmp_path: Path) -> None:
    """A scheduler's PLACE of 50,000 placements is one entry of several MB; the Raft thread
    applied it itself when the state lock was free and sent nothing for 5-7 s (5,000 hosts),
    and the followers elected again.  Fails on the old code: the Raft thread applied it."""
    from xce.daemons.raft import APPLY_IN_RAFT_THREAD

    r = node(tmp_path, free_port(), compact_entries=10**6, compact_seconds=60)
    try:
        wait_for(r.is_leader, 10, "a leader")
        commit(r, [SetQueues(time=1.0, queues=[Queue(name="normal")], default_queue="normal")])
        spec, req = JobSpec(command=["true"]), parse_resreq("")
        by: list[str] = []
        apply = r.state.apply_batch

        def recorded(cmds: list) -> tuple:
            by.append(threading.current_thread().name)
            return apply(cmds)
        r.state.apply_batch = recorded  # type: ignore[method-assign]
        small = [Submit(time=2.0, specs=[spec], reqs=[req], key="small")]
        assert len(encode_batch(small)) <= APPLY_IN_RAFT_THREAD
        commit(r, small)
        big = [Submit(time=3.0, specs=[spec] * 5000, reqs=[req] * 5000, key="big")]
        assert len(encode_batch(big)) > APPLY_IN_RAFT_THREAD
        results = commit(r, big)
        assert len(results[0].value) == 5000 and len(r.state.jobs) == 5001
        assert by[0] != "loop" and by[1] == "loop", by  # the small one at once, the big one by the loop
    finally:
        r.destroy()


def test_a_leader_has_applied_what_it_inherited_only_after_its_own_no_op_and_the_backlog(tmp_path: Path) -> None:
    """``inherited_applied`` (table.serve's gate for a new leader, Raft sec. 8): false until this
    node leads and has applied its election's no-op, and while committed entries wait in the
    backlog; the election noted is this term's."""
    from xce.daemons.controller import RaftPort

    r = node(tmp_path, free_port())
    try:
        port = RaftPort(r, {})
        wait_for(r.inherited_applied, 10, "the leader to apply its no-op")
        term, noop = r.elected
        assert term == r.term() and noop >= 1 and port.caught_up()
        spec, req = JobSpec(command=["true"]), parse_resreq("")
        got: list = []
        with r.lock:  # the loop reads: a commit waits in the backlog
            r.apply_batch(encode_batch([Submit(time=2.0, specs=[spec], reqs=[req], key="k")]),
                          callback=lambda res, err: got.append((res, err)))
            wait_for(lambda: got, 10, "a commit")
            assert r.backlog and not r.inherited_applied()
            assert port.caught_up()  # once caught up, for the rest of the term: its own entries follow in order
            r.apply_backlog()
        assert r.inherited_applied()
        r.elected = (term - 1, noop)  # an election of an earlier term says nothing of this one
        assert not r.inherited_applied()
    finally:
        r.destroy()


def test_with_fsync_durability_a_full_dump_is_on_disk_before_the_journal_it_replaces_is_cut(tmp_path: Path,
                                                                                          monkeypatch) -> None:
    """pysyncobj renames its dump into place and then deletes the journal entries it holds, and
    never fsyncs the dump: after a power cut the journal was cut and the dump's data could be
    gone, committed entries with it.  Under durability "fsync" the compaction counts as done
    only once the dump file and its directory are synced (from a thread of their own: the Raft
    thread never waits on the disk)."""
    import os

    from xce.daemons.raft import make_durable

    synced: list[tuple[str, int]] = []  # (path, the journal's length then)
    real = os.fsync
    r: ReplicatedState | None = None

    def fsync(fd: int) -> None:
        real(fd)
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.endswith("raft.dump") or path == str(tmp_path):
            synced.append((path, r.status()["log_len"] if r is not None else -1))

    monkeypatch.setattr(os, "fsync", fsync)
    r = node(tmp_path, free_port())
    try:
        make_durable(r, str(tmp_path / "raft.journal"), str(tmp_path / "raft.dump"))
        wait_for(r.is_leader, 10, "a leader")
        spec, req = JobSpec(command=["true"]), parse_resreq("")
        for i in range(200):
            commit(r, [Submit(time=2.0 + i, specs=[spec], reqs=[req], key=f"k{i}")])
        wait_for(lambda: r.status()["log_len"] < 100, 20, "the journal to be compacted")
        paths = [p for p, _ in synced]
        first = paths.index(str(tmp_path / "raft.dump"))  # ValueError: never synced
        assert paths[first + 1] == str(tmp_path), synced  # then its directory: the rename
    finally:
        r.destroy()


def test_a_dump_counts_as_written_only_once_synced(tmp_path: Path, monkeypatch) -> None:
    """``SyncedDumps`` between pysyncobj's compaction and its writer: the child's success reads
    as still serializing while the sync runs (the journal is not cut meanwhile), then success;
    a sync that fails reads as failure (the journal is kept)."""
    import os

    from pysyncobj.serializer import SERIALIZER_STATE as ST

    from xce.daemons.raft import SyncedDumps

    class Writer:  # pysyncobj's Serializer as the compaction sees it: the child has just succeeded
        def __init__(self) -> None:
            self.states = [(ST.SUCCESS, 41)]
            self.started: list[int] = []

        def checkSerializing(self):  # noqa: N802
            return self.states.pop(0) if self.states else (ST.NOT_SERIALIZING, None)

        def serialize(self, data, id):  # noqa: A002
            self.started.append(id)

    dump = tmp_path / "raft.dump"
    dump.write_bytes(b"dump")
    go, real = threading.Event(), os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (go.wait(10), real(fd)))
    w = SyncedDumps(Writer(), str(dump))
    assert w.checkSerializing() == (ST.SERIALIZING, 41)
    w.serialize(("data",), 42)
    assert w.inner.started == []  # no new dump while this one is being synced
    assert w.checkSerializing() == (ST.SERIALIZING, 41)
    go.set()
    wait_for(lambda: w.checkSerializing() != (ST.SERIALIZING, 41), 10, "the sync")
    # (the call that saw the end said SUCCESS; the next asks the writer again)
    w2 = SyncedDumps(Writer(), str(dump))
    assert w2.checkSerializing() == (ST.SERIALIZING, 41)
    wait_for(lambda: not w2.syncing[0].is_alive(), 10, "the sync")
    assert w2.checkSerializing() == (ST.SUCCESS, 41) and w2.checkSerializing() == (ST.NOT_SERIALIZING, None)
    w3 = SyncedDumps(Writer(), str(tmp_path / "gone" / "raft.dump"))
    assert w3.checkSerializing() == (ST.SERIALIZING, 41)
    wait_for(lambda: not w3.syncing[0].is_alive(), 10, "the sync")
    assert w3.checkSerializing() == (ST.FAILED, 41)

