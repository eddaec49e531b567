"""`xce sim TRACE`'s run: the progress bar, and the run of each policy (the arguments: xce/sim/cli.py).

The shell around the pure replay: it reads the trace, times each policy (wall time is
the simulator's own cost, never the virtual clock), draws a progress bar on stderr when
that is a terminal, and prints the table, ``--json`` or ``--report DIR``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, replace
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xce.site.config import WorkerConf
from xce.sim import metrics, report
from xce.sim.engine import Engine, JobRecord, Outcome
from xce.sim.model import Machine, SimJob, UsageModel, machine, sim_jobs
from xce.sim.policies import Knobs, policies
from xce.sim.swf import load
from xce.core.errors import InvalidRequest
from xce.core.units import parse_mem


def progress_bar(label: str) -> Callable[[float, int], None] | None:
    """A bar on stderr, only when stderr is a terminal: the share of jobs done, the time so
    far and the cost of a simulated event so far."""
    if not sys.stderr.isatty():
        return None
    t0 = time.perf_counter()

    def show(done: float, events: int) -> None:
        n, spent = int(done * 30), time.perf_counter() - t0
        per = f"{spent / events * 1e6:6.0f} us/event" if events else ""
        sys.stderr.write(f"\r{label:>13} [{'#' * n}{'.' * (30 - n)}] {done:4.0%} {spent:6.1f}s {per}")
        sys.stderr.flush()

    return show


def run_policy(m: Machine, jobs: list[SimJob], name: str, usage: UsageModel, kill_grace: float,
               mem_floor: int, show: bool = True, run_limits: bool = False,
               knobs: Knobs = Knobs()) -> tuple[Outcome, dict[str, Any]]:
    (pol,) = policies(name)
    bar = progress_bar(pol.name) if show else None
    t0, c0 = time.perf_counter(), time.process_time()
    outcome = Engine(m, jobs, pol, usage, kill_grace, mem_floor, bar, run_limits, knobs).run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if bar is not None:
        bar(1.0, outcome.events)
        sys.stderr.write("\n")
    row = metrics.summary(outcome)
    row["digest"] = metrics.digest(outcome)  # every decision: equal digests, equal replays
    row["wall_s"] = wall
    row["cpu_s"] = cpu  # this process's CPU: what a busy shared machine does not inflate
    row["us_per_event"] = wall / max(1, outcome.events) * 1e6
    row["cpu_us_per_event"] = cpu / max(1, outcome.events) * 1e6
    return outcome, row


def record_row(jobs: list[SimJob], m: Machine) -> dict[str, Any]:
    recs = [JobRecord(j.submit, j.submit + j.wait, j.submit + j.wait + j.run, j.run, j.slots, j.user)
            for j in jobs if j.wait >= 0]
    return metrics.record_summary(recs, m.slots_total)


def knobs_of(a: argparse.Namespace) -> Knobs:
    """The reclaim, right-sizing and retry flags (checked by Knobs, which names a bad one)."""
    return Knobs(reclaim_share=a.reclaim_share, reclaim_queues=tuple(q for q in a.reclaim_queues.split(",") if q),
                 reclaim_margin=a.reclaim_margin, settle=a.settle, shrink_age=a.shrink_age, reclaim_policy=a.reclaim_policy,
                 size_margin=a.size_margin, size_min_runs=a.size_min_runs, history=a.history, mem_retries=a.mem_retries,
                 mem_retry_factor=a.mem_retry_factor, seed=a.seed)


def margins_of(text: str | None) -> list[float]:
    if not text:
        return []
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InvalidRequest(f"--sweep-margin takes numbers separated by commas, got {text!r}") from None


def cmd_sim(a: argparse.Namespace) -> int:
    if a.kill_grace is None:
        a.kill_grace = WorkerConf().kill_grace
    names = [p.name for p in policies(a.policy)]  # an unknown name fails before the trace is read
    knobs, margins = knobs_of(a), margins_of(a.sweep_margin)  # so does a bad knob
    trace = load(a.trace, a.limit)
    m = machine(trace, a.hosts, a.slots, 0 if a.no_memory else (parse_mem(a.mem) if a.mem else None))
    usage = UsageModel(a.ramp, a.steps, a.noise, a.seed, memory=m.mem > 0)
    jobs, skipped = sim_jobs(trace, m, memory=m.mem > 0)
    outcomes, rows, points = [], [], []
    for margin in margins or [None]:
        k = knobs if margin is None else replace(knobs, reclaim_margin=margin, size_margin=margin)
        for name in names:
            o, row = run_policy(m, jobs, name, usage, a.kill_grace, parse_mem(a.mem_floor),
                                run_limits=a.run_limits, knobs=k)
            if margin is not None:
                o.policy = row["policy"] = f"{name}@{margin:g}"
                points.append((margin, row))
            outcomes.append(o)
            rows.append(row)
    if a.record:
        rows.append(record_row(jobs, m))
    meta = {"trace": Path(a.trace).name, "jobs": len(jobs), "skipped": skipped,
            "machine": {"hosts": m.hosts, "slots": m.slots, "mem": m.mem},
            "usage": {"ramp": usage.ramp, "steps": usage.steps, "noise": usage.noise, "seed": usage.seed},
            "kill_grace": a.kill_grace, "run_limits": a.run_limits,
            "knobs": {**asdict(knobs), "sweep_margin": margins}}
    if a.report:
        if points:
            report.sweep_plot(points, Path(a.report))
        page = report.write_report(Path(a.report), outcomes, rows, meta)
        print(f"report: {page}", file=sys.stderr)
    if a.json:
        print(json.dumps({**meta, "policies": rows}, indent=2))
    else:
        print(report.describe(meta))
        print(report.table(rows))
    return 0
