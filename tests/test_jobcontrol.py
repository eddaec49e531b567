"""Job control, dependencies, history and queue run limits in the state machine (issue 14, items 3-5).

Every transition of TRANSITIONS is driven here through the command that causes it; an
illegal one raises IllegalTransition naming the job and its state, and changes nothing.
"""

from __future__ import annotations

import pickle
import re

import msgspec
import pytest
from builders import T0, alloc, cluster_state, host, queue, spec, submit
from hypothesis import given, settings
from hypothesis import strategies as st_

from xce.core.errors import IllegalTransition, InvalidRequest, NotFound
from xce.core.jobspec.depend import parse_depend
from xce.core.model import ACTIVE, PREEXEC_FAILED, JobState
from xce.core.resreq import parse_resreq
from xce.core.state import (
    TRANSITIONS,
    Cleanup,
    ClusterState,
    Finish,
    HostLost,
    HostUnknown,
    Kill,
    Modify,
    ModifySpec,
    Move,
    Place,
    RegisterHost,
    Requeue,
    Resume,
    SetQueues,
    SpecPatch,
    Stop,
    Switch,
    SysResume,
    SysSuspend,
)

S = JobState


def cluster(*queues) -> ClusterState:
    return cluster_state(*(queues or (queue(), queue("other", priority=50))), hosts=(host("n1"), host("n2")))


def place(st: ClusterState, jid: int, h: str = "n1", t: float = T0 + 1) -> int:
    return st.apply(Place(time=t, job_id=jid, attempt=st.jobs[jid].attempt, allocs=[alloc(h, 1)]))


def finish(st: ClusterState, jid: int, code: int = 0, h: str = "n1", t: float = T0 + 2, **kw) -> str:
    return st.apply(Finish(time=t, job_id=jid, attempt=st.jobs[jid].attempt, host=h, exit_code=code, **kw))


def dep(text: str, **kw):
    return spec(depend=parse_depend(text), **kw)


# ---- every transition, through its command ---------------------------------------------------

def _running(st):
    place(st, 1)


def _ususp(st):
    place(st, 1)
    st.apply(Stop(time=T0 + 2, job_ids=[1]))


def _ssusp(st):
    place(st, 1)
    st.apply(SysSuspend(time=T0 + 2, job_ids=[1]))


def _unkwn(st, before=_running):
    before(st)
    st.apply(HostUnknown(time=T0 + 3, name="n1"))


def _psusp(st):
    st.apply(Stop(time=T0 + 1, job_ids=[1]))


def _done(st):
    place(st, 1)
    finish(st, 1, 0)


def _exit(st):
    place(st, 1)
    finish(st, 1, 3)


def _requeue_running(st):  # brequeue: killed first; the kill's Finish makes it PEND
    st.apply(Requeue(time=T0 + 4, job_ids=[1]))
    finish(st, 1, 137, signal=15, t=T0 + 5)


def _lost(st):
    st.apply(HostLost(time=T0 + 5, name="n1"))


def _preexec_held(st):  # its -E failed as often as its queue allows (here once)
    st.apply(SetQueues(time=T0 + 4, default_queue=st.default_queue,
                       queues=[msgspec.structs.replace(q, max_preexec_retry=1) for q in st.queues.values()]))
    finish(st, 1, 2, reason=PREEXEC_FAILED, t=T0 + 5)


