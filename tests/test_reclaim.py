"""Reclaimable memory: the defined term, the placement step, and reclaim on a heartbeat.

docs/accounting.md "Reclaimable memory".  Builders and the recording reactor kit only.
"""

from __future__ import annotations

import signal

import pytest
from builders import T0, alloc, cap, caps, host, job, queue, spec
from reactor_kit import Kit, kit

from xce.core import accounting as A
from xce.core.accounting import Ledger, ReclaimRules
from xce.core.errors import ConfigError, InvalidRequest
from xce.core.model import Job, JobState
from xce.core.placement import demand_of, fit_reason, schedule
from xce.core.resreq import parse_resreq
from xce.core.state import Finish, Kill, Place, Requeue, Submit, SysResume, SysSuspend
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.replica.audit import audit
from xce.site.config import from_dict

M = 1 << 20
G = 1 << 30
FAST = ReclaimRules(min_run=1.0, window=1.0, margin=0.1)


# ---- the defined term ------------------------------------------------------------------------

@pytest.mark.parametrize("since,peak_at,now,want", [
    (T0, T0, T0 + 0.5, False),      # too young
    (T0, T0 + 5, T0 + 5.5, False),  # its peak rose half a second ago
    (T0, T0 + 1, T0 + 2, True),     # ran 2 s, peak still for 1 s
])
def test_settled_needs_a_minimum_run_and_a_still_peak(since: float, peak_at: float, now: float, want: bool) -> None:
    assert A.settled(since, peak_at, now, FAST) is want


def test_lendable_is_the_slack_at_the_peak_less_the_margin() -> None:
    assert A.lendable(6 * G, 1 * G, FAST) == 5 * G - int(6 * G * 0.1)
    assert A.lendable(1 * G, 1 * G, FAST) == 0       # no slack at its peak
    assert A.lendable(1 * G, 2 * G, FAST) == 0       # over its reservation: nothing, never negative
    assert A.reclaim_room(-2 * G, 3 * G) == 1 * G


def _ledger() -> Ledger:
    led = Ledger(FAST)
    led.open(1, "n1", 6 * G, {"slots": 1}, since=T0)                    # the owner
    led.open(2, "n1", 2 * G, {"slots": 1}, since=T0, reclaiming=True)   # a borrower lends nothing
    led.open(3, "n1", 2 * G, {"slots": 1}, since=T0)                    # never reported: lends nothing
    led.observe_host("n1", [1, 2], None, [G, 100 * M], [G, 100 * M], [0.0, 0.0], now=T0 + 1)
    return led


def test_reclaimable_is_the_settled_jobs_lendable_and_at_most_their_slack() -> None:
    led = _ledger()
    assert led.reclaimable("n1", T0 + 1.5, FAST) == 0           # the peak rose at T0 + 1: not settled yet
    got = led.reclaimable("n1", T0 + 2, FAST)
    assert got == A.lendable(6 * G, G, FAST)
    assert got <= led.host_totals("n1").mem_slack
    assert led.reclaimable("nx", T0 + 2, FAST) == 0


def test_a_peak_rise_unsettles_but_the_noise_of_a_steady_job_does_not() -> None:
    led = _ledger()
    led.observe_host("n1", [1], None, [G + 4096], [G + 4096], [0.0], now=T0 + 3)   # a few pages: noise
    assert led.reclaimable("n1", T0 + 3, FAST) > 0
    led.observe_host("n1", [1], None, [3 * G], [3 * G], [0.0], now=T0 + 4)         # the owner grows back
    assert led.reclaimable("n1", T0 + 4.5, FAST) == 0
    assert led.reclaimable("n1", T0 + 5, FAST) == A.lendable(6 * G, 3 * G, FAST)   # settled again


def test_a_settled_jobs_rise_within_its_margin_lowers_its_loan_by_the_rise() -> None:
    led = _ledger()                                   # the owner: 6G reserved, peak 1G, settled at T0 + 2
    before = led.reclaimable("n1", T0 + 2, FAST)
    led.observe_host("n1", [1], None, [G + 500 * M], [G + 500 * M], [0.0], now=T0 + 3)   # +500M < margin 614M
    assert led.reclaimable("n1", T0 + 3, FAST) == before - 500 * M                      # still settled, lends less
    assert A.large_rise(G, G + 500 * M, 6 * G, A.kept_back(6 * G, FAST)) is False


