"""FAIRSHARE, LIMITS and JOBS' order view: the controller computes the scheduler's own figures.

The controller holds the hard state (finished jobs, the usage of those it forgot, running
allocations) and the ledger the scheduler's mirror copies, so these reads build the round's
inputs with the same ``PolicyState`` and answer with them; each test checks a figure
against the core function the scheduler calls.
"""

from __future__ import annotations

import pytest
from builders import T0, host
from reactor_kit import kit
from test_reactors_clients import only_reply

from xce.core.model import HostUsage
from xce.core.sched.site import PolicyState
from xce.core.state import Cleanup, Finish, HostLost, Kill, Place, Requeue
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.site.config import Config, ControllerConf, LimitConf

G = 1 << 30


def cfg(**kw) -> Config:
    return Config(controller=ControllerConf(peers=["127.0.0.1:7712"], peer_addresses=["tcp://127.0.0.1:7710"]),
                  **kw)


def ran(k, user: str, hours: float = 1.0) -> int:
    """A job of ``user`` that ran one slot with 1G for ``hours`` and ended."""
    job = k.run_job("node1", user=user)
    k.state.apply(Finish(time=T0 + 1 + hours * 3600, job_id=job.id, attempt=1, host="node1", exit_code=0,
                         usage=HostUsage(host="node1", reserved=G, actual=G, peak=G, charged_peak=G)))
    return job.id


def shares(k) -> dict[str, S.ShareRow]:
    reply = only_reply(k.call(Op.FAIRSHARE, S.Empty()))
    return {"/".join(r.path): r for r in reply.rows}


def test_fairshare_shows_the_tree_with_the_rounds_priorities() -> None:
    k = kit(host("node1"))
    k.now = T0 + 7200
    ran(k, "alice")
    a, b = k.pend_job(user="alice"), k.pend_job(user="bob")
    rows = shares(k)
    assert set(rows) == {"alice", "bob"}
    assert rows["bob"].priority == 1.0 and rows["bob"].slot_seconds == 0.0
    assert 0 < rows["alice"].priority < 1 and rows["alice"].slot_seconds > 0
    assert rows["alice"].share == rows["bob"].share == 0.5 and rows["alice"].by == "user" and rows["alice"].leaf
    # The scheduler's own round inputs give the same priorities.
    st = k.state
    got = PolicyState(k.ctx.site).round_inputs(st.jobs.values(), [a, b], [], k.ctx.live.ledger, {"normal": 30},
                                               k.now)
    assert got.ordering.figures(a)["fairshare"] == pytest.approx(rows["alice"].priority)
    reply = only_reply(k.call(Op.FAIRSHARE, S.Empty()))
    assert (reply.enabled, reply.half_life, reply.time) == (True, 18_000.0, k.now)


def test_a_forgotten_jobs_usage_still_counts() -> None:
    """Cleanup drops the finished job, and folds its usage into the hard state: the figures stay."""
    k = kit(host("node1"))
    k.now = T0 + 7200
    ran(k, "alice")
    k.pend_job(user="alice")
    k.pend_job(user="bob")
    before = shares(k)["alice"]
    k.state.apply(Cleanup(time=T0 + 5000, keep_finished=0, half_life=18_000.0))
    assert k.state.usage_past and 1 not in k.state.jobs
    after = shares(k)["alice"]
    assert after.slot_seconds == pytest.approx(before.slot_seconds)
    assert after.priority == pytest.approx(before.priority) and after.priority < 1


def requeued(k, user: str, hours: float = 1.0, how: str = "brequeue", **kw) -> int:
    """A job of ``user`` that ran one slot with 1G for ``hours`` and was requeued: PEND again."""
    job = k.run_job("node1", user=user, **kw)
    end = T0 + 1 + hours * 3600
    if how == "brequeue":
        k.state.apply(Requeue(time=end - 1, job_ids=[job.id]))
        k.state.apply(Finish(time=end, job_id=job.id, attempt=1, host="node1", signal=15,
                             usage=HostUsage(host="node1", reserved=G, actual=G, peak=G, charged_peak=G)))
    else:  # its host lost, its queue rerunnable: the lost host's reservation is its charge
        k.state.apply(HostLost(time=end, name="node1"))
    assert k.state.jobs[job.id].state.value == "PEND"
    return job.id


