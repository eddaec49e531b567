"""Backfill alone: reservations for blocked jobs, and lower jobs that may or may not start beside them."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from builders import T0, alloc, b, cap, caps, host, job

from xce.core.accounting import Ledger
from xce.core.model import JobState
from xce.core.placement import host_caps, schedule
from xce.core.sched.backfill import BackfillRules, Release, ReleaseBook, releases, when

EASY = BackfillRules()
OFF = BackfillRules(mode="off")
CONSERVATIVE = BackfillRules(mode="conservative", depth=2)
FCFS = BackfillRules(mode="fcfs")


def rel(host: str, end: float, slots: int, mem: str | int = 0) -> Release:
    """A running job on ``host`` ending at T0 + ``end``: ``slots`` and an unreported reservation ``mem``."""
    return Release(T0 + end, host, slots, 0, b(mem))


def placed(plan) -> dict[int, list[str]]:
    return {jid: [a.host for a in allocs] for jid, allocs in plan.placements}


def wide(id: int, slots: int = 4, **kw):
    return job(id, mem=None, slots=slots, resreq="span[hosts=1]", **kw)


def small(id: int, run: float | None, slots: int = 1, mem: str | None = None, **kw):
    return job(id, mem=mem, slots=slots, resreq="span[hosts=1]", run_limit=run, **kw)


# ---- the scenarios: (name, rules, hosts, releases, pending, placed, reasons that must appear) --

CASES = [
    ("greedy without backfill: the wide job waits, both small ones start",
     OFF, [cap("n1", slots=4, slots_free=2)], [rel("n1", 600, 2)],
     [wide(1), small(2, 300), small(3, 3600)], {2: ["n1"], 3: ["n1"]}, {1: "slots: needs 4"}),
    ("EASY: a short job backfills, a long one and one without a run limit do not",
     EASY, [cap("n1", slots=4, slots_free=2)], [rel("n1", 600, 2)],
     [wide(1), small(2, 300), small(3, 3600), small(4, None)], {2: ["n1"]},
     {1: "reserved to start at", 3: "backfill: would delay job 1", 4: "backfill: would delay job 1"}),
    ("EASY: a long job that fits beside the reservation starts",
     EASY, [cap("n1", slots=8, slots_free=4)], [rel("n1", 600, 4)],
     [wide(1, slots=6), small(2, 3600, slots=2), small(3, 3600, slots=2)], {2: ["n1"]},
     {3: "backfill: would delay job 1"}),
    ("EASY: another host is not held",
     EASY, [cap("n1", slots=4, slots_free=2), cap("n2", slots=2)], [rel("n1", 600, 2)],
     [wide(1), small(2, 3600), small(3, 3600), small(4, 3600)], {2: ["n2"], 3: ["n2"]},
     {4: "backfill: would delay job 1"}),
    ("EASY: only the first blocked job holds a reservation",
     EASY, [cap("n1", slots=4, slots_free=0), cap("n2", slots=4, slots_free=2)],
     [rel("n1", 600, 4), rel("n2", 900, 2)],
     [wide(1), wide(2), small(3, 3600, slots=2)], {3: ["n2"]}, {1: "on n1", 2: "slots: needs 4"}),
    ("conservative: the top two hold reservations, so the long job may not delay the second",
     CONSERVATIVE, [cap("n1", slots=4, slots_free=0), cap("n2", slots=4, slots_free=2)],
     [rel("n1", 600, 4), rel("n2", 900, 2)],
     [wide(1), wide(2), small(3, 3600, slots=2), small(4, 300, slots=2)], {4: ["n2"]},
     {1: "on n1", 2: "on n2", 3: "backfill: would delay job 2"}),
    ("strict FCFS: the wide job waits and holds both small ones, however short",
     FCFS, [cap("n1", slots=4, slots_free=2)], [rel("n1", 600, 2)],
     [small(2, 300), wide(1), small(3, 300), small(4, None)], {2: ["n1"]},
     {1: "slots: needs 4", 3: "fcfs: waiting behind job 1", 4: "fcfs: waiting behind job 1"}),
    ("no known end: no reservation, greedy as before",
     EASY, [cap("n1", slots=4, slots_free=2)], [],
     [wide(1), small(2, 3600)], {2: ["n1"]}, {1: "slots: needs 4"}),
]


@pytest.mark.parametrize("name,rules,hosts,rels,pending,expect,reasons", CASES, ids=[c[0] for c in CASES])
def test_backfill(name: str, rules, hosts, rels, pending, expect, reasons) -> None:
    plan = schedule(caps(*hosts), pending, T0, backfill=rules, releases=rels)
    assert placed(plan) == expect
    for jid, part in reasons.items():
        assert part in plan.reasons[jid], (jid, plan.reasons[jid])
    if name.startswith("no known end") or rules in (OFF, FCFS):
        assert plan.reservations == [] and "reserved" not in plan.reasons[1]


def test_strict_fcfs_without_words_places_as_with_them() -> None:
    """The simulator's rounds (explain=False) take no quiet walk under FCFS: it would pass the head."""
    pending = [small(2, 300), wide(1), small(3, 300)]
    for explain in (True, False):
        plan = schedule(caps(cap("n1", slots=4, slots_free=2)), pending, T0, backfill=FCFS,
                        releases=[rel("n1", 600, 2)], explain=explain)
        assert placed(plan) == {2: ["n1"]}, explain


