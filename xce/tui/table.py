"""RowTable: a virtual table that renders only the rows on screen.

It shows the keys of a RowSet (rows.py) through a ``render_row`` callback, so a
table of 20,000 jobs costs what its visible rows cost.  Rendered rows are
cached per key for the rows on screen; ``sync_rows`` renders the changed ones
again and repaints only the lines whose text or colours moved (or the whole
table when the order changed).  The header line is
fixed; clicking a title asks for a sort, clicking a row moves the cursor, a
double click or Enter opens it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from xce.tui.columns import Cell
from xce.tui.rows import RowSet

RowRender = Callable[[Any], tuple[list[Cell], Style | None] | None]
HEADER = Style(bold=True, bgcolor="grey23")
SORTED = Style(bold=True, bgcolor="grey23", color="bright_white", underline=True)
CURSOR = Style(reverse=True)
GREY = Style(dim=True, color="bright_black")
PLAIN = Style.null()


class RowTable(ScrollView, can_focus=True):
    DEFAULT_CSS = "RowTable { height: 1fr; scrollbar-size-vertical: 1; }"
    BINDINGS = [
        Binding("up", "move(-1)", "up", show=False), Binding("down", "move(1)", "down", show=False),
        Binding("pageup", "page(-1)", show=False), Binding("pagedown", "page(1)", show=False),
        Binding("home", "move(-1000000000)", show=False), Binding("end", "move(1000000000)", show=False),
        Binding("enter", "open", "detail"),
    ]

    class Selected(Message):
        def __init__(self, table: RowTable, key: Any) -> None:
            super().__init__()
            self.table, self.key = table, key

    class SortClicked(Message):
        def __init__(self, table: RowTable, column: str) -> None:
            super().__init__()
            self.table, self.column = table, column

    def __init__(self, rows: RowSet, render_row: RowRender, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.auto_links = False  # rows carry no links (and render_lines goes straight without them)
        self.rows = rows
        self.render_row = render_row
        self.cursor = 0
        self.greyed = False
        self._keys: Sequence[Any] = []   # the RowSet's keys (changed in place by its updates)
        self._shown: list[Any] = []      # the rows on screen when last synced
        self._shown_top = -1             # ... and the first one's position
        self._view_width = 0
        self._cursor_row: Any = None     # the row under the cursor when last synced or moved
        self._cache: dict[Any, Strip] = {}
        self._layout(0)

    def _layout(self, width: int) -> None:
        """Column widths: the last column takes what the screen has left beyond its minimum."""
        cols = self.rows.columns
        fixed = sum(c.width + 1 for c in cols[:-1])
        self.widths = [c.width for c in cols[:-1]] + [max(cols[-1].width, width - fixed - 1)]
        self._right = [c.right for c in cols]
        self._x = [0]
        for w in self.widths:
            self._x.append(self._x[-1] + w + 1)
        self.row_width = self._x[-1]

    def on_resize(self) -> None:
        self._view_width = self.size.width
        self._layout(self._view_width)
        self._cache.clear()
        self.virtual_size = Size(self.row_width, len(self._keys) + 1)
        self.refresh()

    # ---- data -------------------------------------------------------------------------------

    @property
    def cursor_key(self) -> Any:
        return self._keys[self.cursor] if 0 <= self.cursor < len(self._keys) else None

    def sync_rows(self, changed: Callable[[Any], bool] | None, order_changed: bool,
                  greyed: bool = False) -> None:
        """Take the RowSet's keys; repaint the visible rows ``changed`` says moved (None: all).

        Only visible rows are kept rendered.  When the rows on screen are the same
        ones in the same places, a changed row is rendered again and its line
        repainted only if the result differs, so a frame costs what is on screen
        and what moved on it.
        """
        if greyed != self.greyed:
            self.greyed, changed = greyed, None
        top, page = int(self.scroll_offset.y), max(0, self.size.height - 1)
        # The RowSet changes its keys in place: what was on screen is what was kept, not a re-read.
        shown = self._shown
        if order_changed:
            old = self._cursor_row
            self._keys = self.rows.keys
            self._set_virtual_height(len(self._keys) + 1)
            if old is not None:
                try:
                    self.cursor = self._keys.index(old)
                except ValueError:
                    pass
            self.cursor = max(0, min(self.cursor, len(self._keys) - 1))
            top = int(self.scroll_offset.y)
        self._cursor_row = self.cursor_key
        visible = self._shown = self._keys[top: top + page]
        self._shown_top = top
        if changed is None:
            self._cache.clear()
            self.refresh()
            return
        cache = self._cache
        kept: dict[Any, Strip] = {}
        if visible != shown:  # rows moved on screen (or scrolled): repaint it all, reusing unchanged rows
            for key in visible:
                strip = cache.get(key)
                if strip is not None and not changed(key):
                    kept[key] = strip
            self._cache = kept
            self.refresh()
            return
        moved_lines: list[int] = []
        for i, key in enumerate(visible, top):
            old_strip = cache.get(key)
            if old_strip is not None and not changed(key):
                kept[key] = old_strip
                continue
            strip = kept[key] = self._row(key)
            if old_strip is None or strip._segments != old_strip._segments:
                moved_lines.append(i + 1)
        self._cache = kept
        if len(moved_lines) > max(4, page // 4):
            # Many lines: one refresh of the widget. Each refresh_line is a region of its
            # own, and the compositor renders and composes every region separately.
            self.refresh()
        else:
            for y in moved_lines:
                self.refresh_line(y)

    def _set_virtual_height(self, height: int) -> None:
        """The scroll range follows the row count (the jobs view gains 300 rows a second at scale).

        Setting ``virtual_size`` lays the whole screen out again (its reactive is a layout
        one), which cost as much as the rest of a frame.  A ScrollView's own size does not
        depend on it: while the scrollbar is needed before and after, moving the scrollbar
        is all there is to do, as Textual does for a size change without layout.
        """
        size, old = Size(self.row_width, height), self.virtual_size
        if size == old:
            return
        scroll_update = getattr(self, "_scroll_update", None)  # Textual's own, private: fall back without it
        page = self.size.height
        if scroll_update is not None and size.width == old.width and old.height > page and height > page:
            self.set_reactive(RowTable.virtual_size, size)
            scroll_update(size)
        else:
            self.virtual_size = size

    def visible_keys(self) -> list[Any]:
        top = int(self.scroll_offset.y)
        return self._keys[top: top + max(0, self.size.height - 1)]

    # ---- rendering --------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        # Called for every line of every repaint: the widget's size and offsets are read
        # once each (they are computed properties), and the row from the synced page.
        width = self._view_width or self.size.width
        off = self.scroll_offset
        sx = off.x
        if y == 0:
            strip = self._header()
        else:
            top = off.y
            idx = top + y - 1
            if idx >= len(self._keys):
                return Strip.blank(width)
            shown = self._shown
            key = shown[y - 1] if top == self._shown_top and y <= len(shown) else self._keys[idx]
            strip = self._cache.get(key)
            if strip is None:
                if len(self._cache) > 4000:  # scrolled far: keep the cache to a few pages
                    self._cache.clear()
                strip = self._cache[key] = self._row(key)
            if idx == self.cursor and self.has_focus:
                strip = strip.apply_style(CURSOR)
            elif idx == self.cursor:
                strip = strip.apply_style(Style(bgcolor="grey30"))
        if sx or strip.cell_length != width:
            strip = strip.crop_extend(sx, sx + width, None)
        return strip.apply_style(GREY) if self.greyed and y else strip

    def render_lines(self, crop: Region) -> list[Strip]:
        """The lines of ``crop``: ``render_line``'s strips with the app's line filters.

        Textual's styles cache would do this too, plus borders, padding, tint and
        opacity, at ~50 µs a line: with every visible row changing each second that
        was a tenth of a frame.  The table uses none of those, so it goes straight
        (and falls back to Textual's path if a stylesheet ever gives it one).
        """
        styles = self.styles
        if (self.BLANK or styles.has_rule("border") or styles.has_rule("outline") or styles.has_rule("padding")
                or styles.has_rule("hatch") or styles.tint.a or self.opacity != 1.0 or styles.text_opacity != 1.0
                or self.auto_links):
            return super().render_lines(crop)
        width = self.size.width
        filters = self.get_line_filters()
        _, background = self.background_colors
        # NO_COLOR's monochrome filter reads every segment's style; blank and padded cells have none.
        styled = self.app.no_color
        strips = []
        for y in crop.line_range:
            strip = self.render_line(y).adjust_cell_length(width)
            if styled:
                strip = Strip([Segment(t, st or PLAIN, c) for t, st, c in strip], strip.cell_length)
            for line_filter in filters:
                strip = strip.apply_filter(line_filter, background)
            strips.append(strip)
        x1, x2 = crop.column_span
        if (x1, x2) != (0, width):
            strips = [strip.crop(x1, x2) for strip in strips]
        return strips

    def _header(self) -> Strip:
        segs = []
        for c, w in zip(self.rows.columns, self.widths, strict=True):
            arrow = ("▼" if self.rows.reverse else "▲") if c is self.rows.sort_col else ""
            title = (c.title + arrow)[:w]
            title = title.rjust(w) if c.right else title.ljust(w)
            segs.append(Segment(title, SORTED if c is self.rows.sort_col else HEADER))
            segs.append(Segment(" ", HEADER))
        return Strip(segs, self.row_width)

    def _row(self, key: Any) -> Strip:
        """One row as segments: runs of plain cells share one segment; styled spans via Rich.

        Fewer segments make every later step (cropping, dividing, filtering, writing)
        cheaper, and a screen of changed rows is most of a frame's work at scale.
        """
        got = self.render_row(key)
        if got is None:
            return Strip.blank(self.row_width)
        cells, row_style = got
        base = row_style or Style.null()
        segs: list[Segment] = []
        run: list[str] = []  # padded plain cells waiting to become one segment in the row's style
        for right, w, cell in zip(self._right, self.widths, cells, strict=True):
            if cell.__class__ is str and len(cell) <= w and cell.isascii():  # the usual cell
                run.append(cell.rjust(w) if right else cell.ljust(w))
                continue
            style = None
            if isinstance(cell, Text):
                if cell.spans:
                    if run:
                        segs.append(Segment(" ".join(run) + " ", base))
                        run = []
                    runs = _span_runs(cell, w)
                    if runs is None:  # overlapping spans, wide characters, too long: Rich does it
                        t = cell.copy()
                        t.truncate(w, overflow="ellipsis", pad=True)
                        runs = [(sg.text, sg.style) for sg in t.render(self.app.console)]
                    segs.extend(Segment(text, base + style if style else base) for text, style in runs)
                    segs.append(Segment(" ", base))
                    continue
                text = cell.plain
                if cell.style:
                    style = base + (Style.parse(cell.style) if isinstance(cell.style, str) else cell.style)
            else:
                text = cell
            n = len(text) if text.isascii() else cell_len(text)
            if n > w:
                text, n = set_cell_size(text, w - 1) + "…", w
            pad = " " * (w - n)
            text = pad + text if right else text + pad
            if style is None:
                run.append(text)
                continue
            if run:
                segs.append(Segment(" ".join(run) + " ", base))
                run = []
            segs.append(Segment(text + " ", style))
        if run:
            segs.append(Segment(" ".join(run) + " ", base))
        return Strip(segs, self.row_width)

    # ---- cursor, keys and mouse -------------------------------------------------------------

    def move_to(self, idx: int) -> None:
        old = self.cursor
        self.cursor = max(0, min(idx, len(self._keys) - 1))
        self._cursor_row = self.cursor_key
        page = max(1, self.size.height - 1)
        top = int(self.scroll_offset.y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + page:
            self.scroll_to(y=self.cursor - page + 1, animate=False, immediate=True)
        self.refresh_line(old + 1)
        self.refresh_line(self.cursor + 1)

    def action_move(self, delta: int) -> None:
        self.move_to(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self.move_to(self.cursor + direction * max(1, self.size.height - 2))

    def action_open(self) -> None:
        if self.cursor_key is not None:
            self.post_message(self.Selected(self, self.cursor_key))

    def on_click(self, event: events.Click) -> None:
        off = event.get_content_offset(self)
        if off is None:
            return
        if off.y == 0:
            x = off.x + int(self.scroll_offset.x)
            for i, c in enumerate(self.rows.columns):
                if self._x[i] <= x < self._x[i + 1]:
                    self.post_message(self.SortClicked(self, c.key))
                    break
            return
        self.move_to(int(self.scroll_offset.y) + off.y - 1)
        if event.chain >= 2:
            self.action_open()

    def on_focus(self) -> None:
        self.refresh_line(self.cursor + 1)

    def on_blur(self) -> None:
        self.refresh_line(self.cursor + 1)


def _span_runs(cell: Text, width: int) -> list[tuple[str, Style | None]] | None:
    """A Text's (text, style) runs cut straight from its spans, padded to ``width``.

    The hosts view's memory bar is one such cell on every row: rendering it through
    Rich's console cost ~100 µs a row.  Only for the simple case (one cell a character
    that fits, no base style, spans in order and not overlapping); None otherwise.
    """
    plain = cell.plain
    if len(plain) > width or cell.style or cell_len(plain) != len(plain):
        return None
    runs: list[tuple[str, Style | None]] = []
    at = 0
    for span in cell.spans:
        if span.start < at or isinstance(span.style, str):
            return None
        if span.start > at:
            runs.append((plain[at:span.start], None))
        runs.append((plain[span.start:span.end], span.style))
        at = span.end
    if at < len(plain):
        runs.append((plain[at:], None))
    if len(plain) < width:
        runs.append((" " * (width - len(plain)), None))
    return [r for r in runs if r[0]]
