"""Tests for xce.core.placement: each filter with its reason, rounds, ranking, and the one fit rule."""

from __future__ import annotations

import copy

import pytest
from builders import SITE, T0, alloc, b, cap, caps, host, job
from hypothesis import given, settings
from hypothesis import strategies as st

from xce.core.accounting import MEM_VIEWS, Ledger
from xce.core.model import Alloc, JobState
from xce.core.placement import (
    Demand,
    allocation_reason,
    build_allocs,
    check_placement,
    demand_of,
    f_mem,
    f_schedulable,
    f_select,
    f_slots,
    f_tasks,
    f_virtual,
    fit_reason,
    fits,
    host_caps,
    job_demand,
    never_fits,
    pending_order,
    rank_key,
    schedule,
)
from xce.core.sched.backfill import BackfillRules, Release
from xce.core.sched.limits import Limit, LimitBook
from xce.core.resreq import parse_resreq

G, M = b("1G"), b("1M")


def demand(mem: str | None = "1G", slots: int = 1, resreq: str = "", cluster: tuple[str, ...] = ()) -> Demand:
    j = job(mem=mem, slots=slots, resreq=resreq, resources=SITE)
    return demand_of(j.spec.slots, j.req, {n: 0 for n in cluster})


def placed(plan) -> dict[int, list[tuple[str, int]]]:
    return {jid: [(a.host, a.slots) for a in allocs] for jid, allocs in plan.placements}


# ---- each filter alone ---------------------------------------------------------------------

FILTER_CASES = [
    # filter, demand, host, slots, expected reason (None: fits)
    (f_schedulable, demand(), cap("node2"), 1, None),
    (f_schedulable, demand(), cap("node2", schedulable="closed"), 1, "host node2 is closed"),
    (f_schedulable, demand(), cap("node2", schedulable="unavail"), 1, "host node2 is unavail"),
    (f_select, demand(resreq="select[ncpus>=8]"), cap("node2", attrs={"ncpus": 8}), 1, None),
    (f_select, demand(resreq="select[ncpus>=8]"), cap("node2", attrs={"ncpus": 4}), 1,
     "select: node2 does not match ncpus>=8"),
    (f_select, demand(), cap("node2"), 1, None),
    (f_slots, demand(slots=4), cap("node2", slots=4), 4, None),
    (f_slots, demand(slots=4), cap("node2", slots=4, slots_free=3), 4, "slots: needs 4, node2 has 3 free of 4"),
    (f_slots, demand(slots=2), cap("node2", slots=4, slots_free=-1), 2, "slots: needs 2, node2 has 0 free of 4"),
    (f_mem, demand("4G"), cap("node2", os_available=b("4G") + 1), 1, None),
    (f_mem, demand("4G"), cap("node2", os_available="4G"), 1, None),
    (f_mem, demand(None), cap("node2", os_available=0), 1, None),
    (f_mem, demand("4G"), cap("node2", os_available=int(6.2 * G), slack=int(3.1 * G)), 1,
     "mem: needs 4.0G, node2 has 3.1G available for scheduling (OS 6.2G - slack 3.1G)"),
    (f_mem, demand("1G", slots=2, resreq="rusage[mem=1G/task]"), cap("node2", os_available="1.5G"), 2,
     "mem: needs 2.0G, node2 has 1.5G available for scheduling (OS 1.5G - slack 0B)"),
    (f_virtual, demand(resreq="rusage[mem=1G:gpu=2]"), cap("node2", virtual_free={"gpu": 2}), 1, None),
    (f_virtual, demand(resreq="rusage[mem=1G:gpu=2]"), cap("node2", virtual_free={"gpu": 1}), 1,
     "gpu: needs 2, node2 has 1"),
    (f_virtual, demand(resreq="rusage[mem=1G:gpu=2]"), cap("node2"), 1, "gpu: needs 2, node2 has 0"),
]


@pytest.mark.parametrize("f,d,h,slots,expect", FILTER_CASES,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(FILTER_CASES)])
def test_filter(f, d: Demand, h, slots: int, expect: str | None) -> None:
    assert f(d, h, slots, True) == expect


def test_fit_reason_reports_the_first_failing_filter() -> None:
    h = cap("node2", slots_free=0, os_available=0, schedulable="closed")
    assert fit_reason(demand(), h, 1) == "host node2 is closed"
    h.schedulable = None
    assert fit_reason(demand(), h, 1).startswith("slots:")
    h.slots_free = 4
    assert fit_reason(demand(), h, 1).startswith("mem:")
    h.os_available = G
    assert fit_reason(demand(), h, 1) is None


def test_mem_per_job_is_charged_on_the_first_host_only() -> None:
    d = demand(None, slots=2, resreq="rusage[mem=2G/job] span[ptile=1]")
    h = cap("node2", os_available="1G")
    assert f_mem(d, h, 1, False) is None
    assert "needs 2.0G" in f_mem(d, h, 1, True)