PATHS = {
    (S.PEND, "place"): (lambda st: None, _running),
    (S.PEND, "kill"): (lambda st: None, lambda st: st.apply(Kill(time=T0 + 1, job_ids=[1]))),
    (S.PEND, "stop"): (lambda st: None, _psusp),
    (S.PSUSP, "resume"): (_psusp, lambda st: st.apply(Resume(time=T0 + 2, job_ids=[1]))),
    (S.PSUSP, "kill"): (_psusp, lambda st: st.apply(Kill(time=T0 + 2, job_ids=[1]))),
    (S.RUN, "done"): (_running, lambda st: finish(st, 1, 0)),
    (S.RUN, "exit"): (_running, lambda st: finish(st, 1, 1)),
    (S.RUN, "requeue"): (_running, _requeue_running),
    (S.RUN, "stop"): (_running, lambda st: st.apply(Stop(time=T0 + 2, job_ids=[1]))),
    (S.RUN, "sys_suspend"): (_running, lambda st: st.apply(SysSuspend(time=T0 + 2, job_ids=[1]))),
    (S.RUN, "unknown"): (_running, lambda st: st.apply(HostUnknown(time=T0 + 3, name="n1"))),
    (S.USUSP, "resume"): (_ususp, lambda st: st.apply(Resume(time=T0 + 3, job_ids=[1]))),
    (S.USUSP, "done"): (_ususp, lambda st: finish(st, 1, 0, t=T0 + 3)),
    (S.USUSP, "exit"): (_ususp, lambda st: finish(st, 1, 2, t=T0 + 3)),
    (S.USUSP, "requeue"): (_ususp, _requeue_running),
    (S.USUSP, "unknown"): (_ususp, lambda st: st.apply(HostUnknown(time=T0 + 3, name="n1"))),
    (S.SSUSP, "sys_resume"): (_ssusp, lambda st: st.apply(SysResume(time=T0 + 3, job_ids=[1]))),
    (S.SSUSP, "stop"): (_ssusp, lambda st: st.apply(Stop(time=T0 + 3, job_ids=[1]))),
    (S.SSUSP, "done"): (_ssusp, lambda st: finish(st, 1, 0, t=T0 + 3)),
    (S.SSUSP, "exit"): (_ssusp, lambda st: finish(st, 1, 9, t=T0 + 3)),
    (S.SSUSP, "requeue"): (_ssusp, _requeue_running),
    (S.SSUSP, "unknown"): (_ssusp, lambda st: st.apply(HostUnknown(time=T0 + 3, name="n1"))),
    (S.UNKWN, "back"): (_unkwn, lambda st: st.apply(RegisterHost(time=T0 + 4, host=host("n1")))),
    (S.UNKWN, "done"): (_unkwn, lambda st: finish(st, 1, 0, t=T0 + 4)),
    (S.UNKWN, "exit"): (_unkwn, _lost),
    (S.UNKWN, "requeue"): (_unkwn, _requeue_running),
    (S.RUN, "preexec_hold"): (_running, _preexec_held),
    (S.USUSP, "preexec_hold"): (_ususp, _preexec_held),
    (S.SSUSP, "preexec_hold"): (_ssusp, _preexec_held),
    (S.UNKWN, "preexec_hold"): (_unkwn, _preexec_held),
    (S.DONE, "requeue"): (_done, lambda st: st.apply(Requeue(time=T0 + 4, job_ids=[1]))),
    (S.EXIT, "requeue"): (_exit, lambda st: st.apply(Requeue(time=T0 + 4, job_ids=[1]))),
}


def test_every_transition_has_a_command_path() -> None:
    assert set(PATHS) == set(TRANSITIONS)


@pytest.mark.parametrize("key", list(PATHS), ids=[f"{s.value}-{e}" for s, e in PATHS])
def test_each_transition_through_its_command(key) -> None:
    before, act = PATHS[key]
    st = cluster()
    submit(st)
    before(st)
    assert st.jobs[1].state == key[0]
    act(st)
    assert st.jobs[1].state == TRANSITIONS[key]
    ended = TRANSITIONS[key] in (S.DONE, S.EXIT)
    assert (1 in st.finished_order) == ended
    assert st.history[1][-1].time > T0  # every change is an event with its time


# ---- illegal transitions: refused, with the state named, and nothing changed ---------------

@pytest.mark.parametrize("setup,cmd,word", [
    (_done, lambda: Stop(time=T0 + 5, job_ids=[1]), "stop"),
    (lambda st: None, lambda: Resume(time=T0 + 5, job_ids=[1]), "resume"),
    (_running, lambda: Resume(time=T0 + 5, job_ids=[1]), "resume"),
    (lambda st: None, lambda: Requeue(time=T0 + 5, job_ids=[1]), "requeue"),
    (_ususp, lambda: Stop(time=T0 + 5, job_ids=[1]), "stop"),
    (_running, lambda: SysResume(time=T0 + 5, job_ids=[1]), "sys_resume"),
    (_done, lambda: Switch(time=T0 + 5, job_ids=[1], queue="other"), "switch"),
    (_running, lambda: Move(time=T0 + 5, job_id=1, to="top"), "move to the top"),
    (_running, lambda: ModifySpec(time=T0 + 5, job_id=1, patch=SpecPatch(slots=2)), "modify"),
])
def test_illegal_transitions_are_refused(setup, cmd, word) -> None:
    st = cluster()
    submit(st, spec(), spec())
    setup(st)
    state = st.jobs[1].state
    with pytest.raises(IllegalTransition, match=rf"job 1: cannot {word} a job in state {state.value}"):
        st.apply(cmd())
    assert st.jobs[1].state == state


