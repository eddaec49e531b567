"""xce-top's pure parts: filters, the sync protocol, row sets, recordings, replay, kill outcomes."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from xce.client.follow import Sync
from xce.core.errors import PermissionDenied
from xce.core.model import JobState
from xce.proto.schema import Event, JobSample
from xce.tui import synth
from xce.tui.actions import kill_outcome
from xce.tui.filters import parse
from xce.tui.model import ConsoleModel
from xce.tui.record import Recorder, read
from xce.tui.replay import Player
from xce.tui.rows import RowSet
from xce.tui.testing import FakeActions

FIXTURE = Path(__file__).parent / "fixtures" / "demo.xcerec"
M = 2**20


def snapshot(seq: int = 0, epoch: str = synth.EPOCH):
    recs = synth.demo_records(5)
    snap = msgspec.msgpack.decode(recs[1].body, type=synth.Snapshot)
    return msgspec.structs.replace(snap, seq=seq, epoch=epoch)


def sample_event(seq: int, actual_mb: int = 70, epoch: str = synth.EPOCH) -> Event:
    return Event(seq=seq, epoch=epoch, time=synth.T0 + seq, samples=[JobSample(1, "node1", actual_mb * M, 0, 0.0)])


# ---- filters -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,fields,hay,want", [
    ("user:alice", {"user": ("alice",)}, "", True),
    ("user:bob", {"user": ("alice",)}, "", False),
    ("user:bob,alice", {"user": ("alice",)}, "", True),
    ("!user:alice", {"user": ("alice",)}, "", False),
    ("! user:alice", {"user": ("alice",)}, "", False),
    ("state:run host:node1", {"state": ("run",), "host": ["node1", "node3"]}, "", True),
    ("oom", {}, "10 oom bob killed", True),
    ("!oom", {}, "10 oom bob killed", False),
    ("queue:high oom", {"queue": ("high",)}, "oom", True),
    ("", {}, "", True),
])
def test_filter(text: str, fields: dict, hay: str, want: bool) -> None:
    assert parse(text).match(fields, hay) is want


# ---- the sync protocol ---------------------------------------------------------------------------

def test_events_before_the_snapshot_wait_and_only_later_ones_apply() -> None:
    m = ConsoleModel()
    s = Sync(m, m.lock)
    assert s.wants_snapshot
    s.requested()
    s.on_event(sample_event(1, 10), 1.0)   # already in the snapshot (seq 1)
    s.on_event(sample_event(2, 77), 2.0)   # after it
    s.on_snapshot(snapshot(seq=1), 0.5)
    assert s.state == "LIVE" and m.mirror.seq == 2
    assert m.job_view(1).mem_actual == 77 * M


def test_gap_asks_for_a_new_snapshot() -> None:
    m = ConsoleModel()
    s = Sync(m, m.lock)
    s.requested()
    s.on_snapshot(snapshot(seq=0), 0.0)
    s.on_event(sample_event(1), 1.0)
    assert not s.wants_snapshot
    s.on_event(sample_event(3), 3.0)       # seq 2 was lost
    assert s.wants_snapshot and s.gaps == 1
    s.requested()
    s.on_event(sample_event(4, 90), 4.0)
    s.on_snapshot(snapshot(seq=3), 3.5)    # the buffered seq 4 follows it
    assert s.state == "LIVE" and m.mirror.seq == 4 and m.job_view(1).mem_actual == 90 * M


def test_epoch_change_asks_for_a_new_snapshot_and_old_epochs_are_dropped() -> None:
    m = ConsoleModel()
    s = Sync(m, m.lock)
    s.requested()
    s.on_snapshot(snapshot(seq=0), 0.0)
    s.on_event(sample_event(1, epoch="new-leader"), 1.0)
    assert s.wants_snapshot
    s.requested()
    s.on_event(sample_event(2, epoch="new-leader"), 2.0)
    s.on_snapshot(snapshot(seq=1, epoch="new-leader"), 1.5)
    assert s.state == "LIVE" and m.mirror.epoch == "new-leader" and m.mirror.seq == 2


def test_changes_mark_only_what_changed() -> None:
    m = ConsoleModel()
    s = Sync(m, m.lock)
    s.requested()
    s.on_snapshot(snapshot(), 0.0)
    assert m.take_changes().reset
    s.on_event(sample_event(1), 1.0)
    ch = m.take_changes()
    # usage is marked per host; a row asks whether its job is on one
    assert ch.sampled == {"node1"} and ch.hosts == {"node1"} and not ch.jobs and not ch.hard and not ch.reset
    assert ch.job_changed(m.job(1), 1) and not ch.job_changed(m.job(4), 4)  # 4 runs on node2
    assert m.job_view(1).mem_actual == 70 * M


# ---- row sets ------------------------------------------------------------------------------------

def replayed() -> ConsoleModel:
    m = ConsoleModel()
    Player(read(FIXTURE), m).to_end()
    return m


def test_rowset_sorts_filters_and_inverts() -> None:
    m = replayed()
    rs = RowSet("jobs", "id")
    rs.update(m, m.take_changes(), synth.T0 + 90)
    assert rs.keys == sorted(m.mirror.jobs)
    rs.set_sort("actual", reverse=True)
    rs.update(m, m.take_changes(), synth.T0 + 90)
    assert rs.keys[0] == 7  # the mpi job: 970M over two hosts
    rs.set_filter("user:bob")
    rs.update(m, m.take_changes(), synth.T0 + 90)
    assert {m.mirror.jobs[k].spec.user for k in rs.keys} == {"bob"}
    rs.set_filter("!user:bob")
    rs.update(m, m.take_changes(), synth.T0 + 90)
    assert rs.keys and "bob" not in {m.mirror.jobs[k].spec.user for k in rs.keys}
    hosts = RowSet("hosts", "name")
    hosts.set_filter("state:unavail,closed")
    hosts.update(m, m.take_changes(), synth.T0 + 90)
    assert hosts.keys == ["node3", "node4"]


def test_rowset_follows_state_changes() -> None:
    m = replayed()
    rs = RowSet("jobs", "id")
    rs.set_filter("state:run")
    rs.update(m, m.take_changes(), 0)
    assert 1 in rs.keys
    job = msgspec.structs.replace(m.mirror.jobs[1], state=JobState.DONE, end_time=synth.T0 + 95)
    assert m.apply_event(Event(seq=m.mirror.seq + 1, epoch=m.mirror.epoch, time=synth.T0 + 95, jobs=[job]), 0)
    assert rs.update(m, m.take_changes(), 1) and 1 not in rs.keys


# ---- recordings and replay -----------------------------------------------------------------------

def test_record_roundtrip_and_cut_recordings(tmp_path: Path) -> None:
    recs = synth.demo_records(3)
    synth.write(str(tmp_path / "a.xcerec"), recs)
    back = read(tmp_path / "a.xcerec")
    assert [(r.t, r.kind, bytes(r.body)) for r in back] == [(r.t, r.kind, bytes(r.body)) for r in recs]
    data = (tmp_path / "a.xcerec").read_bytes()
    (tmp_path / "cut.xcerec").write_bytes(data[:-5])
    assert len(read(tmp_path / "cut.xcerec")) == len(recs) - 1
    r = Recorder(tmp_path / "b.xcerec")
    r.close()
    assert read(tmp_path / "b.xcerec") == []


def test_player_pause_speed_and_step() -> None:
    m = ConsoleModel()
    p = Player(read(FIXTURE), m)
    assert m.cluster == "demo" and not m.synced
    assert p.step() and m.synced                  # the snapshot
    p.paused = True
    assert p.advance(10) == 0
    p.paused = False
    assert p.faster(True) == 2.0
    n = p.advance(1.0)                            # two recorded seconds: one heartbeat of 3 hosts
    assert n == 3 and p.now() == pytest.approx(synth.T0 + 0.02 + 2)
    p.to_end()
    assert p.ended and p.progress == 1.0


# ---- kill outcomes -------------------------------------------------------------------------------

Fake = FakeActions  # shared with the other console tests (xce/tui/testing.py)


def test_kill_outcomes() -> None:
    assert kill_outcome(3, Fake("kill requested")) == (True, "job 3: kill requested")
    ok, msg = kill_outcome(3, Fake("already DONE"))
    assert not ok and "already ended: DONE" in msg
    ok, msg = kill_outcome(3, Fake(PermissionDenied("user bob may not kill job 3")))
    assert not ok and "permission denied" in msg and "bob" in msg


# ---- histories -----------------------------------------------------------------------------------

def test_host_history_keeps_exactly_the_last_batches_and_follows_changing_jobs() -> None:
    from xce.tui.history import HostHistory

    h = HostHistory("n1", cap=8)
    for k in range(40):
        ids = [1, 2] if k < 20 else ([2, 3] if k % 2 else [3])  # job 1 ends, 3 starts; batches go partial
        h.add_samples(float(k), ids, [100 * k + j for j in ids])
        t, v = h.job(3)
        assert len(t) == len(v) and t == sorted(t)
        assert sum(len(b.t) for b in h.blocks) <= 8 + 8 // 8  # trimmed in bulk, never far past cap
    assert h.job(1) == ([], [])                                # its batches rolled out of the last 8
    assert h.job(2) == ([33.0, 35.0, 37.0, 39.0], [3302, 3502, 3702, 3902])
    assert h.job(3)[0] == [float(k) for k in range(32, 40)]
    assert h.oldest_batch() == 32.0
    h.add_samples(30.0, [3], [1])                              # late: kept in order, at the last time
    assert h.job(3) == ([float(k) for k in range(33, 40)] + [39.0], [100 * k + 3 for k in range(33, 40)] + [1])


def test_host_history_shares_the_ids_of_consecutive_equal_batches() -> None:
    from xce.tui.history import HostHistory

    h = HostHistory("n1", cap=240)
    for k in range(5):
        h.add_samples(float(k), [7, 8, 9], [k, k + 1, k + 2])
    assert len(h.blocks) == 1 and h.job(8) == ([0.0, 1.0, 2.0, 3.0, 4.0], [1, 2, 3, 4, 5])


def test_host_history_figures_same_instant_keeps_the_latest_and_trims_by_half() -> None:
    from xce.tui.history import HostHistory

    h = HostHistory("n1", cap=4)
    h.add_figures(1.0, 10, 20, 30)
    h.add_figures(1.0, 11, 21, 31)
    assert h.figure_series() == ([1.0], [11], [21], [31])
    for k in range(2, 9):
        h.add_figures(float(k), k, 2 * k, 3 * k)
    times, actual, reserved, osa = h.figure_series()
    assert times == [5.0, 6.0, 7.0, 8.0] and actual == [5, 6, 7, 8] and osa[-1] == 24


# ---- sorted rows ---------------------------------------------------------------------------------

@pytest.mark.parametrize("reverse", [False, True])
def test_sorted_rows_match_a_sorted_list_through_adds_and_removals(reverse: bool) -> None:
    import random

    from xce.tui import ordered
    from xce.tui.ordered import SortedRows

    rnd = random.Random(7)
    keys = {r: (rnd.randrange(5), r) for r in range(3 * ordered.LOAD)}  # many ties: the row breaks them
    rows = SortedRows(keys.values(), reverse)
    for step in range(4000):
        r = rnd.randrange(4 * ordered.LOAD)
        if r in keys and rnd.random() < 0.5:
            assert rows.discard(r)
            del keys[r]
        elif r not in keys:
            keys[r] = (rnd.randrange(5), r)
            rows.add(keys[r])
        if step % 97 == 0:
            want = [sk[1] for sk in sorted(keys.values(), reverse=reverse)]
            assert rows == want and len(rows) == len(want)
            i, j = sorted((rnd.randrange(len(want) + 1), rnd.randrange(len(want) + 1)))
            assert rows[i:j] == want[i:j] and rows[-1] == want[-1] and rows[i % len(want)] == want[i % len(want)]
            probe = want[j % len(want)]
            assert probe in rows and rows.index(probe) == want.index(probe)
    assert not rows.discard(10**9) and 10**9 not in rows
    with pytest.raises(ValueError):
        rows.index(10**9)


def test_span_runs_cut_a_bar_as_rich_renders_it() -> None:
    from rich.console import Console
    from rich.text import Text

    from xce.core.views import HostView
    from xce.tui import fmt
    from xce.tui.table import _span_runs

    v = HostView(name="n", state="ok", slots_total=8, slots_used=2, mem_total=16 * 2**30, mem_os_available=0,
                 mem_reserved=6 * 2**30, mem_actual=7 * 2**30, mem_slack=2**30, mem_overage=2 * 2**30,
                 mem_charged=8 * 2**30, mem_available=0)
    bar = fmt.mem_bar(v, 30)
    want = bar.copy()
    want.truncate(34, overflow="ellipsis", pad=True)
    rich_runs = [(s.text, s.style) for s in want.render(Console())]
    runs = _span_runs(bar, 34)
    assert runs is not None and "".join(t for t, _ in runs) == "".join(t for t, _ in rich_runs)
    styled = [(ch, st) for t, st in runs for ch in t]
    assert styled == [(ch, st or None) for t, st in rich_runs for ch in t]
    assert _span_runs(Text("x" * 40), 34) is None  # too long: Rich cuts it with an ellipsis


def test_a_snapshot_is_built_apart_and_a_frame_never_waits_for_its_build() -> None:
    """At 100,000 jobs a snapshot's mirror takes seconds to build (6.96 s for one frame at
    5,000 hosts under load); the frames read the old state meanwhile and the new one is swapped
    in.  Fails on the old code: the whole build ran under the model's lock."""
    import threading

    lock_free_during_build: list[bool] = []

    class Watched(ConsoleModel):
        def prepare_snapshot(self, snap):  # type: ignore[no-untyped-def]
            def frame() -> None:  # a frame, drawn from another thread, takes the lock
                took = self.lock.acquire(blocking=False)
                if took:
                    self.lock.release()
                lock_free_during_build.append(took)
            t = threading.Thread(target=frame)
            t.start()
            t.join()
            return super().prepare_snapshot(snap)

    snap = synth.big_snapshot(hosts=20, jobs=200)
    m, plain = Watched(), ConsoleModel()
    Sync(m, m.lock).on_snapshot(snap, 1.0)
    plain.apply_snapshot(snap, 1.0)  # the same snapshot, applied in place
    assert lock_free_during_build == [True]
    assert m.synced and m.mirror.jobs == plain.mirror.jobs and m.mirror.hosts == plain.mirror.hosts
    assert m.kept.mirror is m.mirror and m.totals.jobs == plain.totals.jobs
