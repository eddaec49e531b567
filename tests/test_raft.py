"""The Raft adapter on its own: batches apply through pysyncobj, the journal stays bounded,
and a restarted node recovers every committed entry from its dump and journal."""

from __future__ import annotations

import threading
from pathlib import Path

from conftest import wait_for

from xce.cli.up import free_port
from xce.core.model import JobSpec, Queue
from xce.core.resreq import parse_resreq
from xce.core.state import SetQueues, Submit, encode_batch
from xce.daemons.raft import ReplicatedState, make_conf


def node(tmp: Path, port: int) -> ReplicatedState:
    conf = make_conf(str(tmp / "raft.journal"), str(tmp / "raft.dump"), "pw", 0.02, 0.001, (0.1, 0.2),
                     bind=f"127.0.0.1:{port}", compact_entries=50, compact_seconds=0.01)
    return ReplicatedState(f"127.0.0.1:{port}", [], conf, lambda: None)


def commit(r: ReplicatedState, cmds: list) -> list:
    done = threading.Event()
    out: list = []
    r.apply_batch(encode_batch(cmds), callback=lambda res, err: (out.append((res, err)), done.set()))
    assert done.wait(10), "no commit"
    assert out[0][1] == 0, out
    return out[0][0]


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
