"""A small block-character plot: a filled series against a line, in a Rich Text.

Used by the detail screens: a job's actual memory (filled; green within its
reservation, red above it) against its reservation line (yellow; it slopes when
the reservation decays), and a host's actual against its reserved total.
Pure functions: per-column values in, Text out.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from rich.style import Style
from rich.text import Text

from xce.tui import fmt

EIGHTHS = " ▁▂▃▄▅▆▇█"
LINE = Style(color="yellow", bold=True)
AXIS = Style(color="bright_black")
LABEL_W = 7


def resample(times: Sequence[float], values: Sequence[int], t0: float, t1: float,
             width: int) -> list[int | None]:
    """The step function (last value at or before each column's time) per column."""
    out: list[int | None] = []
    span = max(t1 - t0, 1e-9)
    for c in range(width):
        tc = t0 + (c + 1) * span / width
        i = bisect_right(times, tc) - 1
        out.append(values[i] if i >= 0 else None)
    return out


def block_plot(fill: Sequence[int | None], line: Sequence[int | None], height: int,
               t0: float, t1: float, ymax: int | None = None) -> Text:
    width = len(fill)
    top = max([v for v in (*fill, *line) if v is not None] + [ymax or 0, 1])
    top = int(top * 1.08) if ymax is None else top
    step = top / height
    text = Text(no_wrap=True)
    for r in range(height - 1, -1, -1):
        lo, hi = r * step, (r + 1) * step
        label = fmt.mem(int(hi)) if r == height - 1 else (fmt.mem(0) if r == 0 else "")
        text.append(label.rjust(LABEL_W - 1) + "┤" if label else " " * (LABEL_W - 1) + "│", AXIS)
        for c in range(width):
            v, ln = fill[c], line[c]
            on_line = ln is not None and lo <= ln < hi
            if v is not None and v > lo:
                k = 8 if v >= hi else max(1, int((v - lo) / step * 8))
                over = ln is not None and lo >= ln
                text.append(EIGHTHS[k], fmt.OVER if over else fmt.WITHIN)
            elif on_line:
                text.append("─", LINE)
            else:
                text.append(" ")
        text.append("\n")
    span = t1 - t0
    left = f"-{fmt.dur(span)}"
    text.append(" " * LABEL_W + left + " " * max(1, width - len(left) - 3) + "now", AXIS)
    return text
