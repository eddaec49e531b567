"""The command palette: every console action, by name (App.get_system_commands)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from textual.app import SystemCommand

from xce.tui.columns import HOST_COLUMNS, JOB_COLUMNS

if TYPE_CHECKING:
    from xce.tui.app import XceTop


def console_commands(app: XceTop) -> Iterator[SystemCommand]:
    yield SystemCommand("Show hosts", "the hosts view", lambda: app.show_view("hosts"))
    yield SystemCommand("Show jobs", "the jobs view", lambda: app.show_view("jobs"))
    yield SystemCommand("Open detail", "detail of the selected host or job", app.action_open)
    yield SystemCommand("Filter", "filter the current table (/)", lambda: app.table_action("filter"))
    yield SystemCommand("Clear filter", "show every row", lambda: app.table_action("clear"))
    yield SystemCommand("Reverse sort", "reverse the current sort (r)", lambda: app.table_action("reverse"))
    yield SystemCommand("Arrays: group / list elements", "jobs view: one row per array ⇄ every element (a)",
                        lambda: (app.show_view("jobs"), app.main_screen().action_group()))
    yield SystemCommand("Kill job", "kill the selected job, after a confirmation (k)", app.action_kill)
    yield SystemCommand("Pause / resume", "freeze or resume the display (p)", app.action_pause)
    yield SystemCommand("Help", "keys and colours (?)", app.action_help)
    for c in JOB_COLUMNS:
        yield SystemCommand(f"Sort jobs by {c.title}", f"jobs view, column {c.title}",
                            lambda k=c.key: app.sort_view("jobs", k))
    for c in HOST_COLUMNS:
        title = c.title.split()[0]
        yield SystemCommand(f"Sort hosts by {title}", f"hosts view, column {title}",
                            lambda k=c.key: app.sort_view("hosts", k))
    if app.player is not None:
        yield SystemCommand("Replay faster", "double the replay speed (+)", lambda: app.action_speed(1))
        yield SystemCommand("Replay slower", "halve the replay speed (-)", lambda: app.action_speed(-1))
        yield SystemCommand("Replay step", "apply the next recorded message (.)", app.action_step)
