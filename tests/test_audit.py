"""`xce admin audit`'s checks on the hard allocations and on dispatch (pure: no daemons)."""

from __future__ import annotations

from builders import T0, cluster_state, host, spec, submit

from xce.core.model import Alloc
from xce.core.state import Place
from xce.replica.audit import Dispatch, audit
from xce.replica.live import Live

G = 2**30


def placed(allocs: list[Alloc], resreq: str = "") -> tuple:
    st = cluster_state(hosts=(host("node1"), host("node2")))
    (jid,) = submit(st, spec("1G", resreq=resreq))
    st.apply(Place(time=T0, job_id=jid, attempt=0, allocs=allocs))
    live = Live()
    live.sync_job(st.jobs[jid], T0)
    return st, live, jid


def test_an_allocation_the_request_does_not_give_is_a_violation() -> None:
    """A worker key once placed a 1G job with a 1-byte reservation, and the audit saw nothing."""
    st, live, jid = placed([Alloc("node2", 1, mem=1, virtual={"slots": 1})])
    problems, _ = audit(st, live)
    assert f"job {jid}: allocation on node2: mem 1B, the job's request gives 1.0G" in problems
    st, live, jid = placed([Alloc("node2", 1, mem=G, virtual={"slots": 1})])
    assert audit(st, live)[0] == []


def test_a_job_running_with_no_task_on_its_host_past_one_heartbeat_is_a_violation() -> None:
    st, live, jid = placed([Alloc("node1", 1, mem=G, virtual={"slots": 1})])
    up = {"node1": T0 - 100}
    never_started = Dispatch(started={}, registered=up, now=T0 + 1.5, grace=1.0)
    problems, checked = audit(st, live, dispatch=never_started)
    assert problems == [f"job {jid} is RUN on node1 but no task runs there (placed 1.5 s ago; "
                        "the worker never confirmed it)"]
    assert checked["dispatches"] == 1
    # within one heartbeat of the placement, or of the host's registration with this leader
    # (after a failover its worker lists its tasks then), or not registered yet: not yet
    assert audit(st, live, dispatch=Dispatch(started={}, registered=up, now=T0 + 0.5, grace=1.0))[0] == []
    assert audit(st, live, dispatch=Dispatch(started={}, registered={"node1": T0 + 1}, now=T0 + 1.5,
                                             grace=1.0))[0] == []
    assert audit(st, live, dispatch=Dispatch(started={}, registered={}, now=T0 + 9, grace=1.0))[0] == []
    # started: no problem; started at another attempt: a problem
    ok = Dispatch(started={(jid, "node1"): 1}, registered=up, now=T0 + 9, grace=1.0)
    assert audit(st, live, dispatch=ok)[0] == []
    stale = Dispatch(started={(jid, "node1"): 0}, registered=up, now=T0 + 9, grace=1.0)
    assert len(audit(st, live, dispatch=stale)[0]) == 1


def test_a_preemptor_on_a_suspended_jobs_slots_is_no_overcommit() -> None:
    """A preempted (SSUSP) job's slots are free (xce/core/sched/preempt.py): the job placed on
    them is no violation; the same slots taken by two running jobs still are."""
    from xce.core.state import SysSuspend

    st = cluster_state(hosts=(host("node1", slots=2),))
    low, high = submit(st, spec("1G", slots=2), spec("1G", slots=2))
    st.apply(Place(time=T0, job_id=low, attempt=0, allocs=[Alloc("node1", 2, mem=G, virtual={"slots": 2})]))
    st.apply(SysSuspend(time=T0 + 1, job_ids=[low]))
    st.apply(Place(time=T0 + 2, job_id=high, attempt=0, allocs=[Alloc("node1", 2, mem=G, virtual={"slots": 2})]))
    live = Live()
    for j in st.jobs.values():
        live.sync_job(j, T0 + 2)
    assert audit(st, live)[0] == []
    from xce.core.state import SysResume

    st.apply(SysResume(time=T0 + 3, job_ids=[low]))
    assert "host node1: 4 slots allocated of 2" in audit(st, live)[0]
