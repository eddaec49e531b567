"""The columns of the hosts and jobs tables: titles, widths, cells and sort keys.

A column's ``cell`` renders one view (xce.core.views) as text; its ``sort`` gives the
sort key from the model (usage columns through ``ConsoleModel.usage``: the same
figures, without building 20,000 views).  Columns marked ``live`` depend on
usage reports, so a table sorted by one re-sorts as samples arrive (throttled
for big tables); the others change only with hard state.  Nothing here
computes accounting.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from xce.core.arrays import element_text, split_id
from xce.tui import fmt
from xce.tui.arrays import ArrayRow
from xce.tui.model import ConsoleModel

Cell = str | Text
STATE_RANK = {s: i for i, s in enumerate(("RUN", "SSUSP", "USUSP", "PSUSP", "UNKWN", "PEND", "EXIT", "DONE"))}


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    title: str
    width: int
    cell: Callable[[Any, float], Cell]
    sort: Callable[[ConsoleModel, Any], Any]
    right: bool = False
    live: bool = False


def _num(x: int | float | None) -> float:
    return -1.0 if x is None else float(x)


def _actual_cell(v: Any, now: float) -> Cell:
    s = fmt.mem(v.mem_actual)
    if v.mem_actual is not None and v.mem_reserved > 0 and v.mem_actual > v.mem_reserved:
        return Text(s, fmt.OVER)
    return s


def _eff_cell(v: Any, now: float) -> Cell:
    s = fmt.pct(v.efficiency)
    st = fmt.job_style(v, now)
    return Text(s, st) if st in (fmt.LOW, fmt.OVER) else s


_STATE_CELLS: dict[str, Text] = {st: Text(st, style) for st, style in fmt.STATE_STYLES.items()}


def _state_cell(state: str) -> Cell:
    # The same few states on every row: one Text each (the table reads cells, never changes them).
    cell = _STATE_CELLS.get(state)
    return cell if cell is not None else Text(state)


def _id_cell(v: Any, now: float) -> Cell:
    """``12[3]`` for an element (as xce jobs writes it), ``▸12`` for an array's row, else the id."""
    return f"▸{v.id}" if isinstance(v, ArrayRow) else element_text(v.id)


def _id_key(m: ConsoleModel, k: int) -> tuple[int, int]:
    # An array's row sorts before its elements, the elements by index.
    array_id, index = split_id(k)
    return array_id, -1 if index is None else index


def _state_key(m: ConsoleModel, k: int) -> int:
    job = m.mirror.jobs.get(k)
    g = m.arrays.get(k) if job is None else None
    state = job.state.value if job is not None else g.state if g is not None else ""
    return STATE_RANK.get(state, 9)


def _hosts_key(m: ConsoleModel, k: int) -> str:
    job = m.mirror.jobs.get(k)
    if job is not None:
        return ",".join(job.hosts)
    v = m.row_view(k)
    return ",".join(v.hosts) if v is not None else ""


def _start_key(m: ConsoleModel, k: int) -> float:
    job = m.mirror.jobs.get(k)
    start = job.start_time if job is not None else getattr(m.row_view(k), "start_time", None)
    return -(start or 9e18)


def _reason_cell(v: Any, now: float) -> Cell:
    text = fmt.shown_reason(v, now)
    style = fmt.reason_style(v)
    return Text(text, style) if style is not None and text else text


JOB_COLUMNS: tuple[Column, ...] = (
    Column("id", "ID", 9, _id_cell, _id_key, right=True),
    Column("name", "NAME", 12, lambda v, n: v.name or "-", lambda m, j: m.row_spec(j).name),
    Column("user", "USER", 8, lambda v, n: v.user, lambda m, j: m.row_spec(j).user),
    Column("queue", "QUEUE", 6, lambda v, n: v.queue, lambda m, j: m.row_spec(j).queue),
    Column("state", "STATE", 5, lambda v, n: _state_cell(v.state), _state_key),
    Column("hosts", "HOSTS", 9, lambda v, n: ",".join(v.hosts) or "-", _hosts_key),
    Column("slots", "SLOTS", 5, lambda v, n: str(v.slots), lambda m, j: m.row_spec(j).slots, right=True),
    Column("reserved", "RESV", 7, lambda v, n: fmt.mem(v.mem_reserved),
           lambda m, j: m.usage(j)[0], right=True, live=True),
    Column("actual", "ACTUAL", 7, _actual_cell, lambda m, j: _num(m.usage(j)[1]), right=True, live=True),
    Column("peak", "PEAK", 7, lambda v, n: fmt.mem(v.mem_peak), lambda m, j: m.usage(j)[2],
           right=True, live=True),
    Column("charged", "CHARGED", 7, lambda v, n: fmt.mem(v.mem_charged), lambda m, j: m.usage(j)[3],
           right=True, live=True),
    Column("eff", "EFF", 4, _eff_cell, lambda m, j: _num(m.usage(j)[4]), right=True, live=True),
    Column("run", "RUNTIME", 7, lambda v, n: fmt.dur(fmt.run_time(v, n)), _start_key, right=True),
    Column("reason", "REASON", 16, _reason_cell, lambda m, j: m.reason(j)),
)


def _hv(m: ConsoleModel, name: str) -> Any:
    return m.host_view(name)


def _host_mem(key: str, title: str) -> Column:
    return Column(key, title, 7, lambda v, n: fmt.mem(getattr(v, key)),
                  lambda m, h: getattr(_hv(m, h), key), right=True, live=True)


def _over_cell(v: Any, now: float) -> Cell:
    s = fmt.mem(v.mem_overage)
    return Text(s, fmt.OVER) if v.mem_overage > 0 else s


HOST_COLUMNS: tuple[Column, ...] = (
    Column("name", "HOST", 12, lambda v, n: v.name, lambda m, h: h),
    Column("state", "STATE", 7, lambda v, n: _state_cell(v.state), lambda m, h: _hv(m, h).state, live=True),
    Column("slots", "SLOTS", 7, lambda v, n: f"{v.slots_used}/{v.slots_total}",
           lambda m, h: _hv(m, h).slots_used, right=True, live=True),
    _host_mem("mem_total", "CAP"),
    _host_mem("mem_os_available", "OS-AVL"),
    _host_mem("mem_reserved", "RESV"),
    _host_mem("mem_actual", "ACTUAL"),
    _host_mem("mem_slack", "SLACK"),
    _host_mem("mem_reclaimable", "RECLM"),
    Column("mem_overage", "OVER", 7, _over_cell, lambda m, h: _hv(m, h).mem_overage, right=True, live=True),
    _host_mem("mem_available", "AVAIL"),
    Column("bar", "MEMORY  actual│overage│slack│free", 34, lambda v, n: fmt.mem_bar(v, 34),
           lambda m, h: _hv(m, h).mem_charged / max(1, _hv(m, h).mem_total), live=True),
)