def test_a_command_over_several_jobs_is_all_or_nothing() -> None:
    st = cluster()
    submit(st, spec(), spec())
    place(st, 2)
    finish(st, 2)
    with pytest.raises(IllegalTransition, match="job 2: cannot stop a job in state DONE"):
        st.apply(Stop(time=T0 + 3, job_ids=[1, 2]))
    assert st.jobs[1].state == S.PEND
    with pytest.raises(NotFound, match="job 9 is not known"):
        st.apply(Stop(time=T0 + 3, job_ids=[1, 9]))


# ---- what each command does besides the state ----------------------------------------------

def test_a_held_job_is_not_placed_and_resumes_to_pending() -> None:
    st = cluster()
    submit(st)
    assert st.apply(Stop(time=T0 + 1, job_ids=[1], by="ann")) == {1: "PSUSP"}
    assert st.jobs[1].reason == "held by its user (xce stop)"
    with pytest.raises(IllegalTransition, match="cannot place a job in state PSUSP"):
        place(st, 1)
    st.apply(Resume(time=T0 + 2, job_ids=[1], by="ann"))
    assert (st.jobs[1].state, st.jobs[1].reason) == (S.PEND, "")
    assert [(e.event, e.by) for e in st.history[1]] == [("submitted", ""), ("suspended", "ann"), ("resumed", "ann")]


def test_a_job_submitted_held_pends_held_until_resumed() -> None:
    """sbatch -H: PSUSP from its submission, with its reason, never placed until released."""
    from xce.core.jobspec.arrays import parse_slurm_array
    from xce.core.state import SUBMITTED_HELD

    st = cluster()
    submit(st, spec(hold=True), spec(hold=True, array=parse_slurm_array("0-2")))
    assert (st.jobs[1].state, st.jobs[1].reason) == (S.PSUSP, SUBMITTED_HELD)
    with pytest.raises(IllegalTransition, match="cannot place a job in state PSUSP"):
        place(st, 1)
    assert st.arrays[2].held and not [j for j in st.jobs if j >> 32 == 2]  # no element materialised
    st.apply(Resume(time=T0 + 2, job_ids=[1, 2], by="ann"))
    assert (st.jobs[1].state, st.jobs[1].reason) == (S.PEND, "")
    assert [(e.event, e.by) for e in st.history[1]] == [("submitted", ""), ("suspended", ""), ("resumed", "ann")]
    assert sorted(j.state for jid, j in st.jobs.items() if jid >> 32 == 2) == [S.PEND] * 3


def test_suspended_jobs_stay_accounted() -> None:
    """USUSP, SSUSP and UNKWN are ACTIVE: the ledger keeps their reservation charged."""
    from xce.replica.live import Live

    assert {S.USUSP, S.SSUSP, S.UNKWN} <= ACTIVE
    st = cluster()
    submit(st, spec(mem="2G"))
    place(st, 1)
    live = Live()
    live.rebuild(st.jobs.values(), T0 + 1)
    charged = live.ledger.accounts[(1, "n1")].reserved
    st.apply(Stop(time=T0 + 2, job_ids=[1]))
    live = Live()
    live.rebuild(st.jobs.values(), T0 + 2)
    assert live.ledger.accounts[(1, "n1")].reserved == charged > 0


def test_requeue_of_a_running_job_kills_it_first_then_pends_with_a_new_attempt() -> None:
    st = cluster()
    submit(st)
    place(st, 1)
    assert st.apply(Requeue(time=T0 + 2, job_ids=[1], by="ann")) == {1: "requeue requested"}
    job = st.jobs[1]
    assert job.state == S.RUN and job.kill_requested  # the controller's kill chase ends the processes
    finish(st, 1, 137, signal=15, t=T0 + 3)
    assert job.state == S.PEND and job.requeues == 1 and not job.kill_requested and job.allocs == []
    assert job.reason == "requeued: by ann (xce requeue)"
    assert place(st, 1, t=T0 + 4) == 2  # the new attempt
    assert 1 not in st.finished_order