def test_a_large_rise_of_a_settled_job_cancels_its_loan() -> None:
    led = _ledger()
    led.observe_host("n1", [1], None, [G + 700 * M], [G + 700 * M], [0.0], now=T0 + 3)   # +700M > margin 614M
    assert led.reclaimable("n1", T0 + 3.5, FAST) == 0
    assert led.reclaimable("n1", T0 + 4, FAST) == A.lendable(6 * G, G + 700 * M, FAST)  # settled again at it


def test_small_rises_add_up_to_a_large_one_from_the_peak_it_settled_at() -> None:
    led = _ledger()
    led.observe_host("n1", [1], None, [G + 400 * M], [G + 400 * M], [0.0], now=T0 + 3)
    assert led.reclaimable("n1", T0 + 3, FAST) > 0
    led.observe_host("n1", [1], None, [G + 800 * M], [G + 800 * M], [0.0], now=T0 + 3.5)  # 800M past 1G: large
    assert led.reclaimable("n1", T0 + 3.5, FAST) == 0


def test_while_it_settles_any_rise_past_noise_restarts_the_window() -> None:
    led = Ledger(FAST)
    led.open(1, "n1", 6 * G, {"slots": 1}, since=T0)
    led.observe_host("n1", [1], None, [G], [G], [0.0], now=T0 + 0.5)
    led.observe_host("n1", [1], None, [G + 100 * M], [G + 100 * M], [0.0], now=T0 + 1.2)   # small, but not settled
    assert led.reclaimable("n1", T0 + 2, FAST) == 0
    assert led.reclaimable("n1", T0 + 2.2, FAST) == A.lendable(6 * G, G + 100 * M, FAST)


def test_with_no_margin_every_rise_past_noise_unsettles() -> None:
    rules = ReclaimRules(min_run=1.0, window=1.0, margin=0.0)
    led = Ledger(rules)
    led.open(1, "n1", 6 * G, {"slots": 1}, since=T0)
    led.observe_host("n1", [1], None, [G], [G], [0.0], now=T0)
    assert led.reclaimable("n1", T0 + 1) == 5 * G     # the ledger's own rules
    led.observe_host("n1", [1], None, [G + 100 * M], [G + 100 * M], [0.0], now=T0 + 2)
    assert led.reclaimable("n1", T0 + 2.5) == 0


def test_the_whole_column_path_dates_peaks_too() -> None:
    led = _ledger()
    b = led.books["n1"]
    ids = list(b.ids)  # every job of the host in the book's order: observe_host's column path
    led.observe_host("n1", ids, None, [3 * G, 100 * M, 0], [3 * G, 100 * M, 0], [0.0] * 3, now=T0 + 4)
    assert b.peak_at[b.index[1]] == T0 + 4 and b.peak_at[b.index[2]] == T0 + 1


@pytest.mark.parametrize("overs,reclaiming,want", [
    ([("in", -5), ("over", 3), ("lent", -9)], {"lent"}, "lent"),   # a reclaiming job goes first, even within
    ([("l1", -9), ("l2", -1)], {"l1", "l2"}, "l2"),                # of them, the least below its reservation
    ([("in", -5), ("over", 3)], set(), "over"),                    # then the largest overage
    ([("in", -5), ("in2", 0)], set(), None),                       # never a job within its reservation
])
def test_pressure_victim_takes_reclaiming_jobs_first(overs: list, reclaiming: set, want: str | None) -> None:
    assert A.pressure_victim(overs, reclaiming) == want


# ---- placement ---------------------------------------------------------------------------------

def test_only_a_reclaiming_job_runs_on_reclaimable_memory_and_the_step_says_why() -> None:
    h = cap("node1", mem="8G", os_available="4G", slack="3.5G", reclaimable=int(1.5 * G))   # available 512M
    req = parse_resreq("rusage[mem=1G]")
    normal, lent = demand_of(1, req, {}), demand_of(1, req, {}, reclaim=True)
    assert (fit_reason(normal, h, 1) or "").startswith("mem: needs 1.0G")
    assert fit_reason(lent, h, 1) is None
    big = demand_of(1, parse_resreq("rusage[mem=3G]"), {}, reclaim=True)
    assert fit_reason(big, h, 1) == ("reclaim: needs 3.0G, node1 has 2.0G reclaimable "
                                     "(available 512.0M + settled slack 1.5G)")


