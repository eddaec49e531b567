"""Job arrays in the state machine (issue 14 item 2): one entity, elements materialised lazily."""

from __future__ import annotations

import pickle

import pytest
from builders import T0, alloc, cluster_state, host, queue, spec
from hypothesis import given, settings
from hypothesis import strategies as st_

from xce.core import arrays as A
from xce.core.errors import Conflict, IllegalTransition
from xce.core.jobspec.arrays import ArraySpec, parse_lsf_job_name
from xce.core.jobspec.depend import parse_depend
from xce.core.model import ACTIVE, JobState
from xce.core.resreq import parse_resreq
from xce.core.state import ClusterState, Finish, Kill, Place, Resume, Stop, Submit

S = JobState


def cluster() -> ClusterState:
    return cluster_state(queue(), hosts=(host("n1", slots=1000, mem="1000G"),))


def submit_array(st: ClusterState, text: str, **kw) -> int:
    name, arr = parse_lsf_job_name(text, max_size=2_000_000)
    s = spec(mem="10M", name=name, array=arr, **kw)
    return st.apply(Submit(time=T0, specs=[s], reqs=[parse_resreq(s.resreq)]))[0]


def pending(st: ClusterState, aid: int) -> list[int]:
    return sorted(j.id for j in st.jobs.values() if j.id >> A.SHIFT == aid and j.state == S.PEND)


def place(st: ClusterState, jid: int, t: float = T0 + 1) -> int:
    return st.apply(Place(time=t, job_id=jid, attempt=st.jobs[jid].attempt, allocs=[alloc("n1", 1, "10M")]))


def finish(st: ClusterState, jid: int, code: int = 0, t: float = T0 + 2) -> str:
    return st.apply(Finish(time=t, job_id=jid, attempt=st.jobs[jid].attempt, host="n1", exit_code=code))


def test_ids_carry_array_and_index() -> None:
    eid = A.element_id(7, 12)
    assert A.split_id(eid) == (7, 12) and A.split_id(7) == (7, None)
    assert A.element_text(eid) == "7[12]" and A.element_text(7) == "7"
    assert A.split_id(A.element_id(7, 0)) == (7, 0)  # Slurm's index 0


def test_a_million_element_array_is_one_entity_and_a_window_of_jobs() -> None:
    st = cluster()
    aid = submit_array(st, "big[1-1000000]")
    arr = st.arrays[aid]
    assert len(st.jobs) == A.WINDOW and arr.cursor == A.WINDOW
    assert pending(st, aid)[:2] == [A.element_id(aid, 1), A.element_id(aid, 2)]
    assert A.counts(arr, st.jobs).pend == 1_000_000
    assert st.next_job_id == aid + 1  # one id for the array


def test_a_100k_array_commits_as_its_window_not_per_element() -> None:
    """What keeps a 100,000-element commit cheap: it creates a window of jobs, not one per element
    (the time itself is bench/array_bench.py's figure; a timed assertion fails on a loaded machine)."""
    st = cluster()
    aid = submit_array(st, "a[1-100000]")
    assert len(st.jobs) == A.WINDOW and st.arrays[aid].cursor == A.WINDOW
    assert A.counts(st.arrays[aid], st.jobs).pend == 100_000


def test_running_limit_caps_what_is_pending_and_what_may_be_placed() -> None:
    st = cluster()
    aid = submit_array(st, "lim[1-10]%3")
    first = pending(st, aid)
    assert len(first) == 3
    for jid in first:
        place(st, jid)
    assert pending(st, aid) == []  # 3 running: none more may run
    finish(st, first[0])
    (nxt,) = pending(st, aid)
    assert A.split_id(nxt) == (aid, 4)
    st.arrays[aid].counts["RUN"] += 1  # as if a fourth ran: the leader re-checks the limit
    with pytest.raises(Conflict, match=rf"array {aid} already runs its limit of 3 elements"):
        place(st, nxt)


def test_each_element_has_its_own_state_and_record_and_the_array_counts_them() -> None:
    st = cluster()
    aid = submit_array(st, "e[1-5:2,10]")
    ids = pending(st, aid)
    assert [A.split_id(i)[1] for i in ids] == [1, 3, 5, 10]
    place(st, ids[0])
    finish(st, ids[0], 0)
    place(st, ids[1])
    finish(st, ids[1], 4)
    assert (st.jobs[ids[0]].state, st.jobs[ids[1]].state, st.jobs[ids[1]].exit_code) == (S.DONE, S.EXIT, 4)
    assert st.arrays[aid].counts == {"PEND": 2, "RUN": 0, "DONE": 1, "EXIT": 1}
    assert [e.event for e in st.history[ids[0]]] == ["submitted", "dispatched", "ended DONE"]