def test_requeue_of_an_ended_job_pends_it_at_once() -> None:
    st = cluster()
    submit(st)
    _exit(st)
    st.apply(Requeue(time=T0 + 4, job_ids=[1]))
    job = st.jobs[1]
    assert (job.state, job.exit_code, job.end_time, st.finished_order) == (S.PEND, None, None, [])


def test_a_kill_after_a_requeue_wins() -> None:
    st = cluster()
    submit(st)
    place(st, 1)
    st.apply(Requeue(time=T0 + 2, job_ids=[1]))
    st.apply(Kill(time=T0 + 2.5, job_ids=[1]))
    finish(st, 1, 137, signal=9, t=T0 + 3)
    assert st.jobs[1].state == S.EXIT and st.jobs[1].reason == "killed by user"


def test_unknown_host_then_back_restores_a_suspension() -> None:
    st = cluster()
    submit(st)
    _ususp(st)
    st.apply(HostUnknown(time=T0 + 3, name="n1"))
    assert st.jobs[1].state == S.UNKWN and st.jobs[1].prior == S.USUSP and st.hosts["n1"].unavail
    st.apply(RegisterHost(time=T0 + 4, host=host("n1")))
    assert st.jobs[1].state == S.USUSP and st.jobs[1].prior is None


def test_a_job_over_two_silent_hosts_is_back_only_when_both_answer() -> None:
    st = cluster()
    submit(st, spec(slots=2))
    st.apply(Place(time=T0 + 1, job_id=1, attempt=0, allocs=[alloc("n1", 1), alloc("n2", 1)]))
    st.apply(HostUnknown(time=T0 + 3, name="n1"))
    st.apply(HostUnknown(time=T0 + 3, name="n2"))
    st.apply(RegisterHost(time=T0 + 4, host=host("n1")))
    assert st.jobs[1].state == S.UNKWN  # n2 is still silent
    st.apply(RegisterHost(time=T0 + 5, host=host("n2")))
    assert st.jobs[1].state == S.RUN and st.jobs[1].prior is None


def test_unknown_then_lost_decides_by_the_queue() -> None:
    st = cluster(queue(rerunnable=True))
    submit(st)
    _unkwn(st)
    st.apply(HostLost(time=T0 + 5, name="n1"))
    assert st.jobs[1].state == S.PEND and st.jobs[1].reason == "requeued: host n1 lost"


def test_switch_moves_pending_and_running_jobs() -> None:
    st = cluster()
    submit(st, spec(), spec())
    place(st, 2)
    assert st.apply(Switch(time=T0 + 2, job_ids=[1, 2], queue="other", by="ann")) == {1: "other", 2: "other"}
    assert [st.jobs[i].spec.queue for i in (1, 2)] == ["other", "other"]
    assert st.history[2][-1].event == "switched" and st.history[2][-1].detail == "queue normal -> other"
    with pytest.raises(InvalidRequest, match="queue 'nope' does not exist"):
        st.apply(Switch(time=T0 + 3, job_ids=[1], queue="nope"))


def test_top_and_bottom_move_a_job_among_its_queues_pending_jobs() -> None:
    from xce.core.sched.order import pending_order

    st = cluster()
    submit(st, spec(), spec(), spec(), spec(queue="other", priority=99))
    order = lambda: [j.id for j in pending_order([st.jobs[i] for i in (1, 2, 3)], {"normal": 30})]  # noqa: E731
    assert order() == [1, 2, 3]
    st.apply(Move(time=T0 + 1, job_id=3, to="top"))
    assert order() == [3, 1, 2] and st.jobs[3].spec.priority == 1  # job 4's queue is not counted
    st.apply(Move(time=T0 + 2, job_id=3, to="bottom"))
    assert order() == [1, 2, 3] and st.jobs[3].spec.priority == -1


def test_top_and_bottom_never_move_a_job_the_wrong_way() -> None:
    """btop of a job already above every other pending job keeps its priority (it never drops to
    one above theirs); likewise bbot."""
    st = cluster()
    submit(st, spec(priority=7), spec(), spec(priority=-5))
    assert st.apply(Move(time=T0 + 1, job_id=1, to="top")) == 7
    assert st.apply(Move(time=T0 + 2, job_id=3, to="bottom")) == -5
    assert st.apply(Move(time=T0 + 3, job_id=2, to="top")) == 8


