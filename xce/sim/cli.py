"""`xce sim TRACE`: the subcommand's arguments; the run is xce/sim/run.py.

Every `xce` command builds its whole parser (xce/cli/main.py's EXTENSIONS), so this
module stays light: it imported the simulator, and with it the state machine, placement,
the ledger and msgspec, into every `xce submit` that took the full path (docs/benchmarks.md).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (every `xce` start loads this)
if TYPE_CHECKING:
    import argparse
    from typing import Any


def register(sub: Any) -> None:
    s = sub.add_parser("sim", help="replay a workload trace (SWF) through XCE's scheduler, policy by policy",
                       description="Replay a Standard Workload Format trace on a virtual clock through the "
                                   "daemons' own placement, accounting and state machine (docs/simulation.md).")
    s.add_argument("trace", help="an SWF trace, gzip or plain")
    s.add_argument("--policy", default="flat,lsf,xce", help="comma-separated policies (default flat,lsf,xce)")
    s.add_argument("--hosts", type=int, help="hosts (default: the trace's processors / --slots)")
    s.add_argument("--slots", type=int, help="slots per host (default: the trace's processors / --hosts, else 1)")
    s.add_argument("--mem", help="memory per host, e.g. 768M (default: slots x the largest per-processor "
                                 "memory in the trace)")
    s.add_argument("--no-memory", action="store_true", help="slots only: no reservations, no usage")
    s.add_argument("--ramp", type=float, default=0.1, help="share of the run over which memory ramps up (0.1)")
    s.add_argument("--steps", type=int, default=4, help="usage reports along the ramp (4)")
    s.add_argument("--noise", type=float, default=0.0, help="seeded noise on each job's used memory (0)")
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--kill-grace", type=float, default=None,
                   help="seconds from a MEMPRESSURE decision to the victim's end, at worst "
                        "(default: the worker's default kill_grace, docs/simulation.md)")
    s.add_argument("--mem-floor", default="0", help="worker.mem_floor: kill below this OS-available (0)")
    s.add_argument("--run-limits", action="store_true",
                   help="kill a job that runs past its requested time (SWF field 9) as the worker kills one "
                        "past its -W (TERM_RUNLIMIT); by default the trace's run times stand")
    s.add_argument("--reclaim-share", type=float, default=0.25,
                   help="reclaim policies: the seeded share of jobs that accept reclamation (0.25)")
    s.add_argument("--reclaim-queues", default="", help="reclaim policies: every job of these queues accepts it too")
    s.add_argument("--reclaim-margin", type=float, default=0.1,
                   help="[reclaim] margin: share of a lender's reservation kept back (0.1)")
    s.add_argument("--settle", type=float, default=60.0, help="[reclaim] min_run and window, seconds (60)")
    s.add_argument("--shrink-age", type=float, default=0.6,
                   help="shrink policies: a job's reservation is lowered once its peak held still for this share "
                        "of its run so far (0.6)")
    s.add_argument("--reclaim-policy", default="requeue", help="requeue or kill a reclaiming job sent away")
    s.add_argument("--size-margin", type=float, default=0.1,
                   help="right-sizing: p95 of past peaks x (1 + this) (the queue's mem_auto_margin, 0.1)")
    s.add_argument("--size-min-runs", type=int, default=1,
                   help="right-sizing: runs a job's history needs before it sizes (the queue's mem_auto_min_runs; 1)")
    s.add_argument("--history", type=int, default=100, help="right-sizing reads the last N runs of a job (100)")
    s.add_argument("--mem-retries", type=int, default=2, help="retry policies: the queue's mem_retries (2)")
    s.add_argument("--mem-retry-factor", type=float, default=2.0, help="retry policies: growth per try (2.0)")
    s.add_argument("--sweep-margin", metavar="M1,M2,...",
                   help="run each policy once per safety margin (both margins set to it); --report adds margin.png")
    s.add_argument("--limit", type=int, help="replay only the first N jobs of the trace")
    s.add_argument("--record", action="store_true",
                   help="add the trace's own recorded waits as a row (compare on the trace's machine)")
    s.add_argument("--json", action="store_true")
    s.add_argument("--report", metavar="DIR", help="write PNG plots and index.html there")
    s.set_defaults(func=cmd_sim)


def cmd_sim(a: argparse.Namespace) -> int:
    from xce.sim.run import cmd_sim as run  # lazy: the simulator, only for `xce sim` (see above)

    return run(a)
