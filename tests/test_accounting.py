"""Tests for xce.core.accounting: the brief's formulas and the delta-maintained Ledger."""

from __future__ import annotations

import pytest
from builders import T0, alloc, b, job
from hypothesis import given, settings
from hypothesis import strategies as st

from xce.core import accounting
from xce.core.accounting import (
    Account,
    HostTotals,
    Ledger,
    available_mem,
    available_virtual,
    derive,
)
from xce.proto.schema import JobSample
from xce.replica.live import Live

G, M = b("1G"), b("1M")


# ---- formulas ------------------------------------------------------------------------------

FORMULAS = [
    # name,              reserved, actual,  overage,  slack,    charge
    ("unreported",       G,        None,    0,        G,        G),
    ("below",            G,        300 * M, 0,        724 * M,  G),
    ("at",               G,        G,       0,        0,        G),
    ("above",            G,        G + 5 * M, 5 * M,  0,        G + 5 * M),
    ("nothing reserved", 0,        G,       G,        0,        G),
    ("nothing at all",   0,        None,    0,        0,        0),
]


@pytest.mark.parametrize("name,reserved,actual,over,slk,chg", FORMULAS, ids=[f[0] for f in FORMULAS])
def test_formulas(name: str, reserved: int, actual: int | None, over: int, slk: int, chg: int) -> None:
    assert accounting.overage(reserved, actual) == over
    assert accounting.slack(reserved, actual) == slk
    assert accounting.charge(reserved, actual) == chg
    if actual is not None:
        assert accounting.charge(reserved, actual) == max(reserved, actual)