def test_a_round_places_the_reclaim_queue_in_settled_slack_and_charges_it() -> None:
    hc = caps(cap("node1", mem="8G", os_available="4G", slack="3.5G", reclaimable=int(1.5 * G)))
    normal = job(1, mem="1G")
    lent = job(2, mem="1G", queue="reclaim")
    asked = job(3, mem="1G", reclaim=True)
    plan = schedule(hc, [normal, lent, asked], T0, reclaim_queues=frozenset({"reclaim"}))
    assert [jid for jid, _ in plan.placements] == [2, 3]   # room 2G: both borrowers of 1G fit
    assert plan.reasons[1].startswith("mem:")              # the normal job sees only the 512M available
    assert hc["node1"].reclaim_room == 0                   # each placement charged: the room fell by 2G
    late = job(4, mem="1G", queue="reclaim")
    plan = schedule(hc, [late], T0, reclaim_queues=frozenset({"reclaim"}))
    assert plan.reasons[4].startswith("reclaim: needs 1.0G, node1 has 0B reclaimable")


def test_the_simulators_round_places_a_spread_reclaiming_job_as_the_daemons_do() -> None:
    # explain=False bounds a plain demand by its hosts' rooms: a reclaiming job's is the reclaim room
    # (2G here), not the 512M available, or the bound refuses what the walk places.
    jobs = [job(1, mem="1G/task", slots=2, reclaim=True)]
    for explain in (True, False):
        hc = caps(cap("node1", mem="8G", os_available="4G", slack="3.5G", reclaimable=int(1.5 * G)))
        plan = schedule(hc, jobs, T0, explain=explain)
        assert [(jid, [(a.host, a.slots) for a in allocs]) for jid, allocs in plan.placements] == \
            [(1, [("node1", 2)])], explain


# ---- reclaim on a heartbeat (the controller) ---------------------------------------------------

def _settled_owner(policy: str) -> tuple[Kit, Job]:
    """node1 (8G) with a reclaim queue: an owner reserving 6G, settled at 1G."""
    k = kit(host("node1", mem="8G"), queues=(queue("normal"), queue("reclaim", reclaimable=True,
                                                                    reclaim_policy=policy)))
    k.ctx.live.rules = FAST
    k.ctx.live.reclaim_queues = frozenset({"reclaim"})
    k.worker("node1")
    owner = k.run_job("node1", mem="6G")
    beat(k, {owner.id: G}, os_available=7 * G)
    k.now += 2  # settled
    return k, owner


def _kit(policy: str = "requeue") -> tuple[Kit, int, int]:
    """node1 (8G): an owner reserving 6G settled at 1G, and a reclaiming job of 4G running at 3G."""
    k, owner = _settled_owner(policy)
    lent = k.run_job("node1", mem="4G", queue="reclaim")
    beat(k, {owner.id: G, lent.id: 3 * G}, os_available=4 * G)
    return k, owner.id, lent.id


def beat(k: Kit, usage: dict[int, int], os_available: int) -> object:
    ids = list(usage)
    cols = S.UsageColumns(job_id=ids, attempt=[k.state.jobs[j].attempt for j in ids],
                          memory_rss=list(usage.values()), memory_peak=list(usage.values()), cpu_time=[0.0] * len(ids))
    return k.call(Op.HEARTBEAT, S.Heartbeat(host="node1", time=k.now, os_available=os_available, usage=cols))


def test_a_settled_owner_lends_and_nothing_is_reclaimed_while_the_room_holds() -> None:
    k, owner, lent = _kit()
    assert k.ctx.live.reclaimable("node1", k.now) == A.lendable(6 * G, G, FAST)
    out = beat(k, {owner: G, lent: 3 * G}, os_available=4 * G)
    assert not out.commits
    assert k.ctx.live.host_view(k.state.hosts["node1"], k.now).mem_reclaimable == A.lendable(6 * G, G, FAST)


def test_an_owner_growing_back_requeues_the_reclaiming_job_and_never_touches_the_owner() -> None:
    k, owner, lent = _kit()
    k.now += 1
    out = beat(k, {owner: 4 * G, lent: 3 * G}, os_available=1 * G)
    ((cmd, _),) = out.commits
    assert isinstance(cmd, Requeue) and cmd.job_ids == [lent] and cmd.reason.startswith("RECLAIMED")
    k.commit_all(out)
    assert k.state.jobs[lent].kill_requested and k.state.jobs[lent].reason.startswith("requeue requested: RECLAIMED")
    assert not k.state.jobs[owner].kill_requested and k.state.jobs[owner].state == JobState.RUN
    # It counts against its queue's preemption budget (max_preempt), as a preemption does.
    assert (k.state.jobs[lent].evictions, k.state.jobs[owner].evictions) == (1, 0)
    # The next heartbeat counts the job on its way out as gone: nothing more is sent away.
    k.now += 0.5
    assert not beat(k, {owner: 4 * G, lent: 3 * G}, os_available=1 * G).commits
    problems, _ = audit(k.state, k.ctx.live)
    assert problems == []


