"""The main screen: header, status line, the hosts and jobs tables, filter, footer.

It only renders: each frame the App hands it the model's changes (``frame``);
keys switch views, sort, filter and open the detail screens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Footer, Input, Static

from xce.tui.header import HeaderBar
from xce.tui.model import Changes, ConsoleModel
from xce.tui.panes import frame_table, host_renderer, job_renderer, status_text
from xce.tui.rows import RowSet
from xce.tui.table import RowTable

if TYPE_CHECKING:
    from xce.tui.app import XceTop

FILTER_CSS = "#filter { dock: bottom; display: none; } #filter.shown { display: block; }"


class TableScreen(Screen[None]):
    """What screens with a table share: sorting and the `/` filter."""

    BINDINGS = [
        Binding("s", "sort(1)", "sort"), Binding("S", "sort(-1)", "sort back", show=False),
        Binding("r", "reverse", "reverse", show=False), Binding("slash", "filter", "filter"),
        Binding("escape", "back", "back", show=False),
    ]
    app: XceTop

    def table(self) -> RowTable:
        raise NotImplementedError

    def reframe(self) -> None:
        t, m = self.table(), self.app.model
        with m.lock:  # a key or a click, between frames: the receiver thread may be applying events
            order = t.rows.update(m, Changes(), self.app.now())
            t.sync_rows(None, order or True, m.link == "unreachable")
        self.show_status()

    def show_status(self) -> None:
        text = status_text(self.table(), self.app.flash)
        box = self.query_one("#status", Static)
        if getattr(box, "_shown", None) != text:
            box._shown = text  # type: ignore[attr-defined]
            box.update(text, layout=False)

    def action_sort(self, step: int) -> None:
        rs = self.table().rows
        cols = [c.key for c in rs.columns]
        rs.set_sort(cols[(cols.index(rs.sort_col.key) + step) % len(cols)], reverse=False)
        self.reframe()

    def action_reverse(self) -> None:
        rs = self.table().rows
        rs.set_sort(rs.sort_col.key, reverse=not rs.reverse)
        self.reframe()

    def sort_by(self, column: str) -> None:
        self.table().rows.set_sort(column)
        self.reframe()

    def apply_filter(self, text: str) -> None:
        self.table().rows.set_filter(text)
        self.reframe()

    @on(RowTable.SortClicked)
    def _clicked(self, msg: RowTable.SortClicked) -> None:
        msg.table.rows.set_sort(msg.column)
        self.reframe()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = self.table().rows.filter.text
        box.add_class("shown")
        box.focus()

    @on(Input.Submitted, "#filter")
    def _filtered(self, msg: Input.Submitted) -> None:
        msg.input.remove_class("shown")
        self.apply_filter(msg.value)
        self.table().focus()

    def action_back(self) -> None:
        """Escape: close the filter box, else leave a detail screen, else clear the filter."""
        box = self.query_one("#filter", Input)
        if box.has_class("shown"):
            box.remove_class("shown")
            self.table().focus()
        elif not isinstance(self, MainScreen):
            self.app.pop_screen()
        elif self.table().rows.filter.active:
            self.apply_filter("")


class MainScreen(TableScreen):
    DEFAULT_CSS = FILTER_CSS + " #status { height: 1; background: $boost; } #views { height: 1fr; }"
    BINDINGS = [Binding("tab", "switch", "hosts⇄jobs", priority=True), Binding("a", "group", "arrays")]

    def __init__(self, view: str = "hosts") -> None:
        super().__init__()
        self.initial = view

    def compose(self) -> ComposeResult:
        app, m = self.app, self.app.model
        yield HeaderBar(id="header")
        yield Static(id="status")
        with ContentSwitcher(initial=self.initial, id="views"):
            yield RowTable(RowSet("hosts", "name"), host_renderer(m, app.now), id="hosts")
            yield RowTable(RowSet("jobs", "state"), job_renderer(m, app.now), id="jobs")
        yield Input(placeholder="filter: user:alice state:RUN host:node1 text  (! inverts; enter applies)",
                    id="filter")
        yield Footer()

    def on_mount(self) -> None:
        self.table().focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "group":  # the jobs view's; shown only there
            return self.query_one(ContentSwitcher).current == "jobs"
        return not (action == "switch" and isinstance(self.focused, Input))  # tab inside the filter box

    def table(self) -> RowTable:
        return self.query_one(f"#{self.query_one(ContentSwitcher).current}", RowTable)

    def tables(self) -> list[RowTable]:
        return list(self.query(RowTable))

    def action_switch(self) -> None:
        sw = self.query_one(ContentSwitcher)
        sw.current = "jobs" if sw.current == "hosts" else "hosts"
        self.table().focus()
        self.reframe()
        self.app.refresh_bindings()

    def action_group(self) -> None:
        """``a``: one row per array ⇄ every element listed."""
        rows = self.query_one("#jobs", RowTable).rows
        rows.set_group(not rows.group)
        self.app.say("arrays: one row each (enter lists an array's elements)" if rows.group
                     else "arrays: every element listed")
        self.reframe()

    def show(self, view: str) -> None:
        self.query_one(ContentSwitcher).current = view
        self.table().focus()
        self.reframe()
        self.app.refresh_bindings()

    def frame(self, m: ConsoleModel, ch: Changes, now: float, new_second: bool) -> None:
        shown = self.table() if self.is_current else None
        for t in self.tables():
            if t is shown:
                frame_table(t, m, ch, now, new_second)
            else:
                # Hidden (the other view, or under a detail screen): following 300 job changes
                # a second would cost ~4 ms a frame at 20,000 jobs. It re-reads everything
                # when it shows again (reframe on switch or resume).
                t.rows.invalidate()
        if shown is not None:
            self.query_one(HeaderBar).show(self.app.header(now))
            self.show_status()

    def on_screen_resume(self) -> None:
        if self.is_mounted and self.app.model.synced:
            self.reframe()
            self.query_one(HeaderBar).show(self.app.header(self.app.now()))

    @on(RowTable.Selected)
    def _open(self, msg: RowTable.Selected) -> None:
        """Enter on an array's row lists its elements (escape: back to the arrays); else the detail."""
        if msg.table.rows.kind == "jobs" and msg.key in self.app.model.arrays and \
                msg.key not in self.app.model.mirror.jobs:
            self.apply_filter(f"array:{msg.key}")
            return
        self.app.open_detail(msg.table.rows.kind, msg.key)

    def selected_job(self) -> Any:
        t = self.table()
        return t.cursor_key if t.rows.kind == "jobs" else None