@pytest.mark.parametrize("how", ["brequeue", "host lost"])
def test_a_requeued_runs_usage_still_counts(how: str) -> None:
    """Every run is charged: a run that was requeued counts as one that ended, before and after
    the job runs again, in a fresh book (failover) as in the scheduler's incremental one, and
    after Cleanup forgets the job.  (Failed on the old code: the run's usage was dropped with it.)"""
    k = kit(host("node1"))
    k.now = T0 + 7200
    ran(k, "alice")
    jid = requeued(k, "bob", how=how, rerunnable=True)
    rows = shares(k)
    assert rows["bob"].slot_seconds == pytest.approx(rows["alice"].slot_seconds)
    assert rows["bob"].mem_seconds == pytest.approx(rows["alice"].mem_seconds)
    assert rows["bob"].priority == pytest.approx(rows["alice"].priority) and rows["bob"].priority < 1
    # The scheduler's book folded the run while the job was pending; it runs again and ends:
    # both runs count once, in the kept book and in a fresh one alike.
    kept = PolicyState(k.ctx.site)
    kept.round_inputs(k.state.jobs.values(), [], [], None, {}, k.now)
    if how != "brequeue":
        k.state.hosts["node1"].unavail = False
    k.state.apply(Place(time=T0 + 7300, job_id=jid, attempt=k.state.jobs[jid].attempt, allocs=[
        k.state.jobs[1].allocs[0]]))
    k.state.apply(Finish(time=T0 + 7300 + 3600, job_id=jid, attempt=k.state.jobs[jid].attempt, host="node1",
                         exit_code=0, usage=HostUsage(host="node1", reserved=G, actual=G, peak=G, charged_peak=G)))
    at = T0 + 4 * 3600
    fresh = PolicyState(k.ctx.site)
    for ps in (kept, fresh):
        ps.book.fold(k.state.jobs.values(), at)
    bob = ("bob", "", "", "normal")
    assert kept.book.usage[bob] == pytest.approx(fresh.book.usage[bob])
    assert fresh.book.usage[bob][0] > 1.9 * fresh.book.usage[("alice", "", "", "normal")][0]
    # Cleanup forgets the job with both its runs folded into the hard state.
    k.state.apply(Cleanup(time=at, keep_finished=0, half_life=18_000.0))
    assert jid not in k.state.jobs
    gone = PolicyState(k.ctx.site, k.state.usage_past, k.state.usage_as_of)
    gone.book.fold(k.state.jobs.values(), at)
    assert gone.book.usage[bob] == pytest.approx(fresh.book.usage[bob])


def test_fairshare_off_has_no_rows() -> None:
    from xce.site.config import FairshareConf

    k = kit(host("node1"), config=cfg(fairshare=FairshareConf(enabled=False)))
    k.pend_job(user="alice")
    reply = only_reply(k.call(Op.FAIRSHARE, S.Empty()))
    assert reply.enabled is False and reply.rows == []


def test_limits_show_use_and_the_jobs_they_hold() -> None:
    k = kit(host("node1"), config=cfg(limits=[LimitConf(name="user_slots", per="user", slots=1),
                                              LimitConf(name="phys", per="group", members=["phys"], jobs=4)]))
    k.run_job("node1", user="alice")
    held = k.pend_job(user="alice")
    k.pend_job(user="bob")
    k.ctx.live.reasons[held.id] = "limit user_slots: alice uses 1 of 1 slots"
    rows = {(r.name, r.who): r for r in only_reply(k.call(Op.LIMITS, S.Empty())).rows}
    assert set(rows) == {("user_slots", "alice"), ("user_slots", "bob"), ("phys", "phys")}
    alice = rows[("user_slots", "alice")]
    assert (alice.jobs, alice.slots, alice.mem, alice.pending, alice.max_slots, alice.held) == \
        (1, 1, G, 1, 1, [held.id])
    assert rows[("user_slots", "bob")].held == [] and rows[("user_slots", "bob")].slots == 0
    assert (rows[("phys", "phys")].jobs, rows[("phys", "phys")].max_jobs) == (0, 4)  # a named member, idle


