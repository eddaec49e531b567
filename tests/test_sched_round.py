"""The scheduler daemon's round read from the pending index and stopped when full decides as
the round that sorts and walks the whole queue: the same placements, reservations and, for
every pending job, the same reason."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from builders import T0, cap, caps, job
from hypothesis import given, settings
from hypothesis import strategies as st

from xce.core.hostgroups import HostSet
from xce.core.model import Job
from xce.core.placement import Plan, room_reason, schedule
from xce.core.sched.backfill import BackfillRules, Release
from xce.core.sched.fairshare import EQUAL_SHARES, SPEC_KEY, Fairshare
from xce.core.sched.limits import Limit, LimitBook
from xce.core.sched.order import Ordering, PendingIndex

G = 1 << 30
PRIORITY = {"high": 50, "normal": 30, "low": 10}

JOBS = st.lists(st.tuples(
    st.integers(1, 6),                                                   # slots
    st.sampled_from(["", "100M/task", "1G/task", "3G/task", "1G/host"]),  # mem
    st.sampled_from(["", "", "span[hosts=1]", "order[-slots]", "select[ncpus>=2]", "span[ptile=2]"]),
    st.sampled_from([None, 60, 600, 6000]),                              # run limit
    st.sampled_from(["alice", "bob", "carol"]),
    st.sampled_from(["normal", "normal", "high", "low"]),
    st.sampled_from([0, 0, 5]),                                          # job priority (-sp)
    st.integers(0, 5),                                                   # submit time (ties: by id)
    st.sampled_from([False, False, False, True]),                        # -x
), min_size=1, max_size=16)
HOSTS = st.lists(st.tuples(st.integers(1, 6), st.integers(1, 8), st.integers(0, 6), st.booleans()),
                 min_size=1, max_size=4)
RULES = st.sampled_from([BackfillRules(mode="off"), BackfillRules(), BackfillRules(mode="conservative", depth=3)])


def _jobs(raw) -> list[Job]:
    return [job(i + 1, mem=None, slots=s, resreq=f"rusage[mem={m}] {r}" if m else r, run_limit=t, user=u, queue=q,
                priority=p, submit_time=T0 + at, exclusive=x)
            for i, (s, m, r, t, u, q, p, at, x) in enumerate(raw)]


def _caps(raw) -> dict:
    return caps(*(cap(f"n{i}", mem=m * G, slots=s, slots_free=min(s, free), attrs={"ncpus": 2 if i % 2 else 1},
                      schedulable=None if ok else "closed")
                  for i, (s, m, free, ok) in enumerate(raw)))


def _ordering(jobs: list[Job], usage: dict[str, float] | None) -> Ordering:
    fs = None
    if usage is not None:
        keys = {SPEC_KEY(j.spec) for j in jobs}
        fs = {None: Fairshare(EQUAL_SHARES, {(u, "", "", q): (s, 0.0) for u, s in usage.items() for q in PRIORITY},
                              keys)}
    return Ordering(PRIORITY, fs)


def _round(raw_caps, jobs: Iterable[Job], ends, rules, limit, queue_hosts, stop: bool, pending: list[Job]) -> Plan:
    book = LimitBook.build((Limit("two_jobs", "user", jobs=2),), (), pending) if limit else None
    rel = [Release(T0 + e, f"n{i}", 1, 0, G) for i, e in zip(range(len(raw_caps)), ends) if e]
    return schedule(_caps(raw_caps), jobs, T0, backfill=rules, releases=rel, limits=book,
                    queue_hosts=queue_hosts, stop_when_full=stop)


def _every_reason(plan: Plan, pending: list[Job]) -> dict[int, str]:
    """The plan's reasons, with those of the jobs a stopped walk did not reach."""
    placed = {j for j, _ in plan.placements}
    out = dict(plan.reasons)
    for j in pending:
        if j.id not in placed and j.id not in out:
            assert plan.stopped, f"job {j.id} has neither a placement nor a reason"
            out[j.id] = room_reason(j.spec.slots, 0)
    return out