def _kit_unreserved(policy: str = "requeue") -> tuple[Kit, int, int]:
    """node1 (8G): an owner reserving 6G settled at 1G, and a reclaiming job that reserves no memory."""
    k, owner = _settled_owner(policy)
    s = spec(mem=None, queue="reclaim")
    (jid,) = k.state.apply(Submit(time=T0, specs=[s], reqs=[parse_resreq(s.resreq)]))
    k.state.apply(Place(time=k.now, job_id=jid, attempt=0, allocs=[alloc("node1", 1, 0)]))
    k.ctx.live.sync_job(k.state.jobs[jid], k.now)
    return k, owner.id, jid


def test_a_reclaiming_job_that_reserves_nothing_is_killed_once_it_uses_memory_not_requeued() -> None:
    # Requeued, it would be placed again at once (it needs no room: ok_reclaim) and sent away
    # again, for ever.  Before the fix: a Requeue here.
    k, owner, lent = _kit_unreserved()
    beat(k, {owner: G, lent: 3 * G}, os_available=4 * G)
    k.now += 1
    out = beat(k, {owner: 4 * G, lent: 3 * G}, os_available=1 * G)    # the owner grows back: room -1G
    ((cmd, _),) = out.commits
    assert isinstance(cmd, Kill) and cmd.job_ids == [lent]
    assert cmd.reason.startswith("RECLAIMED") and "over its own reservation (uses 3.0G of 0B)" in cmd.reason
    k.commit_all(out)
    k.state.apply(Finish(time=k.now, job_id=lent, attempt=k.state.jobs[lent].attempt, host="node1", signal=9,
                         reason=cmd.reason))
    assert k.state.jobs[lent].state == JobState.EXIT   # nothing to grow: no retry, no loop
    assert k.state.jobs[owner].state == JobState.RUN and not k.state.jobs[owner].kill_requested


def test_a_reclaiming_job_that_holds_no_memory_is_not_sent_away_for_nothing() -> None:
    k, owner, lent = _kit_unreserved()
    k.ctx.cfg.worker.mem_floor = "2G"
    beat(k, {owner: G, lent: 0}, os_available=7 * G)
    k.now += 1
    assert not beat(k, {owner: 7 * G, lent: 0}, os_available=1 * G).commits   # under the floor, but sent away
    assert not k.state.jobs[lent].kill_requested                             # it would give nothing back


def test_under_the_floor_a_reclaiming_job_goes_even_with_room() -> None:
    k, owner, lent = _kit(policy="kill")
    k.ctx.cfg.worker.mem_floor = "5G"
    out = beat(k, {owner: G, lent: 3 * G}, os_available=4 * G)
    ((cmd, _),) = out.commits
    assert isinstance(cmd, Kill) and cmd.job_ids == [lent] and "under the floor" in cmd.reason
    k.commit_all(out)
    assert k.state.jobs[lent].evictions == 1


def test_suspend_policy_stops_the_job_and_resumes_it_once_the_room_is_back() -> None:
    k, owner, lent = _kit(policy="suspend")
    k.now += 1
    out = beat(k, {owner: 4 * G, lent: 3 * G}, os_available=1 * G)
    ((cmd, _),) = out.commits
    assert isinstance(cmd, SysSuspend) and cmd.job_ids == [lent]
    k.commit_all(out)
    assert k.state.jobs[lent].state == JobState.SSUSP and k.state.jobs[lent].suspend_reason.startswith("RECLAIMED")
    assert k.state.jobs[lent].evictions == 1
    assert k.ctx.live.job_view(k.state.jobs[lent]).reason.startswith("RECLAIMED")
    ((host, op, body, _),) = [o for o in k.applied().orders if o.op == Op.SIGNAL_JOB]   # signals.py converges
    assert (host, body.job_id, body.signal) == ("node1", lent, signal.SIGSTOP)
    # A stopped job keeps its pages: while the owner holds its peak the room stays short.
    k.now += 6
    assert not beat(k, {owner: G, lent: 3 * G}, os_available=4 * G).commits
    # The owner ends: the room is back, the job runs again.
    k.state.apply(Finish(time=k.now, job_id=owner, attempt=k.state.jobs[owner].attempt, host="node1", exit_code=0))
    k.ctx.live.sync_job(k.state.jobs[owner], k.now)
    out = beat(k, {lent: 3 * G}, os_available=5 * G)
    ((cmd, _),) = out.commits
    assert isinstance(cmd, SysResume) and cmd.job_ids == [lent]
    k.commit_all(out)
    assert k.state.jobs[lent].state == JobState.RUN and k.state.jobs[lent].suspend_reason == ""