def test_every_configured_limit_shows_before_anyone_uses_it() -> None:
    """Found from outside: with limits configured and no job yet, `xce limits` said "No limit
    configured".  Each limit nobody uses yet is listed once, WHO "" (blimits -c's view)."""
    k = kit(host("node1"), config=cfg(limits=[LimitConf(name="user_jobs", per="user", jobs=3),
                                              LimitConf(name="grp_pend", per="group", pending=10)]))
    rows = only_reply(k.call(Op.LIMITS, S.Empty())).rows
    assert [(r.name, r.per, r.who, r.jobs, r.max_jobs, r.max_pending) for r in rows] == \
        [("user_jobs", "user", "", 0, 3, None), ("grp_pend", "group", "", 0, None, 10)]
    k.pend_job(user="alice", group="phys")
    rows = only_reply(k.call(Op.LIMITS, S.Empty())).rows
    assert [(r.name, r.who, r.pending) for r in rows] == [("user_jobs", "alice", 1), ("grp_pend", "phys", 1)]


def test_no_limits_no_rows() -> None:
    k = kit(host("node1"))
    assert only_reply(k.call(Op.LIMITS, S.Empty())).rows == []


def test_jobs_order_names_the_stage_that_puts_the_job_ahead_first() -> None:
    k = kit(host("node1"))
    k.now = T0 + 7200
    ran(k, "alice")
    a, b = k.pend_job(user="alice"), k.pend_job(user="bob")
    views = {v.id: v for v in only_reply(k.call(Op.JOBS, S.JobsRequest(order=True))).jobs}
    assert views[b.id].order.position == 1 and views[b.id].order.ahead is None
    o = views[a.id].order
    assert (o.position, o.pending, o.ahead) == (2, 2, b.id)
    assert o.why.startswith("fairshare: alice's priority 0.") and o.why.endswith("is below bob's 1.00")
    assert o.figures["fairshare"] < 1 and o.figures["queue"] == 30 and set(o.figures) == \
        {"queue", "fairshare", "job", "submit"}
    plain = only_reply(k.call(Op.JOBS, S.JobsRequest())).jobs
    assert all(v.order is None for v in plain)  # only when asked: it folds every job


def test_a_job_behind_one_that_waits_for_room_too_is_held_by_the_order_stage() -> None:
    """Issue 16 item 1: the reason says which stage holds the job.  Both wait for a slot; bob's
    job goes first, so alice's is held by fairshare (Slurm's Priority), bob's by the slots
    (Slurm's Resources).  A job ahead held by its own limit holds nobody."""
    k = kit(host("node1"))
    k.now = T0 + 7200
    ran(k, "alice")
    a, b = k.pend_job(user="alice"), k.pend_job(user="bob")
    full = "slots: needs 1; the cluster has 0 free"
    k.ctx.live.reasons.update({a.id: full, b.id: full})
    views = {v.id: v for v in only_reply(k.call(Op.JOBS, S.JobsRequest(order=True))).jobs}
    assert views[b.id].reason == full
    why = views[a.id].order.why
    assert why.startswith("fairshare: alice's priority 0.") and views[a.id].reason == \
        f"{why} (job {b.id} goes first); {full}", views[a.id].reason
    assert only_reply(k.call(Op.JOBS, S.JobsRequest(ids=[a.id]))).jobs[0].reason == full  # without the order
    k.ctx.live.reasons[b.id] = "limit u: bob uses 2 of 2 running jobs"
    views = {v.id: v for v in only_reply(k.call(Op.JOBS, S.JobsRequest(order=True))).jobs}
    assert views[a.id].reason == full


def test_a_job_that_left_the_queue_has_no_order() -> None:
    k = kit(host("node1"))
    a = k.pend_job(user="alice")
    k.state.apply(Kill(time=T0 + 2, job_ids=[a.id]))
    (v,) = only_reply(k.call(Op.JOBS, S.JobsRequest(ids=[a.id], order=True))).jobs
    assert v.order is None


def test_a_user_may_read_the_policy_views() -> None:
    k = kit(host("node1"), tokens=True)
    assert only_reply(k.call(Op.FAIRSHARE, S.Empty(), token="tok-alice")).enabled
    assert only_reply(k.call(Op.LIMITS, S.Empty(), token="tok-alice")).rows == []