def test_dispatch_carries_the_element_index_step_and_end() -> None:
    from xce.reactors.orders import array_element

    st = cluster()
    aid = submit_array(st, "e[1-9:4,20]")
    job = st.jobs[A.element_id(aid, 5)]
    e = array_element(job)
    assert (e.array_id, e.index, e.step, e.end) == (aid, 5, 4, 20)
    assert job.spec.index == 5


def test_killing_the_whole_array_ends_its_tail_without_objects() -> None:
    st = cluster()
    aid = submit_array(st, "k[1-100000]")
    place(st, A.element_id(aid, 1))
    got = st.apply(Kill(time=T0 + 3, job_ids=[aid]))
    assert got == {aid: "killed 99999, kill requested for 1"}
    arr = st.arrays[aid]
    assert A.unmaterialised(arr) == 0 and len(st.jobs) == A.WINDOW + 1  # the one placed, and its successor
    assert st.jobs[A.element_id(aid, 1)].kill_requested
    finish(st, A.element_id(aid, 1), 137, t=T0 + 4)
    assert A.counts(arr, st.jobs).exit == 100_000


def test_stop_and_resume_of_a_whole_array() -> None:
    st = cluster()
    aid = submit_array(st, "s[1-3000]")
    place(st, A.element_id(aid, 1))
    out = st.apply(Stop(time=T0 + 2, job_ids=[aid]))
    assert out[A.element_id(aid, 1)] == "USUSP" and list(out.values()).count("PSUSP") == A.WINDOW  # refilled after the placement
    assert pending(st, aid) == [] and st.arrays[aid].held
    st.apply(Resume(time=T0 + 3, job_ids=[aid]))
    assert len(pending(st, aid)) == A.WINDOW and not st.arrays[aid].held


def test_dependencies_on_an_array_and_on_its_elements() -> None:
    st = cluster()
    aid = submit_array(st, "d[1-3]")
    st.apply(Submit(time=T0, specs=[spec(depend=parse_depend(f"done({aid})")),
                                     spec(depend=parse_depend(f"numdone({aid}, >= 2)")),
                                     spec(depend=parse_depend(f"done({aid}[2])"))],
                    reqs=[parse_resreq("")] * 3))
    whole, two, second = aid + 1, aid + 2, aid + 3
    assert st.jobs[whole].reason == f"waiting for done({aid}): job {aid}: 3 PEND"
    e1, e2, e3 = (A.element_id(aid, i) for i in (1, 2, 3))
    for jid in (e2, e1):
        place(st, jid)
        finish(st, jid)
    assert not st.jobs[second].held and not st.jobs[two].held and st.jobs[whole].held
    place(st, e3)
    finish(st, e3, 1)
    assert st.jobs[whole].reason == f"never satisfied: done({aid}): job {aid}: 2 DONE, 1 EXIT"


def test_an_array_round_trips_through_a_snapshot() -> None:
    st = cluster()
    aid = submit_array(st, "p[1-5000]%10", depend=None)
    place(st, A.element_id(aid, 1))
    back = pickle.loads(pickle.dumps(st))
    assert back.arrays == st.arrays and back.jobs == st.jobs


@settings(max_examples=100, deadline=None)
@given(st_.lists(st_.tuples(st_.sampled_from(["place", "done", "exit", "kill", "kill_all", "stop", "resume"]),
                            st_.integers(1, 40)), max_size=60))
def test_array_counts_stay_consistent(actions) -> None:
    st = cluster()
    aid = submit_array(st, "h[1-40]%6")
    arr = st.arrays[aid]
    for n, (what, index) in enumerate(actions):
        jid, now = A.element_id(aid, index), T0 + 1 + n
        job = st.jobs.get(jid)
        try:
            if what == "kill_all":
                st.apply(Kill(time=now, job_ids=[aid]))
            elif job is None:
                continue
            elif what == "place":
                place(st, jid, now)
            elif what in ("done", "exit") and job.state in ACTIVE:
                finish(st, jid, 0 if what == "done" else 2, now)
            elif what == "kill":
                st.apply(Kill(time=now, job_ids=[jid]))
            elif what == "stop":
                st.apply(Stop(time=now, job_ids=[jid]))
            elif what == "resume":
                st.apply(Resume(time=now, job_ids=[jid]))
        except Exception:  # noqa: BLE001 - refusals change nothing
            pass
        elements = [j for j in st.jobs.values() if j.id >> A.SHIFT == aid]
        by_state: dict[str, int] = {}
        for j in elements:
            by_state[j.state.value] = by_state.get(j.state.value, 0) + 1
        tail_killed = arr.counts.get("EXIT", 0) - by_state.get("EXIT", 0)
        assert {k: v for k, v in arr.counts.items() if v} == {
            **{k: v for k, v in by_state.items() if v}, **({"EXIT": arr.counts["EXIT"]} if tail_killed else {})}
        assert sum(arr.counts.values()) + A.unmaterialised(arr) == 40
        assert A.active(arr) <= 6  # the running limit


