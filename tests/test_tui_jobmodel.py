"""xce-top and the job model: array rows, held/suspended/unknown states, reasons, the job detail.

On ``synth.jobmodel_records()`` (an array of 8, PSUSP, USUSP, SSUSP, UNKWN, a dependency
waiting and one never met, a job script with a run limit, one ended by it), replayed to its
end: the pure grouping (ArrayIndex) through events, the columns, Pilot interaction (enter on
an array lists its elements, escape goes back, ``a`` lists every element), the detail's
history and array summary through the Actions port, and snapshots in colour and NO_COLOR.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from pytest_textual_snapshot import SVGImageExtension

from xce.core.arrays import element_id
from xce.core.errors import Unavailable
from xce.core.model import HistEvent, JobState
from xce.core.views import ArrayView
from xce.proto.schema import Event
from xce.tui import fmt, synth
from xce.tui.arrays import ArrayIndex
from xce.tui.commands import console_commands
from xce.tui.detail import JobDetailScreen
from xce.tui.dialogs import ConfirmKill
from xce.tui.model import ConsoleModel
from xce.tui.replay import Player
from xce.tui.rows import RowSet
from xce.tui.testing import FakeActions, ready, row_text, until
from xce.tui.testing import replay_app as _replay_app

A = synth.ARRAY
EL = [element_id(A, i) for i in range(1, 7)]
HISTORY = [HistEvent(synth.T0 - 35, "submitted", "erin"), HistEvent(synth.T0 - 30, "dispatched", "scheduler", "node1"),
           HistEvent(synth.T0 - 30, "started", "node1")]
SUMMARY = ArrayView(id=A, name="sweep", user="dave", queue="normal", indices="1-8", limit=4, elements=8,
                    counts={"PEND": 3, "RUN": 2, "USUSP": 1, "DONE": 1, "EXIT": 1})


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("jobmodel") / "jobmodel.xcerec"
    synth.write(str(path), synth.jobmodel_records())
    return path


def played() -> ConsoleModel:
    m = ConsoleModel()
    Player(synth.jobmodel_records(), m).to_end()
    return m


def rows(m: ConsoleModel, text: str = "", group: bool = True) -> list[int]:
    rs = RowSet("jobs", "id", group=group)
    rs.set_filter(text)
    rs.update(m, m.take_changes(), synth.T0 + 10)
    return list(rs.keys)


# ---- the pure parts ----------------------------------------------------------------------------

def test_array_rows_replace_their_elements_and_a_filter_lists_them() -> None:
    m = played()
    assert rows(m) == [A, 21, 22, 23, 24, 25, 26, 27]               # one row for the array, before the rest
    assert rows(m, f"array:{A}") == EL                              # its elements, by index
    assert rows(m, group=False) == [*EL, 21, 22, 23, 24, 25, 26, 27]  # every element, by array and index
    assert rows(m, "state:ususp") == [A]                            # an array matches its elements' states
    assert rows(m, "state:psusp") == [21]
    assert rows(m, "id:20[3]", group=False) == [EL[2]]


def test_array_row_counts_and_figures_come_from_its_elements() -> None:
    m = played()
    v = m.row_view(A)
    assert v is not None and v.state == "RUN" and v.name == "sweep[1-8]%4" and v.hosts == ["node1", "node2"]
    assert v.reason == "2 RUN 1 USUSP 1 PEND 1 EXIT 1 DONE +2 unseen of 8"
    active = [m.job_view(j) for j in EL[:3]]                         # RUN, RUN, USUSP: what it holds now
    assert (v.mem_reserved, v.mem_actual, v.mem_charged) == (sum(a.mem_reserved for a in active),
                                                             sum(a.mem_actual for a in active),
                                                             sum(a.mem_charged for a in active))
    assert m.usage(A)[:4] == (v.mem_reserved, v.mem_actual, v.mem_peak, v.mem_charged)


def test_array_index_follows_events() -> None:
    """An element that moves, one that is materialised and one that is forgotten move the counts;
    the array's id is marked changed, so its row is filtered and drawn again."""
    m = played()
    m.take_changes()
    e6, e7 = m.job(EL[5]), msgspec.structs.replace(m.job(EL[5]), id=element_id(A, 7))
    started = msgspec.structs.replace(e6, state=JobState.RUN, start_time=synth.T0 + 11)
    seq = m.mirror.seq
    assert m.apply_event(Event(seq=seq + 1, epoch=synth.EPOCH, time=synth.T0 + 11, jobs=[started, e7],
                               forget=[EL[3]]), synth.T0 + 11)
    g = m.arrays.get(A)
    assert g is not None and {s: n for s, n in g.counts.items() if n} == {"RUN": 3, "USUSP": 1, "EXIT": 1, "PEND": 1}
    assert g.unseen == 2 and A in m.take_changes().hard
    rebuilt = ArrayIndex()
    rebuilt.rebuild(m.mirror.jobs)
    assert {s: n for s, n in rebuilt.groups[A].counts.items() if n} == {s: n for s, n in g.counts.items() if n}
    assert m.apply_event(Event(seq=seq + 2, epoch=synth.EPOCH, time=synth.T0 + 12,
                               forget=[j for j in m.arrays.get(A).elements]), synth.T0 + 12)
    assert A not in m.arrays and A not in rows(m)