# ---- host_caps: the round's view from hard state, ledger and soft OS figures ---------------

def test_host_caps_takes_slack_and_allocations_from_the_ledger() -> None:
    led = Ledger()
    led.open(1, "n1", 2 * G, {"slots": 2, "lic": 1})
    led.open(2, "n1", G, {"slots": 1})
    led.report(2, "n1", 3 * G)
    hosts = [host("n1", mem="8G", slots=4, virtual={"lic": 3}, attrs={"type": "x86"}),
             host("n2", closed=True), host("n3", unavail=True, closed=True)]
    cs = host_caps(hosts, led, {"n1": 5 * G})
    n1 = cs["n1"]
    assert (n1.slots_free, n1.os_available, n1.slack, n1.mem_available) == (1, 5 * G, 2 * G, 3 * G)
    assert n1.virtual_free == {"lic": 2} and n1.attrs == {"ncpus": 1, "type": "x86"}
    assert cs["n2"].schedulable == "closed" and cs["n2"].os_available == 8 * G  # no report yet: mem_total
    assert cs["n3"].schedulable == "unavail"


# ---- the key scenario of the brief ---------------------------------------------------------

def test_overgrown_job_blocks_what_a_flat_reservation_would_allow() -> None:
    """Host 2G; job A reserved 500M but uses 1.2G, so job B asking 1G must not be placed."""
    h = host("node1", mem="2G", slots=4)
    led = Ledger()
    led.open(1, "node1", 500 * M, {"slots": 1})
    led.report(1, "node1", int(1.2 * G))
    os_available = 2 * G - int(1.2 * G)  # what the OS reports with A running
    flat_free = h.mem_total - led.host_totals("node1").mem_reserved
    assert flat_free >= G  # a flat reservation count would have placed B
    cs = host_caps([h], led, {"node1": os_available})
    plan = schedule(cs, [job(2, mem="1G")], T0)
    assert plan.placements == []
    assert plan.reasons[2].startswith("mem: needs 1.0G, node1 has 819.2M available")


def test_unused_reservation_is_still_promised() -> None:
    """Job C reserved 1G and uses 50M; job D asking 1.5G waits (C may still grow into its 1G)."""
    h = host("node1", mem="2G", slots=4)
    led = Ledger()
    led.open(3, "node1", G, {"slots": 1})
    led.report(3, "node1", 50 * M)
    cs = host_caps([h], led, {"node1": 2 * G - 50 * M})
    assert cs["node1"].mem_available == G
    plan = schedule(cs, [job(4, mem="1.5G")], T0)
    assert plan.placements == []
    assert plan.reasons[4] == ("mem: needs 1.5G, node1 has 1.0G available for scheduling "
                               "(OS 2.0G - slack 974.0M)")
    # ... while a job that fits in what is really free goes.
    assert placed(schedule(cs, [job(5, mem="1G")], T0)) == {5: [("node1", 1)]}


# ---- rounds --------------------------------------------------------------------------------

def test_pending_order_is_queue_priority_then_id() -> None:
    jobs = [job(5, queue="low"), job(3, queue="high"), job(4, queue="normal"), job(1, queue="low"),
            job(2, queue="high", state=JobState.RUN), job(6, queue="unknown")]
    order = pending_order(jobs, {"high": 50, "normal": 30, "low": 10})
    assert [j.id for j in order] == [3, 4, 1, 5, 6]


def test_schedule_places_in_the_given_order_until_full() -> None:
    jobs = pending_order([job(3, queue="low"), job(2, queue="high"), job(1, queue="low")],
                         {"high": 50, "low": 10})
    plan = schedule(caps(cap("n1", slots=2)), jobs, T0)
    assert placed(plan) == {2: [("n1", 1)], 1: [("n1", 1)]}
    assert plan.reasons == {3: "slots: needs 1; the cluster has 0 free"}


def test_slots_and_mem_both_limit() -> None:
    cs = caps(cap("n1", mem="4G", slots=8))
    plan = schedule(cs, [job(i, mem="1G") for i in range(1, 7)], T0)
    assert sorted(placed(plan)) == [1, 2, 3, 4]
    assert plan.reasons[5].startswith("mem: needs 1.0G, n1 has 0B available")
    assert cs["n1"].slots_free == 4 and cs["n1"].slack == 4 * G  # the overlay was charged


def test_span_hosts_1_needs_one_host_with_every_slot() -> None:
    j = job(1, mem="100M", slots=4, resreq="span[hosts=1]")
    plan = schedule(caps(cap("n1", slots=2), cap("n2", slots=2)), [j], T0)
    assert plan.placements == [] and plan.reasons[1].startswith("slots: needs 4")
    plan = schedule(caps(cap("n1", slots=2), cap("n2", slots=4)), [j], T0)
    assert placed(plan) == {1: [("n2", 4)]}