DECAY = [
    # amount, duration, decay, start, now, in force
    (G, None, False, 0.0, 1e9, G),          # no duration: forever
    (G, 100, False, None, 50.0, G),         # not started yet
    (G, 100, False, 0.0, 99.0, G),          # flat until the duration ends
    (G, 100, False, 0.0, 100.0, 0),         # then nothing
    (G, 100, True, 0.0, 0.0, G),            # decay starts at the whole amount
    (G, 100, True, 0.0, 25.0, 3 * G // 4),  # falls linearly
    (G, 100, True, 0.0, 50.0, G // 2),
    (G, 100, True, 0.0, 100.0, 0),
    (G, 100, True, 0.0, 1000.0, 0),
    (G, 100, True, 10.0, 5.0, G),           # a clock behind the start counts as zero elapsed
]


@pytest.mark.parametrize("amount,duration,decay,start,now,expect", DECAY)
def test_reserved_in_force(amount: int, duration: int | None, decay: bool, start: float | None,
                           now: float, expect: int) -> None:
    assert accounting.reserved_in_force(amount, duration, decay, start, now) == expect


def test_available_mem_is_os_minus_slack_only() -> None:
    led = Ledger()
    led.open(1, "n1", G, {"slots": 1})          # unreported: whole G is slack
    led.open(2, "n1", G, {"slots": 1})
    led.report(2, "n1", G + 200 * M)            # overgrown: no slack, 200M overage
    t = led.host_totals("n1")
    assert t.mem_slack == G
    # The OS figure already reflects job 2's actual use: only job 1's slack is subtracted.
    assert available_mem(6 * G, t) == 5 * G
    assert available_virtual(4, t, "slots") == 2


# ---- the ledger ----------------------------------------------------------------------------

def totals(led: Ledger, host: str) -> tuple:
    return led.host_totals(host).as_tuple()


def test_placed_not_reported_counts_whole_reservation_as_slack() -> None:
    led = Ledger()
    acc = led.open(1, "n1", 2 * G, {"slots": 2})
    assert (acc.actual, acc.used, acc.slack, acc.charged) == (None, 0, 2 * G, 2 * G)
    assert totals(led, "n1") == (2 * G, 0, 2 * G, 0, (("slots", 2),))


@pytest.mark.parametrize("actual,slack,overage", [(300 * M, 724 * M, 0), (G, 0, 0), (G + 300 * M, 0, 300 * M)])
def test_report_below_at_above(actual: int, slack: int, overage: int) -> None:
    led = Ledger()
    led.open(1, "n1", G, {"slots": 1})
    assert led.report(1, "n1", actual)
    acc = led.accounts[(1, "n1")]
    assert (acc.used, acc.slack, acc.charged) == (overage, slack, max(G, actual))
    assert totals(led, "n1") == (G, actual, slack, overage, (("slots", 1),))
    assert led.audit() == []


def test_report_changes_only_mem_fields_of_that_host() -> None:
    led = Ledger()
    led.open(1, "n1", G, {"slots": 2, "lic": 1})
    led.open(2, "n2", G, {"slots": 1})
    alloc_n1 = led.totals["n1"].allocated
    before_n2 = totals(led, "n2")
    led.report(1, "n1", 3 * G)
    # Sibling resources in the same account and their host totals are untouched ...
    assert led.accounts[(1, "n1")].allocated == {"slots": 2, "lic": 1}
    assert led.totals["n1"].allocated is alloc_n1
    assert led.totals["n1"].allocated == {"slots": 2, "lic": 1}
    # ... and so is every other host.
    assert totals(led, "n2") == before_n2
    # A second report moves only the difference.
    led.report(1, "n1", 2 * G)
    assert totals(led, "n1") == (G, 2 * G, 0, G, (("lic", 1), ("slots", 2)))
    assert led.audit() == []


def test_report_is_a_delta_not_an_uncharge_recharge() -> None:
    """The host totals move by exactly the account's change; other jobs' shares stay put."""
    led = Ledger()
    led.open(1, "n1", G, {"slots": 1})
    led.open(2, "n1", 2 * G, {"slots": 1})
    led.report(2, "n1", 500 * M)
    t = led.totals["n1"]
    before = (t.mem_reserved, t.mem_actual, t.mem_slack, t.mem_overage)
    led.report(1, "n1", 1500 * M)
    after = (t.mem_reserved, t.mem_actual, t.mem_slack, t.mem_overage)
    assert tuple(a - b_ for a, b_ in zip(after, before)) == (0, 1500 * M, -G, 476 * M)


def test_unknown_account_report_is_refused() -> None:
    led = Ledger()
    assert led.report(9, "n1", G) is False
    assert led.totals == {}


def test_zero_reservation_has_nothing_to_reconcile() -> None:
    led = Ledger()
    led.open(1, "n1", 0, {"slots": 1})
    led.report(1, "n1", 3 * G)
    acc = led.accounts[(1, "n1")]
    assert (acc.slack, acc.used) == (0, 0)
    t = led.host_totals("n1")
    assert (t.mem_slack, t.mem_overage, t.mem_reserved) == (0, 0, 0)
    assert t.mem_actual == 3 * G                     # shown, but never subtracted again
    assert available_mem(5 * G, t) == 5 * G
    assert led.audit() == []


def test_multi_host_job_reconciles_per_host() -> None:
    led = Ledger()
    led.open(7, "n1", G, {"slots": 2})
    led.open(7, "n2", G, {"slots": 2})
    led.report(7, "n1", 1500 * M)    # n1 outgrew its share
    led.report(7, "n2", 100 * M)     # n2 did not; its slack is not cancelled by n1's overage
    assert totals(led, "n1") == (G, 1500 * M, 0, 476 * M, (("slots", 2),))
    assert totals(led, "n2") == (G, 100 * M, 924 * M, 0, (("slots", 2),))
    assert [a.host for a in led.by_job[7]] == ["n1", "n2"]
    assert led.audit() == []


def test_peak_is_the_highest_seen() -> None:
    led = Ledger()
    led.open(1, "n1", G, {})
    led.report(1, "n1", 500 * M, peak=800 * M)
    led.report(1, "n1", 600 * M)
    led.report(1, "n1", 300 * M, peak=100 * M)
    assert led.accounts[(1, "n1")].peak == 800 * M


def test_set_reserved_applies_the_decay_delta() -> None:
    led = Ledger()
    led.open(1, "n1", G, {"slots": 1})
    led.report(1, "n1", 400 * M)
    led.set_reserved(1, "n1", 512 * M)       # half decayed: slack 112M
    assert totals(led, "n1") == (512 * M, 400 * M, 112 * M, 0, (("slots", 1),))
    led.set_reserved(1, "n1", 256 * M)       # actual now above the reservation in force
    assert totals(led, "n1") == (256 * M, 400 * M, 0, 144 * M, (("slots", 1),))
    led.set_reserved(1, "n1", 0)             # duration over: nothing to reconcile
    assert totals(led, "n1") == (0, 400 * M, 0, 0, (("slots", 1),))
    led.set_reserved(2, "n1", 0)             # unknown account: no-op
    assert led.audit() == []


def test_decay_over_time_through_reserved_in_force() -> None:
    led = Ledger()
    start = 1000.0
    led.open(1, "n1", accounting.reserved_in_force(G, 100, True, start, start), {"slots": 1})
    seen = []
    for now in (start + 10, start + 50, start + 90, start + 100, start + 200):
        led.set_reserved(1, "n1", accounting.reserved_in_force(G, 100, True, start, now))
        seen.append(led.host_totals("n1").mem_slack)
        assert led.audit() == []
    assert seen == sorted(seen, reverse=True)
    assert seen[1] == G // 2 and seen[-1] == 0


def test_close_releases_everything() -> None:
    led = Ledger()
    led.open(1, "n1", G, {"slots": 1, "lic": 2})
    led.open(2, "n1", G, {"slots": 1})
    led.report(1, "n1", 2 * G)
    accs = led.close(1)
    assert [a.job_id for a in accs] == [1]
    assert totals(led, "n1") == (G, 0, G, 0, (("slots", 1),))
    assert led.close(1) == []
    assert 1 not in led.by_job and (1, "n1") not in led.accounts
    assert led.audit() == []


def test_a_heartbeat_batch_in_the_hosts_order_or_any_order_gives_the_same_totals() -> None:
    """observe_host's two paths: the host's own order (no gathering) and any other."""
    a, b_ = Ledger(), Ledger()
    for led in (a, b_):
        for j, r in ((1, G), (2, 0), (3, 2 * G)):
            led.open(j, "n1", r, {"slots": 1}, attempt=1)
    moved = a.observe_host("n1", [1, 2, 3], [1, 1, 1], [300 * M, G, 3 * G], [0, 0, 0], [1.0, 2.0, 3.0])
    b_.observe_host("n1", [3, 1, 2], [1, 1, 1], [3 * G, 300 * M, G], [0, 0, 0], [3.0, 1.0, 2.0])
    assert moved == ([1, 2, 3], [300 * M, G, 3 * G], [300 * M, G, 3 * G], [1.0, 2.0, 3.0])
    assert totals(a, "n1") == totals(b_, "n1") == (3 * G, 300 * M + 4 * G, 724 * M, G, (("slots", 3),))
    assert b_.books["n1"].ids == [3, 1, 2]  # the worker's order is the book's from now on
    assert [b_.accounts[(j, "n1")].actual for j in (1, 2, 3)] == [300 * M, G, 3 * G]
    assert [a.accounts[(j, "n1")].cpu_time for j in (1, 2, 3)] == [1.0, 2.0, 3.0]
    assert a.audit() == b_.audit() == []
    # What was returned for publishing is not the book's own: the next batch leaves it alone.
    moved = a.observe_host("n1", [1, 2, 3], [1, 1, 1], [200 * M, G, 3 * G], [0, 0, 0], [1.0, 2.0, 3.0])
    assert moved is not None and moved[2] == [300 * M, G, 3 * G]
    a.observe_host("n1", [1, 2, 3], [1, 1, 1], [300 * M, G, 4 * G], [0, 0, 0], [1.0, 2.0, 3.0])
    assert moved[2] == [300 * M, G, 3 * G] and moved[1] == [200 * M, G, 3 * G]
    # Nothing moved: nothing to publish, but the CPU figures still land.
    assert a.observe_host("n1", [1, 2, 3], [1, 1, 1], [300 * M, G, 4 * G], [0, 0, 0], [4.0, 5.0, 6.0]) is None
    assert a.accounts[(3, "n1")].cpu_time == 6.0


def test_a_heartbeat_batch_drops_unknown_jobs_other_attempts_and_repeats() -> None:
    led = Ledger()
    led.open(1, "n1", G, {"slots": 1}, attempt=2)
    led.open(2, "n1", G, {"slots": 1}, attempt=1)
    moved = led.observe_host("n1", [9, 1, 2, 2], [1, 1, 1, 1], [G, 5 * G, 100 * M, 200 * M], [0] * 4, [0.0] * 4)
    # job 9 is unknown, job 1's report is for attempt 1 (it runs attempt 2): only job 2's count, in turn.
    assert moved == ([2, 2], [100 * M, 200 * M], [100 * M, 200 * M], [0.0, 0.0])
    assert led.accounts[(1, "n1")].actual is None and led.accounts[(2, "n1")].actual == 200 * M
    assert led.audit() == []
    assert led.observe_host("n9", [1], None, [G], [G], [0.0]) is None
    assert led.observe_host("n1", [9], None, [G], [G], [0.0]) is None


def test_open_twice_keeps_the_first_account() -> None:
    led = Ledger()
    first = led.open(1, "n1", G, {"slots": 1})
    assert led.open(1, "n1", 2 * G, {"slots": 3}) is first
    assert totals(led, "n1") == (G, 0, G, 0, (("slots", 1),))


def test_audit_reports_a_drifted_total() -> None:
    led = Ledger()
    led.open(1, "n1", G, {"slots": 1})
    led.totals["n1"].mem_slack += 1
    problems = led.audit()
    assert len(problems) == 1 and "host n1" in problems[0]
    led.rederive()
    assert led.audit() == []


def test_derive_sums_accounts_per_host() -> None:
    accs = [Account(1, "a", reserved=G, actual=None, allocated={"slots": 1}),
            Account(2, "a", reserved=G, actual=2 * G, allocated={"slots": 2}),
            Account(3, "b", reserved=0, actual=G, allocated={})]
    out = derive(accs)
    assert out["a"].as_tuple() == (2 * G, 2 * G, G, G, (("slots", 3),))
    assert out["a"].mem_charged == 3 * G
    assert out["b"].as_tuple() == (0, G, 0, 0, ())
    assert HostTotals().as_tuple() == (0, 0, 0, 0, ())


# ---- property: deltas always agree with a from-scratch derivation --------------------------

HOSTS = ["n1", "n2", "n3"]
op = st.one_of(
    st.tuples(st.just("open"), st.integers(1, 6), st.sampled_from(HOSTS), st.integers(0, 4 * G),
              st.dictionaries(st.sampled_from(["slots", "lic"]), st.integers(0, 4), max_size=2),
              st.integers(0, 1), st.just(0.0), st.booleans()),  # since, reclaiming
    st.tuples(st.just("close_host"), st.integers(1, 6), st.sampled_from(HOSTS)),
    st.tuples(st.just("report"), st.integers(1, 6), st.sampled_from(HOSTS), st.integers(0, 4 * G),
              st.none() | st.integers(0, 5 * G)),
    st.tuples(st.just("set_reserved"), st.integers(1, 6), st.sampled_from(HOSTS), st.integers(0, 4 * G)),
    st.tuples(st.just("close"), st.integers(1, 6)),
    st.tuples(st.just("rederive"),),
    # A heartbeat's batch: unknown jobs, other attempts and repeats included.
    st.tuples(st.just("observe_host"), st.sampled_from(HOSTS),
              st.lists(st.tuples(st.integers(1, 4), st.integers(0, 1), st.integers(0, 4 * G), st.integers(0, 5 * G)),
                       max_size=6),
              st.booleans()),
)


def apply_op(led: Ledger, name: str, args: tuple) -> None:
    if name != "observe_host":
        getattr(led, name)(*args)
        return
    host, reports, check = args
    before = {j: (a.actual, a.peak) for (j, h), a in led.accounts.items() if h == host}
    led.observe_host(host, [r[0] for r in reports], [r[1] for r in reports] if check else None,
                     [r[2] for r in reports], [r[3] for r in reports], [1.0] * len(reports))
    last = {r[0]: r for r in reports if r[0] in before
            and (not check or r[1] == led.accounts[(r[0], host)].attempt)}
    for j, acc in ((j, led.accounts[(j, host)]) for j in before):
        if j in last:  # the job's last report in the batch is its figure now
            assert acc.actual == last[j][2] and acc.peak >= max(last[j][2], before[j][1])
        else:
            assert (acc.actual, acc.peak) == before[j]


@settings(max_examples=300, deadline=None)
@given(st.lists(op, max_size=40))
def test_any_sequence_keeps_totals_equal_to_derivation(ops: list[tuple]) -> None:
    led = Ledger()
    for o in ops:
        name, args = o[0], o[1:]
        apply_op(led, name, args)
        assert led.audit() == [], (name, args)
        fresh = derive(led.accounts.values())
        for h in set(fresh) | set(led.totals):
            assert led.host_totals(h).as_tuple() == (fresh.get(h) or HostTotals()).as_tuple()
        for acc in led.accounts.values():  # each account keeps used/slack by the formulas
            assert acc.used == (accounting.overage(acc.reserved, acc.actual) if acc.reserved else 0)
            assert acc.slack == accounting.slack(acc.reserved, acc.actual)
        assert sorted(led.accounts) == sorted((j, a.host) for j, accs in led.by_job.items() for a in accs)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4 * G), st.integers(0, 5 * G), st.integers(0, 6 * G)), min_size=1, max_size=8))
