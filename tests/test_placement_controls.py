"""Placement controls alone (issue 16 item 6), on cluster states from builders: exclusive jobs (-x),
per-queue host lists, host attributes in select[]."""

from __future__ import annotations

import pytest
from builders import T0, alloc, cap, caps, host, job, queue

from xce.cli.fmt import job_long
from xce.compat.lsf_fmt import long_listing
from xce.core.accounting import Ledger
from xce.core.errors import ResReqError
from xce.core.model import JobState
from xce.core.hostgroups import resolve
from xce.core.placement import (check_placement, demand_of, host_caps, job_demand, job_hosts, queue_host_sets,
                                schedule)
from xce.core.resources import ResourceDef, catalog
from xce.core.resreq import parse_resreq
from xce.core.sched.backfill import BackfillRules, Release, releases
from xce.core.views import job_view


def placed(plan) -> dict[int, list[str]]:
    return {jid: [a.host for a in allocs] for jid, allocs in plan.placements}


def xjob(id: int, **kw):
    return job(id, exclusive=True, **kw)


# ---- exclusive: (name, hosts as (name, jobs running, held by an exclusive job), pending, placed, reasons)

EXCLUSIVE = [
    ("an exclusive job skips a host that runs a job",
     [("node1", 1, False), ("node2", 0, False)], [xjob(1)], {1: ["node2"]}, {}),
    ("an exclusive job waits while every host runs a job, and says why",
     [("node2", 1, False)], [xjob(1)], {}, {1: "exclusive: node2 runs 1 job"}),
    ("no other job lands beside a running exclusive job",
     [("node1", 1, True)], [job(1)], {}, {1: "exclusive: node1 runs an exclusive job"}),
    ("one exclusive job per host in a round, and nothing beside it",
     [("node1", 0, False), ("node2", 0, False)], [xjob(1), xjob(2), job(3)],
     {1: ["node1"], 2: ["node2"]}, {3: "exclusive"}),
    ("a plain job placed first keeps an exclusive job off its host",
     [("node1", 0, False), ("node2", 0, False)], [job(1), xjob(2)], {1: ["node1"], 2: ["node2"]}, {}),
    ("an exclusive job spread over hosts takes only empty ones",
     [("node1", 0, False), ("node2", 2, False), ("node3", 0, False)], [xjob(1, slots=8, mem=None)],
     {1: ["node1", "node3"]}, {}),
]


@pytest.mark.parametrize("name, hosts, pending, expect, reasons", EXCLUSIVE, ids=[c[0] for c in EXCLUSIVE])
def test_exclusive(name: str, hosts, pending, expect, reasons) -> None:
    cs = caps(*(cap(n, jobs=k, held=held, slots_free=4 - k) for n, k, held in hosts))
    plan = schedule(cs, pending, T0)
    assert placed(plan) == expect
    for jid, words in reasons.items():
        assert words in plan.reasons[jid]


def test_the_leaders_recheck_refuses_a_host_an_exclusive_job_holds_or_shares() -> None:
    led = Ledger()
    led.open(1, "node1", 0, {"slots": 1})
    jobs = {1: job(1, state=JobState.RUN, exclusive=True)}
    cs = host_caps([host("node1"), host("node2")], led, {}, jobs=jobs)
    assert (cs["node1"].jobs, cs["node1"].held, cs["node2"].jobs) == (1, True, 0)
    assert check_placement(job_demand(job(2)), [alloc("node1")], cs) == "exclusive: node1 runs an exclusive job"
    assert check_placement(job_demand(job(2)), [alloc("node2")], cs) is None
    jobs[1] = job(1, state=JobState.RUN)  # the same host with a plain job: only an exclusive one is refused
    cs = host_caps([host("node1")], led, {}, jobs=jobs)
    assert check_placement(job_demand(job(2)), [alloc("node1")], cs) is None
    assert check_placement(job_demand(xjob(3)), [alloc("node1")], cs) == "exclusive: node1 runs 1 job"