def test_span_ptile_splits_across_hosts() -> None:
    j = job(1, mem="100M", slots=5, resreq="span[ptile=2]")
    cs = caps(cap("n1", slots=4), cap("n2", slots=4), cap("n3", slots=4))
    plan = schedule(cs, [j], T0)
    assert placed(plan) == {1: [("n1", 2), ("n2", 2), ("n3", 1)]}
    assert [a.mem for a in plan.placements[0][1]] == [100 * M] * 3  # /host: once per host
    # Two hosts are not enough for five slots at two per host.
    plan = schedule(caps(cap("n1", slots=4), cap("n2", slots=4)), [j], T0)
    assert plan.placements == [] and 1 in plan.reasons


def test_spread_without_span_when_no_single_host_has_room() -> None:
    j = job(1, mem="1G", slots=6, resreq="rusage[mem=1G/task]")
    cs = caps(cap("n1", slots=4), cap("n2", slots=4))
    plan = schedule(cs, [j], T0)
    assert placed(plan) == {1: [("n1", 4), ("n2", 2)]}
    assert [a.mem for a in plan.placements[0][1]] == [4 * G, 2 * G]
    assert never_fits(demand_of(6, j.req, {}), caps(cap("n1", slots=4), cap("n2", slots=4)).values()) is None


def test_ptile_remainder_may_go_to_a_small_host_seen_first() -> None:
    # The 1-slot host ranks first (most memory); it cannot take a chunk of 2 but can take the last 1.
    cs = caps(cap("a", slots=1, os_available="8G"), cap("b", slots=2, os_available="4G"))
    plan = schedule(cs, [job(1, mem="100M", slots=3, resreq="span[ptile=2]")], T0)
    assert placed(plan) == {1: [("a", 1), ("b", 2)]}


def test_spread_takes_only_as_many_slots_as_memory_allows() -> None:
    cs = caps(cap("a", slots=4, mem="8G"), cap("b", slots=4, mem="8G"))
    plan = schedule(cs, [job(1, mem=None, slots=4, resreq="rusage[mem=3G/task]")], T0)
    assert placed(plan) == {1: [("a", 2), ("b", 2)]}
    assert [a.mem for a in plan.placements[0][1]] == [6 * G, 6 * G]


# ---- sbatch -c: whole tasks per host ------------------------------------------------------------

def test_a_spread_job_keeps_each_tasks_slots_on_one_host() -> None:
    """-n 2 -c 2 (4 slots, tasks of 2) on hosts of 3 free slots: 2 + 2, never 3 + 1 (which split
    the second task's CPUs across hosts); explain or not, the same."""
    j = job(1, mem=None, slots=4, cpus_per_task=2)
    for explain in (True, False):
        plan = schedule(caps(cap("a", slots=3), cap("b", slots=3)), [j], T0, explain=explain)
        assert placed(plan) == {1: [("a", 2), ("b", 2)]}
    plain = job(2, mem=None, slots=4)  # without -c, slots are slots
    assert placed(schedule(caps(cap("a", slots=3), cap("b", slots=3)), [plain], T0)) == {2: [("a", 3), ("b", 1)]}


def test_memory_per_task_rounds_a_share_down_to_whole_tasks() -> None:
    j = job(1, mem=None, slots=4, resreq="rusage[mem=3G/task]", cpus_per_task=2)
    plan = schedule(caps(cap("a", slots=4, mem="9G"), cap("b", slots=4, mem="8G")), [j], T0)
    assert placed(plan) == {1: [("a", 2), ("b", 2)]}  # a's 9G holds 3 slots' memory: 1 whole task


def test_hosts_with_only_odd_slots_free_hold_a_job_of_tasks_of_two_when_they_can() -> None:
    j = job(1, mem=None, slots=4, cpus_per_task=2)
    plan = schedule(caps(cap("a", slots=3), cap("b", slots=1), cap("c", slots=1)), [j], T0)
    assert plan.placements == [] and plan.reasons[1]  # 2 on a, and nowhere for the second task
    assert never_fits(job_demand(j), caps(cap("a", slots=1), cap("b", slots=1)).values()).startswith(
        "no host could ever run it")


def test_the_leader_refuses_a_placement_that_splits_a_task_naming_it() -> None:
    d = job_demand(job(1, mem=None, slots=4, cpus_per_task=2))
    cs = caps(cap("a", slots=3), cap("b", slots=3))
    allocs = build_allocs(d, [("a", 3), ("b", 1)])
    assert check_placement(d, allocs, cs) == "tasks: a share of 3 slots on a splits a task of 2 slots (-c 2)"
    assert check_placement(d, build_allocs(d, [("a", 2), ("b", 2)]), cs) is None
    assert f_tasks(d, cs["b"], 1, False) == ("tasks: a share of 1 slots on b would split a task of 2 slots "
                                             "(-c 2: each host holds whole tasks)")


def test_a_ptile_that_is_no_multiple_of_the_task_is_never_placeable() -> None:
    j = job(1, mem=None, slots=4, resreq="span[ptile=3]", cpus_per_task=2)
    assert never_fits(job_demand(j), caps(cap("a", slots=8)).values()) == (
        "no host could ever run it: span[ptile=3] would split its tasks of 2 slots (-c 2): "
        "give a ptile that is a multiple of 2")


