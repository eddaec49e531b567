"""Tables and JSON for the CLI: human units in tables, bytes and Unix seconds in --json."""

from __future__ import annotations

import shlex
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

import msgspec

from xce.core.arrays import element_text, split_id
from xce.core.units import fmt_bytes, fmt_duration


def print_json(obj: Any) -> None:
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(obj).decode(), indent=2) + "\n")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(c) for c in headers]] + [["-" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def job_rows(jobs: Sequence[Any], now: float, reasons: bool = False) -> str:
    """The jobs table; ``reasons`` (bjobs -p): each job's reason on a line of its own under its row."""
    rows = []
    for j in jobs:
        run = (j.end_time or now) - j.start_time if j.start_time else None
        rows.append([element_text(j.id), j.user, j.state, j.queue, ",".join(j.hosts) or "-", j.slots,
                     fmt_bytes(j.mem_reserved), fmt_bytes(j.mem_actual), fmt_bytes(j.mem_peak),
                     pct(j.efficiency), fmt_duration(run), j.name or " ".join(j.command)[:30]])
    text = table(["JOBID", "USER", "STAT", "QUEUE", "HOSTS", "SLOTS", "RESV", "ACTUAL", "PEAK",
                  "EFF", "RUNTIME", "NAME"], rows)
    if not reasons:
        return text
    head, *lines = text.split("\n")
    return "\n".join([head, *(f"{line}\n {j.reason};" if j.reason else line
                              for line, j in zip(lines, jobs, strict=True))])


def job_long(j: Any, now: float) -> str:
    lines = [f"Job <{element_text(j.id)}>, Name <{j.name or '-'}>, User <{j.user}>, Queue <{j.queue}>, State <{j.state}>",
             f"  Command: {shlex.join(j.command)}" + ("   (a job script, kept as submitted)" if j.script else ""),
             "  " + "   ".join(f"{what}: {_when(t)}" for what, t in
                              (("Submitted", j.submit_time), ("Started", j.start_time), ("Ended", j.end_time))
                              if t is not None),
             f"  Submit host: {j.submit_host or '-'}   Cwd: {j.cwd or '-'}   Output: {j.stdout or '(worker output directory)'}   "
             f"Error: {j.stderr or '(with the output)'}",
             f"  Requirements: {j.resreq or '-'}   Slots: {j.slots}   Mem limit: {fmt_bytes(j.mem_limit)}"
             + ("   Exclusive execution" if j.exclusive else ""),
             f"  Memory: reserved {fmt_bytes(j.mem_reserved)}, actual {fmt_bytes(j.mem_actual)}, "
             f"peak {fmt_bytes(j.mem_peak)}, charged {fmt_bytes(j.mem_charged)}, efficiency {pct(j.efficiency)}"]
    if j.mem_basis:
        lines.append(f"  Reservation sized: {j.mem_basis}")
    if getattr(j, "mem_resized", ""):  # shrunk or restored (docs/accounting.md): in force vs asked, when, why
        lines.append(f"  Reservation in force: {fmt_bytes(j.mem_reserved)} of {fmt_bytes(j.mem_asked)} asked; "
                     f"{_when(j.mem_resized_time)} {j.mem_resized}")
    if j.array:
        lines.append(f"  Array: {j.array}, element {split_id(j.id)[1]}")
    if j.project or j.group or j.run_estimate is not None:
        lines.append(f"  Project: {j.project or '-'}   Group: {j.group or '-'}   Run estimate: "
                     + (f"{j.run_estimate / 60:g} min" if j.run_estimate is not None else "-"))
    if j.depend:
        lines.append(f"  Dependency: {j.depend}")
    if j.pre_exec:
        lines.append(f"  Pre-execution command: {j.pre_exec}")
    if j.priority or j.run_limit is not None:
        lines.append(f"  Priority: {j.priority}   Run limit: " +
                     (f"{j.run_limit / 60:g} min" if j.run_limit is not None else "-"))
    if getattr(j, "warn_signal", 0):
        lines.append(f"  Warning: {_signame(j.warn_signal)} {j.warn_time:g} s before the run limit, to "
                     f"{_WARN_TO[j.warn_to]}" + ("" if j.run_limit is not None else " (no run limit: never sent)"))
    if j.reason:
        lines.append(f"  {'Pending reason' if j.state == 'PEND' else 'Reason'}: {j.reason}")
    if j.evictions:
        lines.append(f"  Evicted: {j.evictions} time{'' if j.evictions == 1 else 's'} (preempted or reclaimed)")
    if j.order is not None:
        lines += order_lines(j.order)
    if j.exit_code is not None or j.signal is not None:
        lines.append(f"  Exit code: {j.exit_code}" + (f", signal {j.signal}" if j.signal else ""))
    if j.mem_slack_integral:
        lines.append(f"  Reserved but unused: {fmt_bytes(int(j.mem_slack_integral))}·s")
    if j.accounts:
        lines.append("  Per host:")
        moved = any(a.mem_asked != a.mem_reserved for a in j.accounts if getattr(a, "mem_asked", 0))
        head = ["HOST", "SLOTS", "RESERVED", *(["ASKED"] if moved else []), "ACTUAL", "PEAK", "CHARGED", "SLACK",
                "OVERAGE"]
        lines.append("    " + table(head,
                                     [[a.host, a.slots, fmt_bytes(a.mem_reserved),
                                       *([fmt_bytes(a.mem_asked)] if moved else []), fmt_bytes(a.mem_actual),
                                       fmt_bytes(a.mem_peak), fmt_bytes(a.mem_charged), fmt_bytes(a.mem_slack),
                                       fmt_bytes(a.mem_overage)] for a in j.accounts]).replace("\n", "\n    "))
    return "\n".join(lines)


_WARN_TO = {"": "all its processes", "batch": "its batch shell", "steps": "its steps (srun, blaunch)"}


def _signame(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def order_lines(o: Any) -> list[str]:
    """A pending job's place in the order of pending work: each stage's figure, and which stage
    puts the job just ahead of it first."""
    f = o.figures
    out = [f"  Order: {o.position} of {o.pending} pending   queue priority {f['queue']:g}   "
           f"fairshare {f['fairshare']:.2f}   job priority {f['job']:g}   submitted {_when(f['submit'])}"]
    if o.ahead is not None:
        out.append(f"  Behind job {element_text(o.ahead)}: {o.why}")
    return out


def share_rows(rows: Sequence[Any]) -> str:
    """`xce fairshare`: the share trees as sshare lists them, one node a line, indented by depth."""
    return table(["TREE", "NODE", "BY", "RAW_SHARES", "NORM_SHARES", "SLOT_HOURS", "MEM_GB_HOURS",
                  "EFFECTV_USAGE", "FAIRSHARE"],
                 [[r.tree or "cluster", "  " * (len(r.path) - 1) + r.path[-1], r.by, r.shares, f"{r.share:.3f}",
                   f"{r.slot_seconds / 3600:.2f}", f"{r.mem_seconds / 3600 / 2**30:.2f}", f"{r.usage:.3f}",
                   f"{r.priority:.3f}"] for r in rows])


def limit_rows(rows: Sequence[Any]) -> str:
    """`xce limits`: each limit's use by each principal, USED/MAX ('-': no cap), as blimits shows it."""
    def of(used: Any, cap: Any, show: Any = str) -> str:
        return f"{show(used)}/{show(cap) if cap is not None else '-'}"
    return table(["NAME", "PER", "WHO", "JOBS", "SLOTS", "MEM", "PEND", "HELD"],
                 [[r.name, r.per, _limit_who(r), of(r.jobs, r.max_jobs), of(r.slots, r.max_slots),
                   of(r.mem, r.max_mem, fmt_bytes), of(r.pending, r.max_pending),
                   " ".join(element_text(i) for i in r.held) or "-"] for r in rows])


def _limit_who(r: Any) -> str:
    """A principal's name; "" is either the jobs with no group or project, or, with no use at
    all, a limit nobody uses yet (LimitBook.rows)."""
    if r.who:
        return r.who
    return f"(no {r.per})" if r.jobs or r.pending or r.slots or r.mem or r.held else "-"


def queue_long(q: Any, counts: dict[str, int], default: bool, hosts: str) -> str:
    """One queue's every setting, as ``bqueues -l`` shows a queue's limits and policies."""
    def secs(t: float | None) -> str:
        return "-" if t is None else f"{t / 60:g} min"

    def mem(b: int | None) -> str:
        return "-" if not b else fmt_bytes(b)

    sizing = (f"auto (p95 of past peaks + {100 * q.mem_auto_margin:g} % from {q.mem_auto_min_runs} runs, "
              f"fewer runs: {mem(q.mem_auto_fallback)})"
              if q.mem_default_auto else mem(q.mem_default))
    retry = (f"{q.mem_retries} x{q.mem_retry_factor:g} up to {mem(q.mem_retry_max) if q.mem_retry_max else 'no cap'}"
             if q.mem_retries else "no")
    state_counts = "  ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "no jobs"
    return "\n".join([
        f"Queue <{q.name}>" + ("  (default)" if default else "") + (f"  {q.description}" if q.description else ""),
        f"  Priority: {q.priority}   Rerunnable: {'yes' if q.rerunnable else 'no'}   Jobs: {state_counts}",
        f"  Run limit: default {secs(q.run_limit_default)}, maximum {secs(q.run_limit_max)}",
        f"  Memory limit (-M): default {mem(q.mem_limit_default)}, maximum {mem(q.mem_limit_max)}",
        f"  Reservation without mem: {sizing}   Retry after a memory kill: {retry}",
        f"  Reclaimable: {'yes, evicted by ' + q.reclaim_policy if q.reclaimable else 'no'}   "
        f"Dependency never satisfied: {q.dep_never}",
        f"  Hosts: {hosts}"])


def _when(t: float) -> str:
    return time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(t))


def recommend_rows(rows: Sequence[Any]) -> str:
    """`xce recommend`: one line per (user, job, queue), the most wasteful first."""
    return table(["USER", "JOB", "QUEUE", "RUNS", "REQUESTED", "P95_PEAK", "MAX_PEAK", "RECOMMEND", "WASTED"],
                 [[r.user, r.job[:30], r.queue, r.runs, fmt_bytes(r.mem_requested), fmt_bytes(r.mem_peak_p95),
                   fmt_bytes(r.mem_peak_max), fmt_bytes(r.mem_recommended),
                   f"{fmt_bytes(int(r.mem_wasted_hours))}·h"] for r in rows])


def host_rows(hosts: Sequence[Any], long: bool) -> str:
    if not long:
        return table(["HOST", "STATUS", "SLOTS", "USED", "MEM", "AVAIL", "RESERVED", "ACTUAL"],
                     [[h.name, h.state, h.slots_total, h.slots_used, fmt_bytes(h.mem_total),
                       fmt_bytes(h.mem_available), fmt_bytes(h.mem_reserved), fmt_bytes(h.mem_actual)]
                      for h in hosts])
    out = []
    for h in hosts:
        out.append(f"HOST {h.name}  status {h.state}  slots {h.slots_used}/{h.slots_total}  ncpus {h.ncpus}")
        out.append("  mem: " + ", ".join(f"{k} {fmt_bytes(getattr(h, 'mem_' + k))}" for k in (
            "total", "os_available", "reserved", "actual", "slack", "reclaimable", "overage", "charged",
            "available")))
        for name, total in sorted(h.virtual_total.items()):
            out.append(f"  {name}: {h.virtual_used.get(name, 0)}/{total} used")
        if h.attrs:
            out.append("  attributes: " + " ".join(f"{k}={v}" for k, v in sorted(h.attrs.items())))
    return "\n".join(out)


def dry_run_text(spec: Any, req: Any, res: dict[str, Any], queue: str | None, asked_s: float) -> str:
    """`xce submit --dry-run`: the parsed request as a person reads it, and who checked it."""
    head = (f"Dry run: nothing was submitted. The controller would accept the job into queue <{queue}>."
            if queue else
            f"Dry run: nothing was submitted. No controller answered within {asked_s:g} s, so only the options "
            "and -R were checked here; the queue, and whether any host could ever run the job, were not.")
    fields = [("Command", " ".join(spec.command)), ("Name", spec.name), ("Queue", queue or spec.queue),
              ("Slots", spec.slots), ("Mem limit", fmt_bytes(spec.mem_limit) if spec.mem_limit else ""),
              ("Requirements", spec.resreq), *_resreq_fields(req, res), ("Working dir", spec.cwd),
              ("Output", spec.stdout or ""), ("Errors", spec.stderr or ""),
              ("Rerunnable", {True: "yes", False: "no", None: ""}[spec.rerunnable]),
              ("Reclaim", "yes (runs on reclaimable memory)" if spec.reclaim else "")]
    return "\n".join([head] + [f"  {k + ':':<14} {v}" for k, v in fields if v not in ("", None)])


def _resreq_fields(req: Any, res: dict[str, Any]) -> list[tuple[str, str]]:
    def amount(item: Any) -> str:
        rdef = res.get(item.name)
        size = fmt_bytes(item.amount) if rdef is not None and rdef.unit == "bytes" else str(item.amount)
        span = f" for {fmt_duration(item.duration_s)}" if item.duration_s else ""
        return f"{item.name} {size} per {item.method}{span}{', decaying' if item.decay else ''}"

    out = [("Reserve", "; ".join(amount(i) for i in req.rusage)), ("Select", req.select or "")]
    out.append(("Order", ", ".join(("" if k.descending else "-") + k.name for k in req.order)))
    out.append(("Span", ", ".join(f"{k}={v}" for k, v in (("hosts", req.span_hosts), ("ptile", req.span_ptile))
                                  if v is not None)))
    return out


ARRAY_STATES = ("PEND", "RUN", "DONE", "EXIT", "SSUSP", "USUSP", "PSUSP")


def array_rows(arrays: Sequence[Any]) -> str:
    """bjobs -A: one row per array, its elements counted by state."""
    return table(["JOBID", "ARRAY_SPEC", "OWNER", "QUEUE", "NJOBS", *ARRAY_STATES],
                 [[a.id, f"{a.name}[{a.indices}]" + (f"%{a.limit}" if a.limit else ""), a.user, a.queue, a.elements,
                   *(a.counts.get(s, 0) for s in ARRAY_STATES)] for a in arrays])
