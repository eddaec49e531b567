"""Preemption alone, on builders: who is preempted for whom, and how (memory honest)."""

from __future__ import annotations

import pytest
from builders import T0, alloc, b, cap, caps, job

from xce.core.model import JobState
from xce.core.sched.preempt import PreemptRules, Preemption, credit_suspended, fitter, preempt, resumable

NOW = T0 + 3600
RULES = PreemptRules(preempts={"high": frozenset({"low"})}, action={"low": "suspend", "high": "suspend"},
                     priority={"high": 70, "low": 10, "normal": 30}, min_run_time=60.0)


def running(id: int, host: str = "n1", slots: int = 1, mem: str = "1G", queue: str = "low",
            started: float = NOW - 600, **kw) -> object:
    return job(id, slots=slots, mem=mem, queue=queue, state=JobState.RUN, start_time=started,
               allocs=[alloc(host, slots, mem)], attempt=1, **kw)


def orders(blocked, run, hosts, rules=RULES) -> list[Preemption]:
    return preempt(blocked, run, hosts, rules, NOW, fitter(NOW))


def test_a_high_job_suspends_a_low_one_for_its_slots() -> None:
    low = running(1, slots=2)
    high = job(2, slots=2, queue="high")
    assert orders([high], [low], caps(cap("n1", slots=2, slots_free=0, slack="1G"))) == \
        [Preemption(1, 1, "suspend", 2)]


def test_memory_is_honest_a_job_needing_memory_requeues_instead() -> None:
    """4G host; the low job reserved 3G: a suspended job keeps it, so only a requeue makes room."""
    low = running(1, mem="3G")
    high = job(2, mem="2G", queue="high")
    hosts = caps(cap("n1", mem="4G", slots=2, slots_free=1, slack="3G"))
    assert orders([high], [low], hosts) == [Preemption(1, 1, "requeue", 2)]


@pytest.mark.parametrize("why,low,rules", [
    ("ran less than min_run_time", running(1, slots=2, started=NOW - 30), RULES),
    ("its queue is not one high may preempt", running(1, slots=2, queue="normal"), RULES),
    ("preemption off", running(1, slots=2), PreemptRules()),
])
def test_no_preemption(why: str, low, rules: PreemptRules) -> None:
    high = job(2, slots=2, queue="high")
    assert orders([high], [low], caps(cap("n1", slots=2, slots_free=0, slack="1G")), rules) == [], why


def test_a_queue_that_is_killed_is_killed() -> None:
    rules = PreemptRules(preempts={"high": frozenset({"low"})}, action={"low": "kill"},
                         priority={"high": 70, "low": 10})
    assert orders([job(2, slots=2, queue="high")], [running(1, slots=2)],
                  caps(cap("n1", slots=2, slots_free=0, slack="1G")), rules) == [Preemption(1, 1, "kill", 2)]


def test_the_youngest_victims_on_the_host_it_lands_on_only() -> None:
    """n1 and n2 full with one old and one young low job each: the high job takes the first host
    the youngest victim frees, and nothing else is preempted."""
    old1, young1 = running(1, "n1", started=NOW - 3000), running(2, "n1", started=NOW - 100)
    old2 = running(3, "n2", slots=2, started=NOW - 2000)
    hosts = caps(cap("n1", slots=2, slots_free=0, slack="2G"), cap("n2", slots=2, slots_free=0, slack="2G"))
    assert orders([job(9, queue="high")], [old1, young1, old2], hosts) == [Preemption(2, 1, "suspend", 9)]


def test_two_blocked_jobs_do_not_share_a_victim() -> None:
    low = running(1, slots=2)
    hosts = caps(cap("n1", slots=2, slots_free=0, slack="1G"))
    got = orders([job(2, slots=2, queue="high"), job(3, slots=2, queue="high")], [low], hosts)
    assert got == [Preemption(1, 1, "suspend", 2)]