def test_select_filters_hosts() -> None:
    cs = caps(cap("n1", attrs={"type": "arm"}), cap("n2", attrs={"type": "x86"}))
    plan = schedule(cs, [job(1, resreq="select[type==x86]")], T0)
    assert placed(plan) == {1: [("n2", 1)]}
    plan = schedule(cs, [job(2, resreq="select[type==sparc]")], T0)
    assert plan.reasons[2] == 'select: no host matches type=="sparc"'


def test_select_on_available_mem() -> None:
    cs = caps(cap("n1", os_available="2G"), cap("n2", os_available="6G"))
    plan = schedule(cs, [job(1, mem="1G", resreq="select[mem>4G]")], T0)
    assert placed(plan) == {1: [("n2", 1)]}


@pytest.mark.parametrize("resreq,expect", [("", "n2"), ("order[mem]", "n2"), ("order[-mem]", "n1"),
                                           ("order[slots]", "n3"), ("order[-slots]", "n1")])
def test_order(resreq: str, expect: str) -> None:
    cs = caps(cap("n1", os_available="3G", slots=2), cap("n2", os_available="5G", slots=4),
              cap("n3", os_available="4G", slots=8))
    assert placed(schedule(cs, [job(1, resreq=resreq)], T0))[1] == [(expect, 1)]


def test_rank_key_ties_by_name() -> None:
    cs = [cap("b"), cap("a"), cap("c")]
    assert [h.name for h in sorted(cs, key=rank_key(demand()))] == ["a", "b", "c"]


@pytest.mark.parametrize("why", ["closed", "unavail"])
def test_closed_and_unavail_hosts_are_skipped(why: str) -> None:
    cs = caps(cap("n1", mem="64G", schedulable=why), cap("n2", mem="2G"))
    assert placed(schedule(cs, [job(1)], T0)) == {1: [("n2", 1)]}
    plan = schedule(caps(cap("n1", schedulable=why)), [job(2)], T0)
    assert plan.reasons[2] == "slots: needs 1; the cluster has 0 free"


def test_no_open_host_reason() -> None:
    # Free slots exist only on a closed host: the free-slot count already refuses the job.
    cs = caps(cap("n1", schedulable="closed"), cap("n2", slots=1, slots_free=1, schedulable="unavail"))
    assert "the cluster has 0 free" in schedule(cs, [job(1)], T0).reasons[1]


def test_identical_jobs_share_the_class_failure() -> None:
    cs = caps(cap("n1", mem="2G"), cap("n2", mem="2G"))
    jobs = [job(i, mem="1.5G") for i in range(1, 6)]
    plan = schedule(cs, jobs, T0)
    assert sorted(placed(plan)) == [1, 2]
    assert plan.reasons[3] == plan.reasons[4] == plan.reasons[5]
    assert plan.reasons[3].startswith("mem: needs 1.5G")


def test_smaller_job_still_fits_after_a_larger_class_failed() -> None:
    cs = caps(cap("n1", mem="2G"))
    plan = schedule(cs, [job(1, mem="1.5G"), job(2, mem="1.5G"), job(3, mem="500M")], T0)
    assert sorted(placed(plan)) == [1, 3] and 2 in plan.reasons


def test_a_job_that_fits_nowhere_now_keeps_a_reason() -> None:
    cs = caps(cap("n1", mem="8G", os_available="1G"), cap("n2", mem="8G", os_available="2G"))
    plan = schedule(cs, [job(1, mem="4G")], T0)
    assert plan.placements == []
    # The reason names the closest host, and the job is not "never".
    assert plan.reasons[1] == ("mem: needs 4.0G, n2 has 2.0G available for scheduling "
                               "(OS 2.0G - slack 0B)")
    assert never_fits(demand("4G"), cs.values()) is None


def test_cluster_wide_resources() -> None:
    jobs = [job(i, resreq="rusage[mem=1G:lic=1]", resources=SITE) for i in (1, 2)]
    d = demand_of(1, jobs[0].req, {"lic": 4})
    assert d.cluster == (("lic", 1),) and d.virtual == ()
    cs = caps(cap("n1"))
    plan = schedule(cs, jobs, T0, cluster_free={"lic": 1}, cluster_names=["lic"])
    assert placed(plan) == {1: [("n1", 1)]}
    assert plan.reasons[2] == "lic: needs 1; the cluster has 0 free"
    assert plan.placements[0][1][0].virtual == {"slots": 1}  # cluster-wide: not charged on the host


