"""xce-top: the App shell and ``main``.

The App owns the model, the feed (a LiveFeed thread or a replay Player), the
actions port and the clock; a timer at ``fps`` takes the model's changes and
hands them to every screen's ``frame``.  Screens and widgets live in their own
modules; this one holds only the global keys and the wiring.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from rich.text import Text
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.screen import Screen

from xce.tui.actions import Actions, ClientActions, ReplayActions, kill_outcome
from xce.tui.arrays import ArrayRow
from xce.tui.dialogs import ConfirmKill, HelpScreen
from xce.tui.header import header_text
from xce.tui.live import LiveFeed
from xce.tui.main_screen import MainScreen, TableScreen
from xce.tui.model import Changes, ConsoleModel
from xce.tui.record import Recorder, read
from xce.tui.replay import Player


class XceTop(App[int]):
    TITLE = "xce-top"
    BINDINGS = [
        Binding("q", "quit", "quit"), Binding("question_mark", "help", "help"),
        Binding("p", "pause", "pause"), Binding("k", "kill", "kill"),
        Binding("plus", "speed(1)", "faster"), Binding("minus", "speed(-1)", "slower"),
        Binding("full_stop", "step", "step"),
    ]

    def __init__(self, model: ConsoleModel, *, feed: LiveFeed | None = None, player: Player | None = None,
                 actions: Actions | None = None, clock: Callable[[], float] = time.time,
                 fps: float = 4.0, view: str = "hosts", deterministic: bool = False) -> None:
        super().__init__()
        self.model, self.feed, self.player = model, feed, player
        self.actions: Actions = actions or ReplayActions()
        self.clock, self.fps, self.view = clock, fps, view
        self.paused = False
        self.flash = ""
        self.frames = 0
        self._last_second = -1
        self._last_tick = time.monotonic()
        if deterministic:
            self.animation_level = "none"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The footer shows only the keys that apply: replay keys in a replay, kill on jobs."""
        if action in ("speed", "step"):
            return self.player is not None
        if action == "kill":
            pick = getattr(self.screen, "selected_job", None)
            return pick is not None and (not isinstance(self.screen, MainScreen) or
                                         self.screen.table().rows.kind == "jobs")
        return True

    def now(self) -> float:
        return self.player.now() if self.player is not None else self.clock()

    def on_mount(self) -> None:
        self._last_tick = time.monotonic()
        self.push_screen(MainScreen(self.view))
        if self.feed is not None:
            self.feed.start()
        self.set_interval(1 / self.fps, self.tick)
        self.call_after_refresh(self.tick)

    def on_unmount(self) -> None:
        if self.feed is not None:
            self.feed.stop()

    # ---- the frame --------------------------------------------------------------------------

    def tick(self) -> None:
        mono = time.monotonic()
        dt, self._last_tick = mono - self._last_tick, mono
        if self.player is not None and not self.paused:
            self.player.advance(dt)
        if not self.paused:
            self.render_frame()

    def render_frame(self, only: Screen[Any] | None = None) -> None:
        m, now = self.model, self.now()
        new_second = int(now) != self._last_second
        with m.lock:
            if only is None:
                self._last_second = int(now)
                if new_second:
                    m.tick(now)  # decaying reservations move once a second
                ch = m.take_changes()
            else:
                ch = Changes(reset=True)
            for screen in self.screen_stack if only is None else [only]:
                frame = getattr(screen, "frame", None)
                if frame is None or not screen.is_mounted:
                    continue
                try:
                    frame(m, ch, now, new_second)
                except NoMatches:  # a screen still composing, or being torn down
                    pass
        self.frames += 1

    def header(self, now: float) -> Text:
        replay = ""
        if self.player is not None:
            p = self.player
            replay = f"replay {p.progress:.0%} ×{p.speed:g}" + (" (ended)" if p.ended else "")
        with self.model.lock:  # also called between frames (a screen resumed, the link changed)
            return header_text(self.model, now, self.paused, replay)

    # ---- navigation -------------------------------------------------------------------------

    def main_screen(self) -> MainScreen:
        return next(s for s in self.screen_stack if isinstance(s, MainScreen))

    def open_detail(self, kind: str, key: Any) -> None:
        # a cycle: the detail screens import this module's App
        from xce.tui.detail import HostDetailScreen, JobDetailScreen

        screen = HostDetailScreen(key) if kind == "hosts" else JobDetailScreen(key)
        self.push_screen(screen)
        self.call_after_refresh(self.render_frame, screen)

    def show_view(self, view: str) -> None:
        while not isinstance(self.screen, MainScreen):
            self.pop_screen()
        self.main_screen().show(view)

    def sort_view(self, view: str, column: str) -> None:
        self.show_view(view)
        self.main_screen().sort_by(column)

    def table_action(self, what: str) -> None:
        s = self.screen
        if isinstance(s, TableScreen):
            {"filter": s.action_filter, "reverse": s.action_reverse,
             "clear": lambda: s.apply_filter("")}[what]()

    def action_open(self) -> None:
        if isinstance(self.screen, TableScreen):
            self.screen.table().action_open()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_pause(self) -> None:
        self.paused = not self.paused
        self.say("paused: the display is frozen (p resumes)" if self.paused else "resumed")
        for s in self.screen_stack:
            if isinstance(s, MainScreen):
                s.query_one("#header").show(self.header(self.now()))  # type: ignore[attr-defined]

    def action_speed(self, step: int) -> None:
        if self.player is not None:
            self.say(f"replay speed ×{self.player.faster(step > 0):g}")

    def action_step(self) -> None:
        if self.player is not None:
            self.player.step()
            self.render_frame()

    # ---- kill -------------------------------------------------------------------------------

    def action_kill(self) -> None:
        pick = getattr(self.screen, "selected_job", None)
        jid = pick() if pick else None
        if jid is None:
            self.say("select a job first (tab to the jobs view)", error=True)
            return
        with self.model.lock:
            v = self.model.row_view(jid)
        what = f"{v.name or '-'} of {v.user}, {v.state}" + (f" on {','.join(v.hosts)}" if v and v.hosts else "") \
            if v else "(unknown job)"
        if isinstance(v, ArrayRow):
            what = f"the whole array {v.name} of {v.user}: {v.reason}"

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(lambda: self._kill(jid), thread=True, group="kill")
            else:
                self.say(f"job {jid} not killed")
        self.push_screen(ConfirmKill(jid, what), answered)

    def _kill(self, jid: int) -> None:
        ok, msg = kill_outcome(jid, self.actions)
        self.call_from_thread(self.say, msg, not ok)

    def say(self, msg: str, error: bool = False) -> None:
        self.flash = msg
        self.notify(msg, severity="error" if error else "information", timeout=6)
        for s in self.screen_stack:
            if isinstance(s, TableScreen):
                s.show_status()

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        # a cycle: the command palette's provider imports this module's App
        from xce.tui.commands import console_commands

        yield from super().get_system_commands(screen)
        yield from console_commands(self)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="xce-top", description="XCE's live operator console")
    p.add_argument("--state-dir", help="state directory of a local `xce up` cluster (or XCE_STATE_DIR)")
    p.add_argument("--endpoint", help="controller endpoint(s), comma-separated (or XCE_CONTROLLER)")
    p.add_argument("--record", metavar="FILE", help="save every received message to FILE (.xcerec)")
    p.add_argument("--replay", metavar="FILE", help="play FILE back instead of connecting")
    p.add_argument("--speed", type=float, default=1.0, help="replay speed (default 1)")
    p.add_argument("--view", choices=("hosts", "jobs"), default="hosts", help="the view to start in")
    p.add_argument("--fps", type=float, default=4.0, help="frames per second (default 4)")
    a = p.parse_args(argv)
    if a.record and a.replay:
        p.error("--record and --replay do not go together")
    return a


def tune_gc() -> None:
    """Collect the young generation every 50,000 containers rather than every 700.

    At 20,000 jobs a frame allocates thousands of short-lived containers (strips,
    segments, lists) beside a model of ~200,000 long-lived objects; the default
    thresholds collected a dozen times a second at 0.3-4 ms each (measured with
    gc.callbacks in bench/tui_bench.py).  Unreachable cycles still go, just later.
    """
    gc.set_threshold(50_000, 20, 20)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    tune_gc()
    model = ConsoleModel()
    if a.replay:

        player = Player(read(a.replay), model)
        player.speed = a.speed
        app = XceTop(model, player=player, fps=a.fps, view=a.view)
    else:

        recorder = Recorder(a.record) if a.record else None
        endpoint = a.endpoint.split(",") if a.endpoint else None
        feed = LiveFeed(model, a.state_dir, endpoint, recorder)
        app = XceTop(model, feed=feed, actions=ClientActions(a.state_dir, endpoint), fps=a.fps, view=a.view)
    app.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
