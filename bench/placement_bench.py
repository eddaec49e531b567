"""The placement core alone: one round with N pending jobs on H hosts.

    python bench/placement_bench.py            # 100,000 x 5,000 and 10,000 x 1,000

Jobs have a spread of memory requests (64M..4G, as in the LANL trace's range of
requests relative to node size) and 1..4 slots; hosts have 16 slots and 64G,
a quarter of them half full with running jobs.  Prints seconds per round.
"""

from __future__ import annotations

import random
import sys
import time

from xce.accounting import Ledger
from xce.model import Host, Job, JobSpec
from xce.placement import host_caps, pending_order, schedule
from xce.resreq import parse_resreq

G = 1024**3


def build(n_jobs: int, n_hosts: int, seed: int = 1) -> tuple[dict, list[Job]]:
    rnd = random.Random(seed)
    hosts = [Host(name=f"n{i:05d}", slots_total=16, mem_total=64 * G) for i in range(n_hosts)]
    ledger = Ledger()
    for i, h in enumerate(hosts[: n_hosts // 4]):
        ledger.open(10_000_000 + i, h.name, 32 * G, {"slots": 8})
    reqs = [parse_resreq(f"rusage[mem={m}M]") for m in (64, 128, 256, 512, 1024, 2048, 4096)]
    jobs = [Job(id=i + 1, spec=JobSpec(command=["true"], queue="normal", slots=rnd.randint(1, 4)),
                req=rnd.choice(reqs)) for i in range(n_jobs)]
    caps = host_caps(hosts, ledger, {})
    return caps, jobs


def run(n_jobs: int, n_hosts: int) -> tuple[float, int]:
    caps, jobs = build(n_jobs, n_hosts)
    t0 = time.perf_counter()
    pend = pending_order(jobs, {"normal": 30})
    plan = schedule(caps, pend, 0.0)
    return time.perf_counter() - t0, len(plan.placements)


def main() -> int:
    sizes = [(100_000, 5_000), (10_000, 1_000), (1_000, 100)]
    for n, h in sizes:
        best = min(run(n, h) for _ in range(3))
        print(f"placement round: {n:>7,} pending x {h:>5,} hosts: {best[0] * 1000:8.1f} ms "
              f"({best[1]:,} placed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