def test_host_virtual_resources_are_charged() -> None:
    cs = caps(cap("n1", virtual_free={"gpu": 1}), cap("n2", virtual_free={"gpu": 1}))
    jobs = [job(i, resreq="rusage[mem=1G:gpu=1]", resources=SITE) for i in (1, 2, 3)]
    plan = schedule(cs, jobs, T0)
    assert sorted(placed(plan)) == [1, 2]
    assert plan.reasons[3].startswith("gpu: needs 1")
    assert plan.placements[0][1][0].virtual == {"slots": 1, "gpu": 1}


# ---- never_fits ----------------------------------------------------------------------------

NEVER = [
    # demand, hosts, never?
    (demand("4G"), [cap("n1", mem="8G")], False),
    (demand("16G"), [cap("n1", mem="8G"), cap("n2", mem="12G")], True),
    (demand("1G", slots=8, resreq="span[hosts=1]"), [cap("n1", slots=4), cap("n2", slots=4)], True),
    (demand("1G", slots=8), [cap("n1", slots=4), cap("n2", slots=4)], False),  # may spread
    (demand("1G", slots=9), [cap("n1", slots=4), cap("n2", slots=4)], True),   # not even spread
    (demand("1G", slots=4, resreq="span[ptile=4]"), [cap("n1", slots=2), cap("n2", slots=2)], True),
    (demand("1G", slots=4, resreq="span[ptile=2]"), [cap("n1", slots=2), cap("n2", slots=2)], False),
    (demand("1G", slots=5, resreq="span[ptile=2]"), [cap("n1", slots=2), cap("n2", slots=2)], True),
    (demand("1G", slots=5, resreq="span[ptile=2]"), [cap("n1", slots=1), cap("n2", slots=2), cap("n3", slots=2)],
     False),
    (demand(None, slots=4, resreq="rusage[mem=3G/task]"), [cap("n1", mem="8G"), cap("n2", mem="8G")], False),
    (demand(None, slots=4, resreq="rusage[mem=5G/task]"), [cap("n1", mem="8G"), cap("n2", mem="8G")], True),
    (demand(None, slots=2, resreq="rusage[mem=6G/task]"), [cap("n1", slots=4, mem="8G")], True),
    # Busy hosts do not matter: never_fits judges empty hosts.
    (demand("4G"), [cap("n1", mem="8G", os_available=0, slots_free=0)], False),
]


@pytest.mark.parametrize("d,hosts,never", NEVER)
def test_never_fits(d: Demand, hosts, never: bool) -> None:
    why = never_fits(d, hosts)
    assert (why is not None) == never
    if never:
        assert why.startswith("no host could ever run it")


def test_never_fits_message() -> None:
    why = never_fits(demand("16G"), [cap("n1", mem="8G", slots=4)])
    assert why == ("no host could ever run it: needs 1 slot(s) and 16.0G per host; "
                   "the largest host has 4 slots and 8.0G")


def test_never_fits_leaves_unavail_hosts_out_and_says_so() -> None:
    hosts = [cap("old", mem="24G", slots=8, schedulable="unavail"), cap("n1", mem="8G", slots=2),
             cap("n2", mem="4G", slots=2, schedulable="closed")]  # closed may open again: it counts
    why = never_fits(demand("16G"), hosts)
    assert why == ("no host could ever run it: needs 1 slot(s) and 16.0G per host; "
                   "the largest host has 2 slots and 8.0G (1 unavail host left out: old)")
    assert never_fits(demand("32G"), hosts[:1]) is None  # every host unavail: nothing says "never"


# ---- check_placement: the same fit rule, used by the controller ----------------------------

def test_check_placement() -> None:
    d = demand("1G", slots=2)
    cs = caps(cap("n1", slots=2, mem="4G"))
    assert check_placement(d, [alloc("n1", 2)], cs) is None
    assert check_placement(d, [alloc("n1", 1)], cs) == "placement gives 1 slots, job needs 2"
    assert check_placement(d, [alloc("nx", 2)], cs) == "unknown host nx"
    cs["n1"].slack = 3.5 * G
    assert check_placement(d, [alloc("n1", 2)], cs).startswith("mem: needs 1.0G")


SPECS = st.tuples(
    st.integers(1, 6),                                              # slots
    st.sampled_from([None, "100M", "1G", "3G"]),                    # mem
    st.sampled_from(["", "span[hosts=1]", "span[ptile=2]", "order[-mem]", "rusage[mem=500M/task]",
                     "select[ncpus>=2]", "rusage[mem=2G/task] span[ptile=2]",
                     "rusage[mem=1500M/task] order[-slots]"]),
)
CAPS = st.lists(st.tuples(st.integers(1, 6), st.integers(1, 8), st.integers(0, 8), st.booleans(),
                          st.integers(1, 4)), min_size=1, max_size=4)


def build_caps(raw) -> dict:
    return caps(*(cap(f"n{i}", mem=m * G, slots=s, os_available=min(m, o) * G,
                      schedulable=None if ok else "closed", attrs={"ncpus": n})
                  for i, (s, m, o, ok, n) in enumerate(raw)))


