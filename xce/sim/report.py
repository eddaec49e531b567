"""What a replay shows: the terminal table, and ``--report DIR``'s PNG plots and HTML page.

The table and JSON take the summaries of metrics.py as they are; the plots read the
outcomes' time series.  matplotlib is the optional ``sim`` extra, imported only here and
only for ``--report`` (a clear error says how to install it when it is missing).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xce.core.errors import InvalidRequest
from xce.sim.engine import Outcome
from xce.core.units import fmt_bytes

DAY = 86400.0
COLUMNS: tuple[tuple[str, str, str], ...] = (
    # (header, key, format)
    ("policy", "policy", "s"), ("util slots", "util_slots", "%"), ("util mem", "util_mem", "%"),
    ("wait mean", "wait_mean_s", "t"), ("median", "wait_median_s", "t"), ("p95", "wait_p95_s", "t"),
    ("bsld", "bounded_slowdown_mean", "f"), ("makespan", "makespan_s", "d"),
    ("kills", "mem_kills", "n"), ("lost", "jobs_lost", "n"), ("GB-h lost", "mem_seconds_lost", "g"),
    ("evicted", "evictions", "n"), ("GB-h evicted", "evicted_mem_seconds", "g"), ("retries", "retries", "n"),
    ("runlimit", "runlimit_kills", "n"),
    ("oversub min", "oversubscribed_host_minutes", "f"), ("slack/resv", "slack_share", "%"),
    ("held/cap", "held_share", "%"),
    ("fair", "fairness_jain", "f3"), ("run s", "wall_s", "f"), ("us/event", "us_per_event", "f"),
)


def _cell(v: Any, fmt: str) -> str:
    if v is None:
        return "-"
    if fmt == "s":
        return str(v)
    if fmt == "%":
        return f"{100 * v:.1f}%"
    if fmt == "t":
        return _dur(v)
    if fmt == "d":
        return f"{v / DAY:.1f}d"
    if fmt == "n":
        return str(int(v))
    if fmt == "g":
        return f"{v / 2**30 / 3600:.2f}"
    if fmt == "f3":
        return f"{v:.3f}"
    return f"{v:.1f}"


def _dur(s: float) -> str:
    if s < 60:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{s / 60:.1f}m"
    return f"{s / 3600:.1f}h"


def table(rows: Sequence[dict[str, Any]]) -> str:
    """A fixed-width table of the summaries (a row may lack a column: shown as -)."""
    grid = [[h for h, _, _ in COLUMNS]] + [[_cell(r.get(k), f) for _, k, f in COLUMNS] for r in rows]
    widths = [max(len(row[i]) for row in grid) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
                     for row in grid)


def describe(meta: dict[str, Any]) -> str:
    m = meta["machine"]
    u = meta["usage"]
    mem = fmt_bytes(m["mem"]) if m["mem"] else "no memory model"
    return (f"{meta['trace']}: {meta['jobs']} jobs replayed ({meta['skipped']} skipped); "
            f"{m['hosts']} hosts x {m['slots']} slots, {mem} each; ramp {u['ramp']:.0%} of the run in "
            f"{u['steps']} reports, noise {u['noise']}, seed {u['seed']}; kill grace {meta['kill_grace']} s"
            + ("; run limits enforced (TERM_RUNLIMIT)" if meta.get("run_limits") else ""))


# ---- plots ------------------------------------------------------------------------------

def _pyplot() -> Any:
    try:
        # matplotlib is the optional 'sim' extra: only --report draws
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # after use("Agg"): no display here
    except ImportError:
        raise InvalidRequest("--report needs matplotlib: pip install 'xce[sim]'") from None
    return plt


def plots(outcomes: Sequence[Outcome], out: Path) -> list[Path]:
    """The PNGs: utilisation and queue, wait CDF, memory over time, kills over time."""
    plt = _pyplot()
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for name, draw in (("utilisation", _utilisation), ("wait_cdf", _wait_cdf), ("memory", _memory),
                       ("kills", _kills)):
        fig = draw(plt, outcomes)
        path = out / f"{name}.png"
        fig.savefig(path, dpi=90, bbox_inches="tight")
        plt.close(fig)
        files.append(path)
    return files


def _days(o: Outcome) -> list[float]:
    return [(t - o.start) / DAY for t in o.series.t]


def _utilisation(plt: Any, outcomes: Sequence[Outcome]) -> Any:
    fig, (a, b) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for o in outcomes:
        a.plot(_days(o), [u / o.machine.slots_total for u in o.series.slots_used], label=o.policy, lw=0.8)
        b.plot(_days(o), o.series.pending, label=o.policy, lw=0.8)
    a.set_ylabel("slots in use (share)")
    b.set_ylabel("jobs pending")
    b.set_xlabel("days since the first submit")
    a.legend()
    a.set_title("Utilisation and queue length")
    return fig


def _wait_cdf(plt: Any, outcomes: Sequence[Outcome]) -> Any:
    fig, ax = plt.subplots(figsize=(9, 4))
    for o in outcomes:
        waits = sorted(max(1.0, r.start - r.submit) for r in o.records if r.start is not None)
        n = len(waits)
        ax.step(waits, [(i + 1) / n for i in range(n)], label=o.policy, lw=0.9, where="post")
    ax.set_xscale("log")
    ax.set_xlabel("wait (s, 1 s and less shown as 1)")
    ax.set_ylabel("share of jobs")
    ax.set_title("Wait-time CDF")
    ax.legend()
    return fig


def _memory(plt: Any, outcomes: Sequence[Outcome]) -> Any:
    fig, axes = plt.subplots(len(outcomes), 1, figsize=(9, 2.6 * len(outcomes)), sharex=True, squeeze=False)
    for ax, o in zip(axes[:, 0], outcomes):
        total = o.machine.mem * o.machine.hosts or 1
        d = _days(o)
        ax.plot(d, [v / total for v in o.series.reserved], label="reserved", lw=0.8)
        ax.plot(d, [v / total for v in o.series.actual], label="actual", lw=0.8)
        ax.plot(d, [v / total for v in o.series.slack], label="slack", lw=0.8)
        ax.plot(d, [v / total for v in o.series.held], label="held, unused", lw=0.8)
        ax.set_ylabel(f"{o.policy}: share of memory")
        ax.legend(loc="upper right")
    axes[0, 0].set_title("Memory reserved, actual, slack and held but unused over time")
    axes[-1, 0].set_xlabel("days since the first submit")
    return fig


def _kills(plt: Any, outcomes: Sequence[Outcome]) -> Any:
    fig, ax = plt.subplots(figsize=(9, 3.5))
    for o in outcomes:
        ax.plot(_days(o), o.series.kills, label=o.policy, lw=0.9)
    ax.set_xlabel("days since the first submit")
    ax.set_ylabel("jobs killed (cumulative)")
    ax.set_title("Memory-pressure kills over time")
    ax.legend()
    return fig


def sweep_plot(points: Sequence[tuple[float, dict[str, Any]]], out: Path) -> Path:
    """margin.png: the safety margin's trade-off, per policy -- memory given back to work
    (slack share, held share) against work lost (kills, evictions) and the mean wait."""
    plt = _pyplot()
    out.mkdir(parents=True, exist_ok=True)
    fig, (a, b, c) = plt.subplots(3, 1, figsize=(8, 8.5), sharex=True)
    for name in dict.fromkeys(r["policy"].split("@")[0] for _, r in points):
        pts = sorted((m, r) for m, r in points if r["policy"].split("@")[0] == name)
        ms = [m for m, _ in pts]
        a.plot(ms, [100 * r["held_share"] for _, r in pts], "o-", label=f"{name}: held, unused / capacity")
        a.plot(ms, [100 * r["slack_share"] for _, r in pts], "s--", label=f"{name}: slack / reserved")
        b.plot(ms, [r["mem_seconds_lost"] / 2**30 / 3600 for _, r in pts], "o-", label=f"{name}: GiB-h killed")
        b.plot(ms, [r["evicted_mem_seconds"] / 2**30 / 3600 for _, r in pts], "s--", label=f"{name}: GiB-h evicted")
        c.plot(ms, [r["wait_mean_s"] / 3600 for _, r in pts], "o-", label=f"{name}: mean wait")
    a.set_ylabel("%")
    b.set_ylabel("GiB-hours lost")
    c.set_ylabel("hours")
    c.set_xlabel("safety margin (share of a reservation: reclaim margin and right-sizing margin)")
    for ax in (a, b, c):
        ax.legend(fontsize=7)
    a.set_title("The safety margin's trade-off")
    path = out / "margin.png"
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return path


def html_page(rows: Sequence[dict[str, Any]], meta: dict[str, Any], pngs: Sequence[Path]) -> str:
    """One self-contained page: the model, the table, every plot embedded as base64."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h, _, _ in COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(r.get(k), f))}</td>" for _, k, f in COLUMNS)
                   + "</tr>" for r in rows)
    imgs = "".join(f'<h2>{html.escape(p.stem)}</h2><img alt="{html.escape(p.stem)}" '
                   f'src="data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}">' for p in pngs)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>xce sim: {html.escape(meta['trace'])}"
            f"</title><style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}"
            f"td,th{{border:1px solid #ccc;padding:3px 6px;text-align:right}}</style></head><body>"
            f"<h1>xce sim</h1><p>{html.escape(describe(meta))}</p><table><tr>{head}</tr>{body}</table>"
            f"{imgs}</body></html>")


def write_report(out: Path, outcomes: Sequence[Outcome], rows: Sequence[dict[str, Any]],
                 meta: dict[str, Any]) -> Path:
    pngs = plots(outcomes, out)
    page = out / "index.html"
    page.write_text(html_page(rows, meta, pngs), encoding="utf-8")
    return page

