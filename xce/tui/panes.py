"""Glue between the model and a RowTable: row renderers and the per-frame update.

``frame_table`` is what every table does each frame: let its RowSet take the
changes, then repaint only the visible rows that changed (a hard change, a
sample on one of the job's hosts, or, once a second, a running job's run
time), or everything after a resnapshot.  An array's row is drawn again on a hard
change of one of its elements, and once a second for its memory figures.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.style import Style

from xce.tui import fmt
from xce.tui.columns import HOST_COLUMNS, JOB_COLUMNS, Cell
from xce.tui.model import Changes, ConsoleModel
from xce.tui.table import RowTable

Now = Callable[[], float]


def job_renderer(model: ConsoleModel, now: Now) -> Callable[[Any], tuple[list[Cell], Style | None] | None]:

    def render(jid: int) -> tuple[list[Cell], Style | None] | None:
        with model.lock:  # rows render during painting, outside the frame's lock
            v = model.row_view(jid)  # a job's view, or an array's row
        if v is None:
            return None
        t = now()
        return [c.cell(v, t) for c in JOB_COLUMNS], fmt.job_style(v, t)
    return render


def host_renderer(model: ConsoleModel, now: Now) -> Callable[[Any], tuple[list[Cell], Style | None] | None]:

    def render(name: str) -> tuple[list[Cell], Style | None] | None:
        with model.lock:
            v = model.host_view(name)
        if v is None:
            return None
        t = now()
        return [c.cell(v, t) for c in HOST_COLUMNS], fmt.host_style(v)
    return render


def frame_table(table: RowTable, m: ConsoleModel, ch: Changes, now: float, new_second: bool) -> None:
    order = table.rows.update(m, ch, now)
    greyed = m.link == "unreachable"
    if ch.reset:
        table.sync_rows(None, order, greyed)
        return
    if table.rows.kind == "hosts":
        table.sync_rows(ch.hosts.__contains__, order, greyed)
        return
    jobs, arrays = m.mirror.jobs, m.arrays

    def changed(jid: int) -> bool:
        job = jobs.get(jid)
        if job is None and jid in arrays:
            # An array's row sums its live elements' accounts (4 ms at 1,000 running): drawn again
            # on a hard change of an element, and its memory figures once a second.
            return new_second or jid in ch.jobs
        if new_second and job is not None and job.start_time is not None and job.end_time is None:
            return True  # its run time moved
        return ch.job_changed(job, jid)
    table.sync_rows(changed, order, greyed)


def status_text(table: RowTable, paused_note: str = "") -> str:
    rs = table.rows
    arrow = "▼" if rs.reverse else "▲"
    parts = [f"{rs.kind}: {len(rs.keys):,} of {rs.total:,}", f"sort {rs.sort_col.title}{arrow}"]
    if rs.base.active:
        parts.append(f"on {rs.base.text}")
    if rs.filter.active:
        parts.append(f"filter: {rs.filter.text}")
    if rs.kind == "jobs" and not rs.group and not rs.base.active:  # toggled off (a host's jobs never group)
        parts.append("every array element listed (a: one row per array)")
    return " · ".join(parts) + (f"  {paused_note}" if paused_note else "")