def test_an_exclusive_job_is_reserved_for_when_its_host_empties_and_nothing_backfills_onto_it() -> None:
    running = job(9, state=JobState.RUN, start_time=T0, run_limit=600, allocs=[alloc("node1")])
    rels = releases([running], BackfillRules(), T0)
    assert rels == [Release(T0 + 600, "node1", 1, 0, alloc().mem, (), False)]
    cs = caps(cap("node1", jobs=1, slots_free=3))
    plan = schedule(cs, [xjob(1, mem=None), job(2, mem=None, run_limit=3600), job(3, mem=None, run_limit=60)],
                    T0, releases=rels)
    assert "exclusive: node1 runs 1 job; reserved to start at" in plan.reasons[1]
    assert plan.reservations[0].exclusive
    # job 2 would still run at the reservation's start: held off; job 3 ends before it: backfills
    assert placed(plan) == {3: ["node1"]} and "backfill: would delay job 1" in plan.reasons[2]


def test_the_end_of_an_exclusive_job_frees_its_host_for_others() -> None:
    running = job(9, state=JobState.RUN, start_time=T0, run_limit=600, exclusive=True, allocs=[alloc("node1")])
    cs = caps(cap("node1", jobs=1, held=True, slots_free=3))
    plan = schedule(cs, [job(1, slots=4, mem=None)], T0, releases=releases([running], BackfillRules(), T0))
    assert "reserved to start at" in plan.reasons[1]


# ---- per-queue host lists (LSF HOSTS, host groups resolved at config load) --------------------

SHORT = {"short": resolve(["node1", "node2"], {})}


def test_a_queue_with_a_host_list_places_only_on_its_hosts() -> None:
    cs = caps(cap("node3", mem="16G"), cap("node1"), cap("node2", slots_free=0))
    plan = schedule(cs, [job(1, queue="short"), job(2, queue="short"), job(3)], T0, queue_hosts=SHORT)
    # node3 ranks first (most memory): only job 3, of a queue without a list, may take it
    assert placed(plan) == {1: ["node1"], 2: ["node1"], 3: ["node3"]}


def test_a_queue_whose_hosts_are_full_waits_though_others_are_free() -> None:
    cs = caps(cap("node1", slots_free=0), cap("node3"))
    plan = schedule(cs, [job(1, queue="short")], T0, queue_hosts=SHORT)
    assert placed(plan) == {} and plan.reasons[1].startswith("slots: needs 1, node1 has 0 free")


@pytest.mark.parametrize("hosts, reason", [
    ([cap("node3")], "queue short: none of its hosts (node1 node2) has registered"),
    ([cap("node1", schedulable="closed"), cap("node3")], "queue short: no host is open (closed)"),
])
def test_a_queue_without_a_usable_host_says_so(hosts, reason) -> None:
    plan = schedule(caps(*hosts), [job(1, queue="short")], T0, queue_hosts=SHORT)
    assert plan.reasons[1] == reason


def test_the_leaders_recheck_refuses_a_host_outside_the_queues_list() -> None:
    j = job(1, queue="short")
    sets = queue_host_sets([queue("short", hosts=("node1", "node2")), queue("normal")])
    assert sets == SHORT
    d = demand_of(1, j.req, {}, hosts=job_hosts(j, sets))
    cs = caps(cap("node1"), cap("node3"))
    assert check_placement(d, [alloc("node3")], cs) == "queue short: node3 is not in its hosts"
    assert check_placement(d, [alloc("node1")], cs) is None
    assert job_hosts(job(2), sets) is None  # normal: any host
    every_but = queue_host_sets([queue("short", hosts_not=("node3",))])["short"]
    assert "node9" in every_but and "node3" not in every_but


def test_preemption_looks_for_room_on_the_queues_hosts_only() -> None:
    from xce.core.sched.preempt import fitter

    fits = fitter(T0, queue_hosts=SHORT)
    assert fits(job(1, queue="short"), caps(cap("node3"))) is None
    assert [a.host for a in fits(job(1, queue="short"), caps(cap("node3"), cap("node2")))] == ["node2"]


# ---- host attributes in select[]: type, model and the site's own (worker.attrs) -------------

