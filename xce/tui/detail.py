"""Detail screens: a job (its memory over time against its reservation, accounts
per host, reason; then its array, dependency, run limit, script and history) and a
host (its memory history and its jobs).  A job's history and its array's summary are
asked of the controller once, in a worker thread, when the screen opens.

Figures come from the model's views; the reservation line is the reservation
in force at each moment, from xce.core.accounting.reserved_in_force (so a decaying
reservation slopes).  The screens re-render on every frame the App hands them.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from xce.core.accounting import reserved_in_force
from xce.core.arrays import element_text, split_id
from xce.core.errors import XceError
from xce.core.model import HistEvent
from xce.core.views import ArrayView, JobView
from xce.replica.live import mem_decay
from xce.tui import fmt
from xce.tui.actions import Actions
from xce.tui.header import HeaderBar
from xce.tui.main_screen import FILTER_CSS, TableScreen
from xce.tui.model import Changes, ConsoleModel
from xce.tui.panes import frame_table, job_renderer
from xce.tui.plot import LABEL_W, block_plot, resample
from xce.tui.rows import RowSet
from xce.tui.table import RowTable

if TYPE_CHECKING:
    from xce.tui.app import XceTop

WINDOW = 600.0  # seconds of history a plot shows at most


def job_info(m: ConsoleModel, jid: int, now: float) -> Text:
    v = m.job_view(jid)
    if v is None:
        return Text(f"job {jid} is no longer known to the controller", "bold red")
    t = Text()
    t.append(f"Job {v.id}", "bold")
    t.append(f"  {v.name or '-'}  user {v.user}  queue {v.queue}  ")
    t.append(v.state, fmt.STATE_STYLES.get(v.state, ""))
    t.append(f"  slots {v.slots}  hosts {','.join(v.hosts) or '-'}\n")
    t.append(f"command {shlex.join(v.command)}" + ("   (a job script, kept as submitted)" if v.script else "") + "\n")
    t.append(f"resreq  {v.resreq or '-'}\n")
    t.append(f"reserved {fmt.mem(v.mem_reserved)}  actual ")
    t.append(fmt.mem(v.mem_actual), fmt.job_style(v, now) or "")
    t.append(f"  peak {fmt.mem(v.mem_peak)}  charged {fmt.mem(v.mem_charged)}  limit {fmt.mem(v.mem_limit)}"
             f"  efficiency {fmt.pct(v.efficiency)}  run time {fmt.dur(fmt.run_time(v, now))}\n")
    if v.exit_code is not None or v.signal is not None:
        t.append(f"exit code {v.exit_code}  signal {v.signal}\n")
    t.append_text(job_model_line(m, jid, v))
    t.append("reason: ", "bold")
    why = fmt.shown_reason(v, now)
    t.append(why or "-", fmt.reason_style(v) or ("yellow" if why else ""))
    return t


def job_model_line(m: ConsoleModel, jid: int, v: JobView) -> Text:
    """Its array, dependency, run limit and priority (bjobs -l's lines), when it has any."""
    t = Text()
    array_id, index = split_id(jid)
    if index is not None:
        g = m.arrays.get(array_id)
        t.append(f"element {element_text(jid)} of array {g.title() if g else array_id}")
        t.append(f"  ({g.counts_text()})\n" if g else "\n")
    if v.depend or v.run_limit is not None or v.priority:
        t.append(f"dependency {v.depend or '-'}  run limit {fmt.dur(v.run_limit)}  priority {v.priority}\n")
    return t


SCRIPT_LINES = 8  # of a job script shown in its detail (the rest: xce jobs -l, the script file)


def job_model_info(m: ConsoleModel, jid: int, facts: JobFacts) -> Text:
    """Below the plot: the script's first lines, and what the controller said of the job's history
    and its array (asked when the screen opened)."""
    v, job = m.job_view(jid), m.job(jid)
    t = Text()
    if v is None or job is None:
        return t
    array_id, index = split_id(jid)
    for a in facts.arrays if index is not None else ():
        t.append("array ", "bold")
        t.append(f"the controller counts {a.elements:,} elements: " +
                 " ".join(f"{n} {s}" for s, n in sorted(a.counts.items())) + ("  (held)" if a.held else "") + "\n")
    if job.spec.script:
        lines = job.spec.script.splitlines()
        t.append("script", "bold")
        t.append(f" ({len(lines)} lines)\n")
        for line in lines[:SCRIPT_LINES]:
            t.append(f"  │ {line}\n", "dim")
        if len(lines) > SCRIPT_LINES:
            t.append(f"  │ … {len(lines) - SCRIPT_LINES} more (xce jobs -l)\n", "dim")
    t.append("history", "bold")
    if facts.problem:
        t.append(f"  not available: {facts.problem}\n", "dim")
    elif facts.history is None:
        t.append("  asking the controller…\n", "dim")
    else:
        t.append("\n")
        for e in facts.history[-HISTORY_LINES:]:
            t.append(f"  {time.strftime('%H:%M:%S', time.localtime(e.time))}  {e.event:<18} {e.by or '-':<12} {e.detail}\n")
    return t


HISTORY_LINES = 12  # the latest events shown (xce hist has them all)


@dataclass(slots=True)
class JobFacts:
    """What the detail asked the controller when it opened (Actions.hist, Actions.arrays)."""

    history: list[HistEvent] | None = None
    arrays: list[ArrayView] = field(default_factory=list)
    problem: str = ""


def fetch_facts(actions: Actions, jid: int) -> JobFacts:
    """The job's history and, for an element, its array's summary; a refusal is said, not raised."""
    facts = JobFacts()
    try:
        facts.history = actions.hist(jid)
        array_id, index = split_id(jid)
        if index is not None:
            facts.arrays = actions.arrays([array_id])
    except XceError as e:
        facts.problem = e.message
    return facts


def accounts_table(m: ConsoleModel, jid: int) -> Table:
    v = m.job_view(jid)
    tab = Table(box=None, header_style="bold", pad_edge=False, expand=False)
    for col in ("HOST", "SLOTS", "RESERVED", "ACTUAL", "PEAK", "CHARGED", "SLACK", "OVERAGE"):
        tab.add_column(col, justify="left" if col == "HOST" else "right")
    for a in (v.accounts if v else []):
        tab.add_row(a.host, str(a.slots), fmt.mem(a.mem_reserved), fmt.mem(a.mem_actual), fmt.mem(a.mem_peak),
                    fmt.mem(a.mem_charged), Text(fmt.mem(a.mem_slack), fmt.SLACK),
                    Text(fmt.mem(a.mem_overage), fmt.OVER if a.mem_overage else ""))
    return tab


def job_plot(m: ConsoleModel, jid: int, now: float, width: int, height: int) -> Text:
    job = m.job(jid)
    if job is None or job.start_time is None:
        return Text("not started: nothing to plot yet", "dim")
    t1 = job.end_time or now
    t0 = max(job.start_time, t1 - WINDOW)
    times, values = m.job_series(jid)
    fill = resample(times, values, t0, t1, width)
    duration, decay = mem_decay(job)
    span = max(t1 - t0, 1e-9)
    line = [sum(reserved_in_force(a.mem, duration, decay, job.start_time, t0 + (c + 1) * span / width)
                for a in job.allocs) for c in range(width)]
    title = Text("actual memory ", "bold")
    title.append("█ within", fmt.WITHIN)
    title.append(" █ above", fmt.OVER)
    title.append(" the reservation ")
    title.append("── reserved" + (" (decays)" if decay or duration else ""), "yellow")
    return title + Text("\n") + block_plot(fill, line, height, t0, t1)


class JobDetailScreen(Screen[None]):
    DEFAULT_CSS = ("JobDetailScreen #plot { height: auto; } JobDetailScreen #accounts { margin-top: 1; } "
                   "JobDetailScreen #jobmodel { margin-top: 1; }")
    BINDINGS = [Binding("escape", "app.pop_screen", "back"), Binding("k", "app.kill", "kill")]
    app: XceTop

    def __init__(self, job_id: int) -> None:
        super().__init__()
        self.job_id = job_id

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        with VerticalScroll():
            yield Static(id="info")
            yield Static(id="plot")
            yield Static(id="accounts")
            yield Static(id="jobmodel")
        yield Footer()

    def on_mount(self) -> None:
        self.facts = JobFacts()
        self.app.run_worker(self._fetch, thread=True, group="facts")

    def _fetch(self) -> None:
        facts = fetch_facts(self.app.actions, self.job_id)
        self.app.call_from_thread(self._fetched, facts)

    def _fetched(self, facts: JobFacts) -> None:
        self.facts = facts
        if self.is_mounted:
            self.app.render_frame(self)

    def frame(self, m: ConsoleModel, ch: Changes, now: float, new_second: bool) -> None:
        self.query_one(HeaderBar).show(self.app.header(now))
        width = max(20, self.app.size.width - LABEL_W - 3)
        height = 8 if self.app.size.height < 30 else 12
        self.query_one("#info", Static).update(job_info(m, self.job_id, now))
        self.query_one("#jobmodel", Static).update(job_model_info(m, self.job_id, self.facts))
        self.query_one("#plot", Static).update(job_plot(m, self.job_id, now, width, height))
        self.query_one("#accounts", Static).update(accounts_table(m, self.job_id))

    def selected_job(self) -> int:
        return self.job_id


def host_plot(m: ConsoleModel, name: str, now: float, width: int, height: int) -> Text:
    v = m.host_view(name)
    times, actual, reserved = m.host_series(name)
    if v is None or not times:
        return Text("no history yet", "dim")
    t0 = max(times[0], now - WINDOW)
    title = Text("memory ", "bold")
    title.append("█ actual", fmt.WITHIN)
    title.append(" ── reserved", "yellow")
    title.append(f"   (scale: capacity {fmt.mem(v.mem_total)})")
    return title + Text("\n") + block_plot(resample(times, actual, t0, now, width),
                                           resample(times, reserved, t0, now, width), height, t0, now,
                                           ymax=v.mem_total)


class HostDetailScreen(TableScreen):
    DEFAULT_CSS = FILTER_CSS + " #status { height: 1; background: $boost; } #hplot { height: auto; }"
    BINDINGS = [Binding("escape", "back", "back"), Binding("k", "app.kill", "kill")]

    def __init__(self, name: str) -> None:
        super().__init__()
        self.host = name

    def compose(self) -> ComposeResult:
        m = self.app.model
        yield HeaderBar(id="header")
        yield Static(id="hinfo")
        yield Static(id="hplot")
        yield Static(id="status")
        yield RowTable(RowSet("jobs", "state", base=f"host:{self.host}", group=False), job_renderer(m, self.app.now),
                       id="hostjobs")
        yield Input(placeholder="filter the jobs of this host", id="filter")
        yield Footer()

    def on_mount(self) -> None:
        self.table().focus()
        self.reframe()

    def table(self) -> RowTable:
        return self.query_one("#hostjobs", RowTable)

    def frame(self, m: ConsoleModel, ch: Changes, now: float, new_second: bool) -> None:
        self.query_one(HeaderBar).show(self.app.header(now))
        v = m.host_view(self.host)
        info = Text()
        if v is None:
            info.append(f"host {self.host} is no longer known", "bold red")
        else:
            info.append(f"Host {v.name} ", "bold")
            info.append(v.state, fmt.STATE_STYLES.get(v.state, ""))
            info.append(f"  slots {v.slots_used}/{v.slots_total}  cpus {v.ncpus}  capacity {fmt.mem(v.mem_total)}"
                        f"  OS-available {fmt.mem(v.mem_os_available)}  available {fmt.mem(v.mem_available)}\n")
            info.append(f"reserved {fmt.mem(v.mem_reserved)}  actual {fmt.mem(v.mem_actual)}  ")
            info.append(f"slack {fmt.mem(v.mem_slack)}", fmt.SLACK)
            info.append("  ")
            info.append(f"overage {fmt.mem(v.mem_overage)}", fmt.OVER if v.mem_overage else "")
            info.append("  ")
            info.append_text(fmt.mem_bar(v, 30))
        self.query_one("#hinfo", Static).update(info)
        height = 5 if self.app.size.height < 30 else 8
        self.query_one("#hplot", Static).update(
            host_plot(m, self.host, now, max(20, self.app.size.width - LABEL_W - 3), height))
        frame_table(self.table(), m, ch, now, new_second)
        self.show_status()

    @on(RowTable.Selected)
    def _open(self, msg: RowTable.Selected) -> None:
        self.app.open_detail("jobs", msg.key)

    def selected_job(self) -> int | None:
        return self.table().cursor_key