def test_a_user_with_own_grants_cannot_control_another_users_array() -> None:
    """The controller's ownership check knows arrays (an array's id is not in ``jobs``)."""
    from xce.core.errors import PermissionDenied
    from xce.reactors.access import job_owner
    from xce.proto import writes
    from xce.proto.opcodes import Op
    from xce.security.policy import DEFAULT_FILE, Principal, authorize, load_policy

    st = cluster()
    aid = submit_array(st, "b[1-5]", user="bob")
    assert job_owner(st, aid) == "bob" and job_owner(st, A.element_id(aid, 1)) == "bob"
    ann = Principal("ann", ("user",))
    for op, body in ((Op.KILL, writes.kill([aid], key="k")), (Op.STOP, writes.control([aid], key="k"))):
        with pytest.raises(PermissionDenied, match="bob"):
            authorize(load_policy(DEFAULT_FILE), ann, op, body, lambda j: job_owner(st, j))


def test_an_element_not_yet_materialised_can_be_named_in_any_command() -> None:
    st = cluster()
    aid = submit_array(st, "far[1-5000]")
    far, near = A.element_id(aid, 4000), A.element_id(aid, 4001)
    assert far not in st.jobs
    assert st.apply(Stop(time=T0 + 1, job_ids=[far])) == {far: "PSUSP"}
    assert st.jobs[far].state == S.PSUSP and st.arrays[aid].ahead == [4000]
    assert st.apply(Kill(time=T0 + 2, job_ids=[near])) == {near: "killed"}
    arr = st.arrays[aid]
    assert sum(arr.counts.values()) + A.unmaterialised(arr) == 5000
    for jid in sorted(pending(st, aid)):  # run the window: the cursor passes 4000 and 4001 without a second Job
        place(st, jid)
        finish(st, jid)
    while pending(st, aid):
        for jid in pending(st, aid):
            place(st, jid)
            finish(st, jid)
    assert arr.ahead == [] and arr.cursor == 5000
    assert arr.counts == {"PEND": 0, "PSUSP": 1, "RUN": 0, "DONE": 4998, "EXIT": 1}
    with pytest.raises(IllegalTransition, match=rf"job {aid}\[4001\]: cannot resume a job in state EXIT"):
        st.apply(Resume(time=T0 + 9, job_ids=[near]))


def test_a_range_target_becomes_element_ids() -> None:
    from xce.core.errors import InvalidRequest
    from xce.core.jobspec.arrays import parse_job_target

    assert A.target_ids(parse_job_target("12")) == [12]
    assert A.target_ids(parse_job_target("12[1-3,7]")) == [A.element_id(12, i) for i in (1, 2, 3, 7)]
    assert A.target_ids(parse_job_target("12_4")) == [A.element_id(12, 4)]
    with pytest.raises(InvalidRequest, match=r"job 12\[1-200000\]: 200,000 elements is more than 100,000"):
        A.target_ids(parse_job_target("12[1-200000]"))


def test_modifying_an_arrays_id_changes_every_pending_element_and_those_to_come() -> None:
    """bmod ID of an array: the old code changed only its first pending element, and raised
    IndexError when none was materialised (a %1 array with its one element running)."""
    from xce.core.state import ModifySpec, SpecPatch

    st = cluster()
    aid = submit_array(st, "m[1-5]%1")
    first = pending(st, aid)[0]
    place(st, first)
    st.apply(ModifySpec(time=T0 + 2, job_id=aid, patch=SpecPatch(run_limit=120.0, priority=4)))
    finish(st, first)
    rest = pending(st, aid)
    assert rest and all((st.jobs[j].spec.run_limit, st.jobs[j].spec.priority) == (120.0, 4) for j in rest)
    assert st.jobs[first].spec.run_limit is None  # a running element is not pending: unchanged
    assert [e.event for e in st.history[aid]][-1] == "modified"
    with pytest.raises(IllegalTransition):
        st.apply(ModifySpec(time=T0 + 3, job_id=first, patch=SpecPatch(priority=1)))


