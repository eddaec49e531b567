"""Shrinking a settled reservation in the daemons: the pure rule (xce/core/shrink.py), the state
machine's Reserve, the ledgers that follow it, the leader's heartbeat reactor and what the worker
and the views make of it.  docs/accounting.md "Shrinking a settled reservation"."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from builders import T0, alloc, cluster_state, host, job, spec
from reactor_kit import Kit, kit
from xce.cli.fmt import job_long
from xce.core import accounting as A
from xce.core import shrink
from xce.core.accounting import Ledger, ReclaimRules
from xce.core.errors import Conflict, InvalidRequest
from xce.core.model import JobState
from xce.core.resreq import parse_resreq
from xce.core.state import Finish, Place, Requeue, Reserve, Submit
from xce.core.views import job_view
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.replica.audit import audit
from xce.replica.live import Live
from xce.site.config import ConfigError, from_dict
from xce.worker.runner import in_force as task_in_force
from xce.worker.runner import set_in_force

G = 2**30
M = 2**20
RULES = ReclaimRules(min_run=1.0, window=1.0, margin=0.1, shrink_age=0.5)


# ---- the pure rule, on a ledger built by hand --------------------------------------------------

def ledger_with(reserved: int = 4 * G, since: float = 0.0, reclaiming: bool = False) -> Ledger:
    """One job (1) on n1 that asked ``reserved``, started at ``since``."""
    led = Ledger(RULES)
    led.open(1, "n1", reserved, {"slots": 1}, since=since, reclaiming=reclaiming)
    return led


def test_an_account_shrinks_to_its_peak_and_margin_once_shrink_settled_not_before() -> None:
    led = ledger_with()
    led.report(1, "n1", G, G, now=1.0)  # its peak rose (from nothing) at 1 s
    # shrink_moment(0, 1) = max(0 + 1, 1 + 1, (1 - 0.5 x 0) / 0.5) = 2
    assert A.shrink_moment(0.0, 1.0, RULES) == 2.0
    assert shrink.shrink_to(led, 1, "n1", 4 * G, 1.9, RULES) is None
    assert shrink.shrink_to(led, 1, "n1", 4 * G, 2.0, RULES) == A.shrunk(4 * G, G, RULES) == G + G // 10


@pytest.mark.parametrize("why, setup", [
    ("unreported", lambda led: None),
    ("reclaiming itself", "reclaiming"),
    ("peak + margin is not below its reservation", lambda led: led.report(1, "n1", 4 * G - 1, 4 * G - 1, now=1.0)),
    ("reserves nothing", "nothing"),
])
def test_these_accounts_never_shrink(why: str, setup: Any) -> None:
    led = ledger_with(reclaiming=setup == "reclaiming", reserved=0 if setup == "nothing" else 4 * G)
    if callable(setup):
        setup(led)
    else:
        led.report(1, "n1", G, G, now=1.0)
    assert shrink.shrink_to(led, 1, "n1", 4 * G, 100.0, RULES) is None, why


def test_a_shrunk_account_is_restored_as_far_as_the_room_reaches() -> None:
    led = ledger_with()
    led.report(1, "n1", G, G, now=1.0)
    led.set_reserved(1, "n1", G + G // 10)
    led.report(1, "n1", 3 * G, 3 * G, now=3.0)  # grew past its reservation in force
    # OS-available 1G on the host; no slack left (it is over its reservation): the room is 1G.
    assert shrink.room(led, "n1", G) == A.available_mem(G, led.host_totals("n1")) == G
    assert shrink.restore_to(led, 1, "n1", 4 * G, G) == A.restored(4 * G, 3 * G, G) == 4 * G
    assert shrink.restore_to(led, 1, "n1", 4 * G, G // 2) == 3 * G + G // 2  # the rest stays over it
    # Within its reservation in force, or never shrunk: nothing to restore.
    led.report(1, "n1", G, 3 * G, now=4.0)
    assert shrink.restore_to(led, 1, "n1", 4 * G, G) is None


def test_a_job_creeping_past_its_shrunk_reservation_on_a_full_host_is_not_restored_at_every_heartbeat() -> None:
    led = ledger_with()
    led.report(1, "n1", G, G, now=1.0)
    led.set_reserved(1, "n1", G + G // 10)
    led.report(1, "n1", G + G // 10 + M // 2, G + G // 10 + M // 2, now=3.0)  # half a MiB over: noise
    assert shrink.restore_to(led, 1, "n1", 4 * G, 0) is None
    led.report(1, "n1", G + G // 10 + 50 * M, G + G // 10 + 50 * M, now=4.0)  # past 1 % of what it asked
    assert shrink.restore_to(led, 1, "n1", 4 * G, 0) == G + G // 10 + 50 * M


def test_a_restore_counts_the_reclaiming_jobs_charges_as_room_they_go_first() -> None:
    led = ledger_with()
    led.open(2, "n1", G, {"slots": 1}, since=0.0, reclaiming=True)
    led.report(2, "n1", G // 2, G // 2, now=1.0)
    assert shrink.room(led, "n1", 0) == A.available_mem(0, led.host_totals("n1")) + G  # its charge: max(1G, 0.5G)


def running(st: Any, jid: int, h: str = "node1", mem: str = "4G") -> None:
    st.apply(Place(time=T0, job_id=jid, attempt=st.jobs[jid].attempt, allocs=[alloc(h, 1, mem)]))


def settled_cluster(**kw: Any) -> tuple[Any, Live]:
    """node1 (8G): job 1 asked 4G (``kw``: its spec), runs at 1G since T0, its peak still since T0 + 1."""
    st = cluster_state(hosts=(host("node1"),))
    s = spec(mem="4G", **kw)
    st.apply(Submit(time=T0, specs=[s], reqs=[parse_resreq(s.resreq)]))
    running(st, 1)
    live = Live(RULES)
    live.sync_job(st.jobs[1], T0)
    live.ledger.report(1, "node1", G, G, now=T0 + 1)
    return st, live


@pytest.mark.parametrize("change, shrinks", [
    (lambda j: None, True),
    (lambda j: setattr(j, "state", JobState.SSUSP), False),  # suspended: not shrunk (it may only be restored)
    (lambda j: setattr(j, "kill_requested", True), False),    # on its way out
])
def test_decide_shrinks_running_jobs_only(change: Any, shrinks: bool) -> None:
    st, live = settled_cluster()
    change(st.jobs[1])
    cmds = shrink.decide(live.ledger, "node1", [st.jobs[1]], 7 * G, T0 + 10, RULES)
    assert [(c.job_id, c.attempt, c.host, c.mem, c.event) for c in cmds] == (
        [(1, 1, "node1", G + G // 10, "shrunk")] if shrinks else [])


def test_a_reservation_with_its_own_duration_is_never_shrunk() -> None:
    st, live = settled_cluster(resreq="rusage[mem=4G:duration=1h]")
    assert shrink.decide(live.ledger, "node1", [st.jobs[1]], 7 * G, T0 + 10, RULES) == []


def test_a_shrink_age_of_1_never_shrinks() -> None:
    st, live = settled_cluster()
    never = ReclaimRules(1.0, 1.0, 0.1, 1.0)
    assert shrink.never(never) and shrink.never(ReclaimRules())  # the daemons' default
    assert shrink.decide(live.ledger, "node1", [st.jobs[1]], 7 * G, T0 + 1e6, never) == []


# ---- the state machine: Reserve ------------------------------------------------------------

def reserved(mem: int, attempt: int = 1, event: str = "shrunk", host: str = "node1") -> Reserve:
    return Reserve(time=T0 + 5, job_id=1, attempt=attempt, host=host, mem=mem, event=event,  # type: ignore[arg-type]
                   detail="peak held still")


def test_reserve_moves_the_reservation_in_force_and_keeps_when_and_why() -> None:
    st, _ = settled_cluster()
    assert st.apply(reserved(G)) == "ok"
    j = st.jobs[1]
    assert j.mem_in_force == {"node1": G} and j.allocs[0].mem == 4 * G  # the placement is what it asked
    assert (j.resized.time, j.resized.host, j.resized.mem, j.resized.event) == (T0 + 5, "node1", G, "shrunk")
    assert st.history[1][-1].event == "reservation shrunk" and "4.0G asked, 1.0G in force" in st.history[1][-1].detail
    assert st.apply(reserved(G)) == "unchanged"  # decided twice before the first was seen applied
    assert [e.event for e in st.history[1]].count("reservation shrunk") == 1


@pytest.mark.parametrize("cmd, error, words", [
    (reserved(5 * G), InvalidRequest, "outside [0, the 4.0G it was placed with]"),
    (reserved(G, attempt=0), Conflict, "no running share on node1 at attempt 0"),
    (reserved(G, host="node2"), Conflict, "no running share on node2"),
])
def test_reserve_is_refused_above_what_was_placed_or_for_another_run(cmd: Reserve, error: type, words: str) -> None:
    st, _ = settled_cluster()
    with pytest.raises(error, match=words.replace("[", r"\[").replace("]", r"\]")):
        st.apply(cmd)


def test_a_requeue_forgets_the_runs_reservation_in_force() -> None:
    st, _ = settled_cluster()
    st.apply(reserved(G))
    st.apply(Requeue(time=T0 + 6, job_ids=[1]))
    st.apply(Finish(time=T0 + 7, job_id=1, attempt=1, host="node1", exit_code=143))
    j = st.jobs[1]
    assert j.state == JobState.PEND and j.mem_in_force == {} and j.resized is None
    with pytest.raises(Conflict):
        st.apply(reserved(G))  # not running: nothing to reserve for


# ---- every ledger follows the hard state ---------------------------------------------------

def test_a_ledger_makes_one_charge_change_and_a_new_leader_rebuilds_it() -> None:
    st, live = settled_cluster()
    before = live.ledger.host_totals("node1")
    slack0, avail0 = before.mem_slack, A.available_mem(7 * G, before)
    st.apply(reserved(G + G // 10))
    live.sync_job(st.jobs[1], T0 + 5)
    t = live.ledger.host_totals("node1")
    assert t.mem_reserved == G + G // 10 and t.mem_slack == G // 10
    assert A.available_mem(7 * G, t) - avail0 == slack0 - G // 10  # what the shrink freed
    assert live.ledger.audit() == []
    fresh = Live(RULES)  # a failover (or the scheduler's mirror re-snapshotting)
    fresh.rebuild(st.jobs.values(), T0 + 6)
    assert fresh.ledger.accounts[(1, "node1")].reserved == G + G // 10


def test_the_audit_checks_the_account_against_the_reservation_in_force() -> None:
    st, live = settled_cluster()
    st.apply(reserved(G))
    assert audit(st, live)[0] == [f"job 1 on node1: account reserves {4 * G}, its reservation in force is {G}"]
    live.sync_job(st.jobs[1], T0 + 5)
    assert audit(st, live)[0] == []


# ---- the leader's heartbeat reactor (recording outbox) --------------------------------------

def beat(k: Kit, usage: dict[int, int], os_available: int) -> Any:
    ids = list(usage)
    cols = S.UsageColumns(job_id=ids, attempt=[k.state.jobs[j].attempt for j in ids],
                          memory_rss=list(usage.values()), memory_peak=list(usage.values()), cpu_time=[0.0] * len(ids))
    return k.call(Op.HEARTBEAT, S.Heartbeat(host="node1", time=k.now, os_available=os_available, usage=cols))


def shrinking_kit() -> tuple[Kit, int]:
    """node1 (8G): a job that asked 4G runs at 1G, its worker confirmed it."""
    k = kit()
    k.ctx.live.rules = RULES
    k.worker("node1")
    j = k.run_job("node1", mem="4G")
    k.ctx.book.confirmed[(j.id, "node1")] = j.attempt
    k.now = T0 + 2
    beat(k, {j.id: G}, os_available=7 * G)  # its first report dates its peak: T0 + 2
    return k, j.id


def test_the_leader_commits_a_shrink_then_tells_the_worker_and_the_scheduler_sees_more_room() -> None:
    k, jid = shrinking_kit()
    k.now = T0 + 2.5
    assert not beat(k, {jid: G}, os_available=7 * G).commits  # not yet: shrink_moment is T0 + 3 (placed T0 + 1)
    k.now = T0 + 3.5
    out = beat(k, {jid: G}, os_available=7 * G)
    ((cmd, _),) = out.commits
    assert isinstance(cmd, Reserve) and (cmd.job_id, cmd.host, cmd.mem, cmd.event) == (jid, "node1", G + G // 10,
                                                                                        "shrunk")
    assert "peak 1.0G held still" in cmd.detail
    # A heartbeat before the commit is seen applied decides nothing again.
    assert not beat(k, {jid: G}, os_available=7 * G).commits
    avail0 = A.available_mem(7 * G, k.ctx.live.ledger.host_totals("node1"))
    after = k.commit_all(out)
    (order,) = after.orders
    assert (order.host, order.op, order.body.mem_in_force, order.body.alloc.mem) == ("node1", Op.RUN_JOB,
                                                                                      G + G // 10, 4 * G)
    k.applied()
    t = k.ctx.live.ledger.host_totals("node1")
    assert t.mem_reserved == G + G // 10
    assert A.available_mem(7 * G, t) == avail0 + 3 * G - G // 10  # 4G - 1G slack became 0.1G
    assert audit(k.state, k.ctx.live)[0] == []
    v = job_view(k.state.jobs[jid], k.ctx.live.ledger)
    assert (v.mem_reserved, v.mem_asked, v.mem_resized_time) == (G + G // 10, 4 * G, T0 + 3.5)
    assert v.mem_resized.startswith("shrunk on node1 to 1.1G: peak 1.0G held still")
    assert v.accounts[0].mem_asked == 4 * G and v.accounts[0].mem_reserved == G + G // 10
    text = job_long(v, k.now)
    assert "Reservation in force: 1.1G of 4.0G asked;" in text and "ASKED" in text


def test_a_shrunk_job_that_grows_is_restored_before_the_reclaim_rule_runs() -> None:
    k, jid = shrinking_kit()
    k.now = T0 + 3.5
    k.commit_all(beat(k, {jid: G}, os_available=7 * G))
    k.applied()
    k.now = T0 + 4
    out = beat(k, {jid: 3 * G}, os_available=5 * G)
    ((cmd, _),) = out.commits
    room = 5 * G  # nothing else runs: no slack left on node1
    assert (cmd.event, cmd.mem) == ("restored", A.restored(4 * G, 3 * G, room)) == ("restored", 4 * G)
    k.commit_all(out)
    k.applied()
    assert k.ctx.live.ledger.accounts[(jid, "node1")].reserved == 4 * G
    assert k.state.history[jid][-1].event == "reservation restored"
    assert audit(k.state, k.ctx.live)[0] == []


def test_the_daemons_default_never_shrinks() -> None:
    k = kit()
    k.ctx.live.rules = from_dict({}).reclaim_rules()
    k.worker("node1")
    j = k.run_job("node1", mem="4G")
    for t in (2, 100, 10_000):
        k.now = T0 + t
        assert not beat(k, {j.id: G}, os_available=7 * G).commits


def test_a_worker_that_registers_again_is_told_its_shares_reservation_in_force() -> None:
    k, jid = shrinking_kit()
    k.now = T0 + 3.5
    k.commit_all(beat(k, {jid: G}, os_available=7 * G))
    k.applied()
    reg = S.RegisterRequest(host="node1", slots=4, ncpus=4, mem_total=8 * G, os_available=7 * G, version="x",
                            running=[S.RunningTask(jid, k.state.jobs[jid].attempt, 1234)])
    after = k.commit_all(k.call(Op.REGISTER, reg))
    assert [(o.op, o.body.mem_in_force) for o in after.orders] == [(Op.RUN_JOB, G + G // 10)]


# ---- the worker --------------------------------------------------------------------------------

def task(**kw: Any) -> Any:
    return SimpleNamespace(**{"reserved": 4 * G, "duration_s": None, "decay": False, "start_time": T0,
                              "in_force": None, **kw})


def test_the_worker_takes_the_reservation_in_force_its_leader_tells_it() -> None:
    t = task()
    assert task_in_force(t, T0 + 5) == 4 * G
    assert set_in_force(t, G) and task_in_force(t, T0 + 5) == G
    assert not set_in_force(t, None) and not set_in_force(t, G)  # an order of no news


def test_under_pressure_a_shrunk_job_over_its_reservation_in_force_goes_before_one_within() -> None:
    tasks = {"shrunk": (task(in_force=G), 2 * G), "within": (task(reserved=2 * G), G)}  # (task, rss)
    # The shrunk one uses 2G: over its 1G in force, under the 4G it asked (and its -M): the MEMLIMIT
    # kill leaves it be, but under pressure it goes first, as the runner's largest_overage asks.
    assert A.pressure_victim((name, rss - task_in_force(t, T0)) for name, (t, rss) in tasks.items()) == "shrunk"


# ---- config ------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [-0.1, 1.5, float("nan"), float("inf")])
def test_a_bad_shrink_age_is_refused_by_its_key(value: float) -> None:
    with pytest.raises(ConfigError, match=r"reclaim\.shrink_age: must be a share of a job's run in \[0, 1\]"):
        from_dict({"reclaim": {"shrink_age": value}})


def test_shrink_age_reaches_the_rules_and_defaults_to_never() -> None:
    assert from_dict({}).reclaim_rules().shrink_age == 1.0
    assert from_dict({"reclaim": {"shrink_age": 0.6}}).reclaim_rules().shrink_age == 0.6
    with pytest.raises(ConfigError, match="reclaim.shrink_age"):
        from_dict({"reclaim": {"shrink_age": "soon"}})


def test_builders_job_has_no_reservation_in_force_until_one_is_committed() -> None:
    j = job(state=JobState.RUN, allocs=[alloc("node1", 1, "2G")])
    assert j.mem_in_force == {} and shrink.in_force(j, j.allocs[0], T0) == 2 * G
