"""The trace replay's cost, and a digest of its decisions, for one policy (issue 17 item 6).

    python bench/sim_bench.py POLICY [--limit N] [--slots 32] [--mem 768M | --no-memory] [--profile FILE]

Runs ``Engine.run`` alone on the LANL CM-5 trace (or ``--trace``) and prints one JSON line: wall
and this process's CPU seconds, events, rounds, the load average before and after, and
``metrics.digest`` of the outcome (every job's start, end and fate).  Run it with ``PYTHONPATH`` at
an old tree to time that tree's engine: the digest is always this tree's function, read from
this file's own tree, so old and new outcomes hash alike when they decide alike.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

TRACE = "/work/shared/traces/LANL-CM5-1994-4.1-cln.swf.gz"


def own_digest():  # type: ignore[no-untyped-def]
    """``digest`` from this file's tree, whatever tree ``xce`` is imported from."""
    path = Path(__file__).resolve().parents[1] / "xce" / "sim" / "metrics.py"
    spec = importlib.util.spec_from_file_location("_bench_metrics", path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.digest


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("policy")
    ap.add_argument("--trace", default=TRACE)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--slots", type=int, default=32)
    ap.add_argument("--mem", default="768M")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--kill-grace", type=float, default=5.0)
    ap.add_argument("--profile", help="cProfile (timer: process time) into this file")
    a = ap.parse_args()
    import xce
    from xce.core.units import parse_mem
    from xce.sim.engine import Engine
    from xce.sim.model import UsageModel, machine, sim_jobs
    from xce.sim.policies import POLICIES
    from xce.sim.swf import load

    digest = own_digest()
    trace = load(a.trace, a.limit)
    m = machine(trace, None, a.slots, 0 if a.no_memory else parse_mem(a.mem))
    jobs, _ = sim_jobs(trace, m, memory=m.mem > 0)
    engine = Engine(m, jobs, POLICIES[a.policy], UsageModel(memory=m.mem > 0), a.kill_grace)
    load0 = os.getloadavg()[0]
    prof = None
    if a.profile:
        import cProfile
        prof = cProfile.Profile(time.process_time)
        prof.enable()
    w0, c0 = time.perf_counter(), time.process_time()
    o = engine.run()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    if prof is not None:
        prof.disable()
        prof.dump_stats(a.profile)
    print(json.dumps({"tree": str(Path(xce.__file__).parents[1]), "policy": a.policy, "limit": a.limit,
                      "memory": m.mem > 0, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                      "load": [round(load0, 2), round(os.getloadavg()[0], 2)],
                      "events": o.events, "rounds": o.rounds, "digest": digest(o)}))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