def test_submit_past_a_pending_cap_is_refused_naming_the_limit() -> None:
    """lsb.resources PEND_JOBS: one pending job per user; a submit that would pass it is refused
    whole (a batch counts each of its jobs), naming the limit; another user is not held by it."""
    from xce.core.errors import LimitReached

    k = kit(host("node1"), config=cfg(limits=[LimitConf(name="user_pend", per="user", pending=1)]))
    k.pend_job(user="alice")
    from builders import spec

    out = k.call(Op.SUBMIT, S.SubmitRequest(jobs=[spec(user="alice")], key="k-policy-1"))
    (_, e), = out.errors
    assert isinstance(e, LimitReached) and e.message == "limit user_pend: alice has 1 of 1 pending jobs"
    assert not out.commits
    out = k.call(Op.SUBMIT, S.SubmitRequest(jobs=[spec(user="bob"), spec(user="bob")], key="k-policy-2"))
    (_, e), = out.errors
    assert e.message == "job 1: limit user_pend: bob has 1 of 1 pending jobs"
    out = k.call(Op.SUBMIT, S.SubmitRequest(jobs=[spec(user="bob")], key="k-policy-3"))
    assert len(out.commits) == 1


# ---- preemption: the scheduler's orders, carried out by the job-control commands ------------

def preempting() -> Config:
    from xce.site.config import QueueConf

    return cfg(queues={"high": QueueConf(priority=70, preempt=["low"]),
                       "low": QueueConf(priority=10, default=True),
                       "scratch": QueueConf(priority=5, preempt_action="kill")})


def test_preempt_suspends_then_stops_the_processes_and_resume_continues_them() -> None:
    import signal

    from builders import alloc, queue
    from xce.core.model import JobState

    k = kit(host("node1", slots=2), queues=(queue("high", 70), queue("low", 10)), default="low", config=preempting())
    k.worker("node1")
    low = k.run_job("node1", slots=2, queue="low")
    high = k.pend_job(slots=2, queue="high")
    out = k.call(Op.PLACE, S.PlaceRequest(placements=[], preempt=[S.Preempt(low.id, 1, "suspend", high.id)]))
    k.commit_all(out)
    assert low.state == JobState.SSUSP and low.evictions == 1  # its queue's max_preempt counts it
    assert k.state.history[low.id][-1].detail == f"preempted by job {high.id} of queue high"
    assert [(o.host, o.body.signal) for o in k.applied().orders if o.op == Op.SIGNAL_JOB] == \
        [("node1", signal.SIGSTOP)]
    # The suspended job's slots are free to the leader's re-check: the preemptor is placed there.
    out = k.call(Op.PLACE, S.PlaceRequest(placements=[S.Placement(high.id, 0, [alloc("node1", 2, "1G")])]))
    assert [c.job_id for c, _ in out.commits] == [high.id]
    k.commit_all(out)
    # A repeated order for a job no longer RUN is stale: nothing is committed.
    assert not k.call(Op.PLACE, S.PlaceRequest(placements=[], preempt=[S.Preempt(low.id, 1, "suspend",
                                                                                 high.id)])).commits
    out = k.call(Op.PLACE, S.PlaceRequest(placements=[], resume=[low.id]))
    k.commit_all(out)
    assert low.state == JobState.RUN
    assert [(o.host, o.body.signal) for o in k.applied().orders if o.op == Op.SIGNAL_JOB] == \
        [("node1", signal.SIGCONT)]


@pytest.mark.parametrize("action,then", [("requeue", "requeue requested: preempted by job"),
                                         ("kill", "preempted by job")])
def test_preempt_by_requeue_or_kill_kills_the_processes_first(action: str, then: str) -> None:
    from builders import queue

    k = kit(host("node1", slots=2), queues=(queue("high", 70), queue("low", 10)), default="low", config=preempting())
    k.worker("node1")
    low = k.run_job("node1", slots=2, queue="low")
    high = k.pend_job(slots=2, queue="high")
    k.commit_all(k.call(Op.PLACE, S.PlaceRequest(placements=[], preempt=[S.Preempt(low.id, 1, action, high.id)])))
    assert low.kill_requested and low.reason.startswith(then), low.reason
    assert low.requeue_requested == (action == "requeue") and low.evictions == 1
    from xce.cli.fmt import job_long  # `xce jobs -l` says it, for a queue's max_preempt
    view = k.ctx.live.job_view(low)
    assert view.evictions == 1 and "Evicted: 1 time (preempted or reclaimed)" in job_long(view, T0)
    # A user's own requeue or kill is no eviction.
    other = k.run_job("node1", slots=1, queue="low")
    k.state.apply(Requeue(time=T0 + 5, job_ids=[other.id]) if action == "requeue" else
                  Kill(time=T0 + 5, job_ids=[other.id]))
    assert other.kill_requested and other.evictions == 0
    assert any(o.op == Op.KILL_JOB for o in k.applied().orders)