@settings(max_examples=400, deadline=None)
@given(HOSTS, JOBS, st.lists(st.sampled_from([0, 30, 300, 3000]), max_size=4), RULES, st.booleans(),
       st.sampled_from([None, {}, {"alice": 100.0, "bob": 5.0}]), st.booleans())
def test_the_index_and_the_stopped_walk_decide_as_the_whole_sorted_walk(raw_caps, raw_jobs, ends, rules, limit,
                                                                       usage, low_on_n0) -> None:
    jobs = _jobs(raw_jobs)
    ordering = _ordering(jobs, usage)
    queue_hosts = {"low": HostSet(False, frozenset({"n0"}))} if low_on_n0 else {}
    old_order = ordering.order(jobs)
    index = PendingIndex()
    for j in reversed(jobs):  # any arrival order
        index.put(j)
    by_id = {j.id: j for j in jobs}
    assert [by_id[i] for i in index.ids(ordering)] == old_order

    old = _round(raw_caps, old_order, ends, rules, limit, queue_hosts, False, jobs)
    read: list[int] = []

    def lazily() -> Iterator[Job]:
        for i in index.ids(ordering):
            read.append(i)
            yield by_id[i]

    new = _round(raw_caps, lazily(), ends, rules, limit, queue_hosts, True, jobs)
    assert new.placements == old.placements
    assert [(r.job_id, r.start, r.allocs) for r in new.reservations] == \
        [(r.job_id, r.start, r.allocs) for r in old.reservations]
    assert _every_reason(new, jobs) == old.reasons
    if new.stopped:  # it read one job past the last it decided, and no more
        assert len(read) == len(new.reasons) + len(new.placements) + 1


def test_a_full_round_stops_at_the_first_job_it_could_only_hold() -> None:
    """No slot left and no reservation to make: the walk reads one job, not the queue."""
    jobs = [job(i, slots=1) for i in range(1, 1001)]
    read: list[int] = []

    def lazily() -> Iterator[Job]:
        for j in jobs:
            read.append(j.id)
            yield j

    plan = schedule(caps(cap("n1", slots=2), cap("n2", slots=2)), lazily(), T0, stop_when_full=True)
    assert [j for j, _ in plan.placements] == [1, 2, 3, 4] and plan.stopped and read == [1, 2, 3, 4, 5]
    assert plan.reasons == {}
    # with a running job's known end, EASY reserves for the first held job, then stops
    read.clear()
    plan = schedule(caps(cap("n1", slots=2), cap("n2", slots=2)), lazily(), T0, stop_when_full=True,
                    releases=[Release(T0 + 60, "n1", 1, 0, G)])
    assert [r.job_id for r in plan.reservations] == [5] and read == [1, 2, 3, 4, 5, 6] and plan.stopped
    assert plan.reasons[5].startswith(room_reason(1, 0) + "; reserved to start at")


def test_the_index_follows_changes_of_priority_and_leaving_jobs() -> None:
    a, b, c = job(1, user="alice"), job(2, user="alice"), job(3, user="bob", queue="high")
    index = PendingIndex()
    for j in (a, b, c):
        index.put(j)
    ordering = Ordering(PRIORITY)
    assert list(index.ids(ordering)) == [3, 1, 2]
    index.put(job(2, user="alice", priority=9))  # xce top: before its group's others
    assert list(index.ids(ordering)) == [3, 2, 1] and len(index) == 3
    index.drop(3)
    index.drop(3)  # twice: no harm
    assert list(index.ids(ordering)) == [2, 1] and index.counts() == {SPEC_KEY(a.spec): 2}


def test_group_key_is_the_head_of_key() -> None:
    jobs = [job(1, user="alice", queue="low"), job(2, user="bob", queue="high", priority=3)]
    for usage in (None, {"alice": 10.0, "bob": 1.0}):
        o = _ordering(jobs, usage)
        for j in jobs:
            assert o.key(j)[:2] == o.group_key(SPEC_KEY(j.spec))