ATTRS = catalog({"gpu_model": ResourceDef("gpu_model", "attribute", "string")})


def test_select_on_type_and_a_site_attribute_carried_at_registration() -> None:
    hosts = [host("a", attrs={"type": "X86_64", "gpu_model": "v100"}), host("b", attrs={"type": "X86_64"}),
             host("c", attrs={"type": "X86_64", "gpu_model": "a100"}), host("d", attrs={"gpu_model": "a100"})]
    cs = host_caps(hosts, Ledger(), {})
    want = "select[type==X86_64 && gpu_model==a100]"
    j = job(1, resreq=want, resources=ATTRS)
    plan = schedule(cs, [j, job(2, resreq="select[gpu_model]", resources=ATTRS)], T0)
    assert placed(plan)[1] == ["c"]
    assert placed(plan)[2][0] in {"a", "c", "d"}  # b lacks the attribute: select[gpu_model] is false there
    assert check_placement(job_demand(j), [alloc("a")], cs) == f"select: a does not match {j.req.select}"
    plan = schedule(host_caps(hosts[:2], Ledger(), {}), [j], T0)
    assert plan.reasons[1] == f"select: no host matches {j.req.select}"


def test_an_attribute_declared_nowhere_is_refused_at_submit_as_lsf_does() -> None:
    with pytest.raises(ResReqError, match="unknown resource 'gpu_modle'"):
        parse_resreq("select[gpu_modle==a100]", ATTRS)
    with pytest.raises(ResReqError, match="unknown resource 'gpu_model'"):
        parse_resreq("select[gpu_model==a100]")  # not declared by this site
    with pytest.raises(ResReqError):
        parse_resreq("rusage[gpu_model=1]", ATTRS)  # an attribute is not consumed


NUMERIC = catalog({"cores": ResourceDef("cores", "attribute", "count"),
                   "arch": ResourceDef("arch", "attribute", "string")})


def test_a_numeric_site_attribute_compares_as_a_number_in_select() -> None:
    """select[cores>8 && ncpus>=1]: a numeric site attribute (worker.attrs cores = 16) compares
    numerically, as LSF's site numeric resources do; a host that lacks it does not match."""
    hosts = [host("a", attrs={"cores": 4, "arch": "zen4"}), host("b", attrs={"cores": 16}), host("c")]
    j = job(1, resreq="select[cores>8 && ncpus>=1]", resources=NUMERIC)
    assert placed(schedule(host_caps(hosts, Ledger(), {}), [j], T0))[1] == ["b"]
    k = job(2, resreq="select[cores>=4] order[cores]", resources=NUMERIC)
    assert placed(schedule(host_caps(hosts, Ledger(), {}), [k], T0))[2] == ["b"]  # the most cores first
    plan = schedule(host_caps(hosts[:1], Ledger(), {}), [j], T0)
    assert plan.reasons[1] == f"select: no host matches {j.req.select}"


def test_a_string_attribute_compared_with_less_or_more_is_refused_naming_it() -> None:
    with pytest.raises(ResReqError, match="'>' cannot compare string attribute 'arch'"):
        parse_resreq("select[arch>zen3]", NUMERIC)
    with pytest.raises(ResReqError, match="'cores' is numeric; expected a number, found many"):
        parse_resreq("select[cores==many]", NUMERIC)
    assert parse_resreq("select[cores>=8 && arch==zen4]", NUMERIC).select == "cores>=8 && arch==\"zen4\""


def test_an_exclusive_job_says_so_in_xce_jobs_l_and_bjobs_l() -> None:
    """-x travels to the views: `xce jobs -l` and bjobs -l (LSF: "..., Exclusive Execution;")."""
    led = Ledger()
    alone, plain = job_view(xjob(1), led), job_view(job(2), led)
    assert alone.exclusive and not plain.exclusive
    assert "Exclusive execution" in job_long(alone, T0) and "Exclusive" not in job_long(plain, T0)
    assert "Exclusive Execution;" in long_listing(alone) and "Exclusive" not in long_listing(plain)
