"""Retry with more memory (xce/core/memretry.py), through the state machine: builders only."""

from __future__ import annotations

import pytest
from builders import T0, cluster_state, host, queue, spec, submit

from xce.core.memretry import grown, mem_kill
from xce.core.model import HostUsage, JobState
from xce.core.placement import alloc_for, job_demand
from xce.core.state import ClusterState, Finish, Place

G = 1 << 30


def _run_and_end(st: ClusterState, jid: int, reason: str, t: float, peak: int = G) -> None:
    """Place the job as its own request gives, then end its run with ``reason``."""
    job = st.jobs[jid]
    st.apply(Place(time=t, job_id=jid, attempt=job.attempt, allocs=[alloc_for(job_demand(job), "node1", 1, True)]))
    st.apply(Finish(time=t + 1, job_id=jid, attempt=st.jobs[jid].attempt, host="node1", exit_code=137, signal=9,
                    reason=reason, usage=HostUsage(host="node1", reserved=0, peak=peak)))


def _state(**q: object) -> ClusterState:
    return cluster_state(queue("normal", mem_retries=2, mem_retry_factor=2.0, mem_retry_max=3 * G, **q),
                         hosts=(host(mem="8G"),))


def test_a_memory_kill_runs_again_larger_each_try_up_to_the_cap_and_the_tries() -> None:
    st = _state()
    (jid,) = submit(st, spec(mem="1G", mem_limit=G))
    _run_and_end(st, jid, "MEMLIMIT", T0 + 10, peak=G + 5)
    job = st.jobs[jid]
    assert job.state == JobState.PEND and job.mem_tries == 1
    assert job.req.rusage[0].amount == 2 * G and job.spec.mem_limit == 2 * G
    _run_and_end(st, jid, "MEMPRESSURE", T0 + 20)
    assert st.jobs[jid].req.rusage[0].amount == 3 * G and st.jobs[jid].spec.mem_limit == 3 * G   # the cap
    _run_and_end(st, jid, "MEMLIMIT", T0 + 30)
    job = st.jobs[jid]
    assert job.state == JobState.EXIT and job.reason == "MEMLIMIT" and job.mem_tries == 2   # tries used up
    tries = [e.detail for e in st.history[jid] if e.event == "requeued"]
    assert tries == ["MEMLIMIT: try 2 of 3 with rusage mem 2.0G and -M 2.0G (peak 1.0G)",
                     "MEMPRESSURE: try 3 of 3 with rusage mem 3.0G and -M 3.0G (peak 1.0G)"]


def test_at_the_cap_or_with_nothing_to_grow_the_job_ends_exit() -> None:
    st = _state()
    capped, bare = submit(st, spec(mem="3G"), spec(mem=None))
    _run_and_end(st, capped, "MEMPRESSURE", T0 + 10)
    _run_and_end(st, bare, "MEMPRESSURE", T0 + 10)
    assert st.jobs[capped].state == st.jobs[bare].state == JobState.EXIT


@pytest.mark.parametrize("reason,retried", [
    ("MEMLIMIT", True), ("RECLAIMED: host node1's owners want their memory back", True),
    ("TERM_RUNLIMIT", False), ("killed by user", False), ("", False)])
def test_only_memory_kills_are_retried(reason: str, retried: bool) -> None:
    assert (mem_kill(reason) is not None) is retried
    st = _state()
    (jid,) = submit(st, spec(mem="1G"))
    _run_and_end(st, jid, reason, T0 + 10)
    assert (st.jobs[jid].state == JobState.PEND) is retried


def test_a_queue_without_retries_ends_the_job_as_before() -> None:
    st = cluster_state(queue("normal"), hosts=(host(),))
    (jid,) = submit(st, spec(mem="1G"))
    _run_and_end(st, jid, "MEMLIMIT", T0 + 10)
    assert st.jobs[jid].state == JobState.EXIT and grown(st.jobs[jid], st.queues["normal"]) is None