def test_a_host_without_reclaiming_jobs_is_left_to_the_worker() -> None:
    k = kit(host("node1", mem="8G"))
    k.worker("node1")
    a = k.run_job("node1", mem="1G")
    k.ctx.cfg.worker.mem_floor = "5G"
    assert not beat(k, {a.id: 7 * G}, os_available=G).commits   # over its reservation: MEMPRESSURE's, not ours


# ---- configuration -----------------------------------------------------------------------------

def test_the_reclaim_queue_is_built_in_and_the_policy_is_checked() -> None:
    cfg = from_dict({"queues": {"short": {}}})
    assert cfg.queues["reclaim"].reclaimable and cfg.queues["reclaim"].reclaim_policy == "requeue"
    own = from_dict({"queues": {"short": {}, "spare": {"reclaimable": True}}})
    assert "reclaim" not in own.queues
    with pytest.raises(ConfigError, match="queues.short.reclaim_policy: must be one of requeue, suspend, kill"):
        from_dict({"queues": {"short": {"reclaim_policy": "drop"}}})
    with pytest.raises(ConfigError, match=r"reclaim.margin: must be a share"):
        from_dict({"reclaim": {"margin": 1.5}})
    assert from_dict({"reclaim": {"min_run": 5, "window": 2}}).reclaim_rules() == ReclaimRules(5.0, 2.0, 0.1)


def test_a_job_suspended_for_reclaim_is_reclaims_to_resume_not_preemptions() -> None:
    from xce.core.model import reclaim_suspended

    assert reclaim_suspended(job(state=JobState.SSUSP, suspend_reason="RECLAIMED: host node1's owners want ..."))
    assert not reclaim_suspended(job(state=JobState.SSUSP, suspend_reason="preempted by job 3 of queue high"))
    assert not reclaim_suspended(job(state=JobState.RUN, suspend_reason="RECLAIMED: ..."))


# ---- submit --------------------------------------------------------------------------------------

def test_submit_refuses_a_reclaiming_job_that_reserves_no_memory_by_name() -> None:
    k = kit(host("node1", mem="8G"), queues=(queue("normal"), queue("reclaim", reclaimable=True)))
    for s, how in ((spec(mem=None, queue="reclaim"), "queue reclaim"), (spec(mem=None, reclaim=True), "--reclaim"),
                   (spec(mem=None, resreq="rusage[mem=auto]", queue="reclaim"), "queue reclaim")):
        out = k.call(Op.SUBMIT, S.SubmitRequest(jobs=[s], key="k-000001"))
        ((_, e),) = out.errors
        assert isinstance(e, InvalidRequest) and e.message.startswith(
            f"reclaim: a job that runs on reclaimable memory ({how}) must reserve memory"), e.message
    assert "(auto: no history of" in e.message                     # the sizing's basis says why it has none
    out = k.commit_all(k.call(Op.SUBMIT, S.SubmitRequest(jobs=[spec(mem="1G", queue="reclaim"),
                                                               spec(mem=None)], key="k-000002")))
    assert not out.errors                                          # a reservation, or no reclaim: admitted


def test_bmod_and_bswitch_cannot_make_a_reclaiming_job_that_reserves_no_memory() -> None:
    k = kit(host("node1", mem="8G"), queues=(queue("normal"), queue("reclaim", reclaimable=True)))
    bare, lent = k.pend_job(mem=None), k.pend_job(mem="1G", queue="reclaim")
    for body in (S.SwitchRequest(ids=[bare.id], queue="reclaim", key="k-000001"),
                 S.ModifySpecRequest(id=bare.id, queue="reclaim", key="k-000002"),
                 S.ModifySpecRequest(id=lent.id, resreq="span[hosts=1]", key="k-000003")):
        out = k.call(Op.SWITCH if isinstance(body, S.SwitchRequest) else Op.MODIFY_SPEC, body)
        ((_, e),) = out.errors
        assert isinstance(e, InvalidRequest) and "must reserve memory" in e.message, e.message
    ok = k.call(Op.SWITCH, S.SwitchRequest(ids=[lent.id], queue="normal", key="k-000004"))
    assert ok.commits and not ok.errors
