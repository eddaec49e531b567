"""Modal screens: the help (keys and colours) and the kill confirmation."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from xce.tui import fmt

KEYS = (
    ("tab", "switch between the hosts and jobs views"),
    ("↑ ↓ PgUp PgDn Home End", "move the cursor"),
    ("enter / double-click", "open the detail (on an array ▸: list its elements)"),
    ("a", "jobs: one row per array ⇄ every element"),
    ("s / S", "sort by the next / previous column (or click a column title)"),
    ("r", "reverse the sort"),
    ("/", "filter: user: queue: state: host: name: id: array: text; ! inverts"),
    ("k", "kill the selected job (asks first)"),
    ("p", "pause / resume updates (and the replay)"),
    ("+ - .", "replay: faster, slower, step one message"),
    ("ctrl+p", "command palette: every action"),
    ("escape", "back / close"),
    ("?", "this help"),
    ("q", "quit"),
)


def help_text() -> Text:
    t = Text()
    t.append("xce-top — keys\n\n", "bold")
    for k, what in KEYS:
        t.append(f"  {k:<24}", "bold cyan")
        t.append(f"{what}\n")
    t.append("\nColours\n\n", "bold")
    for style, ch, what in ((fmt.WITHIN, "█", "actual memory within the reservation"),
                            (fmt.OVER, "█", "overage: actual above the reservation"),
                            (fmt.SLACK, "▒", "idle slack: reserved but unused"),
                            (fmt.FREE, "·", "capacity nobody reserved"),
                            (fmt.LOW, "■", f"job row: running, using < {fmt.LOW_EFFICIENCY:.0%} of its reservation"),
                            (fmt.DEAD, "■", "ended job, unavailable host")):
        t.append(f"  {ch * 3} ", style)
        t.append(f"{what}\n")
    t.append("\nStopped  ", "bold")
    for state, what in (("PSUSP", "held"), ("USUSP", "by its user"), ("SSUSP", "by the system"),
                        ("UNKWN", "host silent")):
        t.append(state, fmt.STATE_STYLES[state])
        t.append(f" {what}  ")
    t.append("\n")
    t.append("\nFilter examples: ", "bold")
    t.append("user:alice state:RUN   !state:DONE   host:node1 oom   ! queue:normal")
    return t


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: 92; max-width: 100%; height: auto; max-height: 100%;
                            border: round $accent; background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(help_text())


class ConfirmKill(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmKill { align: center middle; }
    ConfirmKill > Static { width: 60; max-width: 90%; border: thick $error; background: $surface;
                           padding: 1 2; }
    """
    BINDINGS = [Binding("y", "answer(True)", "yes, kill"), Binding("n,escape", "answer(False)", "no")]

    def __init__(self, job_id: int, what: str) -> None:
        super().__init__()
        self.job_id, self.what = job_id, what

    def compose(self) -> ComposeResult:
        t = Text()
        t.append(f"Kill job {self.job_id}?\n", "bold")
        t.append(f"{self.what}\n\n")
        t.append("y", "bold red")
        t.append(" kill   ")
        t.append("n", "bold")
        t.append(" keep it")
        yield Static(t)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