def test_reasons_say_dependency_suspension_and_run_limit() -> None:
    m = played()
    shown = {j: fmt.shown_reason(m.row_view(j), synth.T0) for j in (21, 22, 23, 24, 25, 26, 27, EL[2])}
    assert shown == {
        21: "held by its user (xce stop)",
        22: "waiting for done(21): job 21 is PSUSP",
        23: "suspended by the system",
        24: "run limit 10m00s",
        25: "state unknown: its host stopped reporting",
        26: "never satisfied: job 10 ended EXIT",
        27: "TERM_RUNLIMIT: job killed after reaching its run limit",
        EL[2]: "suspended by its user (xce stop)",
    }
    assert fmt.reason_style(m.row_view(26)) == fmt.reason_style(m.row_view(27)) == fmt.NEVER
    assert fmt.reason_style(m.row_view(22)) == fmt.HELD


def test_held_and_suspended_states_differ_without_colour() -> None:
    """NO_COLOR leaves bold, italic, underline, reverse: each held/stopped state has its own."""
    def attrs(state: str) -> tuple[Any, ...]:
        st = fmt.STATE_STYLES[state]
        return bool(st.bold), bool(st.italic), bool(st.underline), bool(st.reverse)
    marked = ["PSUSP", "USUSP", "SSUSP", "UNKWN"]
    assert len({attrs(s) for s in [*marked, "RUN"]}) == len(marked) + 1
    assert attrs("RUN") == attrs("PEND") == (False, False, False, False)
    assert len({fmt.STATE_STYLES[s].color for s in [*marked, "RUN", "PEND", "EXIT"]}) == len(marked) + 3


# ---- Pilot ---------------------------------------------------------------------------------------

DEMO = Path(__file__).parent / "fixtures" / "demo.xcerec"


def test_no_color_renders_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """NO_COLOR (Textual's monochrome filter) once crashed the table's painting on an unstyled
    segment: every row and the screen stayed blank.  Both views paint their rows."""
    monkeypatch.setenv("NO_COLOR", "1")

    async def go() -> None:
        app = _replay_app(DEMO, view="jobs")
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot, app)
            assert app.no_color
            await pilot.pause(0.1)
            shot = app.export_screenshot()
            assert "waiting" in shot and "alice" in shot        # job rows
            await pilot.press("tab")
            await pilot.pause(0.1)
            assert "node4" in app.export_screenshot()            # host rows
    asyncio.run(go())


def test_enter_lists_an_arrays_elements_escape_and_a_group_again(recording: Path) -> None:
    async def go() -> None:
        app = _replay_app(recording, view="jobs")
        async with app.run_test(size=(140, 40)) as pilot:
            await ready(pilot, app)
            rs = app.screen.query_one("#jobs").rows
            assert A in rs.keys and not set(EL) & set(rs.keys)
            assert row_text(app, "jobs", A).lstrip().startswith(f"▸{A}")
            await pilot.click("#jobs", offset=(3, 0))                 # sort by ID: the array first
            await pilot.press("home", "enter")
            assert list(rs.keys) == EL and rs.filter.text == f"array:{A}"
            assert f"{A}[3]" in row_text(app, "jobs", EL[2]) and "USUSP" in row_text(app, "jobs", EL[2])
            await pilot.press("escape")
            assert A in rs.keys and EL[0] not in rs.keys
            await pilot.press("a")
            assert set(EL) <= set(rs.keys) and A not in rs.keys
            assert "every array element listed" in str(app.screen.query_one("#status").render())
            await pilot.press("a")
            assert A in rs.keys
            palette = next(c for c in console_commands(app) if c.title.startswith("Arrays"))
            palette.callback()                                         # the same from the palette
            await pilot.pause()
            assert not rs.group and EL[0] in rs.keys
    asyncio.run(go())