def test_modify_of_a_pending_job_revalidates() -> None:
    st = cluster(queue(run_limit_max=600.0), queue("other"))
    submit(st, spec())
    req = parse_resreq("rusage[mem=2G]")
    st.apply(ModifySpec(time=T0 + 1, job_id=1, req=req, by="ann",
                        patch=SpecPatch(resreq=req.text, slots=2, name="renamed", priority=4, run_limit=60.0)))
    job = st.jobs[1]
    assert (job.spec.slots, job.spec.name, job.spec.priority, job.spec.run_limit, job.req) == (2, "renamed", 4, 60, req)
    assert st.history[1][-1].detail == "name, priority, resreq, run_limit, slots"
    with pytest.raises(InvalidRequest, match="run limit 900 s is above queue normal's maximum run limit 600 s"):
        st.apply(ModifySpec(time=T0 + 2, job_id=1, patch=SpecPatch(run_limit=900.0)))
    with pytest.raises(InvalidRequest, match="slots must be >= 1"):
        st.apply(ModifySpec(time=T0 + 2, job_id=1, patch=SpecPatch(slots=0)))
    with pytest.raises(InvalidRequest, match="comes with its parsed form"):
        st.apply(ModifySpec(time=T0 + 2, job_id=1, patch=SpecPatch(resreq="rusage[mem=1G]")))
    with pytest.raises(InvalidRequest, match="names nothing to change"):
        st.apply(ModifySpec(time=T0 + 2, job_id=1, patch=SpecPatch()))
    assert job.spec.run_limit == 60


# ---- queue run limits --------------------------------------------------------------------

def test_queue_run_limit_default_and_maximum_at_submit() -> None:
    st = cluster(queue(run_limit_default=300.0, run_limit_max=3600.0), queue("capped", run_limit_max=60.0))
    submit(st, spec(), spec(run_limit=1200.0), spec(queue="capped"))
    assert [st.jobs[i].spec.run_limit for i in (1, 2, 3)] == [300.0, 1200.0, 60.0]
    with pytest.raises(InvalidRequest, match="run limit 7200 s is above queue normal's maximum run limit 3600 s"):
        submit(st, spec(), spec(run_limit=7200.0))
    assert len(st.jobs) == 3  # all or nothing


def test_queue_memory_limit_default_and_maximum_at_submit_switch_and_modify() -> None:
    """LSF MEMLIMIT in lsb.queues: a job without -M gets the queue's default, a -M above the
    queue's maximum is refused naming both figures, by submit, bswitch and bmod alike."""
    G = 1 << 30
    st = cluster(queue(mem_limit_default=2 * G, mem_limit_max=8 * G), queue("capped", mem_limit_max=G))
    submit(st, spec(), spec(mem_limit=4 * G), spec(queue="capped"))
    assert [st.jobs[i].spec.mem_limit for i in (1, 2, 3)] == [2 * G, 4 * G, G]
    with pytest.raises(InvalidRequest, match="memory limit 16.0G is above queue normal's maximum memory limit 8.0G"):
        submit(st, spec(), spec(mem_limit=16 * G))
    assert len(st.jobs) == 3  # all or nothing
    with pytest.raises(InvalidRequest, match="memory limit 4.0G is above queue capped's maximum memory limit 1.0G"):
        st.apply(Switch(time=T0 + 1, job_ids=[2], queue="capped"))
    with pytest.raises(InvalidRequest, match="memory limit 16.0G is above queue normal's maximum"):
        st.apply(Modify(time=T0 + 1, job_id=1, mem_limit=16 * G))
    st.apply(Modify(time=T0 + 1, job_id=1, mem_limit=None))  # -M removed: the queue's default again
    assert st.jobs[1].spec.mem_limit == 2 * G


# ---- dependencies -----------------------------------------------------------------------

def test_a_dependent_is_held_with_its_reason_until_satisfied() -> None:
    st = cluster()
    submit(st, spec(), dep("done(1)"))
    job = st.jobs[2]
    assert job.held and job.reason == "waiting for done(1): job 1 is PEND"
    with pytest.raises(Exception, match="held by its dependency"):
        place(st, 2)
    place(st, 1)
    assert job.reason == "waiting for done(1): job 1 is RUN"
    finish(st, 1, 0)
    assert not job.held and job.reason == "" and job.state == S.PEND
    assert [e.event for e in st.history[2]] == ["submitted", "released"]