def test_conservative_reservations_follow_each_other_on_one_host() -> None:
    plan = schedule(caps(cap("n1", slots=4, slots_free=0)), [wide(1, run_limit=1000.0), wide(2)], T0,
                    backfill=CONSERVATIVE, releases=[rel("n1", 600, 4)])
    assert [(r.job_id, r.start - T0) for r in plan.reservations] == [(1, 600.0), (2, 1600.0)]


def test_the_reservation_explains_itself() -> None:
    plan = schedule(caps(cap("node3", slots=4, slots_free=0)), [wide(12)], T0, releases=[rel("node3", 3900, 4)])
    assert plan.reasons[12] == \
        f"slots: needs 4; the cluster has 0 free; reserved to start at {when(T0 + 3900, T0)} on node3"
    assert when(T0 + 3900, T0).endswith("(in 1h05m)")


def test_memory_is_reserved_as_xce_accounts_it() -> None:
    """A running job's end gives back its charge (actual to the OS figure, slack out of the
    slack term); a long job that would eat the reserved memory waits, a short one starts."""
    led = Ledger()
    led.open(100, "n1", b("6G"), {"slots": 1})
    led.report(100, "n1", b("5G"))
    running = job(100, mem="6G", state=JobState.RUN, start_time=T0 - 100, run_limit=700.0,
                  allocs=[alloc("n1", 1, "6G")])
    cs = host_caps([host("n1", mem="8G", slots=8)], led, {"n1": b("3G")})  # 3G - slack 1G = 2G now
    assert cs["n1"].mem_available == b("2G")
    rels = releases([running], EASY, T0, led)
    assert rels == [Release(T0 + 600, "n1", 1, b("5G"), b("1G"))]
    pending = [job(1, mem="7G"), job(2, mem="1.5G", run_limit=3600.0), job(3, mem="1.5G", run_limit=300.0)]
    plan = schedule(cs, pending, T0, releases=rels)
    assert placed(plan) == {3: ["n1"]}
    assert "reserved to start at" in plan.reasons[1] and plan.reservations[0].start == T0 + 600
    assert plan.reasons[2].startswith("backfill: would delay job 1")


def test_an_overrun_job_is_due_now() -> None:
    r = job(5, state=JobState.RUN, start_time=T0 - 1000, run_limit=600.0, allocs=[alloc("n1", 1, "1G")])
    assert releases([r], EASY, T0)[0].end == T0
    assert releases([job(6, state=JobState.RUN, start_time=T0, allocs=[alloc()])], EASY, T0) == []


