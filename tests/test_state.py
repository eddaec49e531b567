"""Tests for xce.core.state: the replicated state machine, its transition table, and snapshots."""

from __future__ import annotations

import pickle
import typing

import msgspec
import pytest
from builders import T0, alloc, cluster_state, host, queue, spec, submit

from xce.core.jobspec.depend import parse_depend
from xce.core.errors import Conflict, IllegalTransition, InvalidRequest, NotFound
from xce.core.model import PREEXEC_FAILED, Alloc, Host, HostUsage, Job, JobSpec, JobState, Queue
from xce.core.resreq import OrderKey, ResReq, RusageItem, parse_resreq
from xce.core.views import ArrayView
from xce.core.state import (
    TRANSITIONS,
    Changes,
    Cleanup,
    ClusterState,
    Cmd,
    Command,
    Finish,
    HostLost,
    Kill,
    HostUnknown,
    Modify,
    ModifySpec,
    Move,
    Place,
    RegisterHost,
    RemoveHosts,
    Requeue,
    Reserve,
    Resume,
    SetHostAdmin,
    SetQueues,
    SpecPatch,
    Stop,
    Submit,
    SysResume,
    SysSuspend,
    Switch,
    decode_batch,
    encode_batch,
    transition,
)
from xce.proto.schema import HostLive, HostMem, JobSample, Snapshot, past_usage

S = JobState
G = 2**30
EVENTS = sorted({e for _, e in TRANSITIONS})


def two_hosts(*queues: Queue) -> ClusterState:
    return cluster_state(*queues, hosts=(host("n1"), host("n2")))


def run(st: ClusterState, jid: int, *hosts: str, t: float = T0 + 1) -> int:
    """Place job ``jid`` on ``hosts`` (one slot each) at its current attempt; returns the new attempt."""
    job = st.jobs[jid]
    return st.apply(Place(time=t, job_id=jid, attempt=job.attempt,
                          allocs=[alloc(h, 1) for h in hosts or ("n1",)]))


def finish(st: ClusterState, jid: int, host: str = "n1", exit_code: int | None = 0, t: float = T0 + 2,
           **kw) -> str:
    return st.apply(Finish(time=t, job_id=jid, attempt=st.jobs[jid].attempt, host=host,
                           exit_code=exit_code, **kw))


# ---- the transition table ------------------------------------------------------------------

@pytest.mark.parametrize("state", list(S))
@pytest.mark.parametrize("event", EVENTS)
def test_transition_table(state: JobState, event: str) -> None:
    job = Job(id=1, spec=spec(), req=ResReq(), state=state)
    if (state, event) in TRANSITIONS:
        assert transition(job, event) == TRANSITIONS[(state, event)]
    else:
        with pytest.raises(IllegalTransition, match=f"cannot {event} a job in state {state.value}"):
            transition(job, event)


def test_terminal_states_leave_only_by_requeue() -> None:
    assert {e for s, e in TRANSITIONS if s in (S.DONE, S.EXIT)} == {"requeue"}


# Every legal transition, driven through the commands that cause it.
def _pend_place(st):
    run(st, 1)


def _pend_kill(st):
    st.apply(Kill(time=T0 + 1, job_ids=[1]))


def _run_done(st):
    run(st, 1)
    finish(st, 1, exit_code=0)


def _run_exit(st):
    run(st, 1)
    finish(st, 1, exit_code=3)


def _run_exit_host_lost(st):
    run(st, 1)
    st.apply(HostLost(time=T0 + 2, name="n1"))


def _run_requeue(st):
    st.apply(SetQueues(time=T0, queues=[queue(rerunnable=True)], default_queue="normal"))
    run(st, 1)
    st.apply(HostLost(time=T0 + 2, name="n1"))


def _ususp(st, then):
    run(st, 1)
    st.apply(Stop(time=T0 + 1.5, job_ids=[1]))
    then(st)


COMMAND_PATHS = [
    ("PEND-place-RUN", _pend_place, S.RUN),
    ("PEND-kill-EXIT", _pend_kill, S.EXIT),
    ("RUN-done-DONE", _run_done, S.DONE),
    ("RUN-exit-EXIT", _run_exit, S.EXIT),
    ("RUN-host_lost-EXIT", _run_exit_host_lost, S.EXIT),
    ("RUN-requeue-PEND", _run_requeue, S.PEND),
    ("USUSP-done-DONE", lambda st: _ususp(st, lambda s: finish(s, 1, exit_code=0)), S.DONE),
    ("USUSP-exit-EXIT", lambda st: _ususp(st, lambda s: finish(s, 1, exit_code=1)), S.EXIT),
    ("USUSP-host_lost-EXIT", lambda st: _ususp(st, lambda s: s.apply(HostLost(time=T0 + 2, name="n1"))), S.EXIT),
]


@pytest.mark.parametrize("name,path,final", COMMAND_PATHS, ids=[p[0] for p in COMMAND_PATHS])
def test_legal_transitions_through_commands(name: str, path, final: JobState) -> None:
    st = two_hosts()
    submit(st)
    path(st)
    assert st.jobs[1].state == final
    assert (st.jobs[1].id in st.finished_order) == (final in (S.DONE, S.EXIT))


def test_ususp_requeue_through_host_lost() -> None:
    st = two_hosts(queue(rerunnable=True))
    submit(st)
    _ususp(st, lambda s: s.apply(HostLost(time=T0 + 2, name="n1")))
    assert st.jobs[1].state == S.PEND and st.jobs[1].requeues == 1


@pytest.mark.parametrize("final", ["done", "exit", "kill"])
def test_placing_a_running_or_ended_job_is_illegal(final: str) -> None:
    st = two_hosts()
    submit(st)
    if final == "kill":
        st.apply(Kill(time=T0, job_ids=[1]))
    else:
        run(st, 1)
        with pytest.raises(IllegalTransition):
            run(st, 1)  # RUN at its current attempt
        finish(st, 1, exit_code=0 if final == "done" else 1)
    with pytest.raises(IllegalTransition):
        run(st, 1)
    assert st.jobs[1].state in (S.DONE, S.EXIT)


# ---- what apply changed ----------------------------------------------------------------------

def test_apply_batch_returns_each_result_and_what_the_batch_changed() -> None:
    st = two_hosts()
    results, ch = st.apply_batch([
        Submit(time=T0, specs=[spec(), spec()], reqs=[ResReq(), ResReq()]),
        Place(time=T0 + 1, job_id=1, attempt=0, allocs=[alloc("n1")]),
        Place(time=T0 + 1, job_id=9, attempt=0, allocs=[alloc("n1")]),   # refused: no such job
        SetHostAdmin(time=T0 + 1, names=["n2"], closed=True),
    ])
    assert [type(r).__name__ for r in results] == ["Ok", "Ok", "Err", "Ok"]
    assert results[0].value == [1, 2] and isinstance(results[2].error, NotFound)
    assert (ch.jobs, ch.hosts, ch.forgotten) == ({1, 2}, {"n2"}, [])
    assert bool(ch) and not Changes()