def test_never_satisfied_is_said_and_the_queue_decides() -> None:
    st = cluster(queue(), queue("strict", dep_never="kill"))
    submit(st, spec(), dep("done(1)"), dep("done(1)", queue="strict"))
    _exit(st)
    assert st.jobs[2].state == S.PEND and st.jobs[2].reason == "never satisfied: done(1): job 1 ended EXIT"
    assert st.jobs[3].state == S.EXIT and st.jobs[3].reason == "never satisfied: done(1): job 1 ended EXIT"
    st.apply(Requeue(time=T0 + 5, job_ids=[1]))  # a requeue moves job 1 back: job 2 waits again
    assert st.jobs[2].reason == "waiting for done(1): job 1 is PEND"


def test_a_chain_settles_in_one_command() -> None:
    st = cluster(queue(dep_never="kill"))
    submit(st, spec(), dep("done(1)"), dep("done(2)"), dep("ended(3)"))
    place(st, 1)
    finish(st, 1, 5)  # 1 EXIT -> 2 killed (never) -> 3 killed -> 4 satisfied (3 ended)
    assert [st.jobs[i].state for i in (2, 3)] == [S.EXIT, S.EXIT] and not st.jobs[4].held


def test_dependencies_by_name_and_on_unknown_jobs() -> None:
    st = cluster()
    submit(st, spec(name="prep-a", user="ann"), spec(name="prep-b", user="ann"), spec(name="prep-c", user="bob"))
    submit(st, dep('done("prep-*")', user="ann"))
    assert st.jobs[4].reason == 'waiting for done("prep-*"): jobs named "prep-*": 2 PEND'
    for jid in (1, 2):
        place(st, jid)
        finish(st, jid)
    assert not st.jobs[4].held  # bob's prep-c is not ann's
    with pytest.raises(NotFound, match="dependency 99: job 99 is not known"):
        submit(st, dep("done(99)"))
    with pytest.raises(NotFound, match='dependency "nothing": no job of ann has that name'):
        submit(st, dep('done("nothing")', user="ann"))


def test_only_dependents_are_reevaluated() -> None:
    st = cluster()
    submit(st, spec(), spec(), dep("done(1)"), dep("done(2)"))
    seen: list[int] = []
    original = st._evaluate
    st._evaluate = lambda ch, job, t: (seen.append(job.id), original(ch, job, t))  # type: ignore[method-assign]
    place(st, 1)
    assert seen == [3]


def test_a_forgotten_job_keeps_its_outcome_while_a_dependent_needs_it() -> None:
    st = cluster()
    submit(st, spec(), spec(), dep("done(1) && done(2)"))
    _done(st)
    st.apply(Cleanup(time=T0 + 3, keep_finished=0))
    assert 1 not in st.jobs and st.dep_facts[1].done == 1
    back = pickle.loads(pickle.dumps(st))  # a restored controller rebuilds the index
    assert back.deps.by_id == st.deps.by_id
    place(back, 2)
    finish(back, 2)
    assert not back.jobs[3].held
    place(back, 3)
    assert back.dep_facts == {}  # its last dependent was decided


def test_modify_replaces_the_dependency() -> None:
    st = cluster()
    submit(st, spec(), dep("done(1)"))
    st.apply(ModifySpec(time=T0 + 1, job_id=2, patch=SpecPatch(depend=parse_depend("started(1)"))))
    assert st.jobs[2].reason == "waiting for started(1): job 1 is PEND"
    st.apply(ModifySpec(time=T0 + 2, job_id=2, patch=SpecPatch(depend=None)))
    assert not st.jobs[2].held and st.jobs[2].reason == "" and st.deps.by_id == {}


# ---- a property: whatever the order of commands, the index and the held flags agree ----------