def test_a_whole_batch_dates_peak_rises_as_report_by_report_does(jobs: list[tuple[int, int, int]]) -> None:
    """The column path's settling (``HostBook.rose_all``) against the per-report path's (``rose``):
    two heartbeats of peaks, once as whole batches and once with a stranger's report in (which
    sends them report by report), leave the same settled peaks and dates."""
    got = []
    for stranger in ([], [999]):
        led = Ledger()
        for jid, (reserved, _, _) in enumerate(jobs, 1):
            led.open(jid, "n1", reserved, {}, since=T0)
        ids = list(range(1, len(jobs) + 1)) + stranger
        for when, peaks in ((T0 + 1, [p for _, p, _ in jobs]), (T0 + 2, [p for _, _, p in jobs])):
            peaks = peaks + [G] * len(stranger)
            led.observe_host("n1", ids, None, [0] * len(ids), peaks, [0.0] * len(ids), now=when)
        b = led.books["n1"]
        got.append({j: (b.peak[i], b.settled_peak[i], b.peak_at[i]) for j, i in b.index.items()})
    assert got[0] == got[1]


# ---- Live: the ledger kept in step with hard job state --------------------------------------

def running(jid: int = 1, hosts: tuple[str, ...] = ("n1",), mem: str = "1G", resreq: str = "",
            attempt: int = 1, start: float = T0):
    from xce.core.model import JobState

    return job(jid, mem=mem, resreq=resreq, slots=len(hosts), state=JobState.RUN, attempt=attempt,
               start_time=start, allocs=[alloc(h, 1, mem) for h in hosts])


