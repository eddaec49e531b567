"""The placement core alone: one round with N pending jobs on H hosts.

    python bench/placement_bench.py                 # 100,000 x 5,000, 10,000 x 1,000, 1,000 x 100
    python bench/placement_bench.py --old DIR       # also main's placement.py copied into DIR

Jobs have a spread of memory requests (64M..4G, as in the LANL trace's range of
requests relative to node size) and 1..4 slots; hosts have 16 slots and 64G,
a quarter of them half full with running jobs.  Prints milliseconds per round, wall and
this process's CPU time, each the best of 5 (the CPU figure is the steadier one on a
shared machine).  Each round starts with the collector frozen, as the daemons keep it
(xce/daemons/heap.py):

- ``greedy``: backfill off, no fairshare (the round as it was before the policy stages);
- ``policy``: the defaults (EASY backfill), plus fairshare over 200 users with usage
  from 20,000 finished jobs, run limits on every job (10 min..8 h), and the running jobs'
  releases: the round the scheduler runs, timed from the usage fold to the plan;
- ``preempt``: the policy round on a cluster with preemptive queues, then the preemption
  step the scheduler runs after it (``preempt()`` with the round's own fitter and the
  reservation guard): 40 % of the pending jobs are in queue ``high`` (priority 70, which may
  preempt ``low``), the running jobs in ``low`` (priority 10), so the round leaves high jobs
  blocked and the step looks for victims for the first 8 of them.  Compare it with ``policy``
  of the same run: the difference is what preemption adds to a round.
- ``old``: the same greedy round with the placement module given by ``--old``.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import random
import sys
import time
from pathlib import Path

from xce.core.accounting import Ledger
from xce.core.model import Alloc, Host, HostUsage, Job, JobSpec, JobState
from xce.core.placement import cluster_free, host_caps, pending_order, schedule
from xce.core.resreq import parse_resreq
from xce.core.sched.backfill import BackfillRules, releases
from xce.core.sched.fairshare import EQUAL_SHARES, UsageBook, fairshare_of
from xce.core.sched.limits import HELD
from xce.core.sched.order import Ordering
from xce.core.sched.preempt import PreemptRules, blocked_preemptors, fitter, preempt, reservation_guard

G = 1024**3
NOW = 1_700_000_000.0
USERS = [f"u{i:03d}" for i in range(200)]


PRIO = {"normal": 30, "high": 70, "low": 10}
PREEMPT = PreemptRules(preempts={"high": frozenset({"low"})}, action={"low": "suspend"}, priority=PRIO,
                       min_run_time=60.0)


def build(n_jobs: int, n_hosts: int, seed: int = 1, preemptive: bool = False,
          ) -> tuple[list[Host], Ledger, list[Job], list[Job], list[Job]]:
    rnd = random.Random(seed)
    hosts = [Host(name=f"n{i:05d}", slots_total=16, mem_total=64 * G) for i in range(n_hosts)]
    ledger = Ledger()
    running = []
    for i, h in enumerate(hosts[: n_hosts // 4]):
        jid = 10_000_000 + i
        ledger.open(jid, h.name, 32 * G, {"slots": 8})
        spec = JobSpec(command=["true"], queue="low" if preemptive else "normal", slots=8, user=rnd.choice(USERS),
                       run_limit=rnd.choice((600.0, 3600.0, 28800.0)))
        running.append(Job(id=jid, spec=spec, req=parse_resreq("rusage[mem=32G]"), state=JobState.RUN,
                           start_time=NOW - rnd.uniform(0, 3600), allocs=[Alloc(h.name, 8, 32 * G, {"slots": 8})]))
    reqs = [parse_resreq(f"rusage[mem={m}M]") for m in (64, 128, 256, 512, 1024, 2048, 4096)]
    queues = ("high", "high", "normal", "normal", "normal") if preemptive else ("normal",)
    jobs = [Job(id=i + 1, spec=JobSpec(command=["true"], queue=rnd.choice(queues), slots=rnd.randint(1, 4),
                                       user=rnd.choice(USERS), run_limit=rnd.choice((600.0, 3600.0, 28800.0))),
                req=rnd.choice(reqs), submit_time=NOW) for i in range(n_jobs)]
    finished = [Job(id=20_000_000 + i, spec=JobSpec(command=["true"], user=rnd.choice(USERS)),
                    req=reqs[0], state=JobState.DONE, start_time=NOW - 7200 - i, end_time=NOW - 3600 - i,
                    allocs=[Alloc("n00000", 2, G, {"slots": 2})],
                    usage=[HostUsage(host="n00000", reserved=G, peak=2 * G)]) for i in range(20_000)]
    return hosts, ledger, running, jobs, finished


def run(n_jobs: int, n_hosts: int, mode: str, old: object = None) -> tuple[float, float, int, int, int]:
    hosts, ledger, running, jobs, finished = build(n_jobs, n_hosts, preemptive=mode == "preempt")
    caps = host_caps(hosts, ledger, {})
    book = UsageBook(half_life=5 * 3600)
    book.fold(finished, NOW - 1)  # the scheduler's book before this round: only the new ones are folded now
    gc.collect()
    gc.freeze()  # as the daemons keep their long-lived model out of the collector (xce/daemons/heap.py)
    orders: list = []
    by_id = {j.id: j for j in jobs}  # the scheduler's mirror keeps its jobs by id
    t0, c0 = time.perf_counter(), time.process_time()
    if mode == "old":
        plan = old.schedule(caps, old.pending_order(jobs, {"normal": 30}), NOW)  # type: ignore[attr-defined]
    elif mode == "greedy":
        plan = schedule(caps, pending_order(jobs, {"normal": 30}), NOW, backfill=BackfillRules(mode="off"))
    else:
        book.fold(finished, NOW)
        fs = fairshare_of({None: EQUAL_SHARES}, book.with_running(running, NOW, ledger), jobs)
        rules = BackfillRules()
        ordering = Ordering(PRIO, fs)
        pending = ordering.order(jobs)
        cfree = cluster_free(running, {})
        plan = schedule(caps, pending, NOW, cfree, backfill=rules, releases=releases(running, rules, NOW, ledger))
        if mode == "preempt":  # as Scheduler._preemptions, after the round
            placed = {j for j, _ in plan.placements}
            blocked = blocked_preemptors(pending, placed, plan.reasons, PREEMPT, HELD)
            guard = reservation_guard(plan.reservations, lambda jid: ordering.key(by_id[jid]), rules, NOW)
            orders = preempt(blocked, running, caps, PREEMPT, NOW, fitter(NOW, cfree), ledger, guard)
            assert orders or not any(blocked_preemptors(pending, placed, plan.reasons, PREEMPT, HELD)), \
                "a blocked high job preempted nothing"
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    gc.unfreeze()
    return wall, cpu, len(plan.placements), len(getattr(plan, "reservations", ())), len(orders)


def load_old(directory: str) -> object:
    spec = importlib.util.spec_from_file_location("old_placement", Path(directory) / "placement.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["old_placement"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--old", help="a directory holding the placement.py to compare with")
    p.add_argument("--sizes", default="100000x5000,10000x1000,1000x100")
    a = p.parse_args()
    old = load_old(a.old) if a.old else None
    modes = ["old", "greedy", "policy", "preempt"] if old else ["greedy", "policy", "preempt"]
    for size in a.sizes.split(","):
        n, h = map(int, size.split("x"))
        runs: dict[str, list[tuple[float, float, int, int, int]]] = {m: [] for m in modes}
        for _ in range(5):  # interleaved, so a busy minute falls on every variant alike
            for mode in modes:
                runs[mode].append(run(n, h, mode, old))
        for mode, rs in runs.items():
            wall, cpu = min(r[0] for r in rs), min(r[1] for r in rs)
            print(f"placement round {mode:>6}: {n:>7,} pending x {h:>5,} hosts: {wall * 1000:7.1f} ms wall, "
                  f"{cpu * 1000:7.1f} ms CPU ({rs[0][2]:,} placed, {rs[0][3]} reserved"
                  + (f", {rs[0][4]} preempted)" if mode == "preempt" else ")"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