def detail_text(app: Any, jid: int, part: str = "#jobmodel") -> str:
    """The text of a part of job ``jid``'s detail once it is on screen ("" until then)."""
    s = app.screen
    if not isinstance(s, JobDetailScreen) or s.job_id != jid or not s.query(part):
        return ""
    return str(s.query_one(part).render())


def test_job_detail_shows_script_limit_dependency_and_history(recording: Path) -> None:
    async def go() -> None:
        app = _replay_app(recording, FakeActions("killed", HISTORY, [SUMMARY]), view="jobs")
        async with app.run_test(size=(140, 50)) as pilot:
            await ready(pilot, app)
            app.open_detail("jobs", 24)
            text = await until(pilot, lambda: "dispatched" in (t := detail_text(app, 24)) and t, what="the history")
            info = detail_text(app, 24, "#info")
            assert "#BSUB -W 10" in text and "scheduler" in text and "run limit 10m00s" in info
            assert "(a job script, kept as submitted)" in info
            await pilot.press("escape")
            app.open_detail("jobs", 22)
            await until(pilot, lambda: "dependency done(21)" in detail_text(app, 22, "#info"), what="the dependency")
            await pilot.press("escape")
            app.open_detail("jobs", EL[2])
            text = await until(pilot, lambda: "controller counts" in (t := detail_text(app, EL[2])) and t,
                               what="the array's summary")
            assert "8 elements" in text and "3 PEND" in text
            assert f"element {A}[3] of array sweep[1-8]%4" in detail_text(app, EL[2], "#info")
    asyncio.run(go())


def test_job_detail_says_why_history_is_missing(recording: Path) -> None:
    async def go() -> None:
        app = _replay_app(recording, FakeActions(Unavailable("controller unreachable")), view="jobs")
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot, app)
            app.open_detail("jobs", 24)
            await until(pilot, lambda: "not available: controller unreachable" in detail_text(app, 24),
                        what="the refusal")
    asyncio.run(go())


# ---- snapshots -----------------------------------------------------------------------------------

@pytest.fixture
def _snapshots_in_tests_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    def dirname(cls: Any, *, test_location: Any) -> str:
        return str(Path(test_location.filepath).parent / "snapshots" / test_location.basename)
    monkeypatch.setattr(SVGImageExtension, "dirname", classmethod(dirname))


SNAPS = {
    "jobs": ("jobs", [], False),
    "jobs_nocolor": ("jobs", [], True),
    "array_elements": ("jobs", ["home", "enter"], False),
    "job_detail": ("jobs", [], False),
}


@pytest.fixture
def _utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The history shows local times: UTC here, whatever the machine's zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("_snapshots_in_tests_snapshots", "_utc")
@pytest.mark.parametrize("view", list(SNAPS))
def test_jobmodel_view(snap_compare, recording: Path, monkeypatch: pytest.MonkeyPatch, view: str) -> None:
    start, keys, mono = SNAPS[view]
    if mono:
        monkeypatch.setenv("NO_COLOR", "1")
    app = _replay_app(recording, FakeActions("killed", HISTORY, [SUMMARY]), view=start)

    async def settle(pilot) -> None:  # noqa: ANN001
        await pilot.pause(0.3)
        if view == "job_detail":
            app.open_detail("jobs", 24)
            await until(pilot, lambda: "dispatched" in detail_text(app, 24), what="the history")
            await pilot.pause(0.2)

    assert snap_compare(app, press=keys, terminal_size=(120, 40), run_before=settle)


def test_kill_on_an_arrays_row_asks_for_the_whole_array(recording: Path) -> None:
    async def go() -> None:
        actions = FakeActions("kill requested")
        app = _replay_app(recording, actions, view="jobs")
        async with app.run_test(size=(140, 40)) as pilot:
            await ready(pilot, app)
            table = app.screen.query_one("#jobs")
            table.move_to(list(table.rows.keys).index(A))
            await pilot.press("k")
            dialog = await until(pilot, lambda: isinstance(app.screen, ConfirmKill) and app.screen)
            assert "the whole array sweep[1-8]%4" in dialog.what and "2 RUN" in dialog.what
            await pilot.press("y")
            await until(pilot, lambda: actions.calls == [[A]], what="the kill of the array's id")
    asyncio.run(go())