def test_live_opens_and_closes_accounts_with_the_job_state() -> None:
    from xce.core.model import JobState

    live = Live()
    j = running(1, ("n1", "n2"))
    live.reasons[1] = "was pending"
    live.sync_job(j, T0)
    assert sorted(live.ledger.accounts) == [(1, "n1"), (1, "n2")] and 1 not in live.reasons
    assert live.apply_sample(JobSample(1, "n1", 300 * M, 400 * M, 2.0))
    assert not live.apply_sample(JobSample(1, "n9", 300 * M, 400 * M, 2.0))
    live.sync_job(j, T0 + 5)  # same attempt again: the reported figures survive
    assert live.ledger.accounts[(1, "n1")].actual == 300 * M
    assert live.samples() == [JobSample(1, "n1", 300 * M, 400 * M, 2.0)]
    j.state = JobState.DONE
    live.sync_job(j, T0 + 6)
    assert live.ledger.accounts == {} and live.ledger.by_job == {} and live.ledger.audit() == []


def test_live_replaces_the_accounts_of_an_older_placement() -> None:
    live = Live()
    live.sync_job(running(1, ("n1",), attempt=1), T0)
    live.apply_sample(JobSample(1, "n1", 2 * G, 2 * G, 1.0))
    live.sync_job(running(1, ("n2",), attempt=2), T0 + 10)
    assert list(live.ledger.accounts) == [(1, "n2")]
    assert live.ledger.accounts[(1, "n2")].actual is None
    assert live.ledger.host_totals("n1").as_tuple() == HostTotals().as_tuple()