ACTIONS = st_.lists(st_.tuples(st_.sampled_from(["place", "finish", "fail", "kill", "stop", "resume", "requeue"]),
                               st_.integers(1, 6)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(ACTIONS)
def test_held_jobs_and_the_reverse_index_agree(actions) -> None:
    from xce.core.deps import DepIndex

    st = cluster(queue(dep_never="kill"))
    submit(st, spec(), spec(), dep("done(1)"), dep("exit(2) || done(1)"), dep("numended(3, >= 1)"), spec())
    for t, (what, jid) in enumerate(actions):
        job, now = st.jobs[jid], T0 + 1 + t
        cmd = {"kill": Kill(time=now, job_ids=[jid]), "stop": Stop(time=now, job_ids=[jid]),
               "resume": Resume(time=now, job_ids=[jid]), "requeue": Requeue(time=now, job_ids=[jid])}.get(what)
        try:
            if what == "place":
                place(st, jid, t=now)
            elif what in ("finish", "fail") and job.state in ACTIVE:
                finish(st, jid, 0 if what == "finish" else 1, t=now)
            elif cmd is not None:
                st.apply(cmd)
        except (IllegalTransition, Exception):  # refusals change nothing
            pass
        rebuilt = DepIndex.build(st.jobs.values())
        assert rebuilt.by_id == st.deps.by_id
        for j in st.jobs.values():
            assert not j.held or j.state in (S.PEND, S.PSUSP)


def test_the_scheduler_mirror_sees_only_placeable_pending_jobs() -> None:
    from xce.proto.schema import Event, Snapshot
    from xce.replica.mirror import Mirror

    st = cluster()
    submit(st, spec(), dep("done(1)"), spec())
    st.apply(Stop(time=T0 + 1, job_ids=[3]))
    m = Mirror()
    m.apply_snapshot(Snapshot(seq=1, epoch="e", time=T0 + 1, jobs=list(st.jobs.values()), hosts=[], queues=[],
                              default_queue="normal", live=[], samples=[], reasons={}))
    assert set(m.pending) == {1}
    place(st, 1)
    finish(st, 1)
    st.apply(Resume(time=T0 + 3, job_ids=[3]))
    assert m.apply_event(Event(seq=2, epoch="e", time=T0 + 3, jobs=[st.jobs[i] for i in (1, 2, 3)]))
    assert set(m.pending) == {2, 3}


@pytest.mark.parametrize("table,message", [
    ('dep_never = "drop"', "queues.q.dep_never: must be 'keep' or 'kill', got 'drop'"),
    ("run_limit = -5", "queues.q.run_limit: must be a number of seconds (0: none), got -5"),
    ("run_limit = 60\nrun_limit_default = 600", "queues.q.run_limit_default: 600 s is above the queue's run_limit 60 s"),
    ('mem_limit = "1G"\nmem_limit_default = "2G"', "queues.q.mem_limit_default: 2G is above the queue's mem_limit 1G"),
    ('mem_limit = "1K"', "queues.q.mem_limit: mem_limit must be at least 4.0M"),
    ('mem_limit_default = "lots"', "queues.q.mem_limit_default:"),
])
def test_queue_job_model_keys_are_checked(tmp_path, table, message) -> None:
    from xce.core.errors import XceError
    from xce.site.config import load

    path = tmp_path / "xce.toml"
    path.write_text(f"[queues.q]\ndefault = true\n{table}\n")
    with pytest.raises(XceError, match=re.escape(message)):
        load(path)


def test_a_limit_the_old_queue_gave_follows_the_job_into_its_new_queue() -> None:
    """bswitch of a job without -W (or -M): the old queue's default is not the job's, so the new
    queue's applies; the old code kept 600 s and refused the switch into a queue of at most 60 s."""
    G = 1 << 30
    st = cluster(queue(run_limit_default=600.0, run_limit_max=3600.0, mem_limit_default=2 * G),
                 queue("short", run_limit_max=60.0, mem_limit_max=G))
    submit(st, spec(), spec(run_limit=120.0), spec())
    assert st.apply(Switch(time=T0 + 1, job_ids=[1], queue="short")) == {1: "short"}
    assert (st.jobs[1].spec.run_limit, st.jobs[1].spec.mem_limit) == (60.0, G)
    with pytest.raises(InvalidRequest, match="run limit 120 s is above queue short's maximum run limit 60 s"):
        st.apply(Switch(time=T0 + 1, job_ids=[2], queue="short"))  # its own -W: kept, and too long there
    st.apply(ModifySpec(time=T0 + 2, job_id=3, patch=SpecPatch(queue="short")))
    assert (st.jobs[3].spec.run_limit, st.jobs[3].spec.mem_limit) == (60.0, G)
