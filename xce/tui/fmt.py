"""Display formatting for the console: human units, colours, the host memory bar.

Pure functions of views (xce.core.views) and numbers; no widget or model state.
The colour vocabulary is shared by every table, the header and the help screen.
"""

from __future__ import annotations

from typing import Any

from rich.style import Style
from rich.text import Text

from xce.core.units import fmt_bytes, fmt_duration
from xce.core.views import HostView, JobView

OVER = Style(color="red", bold=True)      # actual above reservation
SLACK = Style(color="blue")               # reserved but idle
WITHIN = Style(color="green")             # actual within reservation
FREE = Style(color="bright_black")        # capacity not reserved
LOW = Style(color="yellow")               # using a small share of the reservation
DEAD = Style(color="bright_black")        # ended jobs, unavailable hosts
STALE = Style(dim=True)                   # data while the controller is unreachable

LOW_EFFICIENCY = 0.25  # below this share of its reservation a running job "stands out"
LOW_AFTER_S = 10.0     # ... once it has run this long (start-up is not waste)

# Each job state its own colour and, for what is held or stopped, its own attribute, so the
# states stay apart without colour too (NO_COLOR: Textual's monochrome keeps bold, italic,
# underline and reverse): held PSUSP italic, user-stopped USUSP bold, system-stopped SSUSP
# underlined, UNKWN reversed.  The words themselves differ as well.
STATE_STYLES: dict[str, Style] = {
    "RUN": Style(color="green"), "PEND": Style(color="yellow"), "DONE": DEAD,
    "EXIT": Style(color="red"), "UNKWN": Style(color="magenta", reverse=True),
    "PSUSP": Style(color="cyan", italic=True), "USUSP": Style(color="bright_magenta", bold=True),
    "SSUSP": Style(color="dark_orange", underline=True),
    "ok": Style(color="green"), "full": Style(color="yellow"), "closed": Style(color="cyan"),
    "unavail": Style(color="red"),
}
HELD = Style(italic=True)                 # a reason that holds a job: a dependency, its user
NEVER = Style(color="red", bold=True)     # a dependency that can never be met; a run limit's end

# What a job in these states waits on when its own reason is empty (a running job's reason
# stays its own when it is stopped: it decides DONE or EXIT; xce/core/state.py).
STATE_REASONS = {
    "USUSP": "suspended by its user (xce stop)",
    "SSUSP": "suspended by the system",
    "UNKWN": "state unknown: its host stopped reporting",
}
LIMITED = frozenset({"RUN", "USUSP", "SSUSP", "UNKWN"})  # states a run limit still applies in


def mem(n: int | None) -> str:
    return fmt_bytes(n)


def dur(seconds: float | None) -> str:
    return fmt_duration(seconds)


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def run_time(v: JobView, now: float) -> float | None:
    if v.start_time is None:
        return None
    return max(0.0, (v.end_time or now) - v.start_time)


def shown_reason(v: Any, now: float) -> str:
    """The REASON column: the job's own reason (pending, dependency, held, exit), else what its
    state means; a live job with a run limit says it (LSF's RUNLIMIT; it counts run time less
    suspended time, which the worker keeps, so no "time left" here).  An array's row: its counts."""
    why = v.reason or STATE_REASONS.get(v.state, "")
    limit = getattr(v, "run_limit", None)
    if limit is not None and v.state in LIMITED:
        why = f"{why}; run limit {dur(limit)}" if why else f"run limit {dur(limit)}"
    return why


def reason_style(v: Any) -> Style | None:
    """Why a job can never run, or was ended by its run limit, in red; a hold in italics."""
    why = v.reason
    if why.startswith("never satisfied") or "RUNLIMIT" in why:
        return NEVER
    if why.startswith(("waiting for", "held")) or v.state in STATE_REASONS:
        return HELD
    return None


def job_style(v: JobView, now: float) -> Style | None:
    """How a job row stands out: over its reservation, or using little of it."""
    if v.state in ("DONE", "EXIT"):
        return DEAD
    if v.mem_actual is not None and v.mem_reserved > 0 and v.mem_actual > v.mem_reserved:
        return OVER
    if v.state == "RUN" and v.mem_actual is not None and v.mem_reserved > 0:
        rt = run_time(v, now) or 0.0
        if rt >= LOW_AFTER_S and v.mem_actual < LOW_EFFICIENCY * v.mem_reserved:
            return LOW
    return None


def host_style(v: HostView) -> Style | None:
    if v.state == "unavail":
        return DEAD
    if v.mem_overage > 0:
        return OVER
    return None


def mem_bar(v: HostView, width: int) -> Text:
    """Actual within reserved within capacity, at one glance.

    Green: actual within reservations; red: overage (actual beyond reservations);
    blue: idle slack (reserved, unused); grey dots: capacity nobody reserved.
    """
    width = max(4, width)
    cap = max(v.mem_total, v.mem_reserved + v.mem_overage, 1)
    within = max(0, v.mem_actual - v.mem_overage)
    parts = [(within, "█", WITHIN), (v.mem_overage, "█", OVER), (v.mem_slack, "▒", SLACK)]
    text = Text()
    used = 0
    for amount, ch, style in parts:
        n = round(amount * width / cap)
        if amount > 0:
            n = max(1, n)
        n = min(n, width - used)
        if n > 0:
            text.append(ch * n, style)
            used += n
    if used < width:
        text.append("·" * (width - used), FREE)
    return text