def test_live_decays_reservations_over_time() -> None:
    live = Live()
    j = running(1, ("n1",), resreq="rusage[mem=1G:duration=100s:decay=1]", start=T0)
    live.sync_job(j, T0 + 25)            # opened late: the reservation in force, not the original
    assert live.ledger.accounts[(1, "n1")].reserved == 3 * G // 4
    live.refresh_decay({1: j}, T0 + 50)
    assert live.ledger.host_totals("n1").mem_slack == G // 2
    live.refresh_decay({1: j}, T0 + 100)
    assert live.ledger.host_totals("n1").mem_reserved == 0
    live.refresh_decay({}, T0 + 200)     # a job that is gone stops decaying
    assert live.decaying == set()


def test_live_rebuild_matches_incremental_sync() -> None:
    from xce.core.model import JobState

    jobs = [running(1, ("n1", "n2")), running(2, ("n1",), mem="2G"), job(3), running(4, ("n2",))]
    jobs[3].state = JobState.EXIT
    a, b_ = Live(), Live()
    for j in jobs:
        a.sync_job(j, T0)
    b_.rebuild(jobs, T0)
    assert {h: t.as_tuple() for h, t in a.ledger.totals.items() if t.as_tuple() != HostTotals().as_tuple()} == \
        {h: t.as_tuple() for h, t in b_.ledger.totals.items()}
    assert b_.ledger.host_totals("n1").mem_slack == 3 * G