@settings(max_examples=120, deadline=None)
@given(CAPS, st.lists(SPECS, min_size=1, max_size=8))
def test_schedule_agrees_with_check_placement_and_never_fits(raw_caps, specs) -> None:
    jobs = [job(i + 1, mem=m, slots=s, resreq=r) for i, (s, m, r) in enumerate(specs)]
    base = build_caps(raw_caps)
    overlay = copy.deepcopy(base)
    plan = schedule(overlay, jobs, T0)
    assert set(plan.reasons).isdisjoint(dict(plan.placements))
    assert set(plan.reasons) | set(dict(plan.placements)) == {j.id for j in jobs}
    # The controller's re-check, replayed in order with the same overlay charging, accepts every placement.
    check = copy.deepcopy(base)
    by_id = {j.id: j for j in jobs}
    for jid, allocs in plan.placements:
        d = demand_of(by_id[jid].spec.slots, by_id[jid].req, {})
        assert check_placement(d, allocs, check) is None
        assert len({a.host for a in allocs}) == len(allocs)
        if d.span_hosts == 1:
            assert len(allocs) == 1
        if d.ptile:
            assert all(a.slots <= d.ptile for a in allocs)
        for a in allocs:
            check[a.host].charge(a.slots, a.mem, a.virtual.items())
    for h in check.values():
        assert h.slots_free >= 0 and h.mem_available >= min(0, base[h.name].mem_available)
    # "never" is never said of a job the empty, open cluster could run.
    empty = {n: cap(n, mem=h.mem_total, slots=h.slots_total, attrs=h.attrs) for n, h in base.items()}
    for j in jobs:
        d = demand_of(j.spec.slots, j.req, {})
        never = never_fits(d, empty.values())
        runs = schedule(copy.deepcopy(empty), [j], T0).placements != []
        if never is not None:
            assert not runs
        elif d.select is None:  # and whatever never_fits lets through, an empty cluster does run
            assert runs, (d, list(empty.values()))


# ---- the leader builds every allocation from the job's own request -------------------------

def test_build_allocs_gives_what_the_scheduler_gives() -> None:
    d = demand("1G", slots=3, resreq="rusage[mem=1G:gpu=1] span[ptile=2]")
    assert build_allocs(d, [("n1", 2), ("n2", 1)]) == [
        Alloc("n1", 2, mem=G, virtual={"slots": 2, "gpu": 1}), Alloc("n2", 1, mem=G, virtual={"slots": 1, "gpu": 1})]


@pytest.mark.parametrize("resreq,slots,allocs,why", [
    ("", 1, [Alloc("n2", 1, mem=1, virtual={"slots": 1})],
     "allocation on n2: mem 1B, the job's request gives 1.0G"),
    ("rusage[mem=1G:gpu=1]", 1, [Alloc("n1", 1, mem=G, virtual={"slots": 1})],
     "allocation on n1: virtual {'slots': 1}, the job's request gives {'gpu': 1, 'slots': 1}"),
    ("rusage[mem=1G:gpu=1]", 1, [Alloc("n1", 1, mem=G, virtual={"slots": 1, "gpu": 1, "lic": 0})],
     "allocation on n1: virtual {'gpu': 1, 'lic': 0, 'slots': 1}, the job's request gives {'gpu': 1, 'slots': 1}"),
    ("span[hosts=1]", 2, [Alloc("n1", 1, mem=G, virtual={"slots": 1}), Alloc("n2", 1, mem=G, virtual={"slots": 1})],
     "span[hosts=1]: the placement uses 2 hosts"),
    ("span[ptile=2]", 4, [Alloc("n1", 3, mem=G, virtual={"slots": 3}), Alloc("n2", 1, mem=G, virtual={"slots": 1})],
     "span[ptile=2]: a share of 3 slots on n1"),
    ("span[ptile=2]", 3, [Alloc("n1", 1, mem=G, virtual={"slots": 1}), Alloc("n2", 1, mem=G, virtual={"slots": 1}),
                          Alloc("n3", 1, mem=G, virtual={"slots": 1})],
     "span[ptile=2]: 3 slots take 2 hosts, the placement uses 3"),
    ("", 1, [Alloc("n1", 1, mem=G, virtual={"slots": 1}), Alloc("n1", 0, mem=G, virtual={"slots": 0})],
     "a placement names each host once and gives each at least one slot"),
])
def test_check_placement_refuses_sizes_and_shapes_the_request_does_not_give(resreq, slots, allocs, why) -> None:
    d = demand("1G", slots=slots, resreq=resreq)
    cs = caps(cap("n1", virtual_free={"gpu": 4}), cap("n2", virtual_free={"gpu": 4}), cap("n3"))
    assert check_placement(d, allocs, cs) == why
    assert allocation_reason(d, allocs) == why  # what the audit applies, without the hosts' figures