def test_changes_are_not_left_in_the_state() -> None:
    st = two_hosts()
    before = set(vars(st))
    ch = Changes()
    submit_ids = st.apply(Submit(time=T0, specs=[spec()], reqs=[ResReq()]), ch)
    assert submit_ids == [1] and ch.jobs == {1} and set(vars(st)) == before


def test_changes_merge_accumulates_a_batch() -> None:
    a, b = Changes({1}, {"n1"}, [7]), Changes({2}, {"n1", "n2"}, [8], removed_hosts=["n3"])
    a.merge(b)
    assert (a.jobs, a.hosts, a.forgotten, a.removed_hosts) == ({1, 2}, {"n1", "n2"}, [7, 8], ["n3"])
    assert Changes(removed_hosts=["n3"])  # a removal alone is a change to publish


# ---- submit --------------------------------------------------------------------------------

def test_submit_assigns_consecutive_ids_and_the_default_queue() -> None:
    st = cluster_state(queue("normal"), queue("short", priority=50), default="short")
    assert submit(st, spec(queue=""), spec(queue="normal")) == [1, 2]
    assert submit(st, spec(queue="")) == [3]
    assert [st.jobs[i].spec.queue for i in (1, 2, 3)] == ["short", "normal", "short"]
    assert st.jobs[1].submit_time == T0 and st.jobs[1].state == S.PEND
    assert st.next_job_id == 4


def test_submit_to_an_unknown_queue_is_refused_whole() -> None:
    st = cluster_state()
    with pytest.raises(InvalidRequest, match="queue 'nope' does not exist"):
        submit(st, spec(queue="normal"), spec(queue="nope"))
    assert st.jobs == {} and st.next_job_id == 1  # all or nothing


def test_submit_needs_one_resreq_per_spec() -> None:
    st = cluster_state()
    with pytest.raises(InvalidRequest):
        st.apply(Submit(time=T0, specs=[spec(), spec()], reqs=[ResReq()]))
    assert st.jobs == {}


def test_a_batch_of_repeated_specs_admits_each_job_as_a_submit_of_its_own_would() -> None:
    """A run of equal specs is admitted once: every job still gets its queue, its queue's
    limits and its own 'submitted' entry, and a dependency is checked for each job."""
    queues = (queue("normal"), queue("short", run_limit_default=60.0, mem_limit_max=2 << 30))
    a, b = spec(queue=""), spec(queue="short", mem_limit=1 << 30)
    dep = spec(queue="", depend=parse_depend('done("first")'))
    batch = [a, a, b, b, a, spec(queue="", name="first"), dep, dep]
    st = cluster_state(*queues)
    ids = submit(st, *batch)
    for s, jid in zip(batch, ids, strict=True):
        alone = cluster_state(*queues)
        submit(alone, spec(queue="", name="first"))  # what the dependency names, as in the batch
        assert st.jobs[jid].spec == alone.jobs[submit(alone, s)[0]].spec
        assert [(e.event, e.detail) for e in st.history[jid]] == [("submitted", f"queue {st.jobs[jid].spec.queue}")]
    assert st.jobs[ids[2]].spec.run_limit == 60.0 and st.jobs[ids[0]].spec.queue == "normal"
    assert len(st.history) == len(batch)
    with pytest.raises(NotFound, match='dependency "first"'):  # each dependency checked: the first refuses
        submit(cluster_state(), dep, dep)


# ---- place ---------------------------------------------------------------------------------

def test_place_records_the_placement() -> None:
    st = two_hosts()
    submit(st, spec(slots=2))
    assert run(st, 1, "n1", "n2", t=T0 + 5) == 1
    j = st.jobs[1]
    assert (j.state, j.attempt, j.hosts, j.start_time, j.reason) == (S.RUN, 1, ["n1", "n2"], T0 + 5, "")


def test_place_with_a_stale_attempt_is_a_conflict() -> None:
    st = two_hosts(queue(rerunnable=True))
    submit(st)
    run(st, 1)
    st.apply(HostLost(time=T0 + 2, name="n1"))   # requeued at attempt 1
    with pytest.raises(Conflict, match="placement for attempt 0, job is at 1"):
        st.apply(Place(time=T0 + 3, job_id=1, attempt=0, allocs=[alloc("n2")]))
    assert st.jobs[1].state == S.PEND


@pytest.mark.parametrize("what", ["closed", "unavail", "unknown"])
def test_place_on_a_host_that_takes_no_jobs_is_a_conflict(what: str) -> None:
    st = two_hosts()
    submit(st)
    if what == "closed":
        st.apply(SetHostAdmin(time=T0, names=["n1"], closed=True))
    elif what == "unavail":
        st.apply(HostLost(time=T0, name="n1"))
    target = "nx" if what == "unknown" else "n1"
    with pytest.raises(Conflict, match=f"host {target} cannot take jobs"):
        run(st, 1, target)
    assert st.jobs[1].state == S.PEND and st.jobs[1].attempt == 0


def test_place_unknown_job_is_not_found() -> None:
    with pytest.raises(NotFound):
        two_hosts().apply(Place(time=T0, job_id=42, attempt=0, allocs=[alloc()]))


# ---- finish --------------------------------------------------------------------------------