def test_a_multi_host_share_that_ended_frees_its_host_while_the_rest_runs() -> None:
    live = Live()
    j = running(1, ("n1", "n2"))
    live.sync_job(j, T0)
    live.apply_sample(JobSample(1, "n1", 300 * M, 300 * M, 1.0))
    j.finished_hosts = ["n1"]  # n1's share exited; n2's still runs
    live.sync_job(j, T0 + 1)
    assert sorted(live.ledger.accounts) == [(1, "n2")]
    assert live.ledger.host_totals("n1").mem_reserved == 0 and live.ledger.host_totals("n1").allocated == {}
    assert live.ledger.audit() == []
    fresh = Live()  # a new leader rebuilding from hard state charges only the share still running
    fresh.rebuild([j], T0 + 2)
    assert sorted(fresh.ledger.accounts) == [(1, "n2")]


def test_pressure_victim_is_the_largest_overage_never_a_job_within_its_reservation() -> None:
    from xce.core.accounting import pressure_victim

    assert pressure_victim([("a", 5), ("b", 9), ("c", 9), ("d", -3)]) == "b"  # first on a tie
    assert pressure_victim([("a", 0), ("b", -1)]) is None
    assert pressure_victim([]) is None


# ---- shrinking a settled reservation (accounting.shrink_moment, shrunk, restored) ---------------

SHRINK = accounting.ReclaimRules(min_run=60.0, window=60.0, margin=0.1, shrink_age=0.6)


def test_a_peak_must_hold_still_for_a_share_of_the_jobs_age_before_its_reservation_shrinks() -> None:
    # Started at 1000, last rise at 2000 (1000 s in): settled at 2060, shrink-settled when the peak has
    # held still for 0.6 of the age, i.e. (2000 - 0.6 x 1000) / 0.4 = 3500 (1500 s still, 2500 s old).
    assert accounting.shrink_moment(1000.0, 2000.0, SHRINK) == pytest.approx(3500.0)
    assert not accounting.shrink_settled(1000.0, 2000.0, 3499.0, SHRINK)
    assert accounting.shrink_settled(1000.0, 2000.0, 3500.0, SHRINK)
    # Early in a run the fixed window and minimum run still bound it.
    assert accounting.shrink_moment(0.0, 10.0, SHRINK) == 70.0
    never = accounting.ReclaimRules(shrink_age=1.0)
    assert accounting.shrink_moment(0.0, 10.0, never) == float("inf")


@settings(max_examples=300, deadline=None)
@given(steps=st.integers(1, 50), width=st.floats(1.0, 1e5), delay=st.floats(0.0, 1e5),
       age=st.sampled_from([0.51, 0.6, 0.75, 0.9]))
def test_a_job_rising_in_equal_steps_rises_again_before_it_may_shrink(steps: int, width: float, delay: float,
                                                                      age: float) -> None:
    # Any evenly stepped ramp, whatever its number of steps, their width and the delay before the first:
    # with shrink_age above 1/2, no step but the last is followed by a shrink-settled moment.
    rules = accounting.ReclaimRules(min_run=0.0, window=0.0, margin=0.1, shrink_age=age)
    for k in range(steps - 1):
        rise, nxt = delay + k * width + width, delay + (k + 2) * width
        assert accounting.shrink_moment(0.0, rise, rules) > nxt


def test_a_shrunk_reservation_is_the_peak_plus_its_margin_and_grows_back_as_far_as_room_reaches() -> None:
    assert accounting.shrunk(G, 400 * M, SHRINK) == 400 * M + int(400 * M * 0.1)
    assert accounting.shrunk(G, 1000 * M, SHRINK) == G  # never more than it asked
    assert accounting.restored(G, 500 * M, 200 * M) == 700 * M
    assert accounting.restored(G, 500 * M, 2 * G) == G
    assert accounting.restored(G, 500 * M, -100 * M) == 500 * M  # no room: it stays over what it has
