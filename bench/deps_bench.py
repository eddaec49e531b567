"""Dependencies (issue 14): the cost of one state change with 10,000 pending dependents.

    python bench/deps_bench.py [--dependents 10000] [--fanin 10] [--refs 10000] [--changes 2000]

Pure core, no daemons: a ClusterState holds --refs jobs and --dependents pending jobs, each
waiting on ``done(a) && done(b) && ...`` of --fanin refs drawn at random (seeded).  Then
--changes state changes of ref jobs (a Place, a Finish) are applied one by one, and for each
the bench reports the time of ``apply`` (µs) and how many dependents were re-evaluated;
beside it, the time one full re-evaluation of every dependent takes (what a state machine
without the reverse index would pay per change).
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time

from xce.core.jobspec.depend import parse_depend
from xce.core.jobspec.depeval import evaluate
from xce.core.model import Alloc, Host, JobSpec, Queue
from xce.core.resreq import ResReq
from xce.core.state import ClusterState, Finish, Place, RegisterHost, SetQueues, Submit

T0 = 1_700_000_000.0


def build(refs: int, dependents: int, fanin: int, seed: int) -> ClusterState:
    rng = random.Random(seed)
    st = ClusterState()
    st.apply(SetQueues(time=T0, queues=[Queue(name="normal")], default_queue="normal"))
    st.apply(RegisterHost(time=T0, host=Host(name="n1", slots_total=1_000_000, mem_total=1 << 50)))
    st.apply(Submit(time=T0, specs=[JobSpec(command=["true"], queue="normal")] * refs, reqs=[ResReq()] * refs))
    specs = []
    for _ in range(dependents):
        ids = rng.sample(range(1, refs + 1), fanin)
        specs.append(JobSpec(command=["true"], queue="normal",
                             depend=parse_depend(" && ".join(f"done({i})" for i in ids))))
    st.apply(Submit(time=T0 + 1, specs=specs, reqs=[ResReq()] * dependents))
    return st


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--refs", type=int, default=10_000)
    p.add_argument("--dependents", type=int, default=10_000)
    p.add_argument("--fanin", type=int, default=10)
    p.add_argument("--changes", type=int, default=2_000)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    t = time.perf_counter()
    st = build(a.refs, a.dependents, a.fanin, a.seed)
    print(f"built {a.refs:,} refs + {a.dependents:,} dependents x {a.fanin} refs in {time.perf_counter() - t:.2f} s")
    evaluated = [0]
    original = st._evaluate

    def counting(ch, job, now):  # noqa: ANN001, ANN202
        evaluated[0] += 1
        return original(ch, job, now)

    st._evaluate = counting  # type: ignore[method-assign]
    gc.collect()
    gc.freeze()
    rng = random.Random(a.seed + 1)
    costs, counts = [], []
    for n, jid in enumerate(rng.sample(range(1, a.refs + 1), a.changes // 2)):
        for cmd in (Place(time=T0 + 2 + n, job_id=jid, attempt=0, allocs=[Alloc("n1", 1)]),
                    Finish(time=T0 + 2 + n, job_id=jid, attempt=1, host="n1", exit_code=0)):
            evaluated[0] = 0
            t = time.perf_counter()
            st.apply(cmd)
            costs.append((time.perf_counter() - t) * 1e6)
            counts.append(evaluated[0])
    held = [j for j in st.jobs.values() if j.spec.depend is not None]
    t = time.perf_counter()
    lookup = st._lookup("")
    for j in held:
        evaluate(j.spec.depend, lookup)
    full = (time.perf_counter() - t) * 1e6
    costs.sort()
    print(f"one state change: median {statistics.median(costs):.1f} µs, p99 {costs[int(len(costs) * 0.99)]:.1f} µs, "
          f"mean re-evaluated {statistics.mean(counts):.1f} dependents (expected {a.dependents * a.fanin / a.refs:.1f}),"
          f" max {max(counts)}")
    print(f"re-evaluating all {len(held):,} dependents instead: {full:,.0f} µs per change")
    print(f"still held: {sum(j.held for j in held):,} of {len(held):,}")


if __name__ == "__main__":
    main()