def test_suspended_jobs_give_back_slots_not_memory_and_resume_first_when_room_returns() -> None:
    ssusp = job(1, slots=2, state=JobState.SSUSP, queue="low", start_time=T0, allocs=[alloc("n1", 2, "1G")])
    hosts = caps(cap("n1", slots=2, slots_free=0, slack="1G"))
    credit_suspended(hosts, [ssusp])
    assert hosts["n1"].slots_free == 2 and hosts["n1"].mem_available == b("7G")  # memory stays charged
    assert resumable([ssusp], hosts, RULES) == [1] and hosts["n1"].slots_free == 0
    # With the preemptor running there (its slots taken), no room: it stays suspended.
    busy = caps(cap("n1", slots=2, slots_free=-2, slack="2G"))
    credit_suspended(busy, [ssusp])
    assert resumable([ssusp], busy, RULES) == []


def test_a_suspended_job_waits_while_its_preemptors_queue_has_pending_work() -> None:
    ssusp = job(1, slots=2, state=JobState.SSUSP, queue="low", start_time=T0, allocs=[alloc("n1", 2, "1G")])
    hosts = caps(cap("n1", slots=2, slots_free=0, slack="1G"))
    credit_suspended(hosts, [ssusp])
    assert resumable([ssusp], hosts, RULES, waiting={"high"}) == []
    assert resumable([ssusp], hosts, RULES, waiting={"normal"}) == [1]


# ---- job priority, the preemption budget, reservations ---------------------------------------

def test_within_a_queue_the_lowest_job_priority_goes_first_then_the_youngest() -> None:
    """-sp / btop / bbot rank a queue's jobs as victims too: the job the operator put last goes
    first, however old; between equals, the youngest (the least work lost)."""
    kept = running(1, "n1", started=NOW - 100, priority=50)
    last = running(2, "n2", started=NOW - 3000, priority=-1)
    hosts = caps(cap("n1", slots=1, slots_free=0, slack="1G"), cap("n2", slots=1, slots_free=0, slack="1G"))
    assert orders([job(9, queue="high")], [kept, last], hosts) == [Preemption(2, 1, "suspend", 9)]


def test_a_job_of_a_lower_job_priority_does_not_preempt_in_its_own_queue() -> None:
    """Job priority orders; it never preempts: only a queue's `preempt` list does (a user's -sp
    cannot evict another user's job)."""
    low = running(1, slots=2, queue="high", priority=0)
    rules = PreemptRules(preempts={"high": frozenset({"low"})}, priority={"high": 70, "low": 10})
    assert orders([job(2, slots=2, queue="high", priority=99)], [low],
                  caps(cap("n1", slots=2, slots_free=0, slack="1G")), rules) == []


def test_a_queues_preemption_budget_counts_reclaimed_evictions_too() -> None:
    """[queues.low] max_preempt = 2 (LSF MAX_JOB_PREEMPT): a job evicted twice already, by
    preemption or by reclamation (Job.evictions), is not preempted again."""
    rules = PreemptRules(preempts={"high": frozenset({"low"})}, priority={"high": 70, "low": 10},
                         max_preempt={"low": 2})
    hosts = caps(cap("n1", slots=1, slots_free=0, slack="1G"), cap("n2", slots=1, slots_free=0, slack="1G"))
    twice, once = running(1, "n1", started=NOW - 100, evictions=2), running(2, "n2", started=NOW - 900, evictions=1)
    assert orders([job(9, queue="high")], [twice, once], hosts, rules) == [Preemption(2, 1, "suspend", 9)]
    assert orders([job(9, queue="high")], [twice], hosts, rules) == []


def guard_of(reserved, *, run: float = 600.0):
    """The round's reservations as the scheduler gives them: job 5 holds n1 from NOW + 300."""
    from xce.core.sched.backfill import BackfillRules, Reservation
    from xce.core.sched.preempt import reservation_guard

    r = Reservation(5, NOW + 300, [alloc("n1", 1)], NOW)
    ahead = {5: 0, 9: 1, 4: -1}
    return reservation_guard([r], ahead.__getitem__, BackfillRules(default_run_limit=run), NOW)