def test_a_release_book_kept_between_rounds_gives_what_releases_makes_each_round() -> None:
    """The simulator keeps the releases from round to round (made at a start, again after a
    report, dropped at an end); unclamped, the round's reservation is the same as with
    ``releases``' clamped ends: an overrun job's end is due now either way."""
    led = Ledger()
    led.open(7, "n1", b("4G"), {"slots": 2})
    led.open(8, "n2", b("2G"), {"slots": 2})
    over = job(7, mem="2G", state=JobState.RUN, start_time=T0 - 1000, run_limit=600.0, allocs=[alloc("n1", 2, "4G")])
    due = job(8, mem="1G", state=JobState.RUN, start_time=T0, run_limit=900.0, allocs=[alloc("n2", 2, "2G")])
    never = job(9, state=JobState.RUN, start_time=T0, allocs=[alloc("n2", 1, "1G")])
    book = ReleaseBook(EASY)
    for j in (over, due, never):
        book.started(j)
    led.report(7, "n1", b("3G"))
    book.changed(over)
    kept = list(book.current(led))
    assert [replace(r, end=max(T0, r.end)) for r in kept] == releases([over, due, never], EASY, T0, led)
    assert kept[0].actual == b("3G") and kept[0].end == T0 - 400  # unclamped; the round takes it as now
    pending = [job(1, mem=None, slots=4, resreq="span[hosts=1]"), job(2, mem=None, slots=2, run_limit=60.0)]
    hosts = [host("n1", mem="8G", slots=4), host("n2", mem="8G", slots=4)]
    got = [schedule(host_caps(hosts, led, {}), pending, T0, releases=rel) for rel in
           (kept, releases([over, due, never], EASY, T0, led))]
    assert [(r.job_id, r.start, [a.host for a in r.allocs]) for r in got[0].reservations] == \
        [(r.job_id, r.start, [a.host for a in r.allocs]) for r in got[1].reservations] == [(1, T0, ["n1"])]
    assert got[0].placements == got[1].placements
    book.ended(7)
    assert [r.host for r in book.current(led)] == ["n2"]


RUNTIME_CASES = [
    ({}, {}, math.inf),
    ({"run_limit": 600.0}, {}, 600.0),
    ({"run_limit": 600.0, "run_estimate": 120.0}, {}, 120.0),
    ({}, {"queue_run_limit": {"normal": 900.0}}, 900.0),
    ({}, {"default_run_limit": 60.0}, 60.0),
    ({"run_limit": 600.0}, {"queue_run_limit": {"normal": 900.0}, "default_run_limit": 60.0}, 600.0),
]


@pytest.mark.parametrize("spec,rules,expect", RUNTIME_CASES)
def test_expected_run_time(spec, rules, expect) -> None:
    assert BackfillRules(**rules).runtime(job(1, **spec).spec) == expect


def test_a_multi_host_job_is_reserved_across_hosts() -> None:
    cs = caps(cap("n1", slots=2, slots_free=0), cap("n2", slots=2, slots_free=1))
    j = job(1, mem=None, slots=4, resreq="span[ptile=2]")
    plan = schedule(cs, [j, small(2, 3600)], T0, releases=[rel("n1", 600, 2), rel("n2", 300, 1)])
    assert sorted(a.host for a in plan.reservations[0].allocs) == ["n1", "n2"]
    assert plan.reservations[0].start == T0 + 600
    assert plan.reasons[2].startswith("backfill: would delay job 1")


def test_a_later_reservation_may_not_run_into_an_earlier_one() -> None:
    """Two slots free at +300 would do for job 2, but it would still run when job 1 starts."""
    cs = caps(cap("n1", slots=4, slots_free=0))
    pending = [wide(1, run_limit=1000.0), wide(2, slots=2, run_limit=1000.0), wide(3, slots=2, run_limit=200.0)]
    plan = schedule(cs, pending, T0, backfill=CONSERVATIVE, releases=[rel("n1", 300, 2), rel("n1", 600, 2)])
    assert [(r.job_id, r.start - T0) for r in plan.reservations] == [(1, 600.0), (2, 1600.0)]


@pytest.mark.parametrize("field,value", [("run_limit", 0.0), ("run_limit", -5.0), ("run_estimate", math.inf),
                                         ("run_estimate", math.nan)])
def test_a_run_figure_must_be_positive_seconds(field: str, value: float) -> None:
    from xce.core.errors import InvalidRequest
    from xce.core.model import check_spec

    with pytest.raises(InvalidRequest, match=f"{field} must be a positive number of seconds, got {value}"):
        check_spec(job(1, **{field: value}).spec)
    check_spec(job(1, **{field: 60.0}).spec)