@pytest.mark.parametrize("view,available", [("xce", 8 - 1 - 3), ("lsf", 8 - 1 - 4), ("flat", 8 - 4)])
def test_host_caps_applies_the_memory_view(view: str, available: int) -> None:
    # one job reserved 4G and uses 1G: OS-available is 7G, slack 3G
    led = Ledger()
    led.open(1, "n1", 4 * G, {"slots": 1})
    led.report(1, "n1", 1 * G)
    h = host_caps([host("n1", mem="8G", slots=4)], led, {"n1": 7 * G}, MEM_VIEWS[view])["n1"]
    assert h.mem_available == available * G
    assert host_caps([host("n1", mem="8G", slots=4)], led, {"n1": 7 * G})["n1"].mem_available == 4 * G


@settings(max_examples=200, deadline=None)
@given(CAPS, SPECS, st.integers(0, 7), st.booleans(), st.integers(-2, 3))
def test_fits_is_fit_reason_without_the_words(raw_caps, spec, slots, first, slack_gb) -> None:
    s, m, r = spec
    d = demand_of(s, job(1, mem=m, slots=s, resreq=r).req, {})
    for h in build_caps(raw_caps).values():
        h.slack = max(0, slack_gb) * G
        assert fits(d, h, slots, first) == (fit_reason(d, h, slots, first) is None)


# ---- explain=False: the simulator's round places exactly as the daemons' -------------------

PLAIN = st.tuples(
    st.integers(1, 12),                                             # slots (wider than most hosts)
    st.sampled_from(["", "100M/task", "1G/task", "2G/task", "3G/task", "1G/host"]),  # mem (per task: plain)
    st.sampled_from(["", "", "", "span[hosts=1]", "order[-slots]", "select[ncpus>=2]", "span[ptile=2]"]),
    st.sampled_from([None, 60, 600, 6000]),                        # run limit (backfill's figure)
    st.sampled_from(["alice", "bob"]),
)


def _bf_releases(raw_caps, ends) -> list[Release]:
    return [Release(T0 + e, f"n{i}", 1, 0, G) for i, e in zip(range(len(raw_caps)), ends) if e]


def _round_of(raw_caps, specs, ends, rules, limit, explain: bool):
    jobs = [job(i + 1, mem=None, slots=s, resreq=f"rusage[mem={m}] {r}" if m else r, run_limit=t, user=u)
            for i, (s, m, r, t, u) in enumerate(specs)]
    book = LimitBook.build((Limit("two_jobs", "user", jobs=2),), ()) if limit else None
    plan = schedule(build_caps(raw_caps), jobs, T0, backfill=rules, releases=_bf_releases(raw_caps, ends),
                    limits=book, explain=explain)
    return plan.placements, [(r.job_id, r.start, r.allocs) for r in plan.reservations], explain or not plan.reasons


@settings(max_examples=400, deadline=None)
@given(CAPS, st.lists(PLAIN, min_size=1, max_size=12), st.lists(st.sampled_from([0, 30, 300, 3000]), max_size=4),
       st.sampled_from([BackfillRules(mode="off"), BackfillRules(), BackfillRules(mode="conservative", depth=3)]),
       st.booleans())
def test_explain_false_places_and_reserves_exactly_as_the_daemons_round(raw_caps, specs, ends, rules, limit) -> None:
    # The short cuts explain=False takes (no words, a failed plain demand rules out every
    # wider and hungrier one, no look at a job it could only hold) never change a placement
    # or a reservation; it gives no reasons.
    assert _round_of(raw_caps, specs, ends, rules, limit, False) == _round_of(raw_caps, specs, ends, rules, limit, True)


def test_a_failed_demand_rules_out_wider_hungrier_ones_without_a_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    from xce.core import placement
    walked: list[int] = []
    real = placement._place_one
    monkeypatch.setattr(placement, "_place_one", lambda d, *a: walked.append(d.slots) or real(d, *a))
    two = lambda: caps(cap("n1", slots=4, mem="4G"), cap("n2", slots=4, mem="4G"))  # noqa: E731
    # (5 x 2G) fails: each host holds 2 such slots.  (6 x 3G) is wider and hungrier: held unwalked;
    # (2 x 1G) and (5 x 1G) are not (less memory per slot) and place.
    jobs = [job(1, mem="2G/task", slots=5), job(2, mem="3G/task", slots=6), job(3, mem="1G/task", slots=2),
            job(4, mem="1G/task", slots=5)]
    plan = schedule(two(), jobs, T0, explain=False)
    assert [jid for jid, _ in plan.placements] == [3, 4] and walked == [5, 2, 5]
    assert plan.reasons == {}
    # the daemons' round, with reasons, walks it, decides the same and says why
    walked.clear()
    plan = schedule(two(), jobs, T0)
    assert [jid for jid, _ in plan.placements] == [3, 4] and walked == [5, 6, 2, 5]
    assert plan.reasons[2] == "slots: needs 6, n1 has 4 free of 4"


