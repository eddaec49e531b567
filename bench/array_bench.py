"""Job arrays (issue 14): commit time and controller memory per pending element.

    python bench/array_bench.py [--elements 100000] [--big 1000000]

Pure core, no daemons: the Submit command of one --elements array applied to a ClusterState
(what each controller does when the Raft entry commits), timed; and the memory one --big array
adds to the state while every element is pending (tracemalloc), per element.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc


from xce.core.jobspec.arrays import parse_lsf_job_name
from xce.core.model import Host, JobSpec, Queue
from xce.core.resreq import parse_resreq
from xce.core.state import ClusterState, RegisterHost, SetQueues, Submit, encode_batch

T0 = 1_700_000_000.0


def state() -> ClusterState:
    st = ClusterState()
    st.apply(SetQueues(time=T0, queues=[Queue(name="normal")], default_queue="normal"))
    st.apply(RegisterHost(time=T0, host=Host(name="n1", slots_total=4, mem_total=1 << 34)))
    return st


def submit(n: int) -> Submit:
    name, arr = parse_lsf_job_name(f"a[1-{n}]", max_size=n)
    spec = JobSpec(command=["true"], name=name, queue="normal", resreq="rusage[mem=10]", array=arr,
                   env={"PATH": "/usr/bin:/bin", "HOME": "/home/u"}, cwd="/home/u")
    return Submit(time=T0, specs=[spec], reqs=[parse_resreq(spec.resreq)])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--elements", type=int, default=100_000)
    p.add_argument("--big", type=int, default=1_000_000)
    a = p.parse_args()
    cmd = submit(a.elements)
    print(f"Raft entry of a {a.elements:,}-element array: {len(encode_batch([cmd]))} bytes")
    st = state()
    t = time.perf_counter()
    st.apply(cmd)
    print(f"applied in {(time.perf_counter() - t) * 1e3:.2f} ms; jobs materialised: {len(st.jobs)}")
    st = state()
    big = submit(a.big)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    st.apply(big)
    grew = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    print(f"{a.big:,}-element array, all pending: {grew / 1e6:.2f} MB, {grew / a.big:.2f} bytes per pending element "
          f"({len(st.jobs)} materialised)")


if __name__ == "__main__":
    main()