def test_an_elements_history_starts_with_its_arrays_submission() -> None:
    """bhist ID[INDEX] says when and by whom it was submitted (the old history began at its dispatch)."""
    st = cluster()
    aid = submit_array(st, "h[1-3]%1", user="ann")
    first, (_, later) = pending(st, aid)[0], A.split_id(A.element_id(aid, 3))
    st.apply(Kill(time=T0 + 5, job_ids=[A.element_id(aid, later)], by="ann"))  # materialised ahead by a command
    for jid in (first, A.element_id(aid, later)):
        e = st.history[jid][0]
        assert (e.time, e.event, e.detail) == (T0, "submitted", f"element of array {aid}"), jid
    assert [e.event for e in st.history[A.element_id(aid, 3)]] == ["submitted", "killed"]


def test_switching_an_arrays_id_moves_the_elements_to_come_too() -> None:
    """bswitch Q ID of an array: the elements not materialised yet pend in Q when they are (the old
    code moved the materialised ones only)."""
    from xce.core.state import Switch

    st = cluster_state(queue(), queue("other"), hosts=(host("n1", slots=1000, mem="1000G"),))
    aid = submit_array(st, "w[1-4]%1")
    first = pending(st, aid)[0]
    st.apply(Switch(time=T0 + 1, job_ids=[aid], queue="other"))
    place(st, first)
    finish(st, first)
    (second,) = pending(st, aid)
    assert (st.jobs[first].spec.queue, st.jobs[second].spec.queue) == ("other", "other")
    assert st.history[aid][-1].event == "switched"


def test_top_of_an_arrays_id_moves_every_pending_element_and_those_to_come() -> None:
    """btop ARRAY: its pending elements and those to come go above the queue's other pending jobs
    (the old code moved the first element only, and raised IndexError with none materialised)."""
    from xce.core.state import Move

    st = cluster()
    aid = submit_array(st, "t[1-4]%2")
    st.apply(Submit(time=T0, specs=[spec(priority=5)], reqs=[parse_resreq("rusage[mem=10M]")]))
    assert st.apply(Move(time=T0 + 1, job_id=aid, to="top")) == 6
    first, second = pending(st, aid)
    assert (st.jobs[first].spec.priority, st.jobs[second].spec.priority) == (6, 6)
    place(st, first)
    finish(st, first)
    assert {st.jobs[j].spec.priority for j in pending(st, aid)} == {6}  # the third, materialised since
    place(st, second)
    place(st, pending(st, aid)[0])
    assert st.apply(Move(time=T0 + 3, job_id=aid, to="bottom")) == 4  # the fourth, none materialised: no error


def test_a_memory_limit_on_an_arrays_id_applies_to_every_element_not_ended() -> None:
    """bmod -M ARRAY (and of an element not materialised yet): the old code said job not found."""
    from xce.core.state import Modify

    st = cluster()
    aid = submit_array(st, "m[1-4]%1")
    first = pending(st, aid)[0]
    place(st, first)
    st.apply(Modify(time=T0 + 1, job_id=aid, mem_limit=1 << 30))
    assert st.jobs[first].spec.mem_limit == 1 << 30  # a running one too, as bmod -M
    finish(st, first)
    assert [st.jobs[j].spec.mem_limit for j in pending(st, aid)] == [1 << 30]  # the next, materialised since
    st.apply(Modify(time=T0 + 3, job_id=A.element_id(aid, 4), mem_limit=2 << 30))
    assert st.jobs[A.element_id(aid, 4)].spec.mem_limit == 2 << 30


def test_the_pending_tail_listed_is_bounded_and_skips_elements_made_ahead() -> None:
    st = cluster()
    aid = submit_array(st, "b[1-50000]")
    arr = st.arrays[aid]
    st.apply(Kill(time=T0 + 1, job_ids=[A.element_id(aid, 1002)]))  # materialised ahead of the cursor
    tail = list(A.pending_tail(arr))
    assert len(tail) == A.LISTED_MAX and tail[0].id == A.element_id(aid, 1001)
    assert A.element_id(aid, 1002) not in {j.id for j in tail} and not set(j.id for j in tail) & set(st.jobs)