def test_preemption_never_starts_a_job_where_it_would_delay_a_higher_jobs_reservation() -> None:
    """Job 5, ahead of the preemptor, is reserved n1 from NOW + 300: a preemptor that would run
    past then is given the victim on n2 (not the youngest, on n1); with only n1's it waits."""
    young1, old2 = running(1, "n1", started=NOW - 100), running(2, "n2", started=NOW - 900)
    hosts = caps(cap("n1", slots=1, slots_free=0, slack="1G"), cap("n2", slots=1, slots_free=0, slack="1G"))
    got = preempt([job(9, queue="high")], [young1, old2], hosts, RULES, NOW, fitter(NOW), guard=guard_of(True))
    assert got == [Preemption(2, 1, "suspend", 9)]
    assert preempt([job(9, queue="high")], [young1], hosts, RULES, NOW, fitter(NOW), guard=guard_of(True)) == []
    # One that ends before the reservation starts may take n1 (backfill would allow it) ...
    short = job(9, queue="high", run_limit=200.0)
    assert preempt([short], [young1], hosts, RULES, NOW, fitter(NOW), guard=guard_of(True)) == \
        [Preemption(1, 1, "suspend", 9)]
    # ... and so may the reserved job itself, or one ahead of it.
    for jid in (5, 4):
        assert preempt([job(jid, queue="high")], [young1], hosts, RULES, NOW, fitter(NOW),
                       guard=guard_of(True)) == [Preemption(1, 1, "suspend", jid)]


def test_the_blocked_preemptors_are_the_rounds_unplaced_jobs_of_preempting_queues_not_held_by_a_limit() -> None:
    from xce.core.sched.preempt import blocked_preemptors

    pend = [job(1, queue="high"), job(2, queue="normal"), job(3, queue="high"), job(4, queue="high"),
            job(5, queue="high")]
    reasons = {4: "limit u: alice uses 2 of 2 running jobs", 3: "slots: needs 1; the cluster has 0 free"}
    got = blocked_preemptors(pend, {1}, reasons, RULES, "limit ")
    assert next(got).id == 3 and [j.id for j in got] == [5]


def test_a_job_whose_victims_are_on_their_way_out_preempts_no_more() -> None:
    """Found from outside: a requeue victim stays RUN (kill_requested) until its processes end,
    and the next rounds preempted two more jobs for the same 2-slot job.  The room of jobs on
    their way out counts as given back: the job waits for it."""
    rules = PreemptRules(preempts={"high": frozenset({"low"})}, action={"low": "requeue"},
                         priority={"high": 70, "low": 10}, min_run_time=0.0)
    leaving = running(9, "n1", slots=1, started=NOW - 10, kill_requested=True)
    others = [running(7, "n1", started=NOW - 300), running(8, "n2", slots=2, started=NOW - 200)]
    hosts = caps(cap("n1", slots=2, slots_free=0, slack="2G"), cap("n2", slots=2, slots_free=0, slack="2G"))
    assert orders([job(10, queue="high")], [leaving, *others], hosts, rules) == []
    # Wider than what is leaving: one more victim, the youngest, and only one.
    assert orders([job(10, slots=2, queue="high")], [leaving, *others], hosts, rules) == \
        [Preemption(8, 1, "requeue", 10)]


def test_a_job_only_spent_victims_would_serve_says_so() -> None:
    """Found from outside: with the low job at its queue's max_preempt, the high job waited
    saying only "slots: needs 4; the cluster has 0 free"."""
    rules = PreemptRules(preempts={"high": frozenset({"low"})}, priority={"high": 70, "low": 10},
                         max_preempt={"low": 2})
    hosts = caps(cap("n1", slots=1, slots_free=0, slack="1G"))
    said: dict[int, str] = {}
    assert preempt([job(9, queue="high")], [running(1, "n1", evictions=2)], hosts, rules, NOW, fitter(NOW),
                   said=said) == []
    assert said == {9: "preemption: job 1 of queue low was evicted 2 times, its queue's max_preempt"}
    said.clear()
    preempt([job(9, queue="high", slots=2)], [running(1, "n1", evictions=2)], hosts, rules, NOW, fitter(NOW),
            said=said)
    assert said == {}  # it would not fit even so: the round's own reason stands