def test_multi_host_job_waits_for_every_host() -> None:
    st = two_hosts()
    submit(st, spec(slots=2))
    run(st, 1, "n1", "n2")
    u1 = HostUsage(host="n1", reserved=G, actual=G // 2, peak=G)
    assert finish(st, 1, "n1", usage=u1) == "ok"
    assert st.jobs[1].state == S.RUN and st.jobs[1].finished_hosts == ["n1"]
    assert finish(st, 1, "n1") == "stale"                   # a repeated report
    assert finish(st, 1, "n3") == "stale"                   # not one of its hosts
    assert finish(st, 1, "n2", t=T0 + 9) == "ok"
    j = st.jobs[1]
    assert (j.state, j.exit_code, j.end_time, j.usage) == (S.DONE, 0, T0 + 9, [u1])
    assert st.finished_order == [1]


@pytest.mark.parametrize("first,second,state,code", [
    (0, 0, S.DONE, 0), (0, 2, S.EXIT, 2), (2, 0, S.EXIT, 2), (3, 4, S.EXIT, 3)])
def test_any_failing_host_fails_the_job(first: int, second: int, state: JobState, code: int) -> None:
    st = two_hosts()
    submit(st, spec(slots=2))
    run(st, 1, "n1", "n2")
    finish(st, 1, "n1", exit_code=first)
    finish(st, 1, "n2", exit_code=second)
    assert (st.jobs[1].state, st.jobs[1].exit_code) == (state, code)


def test_signal_and_reason_make_an_exit() -> None:
    st = two_hosts()
    submit(st, spec(), spec())
    run(st, 1)
    run(st, 2)
    finish(st, 1, exit_code=None, signal=9)
    finish(st, 2, exit_code=0, reason="mem limit exceeded")
    assert (st.jobs[1].state, st.jobs[1].signal) == (S.EXIT, 9)
    assert (st.jobs[2].state, st.jobs[2].reason) == (S.EXIT, "mem limit exceeded")


def test_finish_of_a_pending_or_older_attempt_is_stale() -> None:
    st = two_hosts(queue(rerunnable=True))
    submit(st)
    assert st.apply(Finish(time=T0, job_id=1, attempt=0, host="n1", exit_code=0)) == "stale"  # PEND
    run(st, 1)
    st.apply(HostLost(time=T0 + 2, name="n1"))
    assert st.apply(Finish(time=T0, job_id=1, attempt=1, host="n1", exit_code=0)) == "stale"  # requeued
    run(st, 1, "n2")
    assert st.apply(Finish(time=T0, job_id=1, attempt=1, host="n2", exit_code=0)) == "stale"  # old attempt
    assert st.jobs[1].state == S.RUN
    assert finish(st, 1, "n2") == "ok" and st.jobs[1].state == S.DONE
    assert finish(st, 1, "n2") == "stale"                                                      # ended


# ---- kill ----------------------------------------------------------------------------------

def test_kill() -> None:
    st = two_hosts()
    submit(st, spec(), spec(), spec())
    run(st, 2)
    run(st, 3)
    finish(st, 3)
    out = st.apply(Kill(time=T0 + 5, job_ids=[1, 2, 3, 9], reason="by admin"))
    assert out == {1: "killed", 2: "kill requested", 3: "already DONE", 9: "not found"}
    assert (st.jobs[1].state, st.jobs[1].reason, st.jobs[1].end_time) == (S.EXIT, "by admin", T0 + 5)
    assert (st.jobs[2].state, st.jobs[2].kill_requested, st.jobs[2].reason) == (S.RUN, True, "by admin")
    finish(st, 2, exit_code=None, signal=15)
    assert st.jobs[2].state == S.EXIT


# ---- hosts ---------------------------------------------------------------------------------

@pytest.mark.parametrize("queue_rerun,job_rerun,requeued", [
    (False, None, False), (True, None, True), (False, True, True), (True, False, False)])
def test_host_lost_requeues_rerunnable_and_exits_the_rest(queue_rerun: bool, job_rerun: bool | None,
                                                          requeued: bool) -> None:
    st = two_hosts(queue(rerunnable=queue_rerun))
    submit(st, spec(rerunnable=job_rerun), spec(rerunnable=job_rerun))
    run(st, 1, "n1")
    run(st, 2, "n2")
    assert st.apply(HostLost(time=T0 + 7, name="n1")) == [1]
    j = st.jobs[1]
    assert st.hosts["n1"].unavail and st.jobs[2].state == S.RUN
    if requeued:
        assert (j.state, j.requeues, j.allocs, j.start_time, j.reason) == (
            S.PEND, 1, [], None, "requeued: host n1 lost")
        assert j.id not in st.finished_order
    else:
        assert (j.state, j.reason, j.end_time) == (S.EXIT, "host n1 lost", T0 + 7)


def test_host_lost_never_requeues_a_job_being_killed() -> None:
    st = two_hosts(queue(rerunnable=True))
    submit(st)
    run(st, 1)
    st.apply(Kill(time=T0, job_ids=[1]))
    st.apply(HostLost(time=T0 + 1, name="n1"))
    assert st.jobs[1].state == S.EXIT


def test_host_lost_unknown_host() -> None:
    with pytest.raises(NotFound):
        two_hosts().apply(HostLost(time=T0, name="nx"))


def test_reregistration_keeps_admin_state_and_clears_unavail() -> None:
    st = two_hosts()
    st.apply(SetHostAdmin(time=T0, names=["n1"], closed=True))
    st.apply(HostLost(time=T0, name="n1"))
    st.apply(RegisterHost(time=T0 + 1, host=host("n1", mem="16G")))
    h = st.hosts["n1"]
    assert (h.closed, h.unavail, h.mem_total) == (True, False, 16 * G)


def test_set_host_admin_is_all_or_nothing() -> None:
    st = two_hosts()
    with pytest.raises(NotFound):
        st.apply(SetHostAdmin(time=T0, names=["n1", "nx"], closed=True))
    assert not st.hosts["n1"].closed
    ch = Changes()
    st.apply(SetHostAdmin(time=T0, names=["n1", "n2"], closed=True), ch)
    assert st.hosts["n1"].closed and st.hosts["n2"].closed and ch.hosts == {"n1", "n2"}


def test_remove_hosts_forgets_them_all_or_nothing() -> None:
    st = two_hosts()
    with pytest.raises(NotFound, match="host nx is not known"):
        st.apply(RemoveHosts(time=T0, names=["n1", "nx"]))
    assert set(st.hosts) == {"n1", "n2"}
    st.apply(HostLost(time=T0, name="n2"))
    ch = Changes()
    assert st.apply(RemoveHosts(time=T0 + 1, names=["n2"]), ch) == "ok"
    assert set(st.hosts) == {"n1"} and ch.removed_hosts == ["n2"] and ch
    st.apply(RegisterHost(time=T0 + 2, host=host("n2")))  # its worker may come back: a new host
    assert not st.hosts["n2"].unavail


@pytest.mark.parametrize("suspend", [False, True])
def test_a_host_cannot_be_removed_while_jobs_run_there(suspend: bool) -> None:
    st = two_hosts()
    submit(st, spec(), spec(slots=2), spec())
    run(st, 1, "n1")
    run(st, 2, "n1", "n2")
    if suspend:
        st.jobs[1].state = S.USUSP
    with pytest.raises(Conflict, match=r"^host n1 runs jobs 1 2: kill them or wait for their end "
                                       r"before removing it$"):
        st.apply(RemoveHosts(time=T0 + 2, names=["n1"]))
    finish(st, 1)
    with pytest.raises(Conflict, match=r"^host n1 runs job 2: kill it or wait for its end before removing it$"):
        st.apply(RemoveHosts(time=T0 + 2, names=["n1"]))
    finish(st, 2, "n1")
    finish(st, 2, "n2")
    st.apply(RemoveHosts(time=T0 + 3, names=["n1"]))  # ended jobs and pending job 3 do not hold it
    assert set(st.hosts) == {"n2"} and st.jobs[1].hosts == ["n1"]


def test_a_refused_removal_removes_no_host() -> None:
    st = two_hosts()
    submit(st, spec())
    run(st, 1, "n2")
    with pytest.raises(Conflict, match="host n2 runs job 1"):
        st.apply(RemoveHosts(time=T0 + 2, names=["n1", "n2"]), ch := Changes())
    assert set(st.hosts) == {"n1", "n2"} and not ch


# ---- modify, cleanup, queues ---------------------------------------------------------------

def test_modify_mem_limit() -> None:
    st = two_hosts()
    submit(st, spec(), spec())
    st.apply(Modify(time=T0, job_id=1, mem_limit=2 * G))
    assert st.jobs[1].spec.mem_limit == 2 * G
    st.apply(Kill(time=T0, job_ids=[2]))
    with pytest.raises(Conflict):
        st.apply(Modify(time=T0, job_id=2, mem_limit=G))
    with pytest.raises(NotFound):
        st.apply(Modify(time=T0, job_id=9, mem_limit=G))


def test_cleanup_drops_the_oldest_finished() -> None:
    st = two_hosts()
    submit(st, *[spec() for _ in range(5)])
    st.apply(Kill(time=T0, job_ids=[3, 1, 4]))   # finished in the order 3, 1, 4
    assert st.apply(Cleanup(time=T0, keep_finished=5)) == 0
    ch = Changes()
    assert st.apply(Cleanup(time=T0, keep_finished=1), ch) == 2
    assert sorted(st.jobs) == [2, 4, 5] and st.finished_order == [4] and ch.forgotten == [3, 1]


def test_set_queues_replaces_them() -> None:
    st = cluster_state(queue("a"), queue("b"), default="a")
    st.apply(SetQueues(time=T0, queues=[queue("c", priority=80)], default_queue="c"))
    assert list(st.queues) == ["c"] and st.default_queue == "c"


def test_apply_counts_and_refuses_unknown_commands() -> None:
    st = ClusterState()

    class Bogus(Cmd):
        pass

    with pytest.raises(InvalidRequest, match="unknown command Bogus"):
        st.apply(Bogus(time=T0))


# ---- determinism and batches ---------------------------------------------------------------

def scenario() -> list[Cmd]:
    """One of every command, in an order that exercises most rules."""
    return [
        SetQueues(time=T0, queues=[queue("normal"), queue("re", rerunnable=True, priority=60)],
                  default_queue="normal"),
        RegisterHost(time=T0, host=host("n1", attrs={"type": "x86"}, virtual={"gpu": 2})),
        RegisterHost(time=T0, host=host("n2", ncpus=8)),
        Submit(time=T0 + 1, specs=[spec(), spec(queue="re", slots=2), spec(queue="")],
               reqs=[parse_resreq("rusage[mem=1G]"), parse_resreq("span[ptile=1]"), ResReq()]),
        Submit(time=T0 + 1.5, specs=[spec(depend=parse_depend("done(1)")), spec()],
               reqs=[ResReq(), ResReq()]),
        Place(time=T0 + 2, job_id=1, attempt=0, allocs=[alloc("n1")]),
        Place(time=T0 + 2, job_id=2, attempt=0, allocs=[alloc("n1"), alloc("n2")]),
        Stop(time=T0 + 2.1, job_ids=[5]),
        Resume(time=T0 + 2.2, job_ids=[5]),
        Move(time=T0 + 2.3, job_id=5, to="top"),
        ModifySpec(time=T0 + 2.4, job_id=5, patch=SpecPatch(name="five", priority=3, run_limit=60.0)),
        Switch(time=T0 + 2.5, job_ids=[5], queue="re"),
        SysSuspend(time=T0 + 2.6, job_ids=[2]),
        SysResume(time=T0 + 2.7, job_ids=[2]),
        Reserve(time=T0 + 2.8, job_id=1, attempt=1, host="n1", mem=G // 4, event="shrunk", detail="peak held still"),
        Modify(time=T0 + 3, job_id=3, mem_limit=G),
        Finish(time=T0 + 4, job_id=1, attempt=1, host="n1", exit_code=0,
               usage=HostUsage(host="n1", reserved=G, actual=G // 3, peak=G // 2, cpu_time=1.5)),
        Requeue(time=T0 + 4.5, job_ids=[1]),
        HostUnknown(time=T0 + 4.8, name="n2"),
        HostLost(time=T0 + 5, name="n2"),
        RemoveHosts(time=T0 + 5, names=["n2"]),
        SetHostAdmin(time=T0 + 6, names=["n1"], closed=True),
        Kill(time=T0 + 7, job_ids=[3, 2]),
        Cleanup(time=T0 + 8, keep_finished=1),
    ]


def test_every_command_type_is_in_the_scenario() -> None:
    assert {type(c) for c in scenario()} == set(typing.get_args(Command))


def test_batch_round_trip_of_every_command() -> None:
    cmds = scenario()
    back = decode_batch(encode_batch(cmds))
    assert back == cmds
    assert [type(c) for c in back] == [type(c) for c in cmds]


def test_same_commands_give_the_same_state() -> None:
    blob = encode_batch(scenario())
    a, b_ = ClusterState(), ClusterState()
    for st in (a, b_):
        for cmd in decode_batch(blob):  # each replica decodes its own copy, as Raft does
            try:
                st.apply(cmd)
            except Exception as e:  # noqa: BLE001 - a refused command is part of the fold too
                pytest.fail(f"{cmd!r} raised {e!r}")
    assert pickle.dumps(a) == pickle.dumps(b_)
    assert a.applied == len(scenario()) and a.jobs[2].state == S.EXIT


# ---- snapshot completeness -----------------------------------------------------------------

def unset_fields(obj: object, path: str = "$") -> list[str]:
    """Every field, at any depth, still at its default: the completeness check must see values."""
    out: list[str] = []
    if isinstance(obj, msgspec.Struct):
        for f in msgspec.structs.fields(type(obj)):
            v = getattr(obj, f.name)
            default = f.default_factory() if f.default_factory is not msgspec.NODEFAULT else f.default
            if f.default is not msgspec.NODEFAULT or f.default_factory is not msgspec.NODEFAULT:
                if v == default:
                    out.append(f"{path}.{f.name}")
            out += unset_fields(v, f"{path}.{f.name}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out += unset_fields(v, f"{path}[{i}]")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            out += unset_fields(v, f"{path}[{k!r}]")
    return out


FULL_REQ = ResReq(
    text="select[ncpus>=2] order[-mem] rusage[mem=1G/task:duration=10:decay=1] span[ptile=1]",
    rusage=(RusageItem("mem", G, "task", 600, True),), select="ncpus>=2",
    order=(OrderKey("mem", False),), span_hosts=1, span_ptile=1,  # both spans: for persistence only
    mem_auto=True, mem_basis="auto: p95 of 3 runs of ann/full in re, 1.0G + 10 % = 1.1G")  # both: persistence only
FULL_SPEC = JobSpec(command=["python", "-c", "pass"], name="full", user="ann", queue="re", slots=2,
                    resreq=FULL_REQ.text, mem_limit=3 * G, cwd="/scratch/ann", env={"OMP_NUM_THREADS": "2"},
                    stdout="out.%J", stderr="err.%J", rerunnable=True, priority=5,
                    run_limit=600.0, run_estimate=300.0, project="climate", group="geo",
                    stdout_overwrite=True, stderr_overwrite=True, submit_host="login1", script="#!/bin/sh\ntrue\n",
                    reclaim=True, exclusive=True, pre_exec="test -d /scratch",
                    dep_never_kill=True, hold=True, warn_signal=10, warn_time=55.0, warn_to="batch",
                    cpus_per_task=2)


def full_state() -> ClusterState:
    """A state where every field of every Job, Host and Queue holds a non-default value."""
    st = ClusterState()
    mk = lambda name, **kw: Host(name=name, slots_total=4, mem_total=8 * G, ncpus=8,  # noqa: E731
                                 registered_time=T0, version="0.1.0", attrs={"type": "x86"},
                                 virtual={"gpu": 2}, **kw)
    cmds: list[Cmd] = [
        SetQueues(time=T0, queues=[Queue(name="re", priority=70, rerunnable=True, description="reruns",
                                         run_limit_default=300.0, run_limit_max=3600.0, dep_never="kill",
                                         reclaimable=True, reclaim_policy="suspend", mem_retries=2,
                                         mem_retry_factor=1.5, mem_retry_max=8 * G, mem_default=G,
                                         mem_default_auto=True, mem_auto_fallback=2 * G, mem_auto_margin=0.2, mem_auto_min_runs=5,
                                         hosts=("n1", "n2"), hosts_not=("n3",),  # (hosts given, hosts_not is unread)
                                         mem_limit_default=G, mem_limit_max=16 * G, max_preexec_retry=3,
                                         preexec_retry_action="exit", preexec_timeout=90.0)],
                  default_queue="re"),
        *[RegisterHost(time=T0, host=mk(n)) for n in ("n1", "n2", "n3")],
        Submit(time=T0 + 1, specs=[FULL_SPEC], reqs=[FULL_REQ], key="k1"),
        Resume(time=T0 + 1.2, job_ids=[1]),                                      # submitted held
        Modify(time=T0 + 1.5, job_id=1, mem_limit=4 * G),
        Place(time=T0 + 2, job_id=1, attempt=0,
              allocs=[Alloc("n1", 1, G, {"slots": 1, "gpu": 1}), Alloc("n2", 1, G, {"slots": 1, "gpu": 1})]),
        HostLost(time=T0 + 3, name="n1"),                                         # requeue
        SetHostAdmin(time=T0 + 3.5, names=["n1"], closed=True),
        Place(time=T0 + 4, job_id=1, attempt=1,
              allocs=[Alloc("n2", 1, G, {"slots": 1, "gpu": 1}), Alloc("n3", 1, G, {"slots": 1, "gpu": 1})]),
        Submit(time=T0 + 4.2, specs=[JobSpec(command=["true"], user="bob", queue="re")], reqs=[parse_resreq("")]),
        Place(time=T0 + 4.4, job_id=2, attempt=0, allocs=[Alloc("n3", 1, 0, {"slots": 1})]),
        Finish(time=T0 + 4.8, job_id=2, attempt=1, host="n3", exit_code=0),
        *[Finish(time=T0 + 4.9, job_id=1, attempt=2, host=h, exit_code=137, signal=9, reason="MEMLIMIT")
          for h in ("n2", "n3")],                                                # a retry with more memory
        Place(time=T0 + 4.95, job_id=1, attempt=2,
              allocs=[Alloc("n2", 1, G + G // 2, {"slots": 1, "gpu": 1}),
                      Alloc("n3", 1, G + G // 2, {"slots": 1, "gpu": 1})]),
        *[Finish(time=T0 + 4.96, job_id=1, attempt=3, host=h, exit_code=1, reason=PREEXEC_FAILED)
          for h in ("n2", "n3")],                                                # its -E failed: PEND again
        Place(time=T0 + 4.97, job_id=1, attempt=3,
              allocs=[Alloc("n2", 1, G + G // 2, {"slots": 1, "gpu": 1}),
                      Alloc("n3", 1, G + G // 2, {"slots": 1, "gpu": 1})]),
        Reserve(time=T0 + 4.98, job_id=1, attempt=4, host="n2", mem=G // 2, event="shrunk", detail="held still"),
        Kill(time=T0 + 5, job_ids=[1], reason="over budget", evict=True),      # preempted by kill
        Finish(time=T0 + 6, job_id=1, attempt=4, host="n2", exit_code=137, signal=9, reason="killed",
               usage=HostUsage(host="n2", reserved=G, actual=G // 2, peak=G // 3 * 2, charged_peak=G,
                               cpu_time=12.5, slack_integral=3.0e9)),
        Finish(time=T0 + 7, job_id=1, attempt=4, host="n3", exit_code=137, signal=9, reason="killed",
               usage=HostUsage(host="n3", reserved=G, actual=G // 4, peak=G // 2, charged_peak=G,
                               cpu_time=11.0, slack_integral=2.0e9)),
        # Cleanup keeps one finished job: job 2, which ended first, is dropped and its fairshare
        # usage folded into usage_past.
        Cleanup(time=T0 + 11, keep_finished=1),
    ]
    for c in cmds:
        st.apply(c)
    return st


# Fields a finished job cannot hold (set only while pending, suspended or UNKWN, or on array
# elements): test_a_held_unknown_job_round_trips covers them.
WHILE_ALIVE = (".spec.depend", ".spec.array", ".spec.index", ".held", ".prior", ".requeue_requested",
               ".suspend_reason")


def test_the_full_state_sets_every_field() -> None:
    st = full_state()
    job, h1 = st.jobs[1], st.hosts["n1"]
    assert job.state == S.EXIT and job.kill_requested and job.requeues == 3 and job.attempt == 4
    assert job.preexec_fails == 1
    assert job.mem_tries == 1 and job.spec.mem_limit == 6 * G and job.req.rusage[0].amount == G + G // 2
    assert [f for f in unset_fields(job) if not f.endswith(WHILE_ALIVE)] == []
    assert unset_fields(h1) == []
    assert unset_fields(st.queues["re"]) == []
    fresh = ClusterState()
    # dep_facts: only while a forgotten job has dependents (tests/test_jobcontrol.py); arrays: tests/test_arrays.py
    assert [k for k in ClusterState._REPLICATED if getattr(st, k) == getattr(fresh, k)] == ["dep_facts", "arrays"]
    # Every attribute is replicated but the dependency index, derived from the jobs on restore,
    # and the jobs-by-host index (ClusterState.jobs_on), built when needed; what a command
    # changed travels in Changes.
    assert set(vars(fresh)) - set(ClusterState._REPLICATED) == {"deps", "on_host"}


def test_a_held_unknown_job_round_trips() -> None:
    from xce.core.jobspec.arrays import ArraySpec

    job = Job(id=7, spec=msgspec.structs.replace(FULL_SPEC, depend=parse_depend('done(3) && numexit("a*", < 2)'),
                                                 array=ArraySpec(((1, 9, 2),), 3), index=5),
              req=FULL_REQ, state=S.UNKWN, held=True, prior=S.SSUSP, requeue_requested=True,
              suspend_reason="RECLAIMED: host n1")
    assert [f for f in unset_fields(job) if f.endswith(WHILE_ALIVE)] == []
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(job), type=Job) == job
    assert pickle.loads(pickle.dumps(job)) == job


def test_pickle_round_trip_keeps_everything() -> None:
    st = full_state()
    back = pickle.loads(pickle.dumps(st))
    assert back.__getstate__() == st.__getstate__()
    assert back.jobs[1] == st.jobs[1] and back.hosts == st.hosts and back.queues == st.queues


def test_msgpack_snapshot_round_trip_keeps_everything() -> None:
    st = full_state()
    snap = Snapshot(seq=41, epoch="e1", time=T0 + 8, jobs=list(st.jobs.values()), hosts=list(st.hosts.values()),
                    queues=list(st.queues.values()), default_queue=st.default_queue,
                    live=[HostLive("n2", 5 * G, T0 + 7.5, HostMem(2 * G, G // 2, 3 * G // 2, 0))],
                    samples=[JobSample(1, "n2", G // 2, G, 3.5)],
                    reasons={7: "mem: needs 4.0G"}, leader="127.0.0.1:7001", term=3,
                    usage_past=past_usage(st.usage_past), usage_as_of=st.usage_as_of,
                    arrays=[ArrayView(id=9, name="a", user="u", queue="normal", indices="1-9:2", limit=2, elements=5,
                                      counts={"PEND": 4, "RUN": 1}, held=True, unstarted="3-9:2")])
    # n2 and n3 are open and up on purpose; n1 carries every Host field.
    assert [f for f in unset_fields(snap)
            if not f.startswith(("$.hosts[1]", "$.hosts[2]")) and not f.endswith(WHILE_ALIVE)] == []
    back = msgspec.msgpack.decode(msgspec.msgpack.encode(snap), type=Snapshot)
    assert back == snap
    assert back.jobs[0].state is S.EXIT and isinstance(back.jobs[0].req.rusage, tuple)


# ---- the mirror: snapshot plus sequenced events --------------------------------------------

def mirror_at(seq: int = 10, epoch: str = "e1"):
    from xce.replica.mirror import Mirror

    st = two_hosts()
    submit(st, spec(), spec())
    run(st, 1)
    m = Mirror()
    m.apply_snapshot(Snapshot(seq=seq, epoch=epoch, time=T0 + 1, jobs=list(st.jobs.values()),
                              hosts=list(st.hosts.values()), queues=list(st.queues.values()),
                              default_queue="normal", live=[HostLive("n1", 6 * G, T0)],
                              samples=[JobSample(1, "n1", G // 2, G // 2, 1.0)], reasons={2: "mem: short"},
                              leader="c1", term=2))
    return m, st


def ev(seq: int, epoch: str = "e1", **kw):
    from xce.proto.schema import Event

    return Event(seq=seq, epoch=epoch, time=T0 + seq, **kw)


def test_mirror_snapshot() -> None:
    m, st = mirror_at()
    assert m.synced and (m.seq, m.epoch, m.leader, m.term) == (10, "e1", "c1", 2)
    assert m.jobs == st.jobs and m.hosts == st.hosts and m.default_queue == "normal"
    assert m.live.ledger.accounts[(1, "n1")].actual == G // 2
    assert m.live.os_available == {"n1": 6 * G} and m.live.reasons == {2: "mem: short"}
    assert m.live.ledger.audit() == []


def test_a_mirror_holds_equal_parts_of_decoded_jobs_once() -> None:
    from xce.proto.schema import Event
    from xce.replica.mirror import Mirror, SharedParts

    st = two_hosts()
    submit(st, spec(), spec(), spec())
    for jid in (1, 2, 3):
        run(st, jid)
    st.apply(Finish(time=T0 + 5, job_id=1, attempt=1, host="n1", exit_code=0,
                    usage=HostUsage(host="n1", reserved=G, actual=G // 2, peak=G, charged_peak=G)))
    wire = msgspec.msgpack.encode(Snapshot(
        seq=1, epoch="e1", time=T0 + 6, jobs=list(st.jobs.values()), hosts=list(st.hosts.values()),
        queues=list(st.queues.values()), default_queue="normal", live=[], samples=[], reasons={}))
    m = Mirror()
    m.apply_snapshot(msgspec.msgpack.decode(wire, type=Snapshot))  # fresh objects, as from the wire
    assert m.jobs == st.jobs
    j1, j2, j3 = (m.jobs[i] for i in (1, 2, 3))
    assert j1.req is j2.req is j3.req and j2.allocs[0] is j3.allocs[0] and j2.allocs is not j3.allocs
    submit(st, spec())
    run(st, 4)
    assert m.apply_event(msgspec.msgpack.decode(msgspec.msgpack.encode(
        Event(seq=2, epoch="e1", time=T0 + 7, jobs=[st.jobs[4]])), type=Event))
    assert m.jobs[4] == st.jobs[4] and m.jobs[4].req is j1.req and m.jobs[4].allocs[0] is j2.allocs[0]
    assert m.live.ledger.audit() == []
    parts = SharedParts()
    parts.LIMIT = 2  # past its bound it starts afresh rather than grow with a site's unique requests
    for j in (j1, j2, j3):
        parts.share(j)
    assert len(parts.reqs) + len(parts.allocs) + len(parts.names) <= 3


def test_mirror_applies_events_in_order() -> None:
    m, st = mirror_at()
    run(st, 2, "n2")
    assert m.apply_event(ev(11, jobs=[st.jobs[2]], reasons={2: ""}))
    assert m.jobs[2].state == S.RUN and (2, "n2") in m.live.ledger.accounts and 2 not in m.live.reasons
    finish(st, 1)
    assert m.apply_event(ev(12, jobs=[st.jobs[1]], samples=[JobSample(2, "n2", G, G, 2.0)],
                            live=[HostLive("n2", 7 * G, T0 + 12)], reasons={5: "slots: needs 9"}))
    assert m.jobs[1].state == S.DONE and (1, "n1") not in m.live.ledger.accounts
    assert m.live.ledger.accounts[(2, "n2")].actual == G and m.live.os_available["n2"] == 7 * G
    assert m.live.reasons == {5: "slots: needs 9"}
    assert m.apply_event(ev(13, forget=[1], hosts=[host("n3")], queues=[queue("new")]))
    assert 1 not in m.jobs and "n3" in m.hosts and "new" in m.queues
    assert (m.seq, m.time) == (13, T0 + 13) and m.live.ledger.audit() == []


def test_a_scheduling_round_works_from_totals_re_derived_from_the_accounts() -> None:
    """Whatever the delta-kept totals say, a round sees the accounts' truth (issue 3: a round
    boundary loses nothing, and a drift does not outlive one)."""
    from xce.daemons.scheduler import round_caps

    m, _ = mirror_at()
    truth = round_caps(m)["n1"]
    m.live.ledger.totals["n1"].mem_slack += 3 * G        # a drifted delta ...
    m.live.ledger.totals["n1"].allocated["slots"] = 99
    caps = round_caps(m)["n1"]
    assert (caps.slack, caps.slots_free) == (truth.slack, truth.slots_free)  # ... is gone at the round
    assert m.live.ledger.audit() == []


def test_mirror_takes_columnar_samples_as_it_takes_legacy_ones() -> None:
    """The controller publishes HostSamples; recordings of older streams carry JobSamples."""
    from xce.proto.schema import HostSamples

    a, st = mirror_at()
    run(st, 2, "n2")
    b, _ = mirror_at()
    for m in (a, b):
        assert m.apply_event(ev(11, jobs=[st.jobs[2]]))
    assert a.apply_event(ev(12, samples=[JobSample(2, "n2", G, 2 * G, 2.0), JobSample(1, "n1", G // 4, G, 1.0)]))
    assert b.apply_event(ev(12, host_samples=[HostSamples("n2", [2], [G], [2 * G], [2.0]),
                                              HostSamples("n1", [1], [G // 4], [G], [1.0])]))
    for key in [(1, "n1"), (2, "n2")]:
        x, y = a.live.ledger.accounts[key], b.live.ledger.accounts[key]
        assert (x.actual, x.peak, x.used, x.cpu_time) == (y.actual, y.peak, y.used, y.cpu_time)
    assert a.live.ledger.totals == b.live.ledger.totals and b.live.ledger.audit() == []


def test_mirror_keeps_pending_and_running_indexes_with_every_change() -> None:
    m, st = mirror_at()
    assert set(m.pending) == {2} and set(m.running) == {1}
    run(st, 2, "n2")
    finish(st, 1)
    assert m.apply_event(ev(11, jobs=[st.jobs[1], st.jobs[2]]))
    assert m.pending == {} and set(m.running) == {2}
    assert m.apply_event(ev(12, forget=[2]))
    assert m.running == {} and m.pending == {}


def test_mirror_gap_is_refused() -> None:
    m, st = mirror_at()
    before = dict(m.jobs)
    assert m.apply_event(ev(12, forget=[1])) is False
    assert m.seq == 10 and m.jobs == before


def test_mirror_other_epoch_is_refused() -> None:
    m, _ = mirror_at()
    assert m.apply_event(ev(11, epoch="e2", forget=[1])) is False
    assert m.apply_event(ev(5, epoch="e2", forget=[1])) is False
    assert m.seq == 10 and 1 in m.jobs


@pytest.mark.parametrize("seq", [3, 10])
def test_mirror_ignores_events_already_in_the_snapshot(seq: int) -> None:
    m, _ = mirror_at()
    assert m.apply_event(ev(seq, forget=[1], reasons={2: ""})) is True
    assert m.seq == 10 and 1 in m.jobs and m.live.reasons == {2: "mem: short"}


def test_unsynced_mirror_applies_nothing() -> None:
    from xce.replica.mirror import Mirror

    m = Mirror()
    assert not m.synced
    assert m.apply_event(ev(1, epoch="e1", hosts=[host("n1")])) is False and m.hosts == {}


def test_a_retried_submit_with_the_same_key_returns_the_first_ids() -> None:
    st = cluster_state()
    first = st.apply(Submit(time=T0, specs=[spec()], reqs=[parse_resreq("")], key="abc"))
    again = st.apply(Submit(time=T0 + 1, specs=[spec()], reqs=[parse_resreq("")], key="abc"))
    other = st.apply(Submit(time=T0 + 2, specs=[spec()], reqs=[parse_resreq("")], key="xyz"))
    assert first == again and other != first and len(st.jobs) == 2


@pytest.mark.parametrize("allocs,needle", [
    ([], "names each host once"),
    ([Alloc("n1", 1, 0, {"slots": 1}), Alloc("n1", 1, 0, {"slots": 1})], "names each host once"),
    ([Alloc("n1", 3, 0, {"slots": 3})], "the job needs 2"),
    ([Alloc("n1", 2, 0, {"slots": 2}), Alloc("n2", 0, 0, {})], "the job needs 2"),
])
def test_a_malformed_placement_is_refused_and_the_job_stays_pending(allocs, needle) -> None:
    st = cluster_state()
    for n in ("n1", "n2"):
        st.apply(RegisterHost(time=T0, host=host(n)))
    (jid,) = st.apply(Submit(time=T0, specs=[spec(slots=2)], reqs=[parse_resreq("")]))
    with pytest.raises(InvalidRequest, match=needle):
        st.apply(Place(time=T0, job_id=jid, attempt=0, allocs=allocs))
    assert st.jobs[jid].state == S.PEND and st.jobs[jid].allocs == []


# ---- idempotency keys: scoped by who sent them (issue 12 item 4) ----------------------------

def test_a_key_reused_by_another_principal_makes_that_principal_its_own_job() -> None:
    st = cluster_state()
    alice = st.apply(Submit(time=T0, specs=[spec(user="alice")], reqs=[parse_resreq("")], key="k", by="alice"))
    bob = st.apply(Submit(time=T0 + 1, specs=[spec(user="bob")], reqs=[parse_resreq("")], key="k", by="bob"))
    again = st.apply(Submit(time=T0 + 2, specs=[spec(user="bob")], reqs=[parse_resreq("")], key="k", by="bob"))
    assert alice != bob and again == bob
    assert st.jobs[bob[0]].spec.user == "bob" and len(st.jobs) == 2


def test_every_keyed_write_answers_a_retry_with_its_first_answer() -> None:
    st = cluster_state()
    (jid,) = submit(st, spec())
    first = st.apply(Kill(time=T0 + 1, job_ids=[jid], key="kill-1", by="alice"))
    again = st.apply(Kill(time=T0 + 2, job_ids=[jid], key="kill-1", by="alice"))
    fresh = st.apply(Kill(time=T0 + 3, job_ids=[jid], key="kill-2", by="alice"))
    assert first == again == {jid: "killed"} and fresh == {jid: "already EXIT"}


def test_a_key_used_for_one_kind_of_write_is_refused_for_another() -> None:
    st = cluster_state()
    (jid,) = submit(st, spec())
    st.apply(Kill(time=T0 + 1, job_ids=[jid], key="k", by="alice"))
    with pytest.raises(Conflict, match="idempotency key 'k' was already used for a Kill"):
        st.apply(Modify(time=T0 + 2, job_id=jid, mem_limit=G, key="k", by="alice"))


def test_keyed_answers_survive_a_snapshot() -> None:
    st = cluster_state()
    ids = st.apply(Submit(time=T0, specs=[spec()], reqs=[parse_resreq("")], key="k", by="alice"))
    back = pickle.loads(pickle.dumps(st))
    assert back.apply(Submit(time=T0 + 1, specs=[spec()], reqs=[parse_resreq("")], key="k", by="alice")) == ids


class _NoScan(dict):  # type: ignore[type-arg]
    def values(self):  # type: ignore[no-untyped-def]
        raise AssertionError("walked every job")


def test_a_live_host_registering_again_walks_no_job_and_an_unknown_one_gets_its_jobs_back() -> None:
    """After a failover every live host registers again: each RegisterHost must not walk the
    cluster's jobs (hosts x jobs under the Raft lock); only a host gone unknown has UNKWN jobs."""
    st = two_hosts()
    (jid,) = submit(st)
    run(st, jid, "n1")
    jobs = st.jobs
    st.jobs = _NoScan(jobs)
    st.apply(RegisterHost(time=T0 + 2, host=host("n1")))
    st.jobs = jobs
    st.apply(HostUnknown(time=T0 + 3, name="n1"))
    assert st.jobs[jid].state == JobState.UNKWN
    st.apply(RegisterHost(time=T0 + 4, host=host("n1")))
    assert st.jobs[jid].state == JobState.RUN and not st.hosts["n1"].unavail


class _CountScan(dict):  # type: ignore[type-arg]
    walks = 0

    def values(self):  # type: ignore[no-untyped-def]
        type(self).walks += 1
        return super().values()


def test_many_hosts_going_unknown_and_coming_back_walk_the_jobs_once_not_once_each() -> None:
    """A stalled leader's hosts all go silent in one check: thousands of HostUnknown, then as many
    RegisterHost.  Each walked every job (hosts x jobs steps in every controller's Raft thread,
    20 s and more at 2,000 hosts x 20 jobs); now one walk serves them while no command moves a
    job.  Fails on the old code (a walk per command).  The outcome is the walk's: jobs UNKWN, in
    job order, and back in the states they had; a job over two hosts comes back with the second."""
    names = [f"n{i}" for i in range(1, 5)]
    st = cluster_state(hosts=tuple(host(n) for n in names))
    ids = [submit(st)[0] for _ in names]
    for jid, n in zip(ids, names, strict=True):
        run(st, jid, n)
    (both,) = submit(st, spec(slots=2))
    run(st, both, "n1", "n2")
    st.apply(Stop(time=T0 + 1, job_ids=[ids[1]], key="s", by="alice"))  # USUSP: comes back stopped
    st.jobs = _CountScan(st.jobs)
    _CountScan.walks = 0
    gone = st.apply_batch([HostUnknown(time=T0 + 2, name=n) for n in names])[0]
    assert [r.value for r in gone] == [[ids[0], both], [ids[1]], [ids[2]], [ids[3]]]
    st.apply_batch([RegisterHost(time=T0 + 3, host=host(n)) for n in names])
    assert _CountScan.walks == 1
    assert [st.jobs[j].state for j in ids] == [JobState.RUN, JobState.USUSP, JobState.RUN, JobState.RUN]
    assert st.jobs[both].state == JobState.RUN and st.jobs[both].prior is None
    submit(st, time=T0 + 4)
    st.apply(HostUnknown(time=T0 + 5, name="n3"))  # after a command that may move jobs: walked again
    assert _CountScan.walks == 2


def test_many_hosts_lost_together_walk_the_jobs_once_and_the_index_follows_the_requeues() -> None:
    """A stalled leader's hosts are lost in one check: thousands of HostLost, each of which
    walked every job (40 s without a Raft tick at 5,000 hosts x 20 jobs).  Fails on the old
    code (a walk per command).  A requeued job leaves every host's list, so a later HostLost
    of its other host leaves it alone; an ended one stays listed, as jobs in any state are."""
    names = [f"n{i}" for i in range(1, 5)]
    st = cluster_state(hosts=tuple(host(n) for n in names))
    st.apply(SetQueues(time=T0, queues=[queue(rerunnable=True), queue(name="once")], default_queue="normal"))
    ids = [submit(st)[0] for _ in names]
    for jid, n in zip(ids, names, strict=True):
        run(st, jid, n)
    (both,) = submit(st, spec(slots=2))
    run(st, both, "n1", "n2")
    (ends,) = submit(st, spec(queue="once"))
    run(st, ends, "n3")
    st.jobs = _CountScan(st.jobs)
    _CountScan.walks = 0
    lost = st.apply_batch([HostLost(time=T0 + 2, name=n) for n in names])[0]
    assert [r.value for r in lost] == [[ids[0], both], [ids[1]], [ids[2], ends], [ids[3]]]
    assert _CountScan.walks == 1
    assert all(st.jobs[j].state == JobState.PEND for j in [*ids, both]) and st.jobs[ends].state == JobState.EXIT
    assert [j.id for n in names for j in st.jobs_on(n)] == [ends]
    assert st.jobs[both].requeues == 1  # requeued once, by n1; n2's loss found it pending
