"""xce-top driven through Textual's Pilot on the recorded demo stream (no cluster)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import msgspec
import zmq

from xce.core.errors import PermissionDenied
from xce.proto.codec import encode
from xce.proto.opcodes import Op
from xce.proto.schema import Event, JobSample
from xce.tui import synth
from xce.tui.dialogs import ConfirmKill, HelpScreen
from xce.tui.live import LiveFeed
from xce.tui.model import ConsoleModel
from xce.tui.testing import FakeActions, ready, row_text, until
from xce.tui.testing import replay_app as _replay_app

FIXTURE = Path(__file__).parent / "fixtures" / "demo.xcerec"


def replay_app(actions: object = None, to_end: bool = True, view: str = "hosts"):  # noqa: ANN201
    return _replay_app(FIXTURE, actions, to_end, view)  # type: ignore[arg-type]


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


M = 2**20


def test_sort_by_click_and_keys() -> None:
    async def go() -> None:
        app = replay_app(view="jobs")
        async with app.run_test(size=(120, 40)) as pilot:
            rows = app.screen.query_one("#jobs").rows
            await ready(pilot, app)
            assert rows.sort_col.key == "state" and rows.keys[0] == 1 and rows.keys[-1] in (9, 11)
            await pilot.click("#jobs", offset=(3, 0))          # the ID title
            await pilot.pause()
            assert rows.sort_col.key == "id" and rows.keys == sorted(rows.keys)
            await pilot.click("#jobs", offset=(3, 0))          # again: descending
            assert rows.reverse and rows.keys == sorted(rows.keys, reverse=True)
            await pilot.press("s")                              # the next column: NAME
            names = [app.model.job(k).spec.name for k in rows.keys]
            assert rows.sort_col.key == "name" and names == sorted(names)
            await pilot.press("r")
            assert [app.model.job(k).spec.name for k in rows.keys] == sorted(names, reverse=True)
            await pilot.click("#jobs", offset=(70, 0))         # ACTUAL
            await pilot.pause()
            assert rows.sort_col.key == "actual"
            await pilot.click("#jobs", offset=(70, 0))
            await pilot.pause()
            assert rows.keys[0] == 7                           # mpi: 970M
    run(go())


async def type_filter(pilot: object, app: object, text: str) -> None:
    await pilot.press("slash")  # type: ignore[attr-defined]
    box = app.screen.query_one("#filter")  # type: ignore[attr-defined]
    assert box.has_focus
    box.value = text
    await pilot.press("enter")  # type: ignore[attr-defined]


def test_filter_and_invert() -> None:
    async def go() -> None:
        app = replay_app(view="jobs")
        async with app.run_test(size=(120, 40)) as pilot:
            rows = app.screen.query_one("#jobs").rows
            await ready(pilot, app)
            await type_filter(pilot, app, "user:bob")
            assert rows.keys and {app.model.job(k).spec.user for k in rows.keys} == {"bob"}
            await type_filter(pilot, app, "!user:bob state:run")
            users = {app.model.job(k).spec.user for k in rows.keys}
            assert rows.keys and "bob" not in users
            assert {app.model.job(k).state.value for k in rows.keys} == {"RUN"}
            await type_filter(pilot, app, "oom")
            assert rows.keys == [10]
            await pilot.press("escape")                         # clears the filter
            assert len(rows.keys) == 12
            await pilot.press("tab")
            await type_filter(pilot, app, "state:full")
            assert app.screen.query_one("#hosts").rows.keys == ["node2"]
    run(go())




def test_kill_asks_first_then_kills() -> None:
    async def go() -> None:
        fake = FakeActions("kill requested")
        app = replay_app(fake, view="jobs")
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot, app)
            await pilot.press("k")
            assert isinstance(app.screen, ConfirmKill) and app.screen.job_id == 1
            await pilot.press("n")
            assert fake.calls == [] and "not killed" in app.flash
            await pilot.press("k", "y")
            await until(pilot, lambda: "kill requested" in app.flash, what="the kill answer")
            assert fake.calls == [[1]]
    run(go())


def test_kill_refusals_are_shown() -> None:
    async def go() -> None:
        fake = FakeActions(PermissionDenied("user alice may not kill jobs of bob"))
        app = replay_app(fake, view="jobs")
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot, app)
            await pilot.press("k", "y")
            await until(pilot, lambda: "refused" in app.flash, what="the refusal")
            assert "permission denied" in app.flash
            fake.answer = "already DONE"
            await pilot.press("k", "y")
            await until(pilot, lambda: "already ended" in app.flash, what="the refusal")
        app = replay_app(view="jobs")                           # a replay has no controller
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot, app)
            await pilot.press("k", "y")
            await until(pilot, lambda: "no controller" in app.flash, what="the refusal")
    run(go())


def test_pause_freezes_the_display_and_the_replay() -> None:
    async def go() -> None:
        app = replay_app(to_end=False)
        app.player.speed = 8.0  # the 90 s recording lasts 11 s: still playing when paused
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: app.model.synced, what="the snapshot")
            await pilot.press("p")
            assert app.paused
            pos, frames = app.player.i, app.frames
            assert not app.player.ended
            await pilot.pause(0.6)
            assert app.player.i == pos and app.frames == frames
            assert "PAUSED" in str(app.screen.query_one("#header").render())
            await pilot.press("full_stop")                      # step: exactly one message
            assert app.player.i == pos + 1
            await pilot.press("p")
            await until(pilot, lambda: app.player.i > pos + 1, what="the replay to go on")
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
    run(go())


def test_detail_screens_open_and_close() -> None:
    async def go() -> None:
        app = replay_app(view="jobs")
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot, app)
            await pilot.press("enter")
            assert type(app.screen).__name__ == "JobDetailScreen"
            await pilot.press("escape", "tab", "enter")
            assert type(app.screen).__name__ == "HostDetailScreen"
            await until(pilot, lambda: app.screen.query_one("#hostjobs").rows.keys)
            assert "under" in row_text(app, "hostjobs", 1)
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert "Kill job" in titles and "Sort jobs by ACTUAL" in titles and "Filter" in titles
    run(go())


def test_live_feed_resnapshots_on_a_gap(tmp_path) -> None:
    """The receiver thread against a fake controller: a seq gap makes it ask for a new snapshot."""
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    snap = synth.demo_records(1)[1]
    snapshot = msgspec.msgpack.decode(snap.body, type=synth.Snapshot)

    class Status:
        endpoints = {"events": f"tcp://127.0.0.1:{port}"}
        leader = None

    class FakeConn:  # the controller's door, faked: only the event stream is real here
        snapshots = 0
        seq = 0  # the controller's sequence number
        curve = None  # a cluster without CURVE
        token = ""

        def __init__(self) -> None:
            self.ctx = ctx

        def request(self, op: Op, body: object = None, timeout: float | None = None) -> object:
            if op == Op.SNAPSHOT:
                FakeConn.snapshots += 1
                return msgspec.structs.replace(snapshot, seq=FakeConn.seq)
            return Status()

        def at(self, endpoint: str) -> FakeConn:
            return self

        def close(self) -> None:
            pass

    m = ConsoleModel()
    feed = LiveFeed(m, state_dir=tmp_path)
    feed.follower.conn = FakeConn()  # type: ignore[assignment]
    feed.start()

    def send(seq: int) -> None:
        FakeConn.seq = seq
        ev = Event(seq=seq, epoch=snapshot.epoch, time=synth.T0 + seq,
                   samples=[JobSample(1, "node1", (60 + seq) * M, 0, 0.0)])
        pub.send_multipart([b"ev", encode(Op.EVENT, 0, ev)])

    try:
        deadline = time.monotonic() + 10
        while m.mirror.seq < 1 and time.monotonic() < deadline:  # PUB/SUB joins late: resend seq 1
            send(1)
            time.sleep(0.05)
        assert m.mirror.seq == 1 and FakeConn.snapshots == 1
        send(3)                                                  # seq 2 lost
        while FakeConn.snapshots < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert FakeConn.snapshots == 2 and feed.sync.gaps == 1
        while m.mirror.seq < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert m.mirror.seq == 3 and feed.sync.state == "LIVE"
    finally:
        feed.stop()
        pub.close(0)
        ctx.term()


def test_hidden_tables_catch_up_when_shown() -> None:
    """The table not on screen (the other view, or under a detail) stops following; shown again, it is current."""
    from xce.tui.model import Changes
    from xce.tui.rows import RowSet

    def fresh(app, kind: str, sort: str) -> list:  # noqa: ANN001
        rs = RowSet(kind, sort)
        rs.update(app.model, Changes(reset=True), app.now())
        return list(rs.keys)

    async def go() -> None:
        app = replay_app(view="jobs", to_end=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot, app)
            app.player.speed = 10
            main = app.main_screen()
            hosts = main.query_one("#hosts")
            hosts.rows.set_sort("mem_actual")                    # a usage column: moves with samples
            start = app.player.i
            await until(pilot, lambda: app.player.i > start + 20, what="the replay to go on")
            # Held still while we compare: at x10 a record could land between the switch and the
            # comparison, and the comparison would then race the next redraw, not test the switch.
            app.player.paused = True
            await pilot.press("tab")                             # to hosts: re-read at once
            assert main.table() is hosts and list(hosts.rows.keys) == fresh(app, "hosts", "mem_actual")
            app.player.paused = False
            await pilot.press("tab", "enter")                    # a job's detail over the jobs table
            assert type(app.screen).__name__ == "JobDetailScreen"
            mark = app.player.i
            await until(pilot, lambda: app.player.i > mark + 20, what="the replay to go on")
            await pilot.press("escape")
            jobs = main.query_one("#jobs")
            await until(pilot, lambda: list(jobs.rows.keys) == fresh(app, "jobs", "state"), what="the jobs table")
    run(go())


def test_the_scroll_range_follows_a_growing_table() -> None:
    """Rows that join move the scrollbar without a new layout; the end of the table is reachable."""
    from xce.client.follow import Sync
    from xce.replica.mirror import Mirror
    from xce.tui.app import XceTop

    async def go() -> None:
        snap = synth.big_snapshot(20, 300)
        m = ConsoleModel()
        sync = Sync(m, m.lock)
        sync.requested()
        sync.on_snapshot(snap, synth.T0)
        leader = Mirror()
        leader.apply_snapshot(snap)
        now = [synth.T0]
        app = XceTop(m, clock=lambda: now[0], view="jobs", deterministic=True, fps=0.001)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            app.render_frame()
            await pilot.pause()
            table = app.screen.query_one("#jobs")
            seq = 0
            for k in (1, 2):
                now[0] = synth.T0 + k
                evs = synth.one_second(snap, seq, now[0], 15, per_event=5)
                seq += len(evs)
                for ev in evs:
                    assert leader.apply_event(ev)
                    synth.stamp(leader, ev)
                    sync.on_event(ev, now[0])
                app.render_frame()
                await pilot.pause()
                n = len(table.rows.keys)
                assert n == 300 + 15 * k  # the ended jobs stay, as DONE
                assert table.virtual_size.height == n + 1 == table.vertical_scrollbar.window_virtual_size
            await pilot.press("end")
            await pilot.pause()
            last = table.rows.keys[-1]
            assert table.cursor_key == last and table.visible_keys()[-1] == last
            assert table.scroll_offset.y >= n - table.size.height
    run(go())