# ---- exact counts: the controller's summaries on the stream ------------------------------------

BIG = 40  # an array of 1,000 of which the console holds three elements


def big_array_records() -> list[Any]:
    """A snapshot holding 3 elements of ``big[1-1000]`` (2 RUN, 1 PEND) with the controller's summary
    of all 1,000, then an event in which element 1 ends DONE and the summary moves with it."""
    from xce.core.jobspec.arrays import parse_lsf_job_name
    from xce.core.model import Queue
    from xce.proto.schema import Snapshot
    from xce.tui.record import Hello, Record

    arr = parse_lsf_job_name("big[1-1000]", max_size=1000)[1]

    def el(i: int, state: JobState, hosts: tuple[tuple[str, int], ...] = ()) -> Any:
        j = synth.job(element_id(BIG, i), "big", "dave", "rusage[mem=100M]", state, hosts,
                      synth.T0 - 40 if hosts else None)
        return msgspec.structs.replace(j, spec=msgspec.structs.replace(j.spec, array=arr, index=i))

    def view(counts: dict[str, int]) -> ArrayView:
        return ArrayView(id=BIG, name="big", user="dave", queue="normal", indices="1-1000", limit=None,
                         elements=1000, counts=counts)

    held = [el(1, JobState.RUN, (("node1", 1),)), el(2, JobState.RUN, (("node2", 1),)), el(3, JobState.PEND)]
    snap = Snapshot(seq=0, epoch=synth.EPOCH, time=synth.T0, jobs=held, hosts=synth.DEMO_HOSTS,
                    queues=[Queue(name="normal")], default_queue="normal", live=[], samples=[], reasons={},
                    leader="tcp://127.0.0.1:7700", term=1,
                    arrays=[view({"RUN": 2, "PEND": 500, "EXIT": 8, "DONE": 490})])
    done = msgspec.structs.replace(held[0], state=JobState.DONE, end_time=synth.T0 + 1, exit_code=0)
    ev = Event(seq=1, epoch=synth.EPOCH, time=synth.T0 + 1, jobs=[done],
               arrays=[view({"RUN": 1, "PEND": 500, "EXIT": 8, "DONE": 491})])
    enc = msgspec.msgpack.Encoder()
    return [Record(synth.T0 - 0.5, "hello", msgspec.Raw(enc.encode(Hello(cluster="big", heartbeat=1.0,
                                                                        source="synth")))),
            Record(synth.T0, "snapshot", msgspec.Raw(enc.encode(snap)), 1),
            Record(synth.T0 + 1.01, "event", msgspec.Raw(enc.encode(ev)), 1)]


def test_an_array_rows_counts_are_the_controllers_not_the_elements_held() -> None:
    m = ConsoleModel()
    p = Player(big_array_records(), m)
    p.seek(synth.T0 + 0.5)
    assert len(m.arrays.get(BIG).elements) == 3
    assert m.row_view(BIG).reason == "2 RUN 500 PEND 8 EXIT 490 DONE of 1,000"
    m.take_changes()
    p.to_end()
    assert BIG in m.take_changes().hard
    assert m.row_view(BIG).reason == "1 RUN 500 PEND 8 EXIT 491 DONE of 1,000"
    assert m.row_view(BIG).end_time is None  # 501 elements are not over, though the console holds none of them
    rebuilt = ArrayIndex()
    rebuilt.rebuild(m.mirror.jobs, m.mirror.arrays)
    assert rebuilt.get(BIG).counts_text() == m.arrays.get(BIG).counts_text()


def test_the_console_shows_an_arrays_exact_counts(tmp_path: Path) -> None:
    path = tmp_path / "big.xcerec"
    synth.write(str(path), big_array_records())

    async def go() -> None:
        app = _replay_app(path, view="jobs")
        async with app.run_test(size=(200, 30)) as pilot:
            await ready(pilot, app)
            text = await until(pilot, lambda: row_text(app, "jobs", BIG), what="the array's row")
            assert "1 RUN 500 PEND 8 EXIT 491 DONE of 1,000" in text and "unseen" not in text
    asyncio.run(go())
