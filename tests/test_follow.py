"""The one event follower: its pure parts on built events, and its shell against a real cluster."""

from __future__ import annotations

import time
from pathlib import Path

from conftest import local_cluster

from xce.client import Client
from xce.client.follow import EventFollower, SeqCheck, Sync
from xce.proto.schema import Event, Snapshot
from xce.replica.mirror import Mirror


def ev(seq: int, epoch: str = "e1", **kw) -> Event:  # noqa: ANN003
    return Event(seq=seq, epoch=epoch, time=float(seq), **kw)


def test_seqcheck_counts_gaps_and_epoch_changes() -> None:
    s = SeqCheck()
    assert s.follows(ev(5))              # the first event sets the start
    assert s.follows(ev(6))
    assert not s.follows(ev(8)) and s.gaps == 1
    assert not s.follows(ev(9, "e2")) and s.gaps == 2
    assert s.follows(ev(10, "e2"))


def test_sync_drives_a_plain_mirror_as_the_scheduler_does() -> None:
    m = Mirror()
    s = Sync(m)
    s.requested()
    s.on_event(ev(4), 0.0)               # buffered until the snapshot: after it, so applied
    s.on_snapshot(Snapshot(seq=3, epoch="e1", time=3.0, jobs=[], hosts=[], queues=[], default_queue="normal",
                           live=[], samples=[], reasons={}), 0.0)
    assert s.state == "LIVE" and m.seq == 4 and s.snapshots == 1
    s.on_event(ev(6), 0.0)               # seq 5 was lost
    assert s.wants_snapshot and s.gaps == 1 and m.seq == 4


def test_events_timeout_is_total_time_on_a_chatty_cluster(tmp_path: Path) -> None:
    """A cluster publishes heartbeats every 0.2 s here; events(timeout=1) still ends after ~1 s."""
    with local_cluster(tmp_path, "--hosts", "1", "--heartbeat", "0.2") as c:
        t0 = time.monotonic()
        n = sum(1 for _ in c.client.events(timeout=1.5))
        took = time.monotonic() - t0
        assert n > 0, "no event arrived in 1.5 s from a cluster heartbeating every 0.2 s"
        assert took < 4.0, f"events(timeout=1.5) took {took:.1f} s"


def test_a_wait_reads_the_states_only_once_its_subscription_is_live(tmp_path: Path, monkeypatch) -> None:
    """The controller welcomes each subscriber (ZMQ_XPUB_WELCOME_MSG), and ``Client.wait`` reads
    the states only after that: before, an end published while its subscription was still on its
    way was lost, and the wait woke only at its re-read, ``poll`` s later (half the waits of a
    job just submitted).  With ``poll`` an hour, each wait here can only end on the event."""
    order: list[str] = []
    settle, states = EventFollower.settle, Client._states
    monkeypatch.setattr(EventFollower, "settle", lambda f, ms: order.append(f"settled {settle(f, ms)}"))
    monkeypatch.setattr(Client, "_states", lambda c, ids: order.append("states") or states(c, ids))
    with local_cluster(tmp_path, "--hosts", "1") as c:
        for _ in range(5):
            order.clear()
            (jid,) = c.client.submit_many([{"command": ["true"]}])
            (v,) = c.client.wait([jid], timeout=30, poll=3600)
            assert v.state == "DONE"
            assert order == ["settled True", "states"], order
