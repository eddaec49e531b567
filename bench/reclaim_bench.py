"""Reclaimable memory in the round: 100,000 running jobs on 5,000 hosts (issue 18's budget).

    python bench/reclaim_bench.py

Each host runs 20 jobs, reported and settled (half of them lend), as the scheduler's mirror
holds them.  Times, best of 5 (wall and this process's CPU):

- ``caps``: the round's host view without reclaim (``host_caps``), as before;
- ``caps+reclaim``: the same with every host's reclaimable memory re-derived (``reclaim=``);
- ``round``: caps+reclaim and a greedy round of 10,000 pending jobs, a tenth of them reclaiming.
"""

from __future__ import annotations

import gc
import random
import time

from xce.core.accounting import Ledger, ReclaimRules
from xce.core.model import Host, Job, JobSpec
from xce.core.placement import host_caps, pending_order, schedule
from xce.core.resreq import parse_resreq
from xce.core.sched.backfill import BackfillRules

G = 1024**3
M = 1024**2
NOW = 1_700_000_000.0
RULES = ReclaimRules(min_run=60, window=60, margin=0.1)


def build(n_hosts: int = 5_000, per_host: int = 20, seed: int = 1) -> tuple[list[Host], Ledger, dict[str, int]]:
    rnd = random.Random(seed)
    hosts = [Host(name=f"n{i:05d}", slots_total=32, mem_total=256 * G) for i in range(n_hosts)]
    ledger = Ledger()
    jid = 0
    for h in hosts:
        ids, actual = [], []
        for _ in range(per_host):
            jid += 1
            reserved = rnd.choice((2, 4, 8)) * G
            ledger.open(jid, h.name, reserved, {"slots": 1}, since=NOW - 3600)
            ids.append(jid)
            actual.append(int(reserved * rnd.uniform(0.1, 1.2)))
        # settled for half of them: their last peak rise long ago; the others just rose
        ledger.observe_host(h.name, ids, None, actual, actual, [0.0] * per_host, now=NOW - 600)
        b = ledger.books[h.name]
        for i in range(0, per_host, 2):
            b.peak_at[i] = NOW - 1
    os_avail = {h.name: 64 * G for h in hosts}
    return hosts, ledger, os_avail


def best(fn, n: int = 5) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(n):
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return min(walls) * 1000, min(cpus) * 1000


def main() -> None:
    hosts, ledger, os_avail = build()
    reqs = [parse_resreq(f"rusage[mem={m}M]") for m in (256, 1024, 4096)]
    rnd = random.Random(2)
    pending = [Job(id=1_000_000 + i, spec=JobSpec(command=["true"], queue="reclaim" if i % 10 == 0 else "normal",
                                                  slots=1), req=rnd.choice(reqs), submit_time=NOW)
               for i in range(10_000)]
    order = pending_order(pending, {"normal": 30, "reclaim": 10})
    print(f"{len(ledger.accounts):,} running jobs on {len(hosts):,} hosts")
    for name, fn in (
            ("caps", lambda: host_caps(hosts, ledger, os_avail)),
            ("caps+reclaim", lambda: host_caps(hosts, ledger, os_avail, reclaim=(NOW, RULES))),
            ("round", lambda: schedule(host_caps(hosts, ledger, os_avail, reclaim=(NOW, RULES)), order, NOW,
                                       backfill=BackfillRules(mode="off"), reclaim_queues=frozenset({"reclaim"})))):
        wall, cpu = best(fn)
        print(f"{name:14s} wall {wall:8.1f} ms  cpu {cpu:8.1f} ms")
    caps = host_caps(hosts, ledger, os_avail, reclaim=(NOW, RULES))
    print(f"reclaimable: {sum(c.reclaimable for c in caps.values()) / G:,.0f} G over {len(caps):,} hosts")


if __name__ == "__main__":
    main()