def test_a_quiet_round_passes_over_the_later_jobs_of_a_failed_class(monkeypatch: pytest.MonkeyPatch) -> None:
    from xce.core import placement
    asked: list[int] = []
    real = placement._Round.place
    monkeypatch.setattr(placement._Round, "place", lambda self, j, p: asked.append(j.id) or real(self, j, p))
    two = lambda: caps(cap("n1", slots=4, mem="4G"), cap("n2", slots=4, mem="4G"))  # noqa: E731
    # jobs 1, 3 and 5 are one class (5 x 2G: each host holds 2 such slots); 2 and 4 place, 6 finds no slot left
    jobs = [job(1, mem="2G/task", slots=5), job(2, mem="1G/task", slots=2), job(3, mem="2G/task", slots=5),
            job(4, mem="1G/task", slots=6), job(5, mem="2G/task", slots=5), job(6, mem="1M/task", slots=1)]
    off = BackfillRules(mode="off")  # no reservation to sweep for (the simulator's greedy policies)
    plan = schedule(two(), jobs, T0, backfill=off, explain=False)
    assert [jid for jid, _ in plan.placements] == [2, 4] and asked == [1, 2, 4]
    asked.clear()
    daemons = schedule(two(), jobs, T0, backfill=off)  # the daemons' round asks each job, and decides the same
    assert [jid for jid, _ in daemons.placements] == [2, 4] and asked == [1, 2, 3, 4, 5, 6]


def test_a_job_wider_than_every_host_keeps_the_reason_of_the_one_host_walk() -> None:
    cs = caps(cap("n1", slots=2, mem="8G", slack="7G"), cap("n2", slots=2, mem="8G", slack="7G"))
    plan = schedule(cs, [job(1, mem="1G/task", slots=3)], T0)
    assert plan.reasons == {1: "slots: needs 3, n1 has 2 free of 2"}


def test_an_easy_round_bounds_and_skips_vetoes_as_a_greedy_one_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a reservation in the round (the simulator's EASY rounds): a plain class short of
    capacity fails without a walk, though a veto might have turned hosts away too, and a job
    that ends before the reservation starts is asked no veto at all."""
    from xce.core import placement
    from xce.core.sched import backfill
    tried: list[int] = []
    vetoes: list[int] = []
    real_fits, real_veto = placement.fits, backfill.Backfill.veto
    monkeypatch.setattr(placement, "fits", lambda d, *a: tried.append(d.mem_task) or real_fits(d, *a))
    monkeypatch.setattr(backfill.Backfill, "veto", lambda self, *a: vetoes.append(1) or real_veto(self, *a))
    two = lambda: caps(cap("n1", slots=4, mem="4G", slots_free=1), cap("n2", slots=4, mem="4G", slots_free=2))  # noqa: E731
    ends = [Release(T0 + 600, "n1", 3, 0, 3 * G)]  # n1's three busy slots come back in 10 minutes
    jobs = [job(1, mem="100M/task", slots=4, run_limit=3600),  # blocked: reserved on n1 at T0+600
            job(2, mem="3G/task", slots=3, run_limit=3600),    # short of capacity (2 slots of 3G), with a reservation
            job(3, mem="100M/task", slots=1, run_limit=60),    # ends before the reservation: no veto
            job(4, mem="200M/task", slots=1, run_limit=3600)]  # asks the veto (on n2: nothing reserved there)
    for explain in (False, True):
        tried.clear()
        vetoes.clear()
        plan = schedule(two(), jobs, T0, releases=ends, explain=explain)
        assert [(r.job_id, [a.host for a in r.allocs]) for r in plan.reservations] == [(1, ["n1"])]
        assert [(jid, [a.host for a in al]) for jid, al in plan.placements] == [(3, ["n1"]), (4, ["n2"])]
        if not explain:  # job 2 tried on no host; job 3 asks no veto
            assert 3 * G not in tried and len(vetoes) == 1


def test_an_easy_round_bounds_a_class_by_what_the_reservation_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain job that would overlap a reservation can take no more of a host than the
    reservation leaves there: short with that, it fails on the veto without a walk."""
    from xce.core import placement
    tried: list[int] = []
    real_fits = placement.fits
    monkeypatch.setattr(placement, "fits", lambda d, *a: tried.append(d.mem_task) or real_fits(d, *a))
    two = lambda: caps(cap("n1", slots=4, mem="4G", slots_free=1), cap("n2", slots=4, mem="4G", slots_free=2))  # noqa: E731
    ends = [Release(T0 + 600, "n1", 3, 0, 3 * G)]
    jobs = [job(1, mem="100M/task", slots=4, run_limit=3600),  # reserved all of n1 from T0+600
            job(2, mem="300M/task", slots=3, run_limit=3600)]  # 3 slots free now, 2 beside the reservation
    for explain in (True, False):
        tried.clear()
        plan = schedule(two(), jobs, T0, releases=ends, explain=explain)
        assert [r.job_id for r in plan.reservations] == [1] and plan.placements == []
        assert (300 << 20 in tried) == explain
        if explain:
            assert plan.reasons[2].startswith("backfill: would delay job 1"), plan.reasons[2]
