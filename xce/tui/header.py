"""The header: cluster, leader and term, link state, counts by state, cluster memory.

Renders a ConsoleModel Summary; it never computes figures itself.  Ages are
given against the injected ``now`` so a replay or a test is deterministic.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from xce.tui import fmt
from xce.tui.model import HOST_STATES, JOB_STATES, ConsoleModel

BAD = Style(color="white", bgcolor="red", bold=True)


def header_text(m: ConsoleModel, now: float, paused: bool, replay: str = "") -> Text:
    s = m.summary()
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f" {m.cluster or 'xce'} ", Style(bold=True, reverse=True))
    t.append(f" leader {m.mirror.leader or '-'} term {m.term}")
    age = "never" if m.last_update is None else f"{max(0.0, now - m.last_update):.0f}s ago"
    t.append(f" │ last update {age}")
    if replay:
        t.append(f" │ {replay}", Style(color="cyan", bold=True))
    if paused:
        t.append(" │ ")
        t.append(" PAUSED ", Style(reverse=True, bold=True))
    t.append("\n")
    if m.link == "unreachable":
        t.append(" controller unreachable — reconnecting ", BAD)
        t.append(f" {m.problem}\n", fmt.STALE)
    elif m.link == "connecting" and not m.synced:
        t.append(" connecting to the controller…\n", Style(color="yellow"))
    t.append(" hosts ", Style(bold=True))
    t.append(f"{len(m.mirror.hosts)}")
    for st in HOST_STATES:
        if s.hosts_by_state.get(st):
            t.append(f" {st} {s.hosts_by_state[st]}", fmt.STATE_STYLES[st])
    t.append("   jobs ", Style(bold=True))
    t.append(f"{len(m.mirror.jobs)}")
    for st in JOB_STATES:
        if s.jobs_by_state.get(st):
            t.append(f" {st} {s.jobs_by_state[st]}", fmt.STATE_STYLES[st])
    t.append("\n mem ", Style(bold=True))
    mm = s.mem
    t.append(f"capacity {fmt.mem(mm['capacity'])}  reserved {fmt.mem(mm['reserved'])}  ")
    t.append(f"actual {fmt.mem(mm['actual'])}", fmt.WITHIN)
    t.append("  ")
    t.append(f"slack {fmt.mem(mm['slack'])}", fmt.SLACK)
    t.append("  ")
    t.append(f"overage {fmt.mem(mm['overage'])}", fmt.OVER if mm["overage"] else Style())
    if m.link == "unreachable":
        t.stylize(fmt.STALE, t.plain.index("\n", t.plain.index("reconnecting")) + 1)
    return t


class HeaderBar(Static):
    DEFAULT_CSS = """HeaderBar { height: auto; max-height: 4; background: $panel;
                                text-wrap: nowrap; text-overflow: ellipsis; }"""

    def show(self, text: Text) -> None:
        """Update only when the text changed, and re-layout only when its height did."""
        last = getattr(self, "_last", None)
        if last != text.plain or getattr(self, "_last_spans", None) != text.spans:
            lines = text.plain.count("\n")
            self.update(text, layout=last is None or last.count("\n") != lines)
            self._last, self._last_spans = text.plain, list(text.spans)
