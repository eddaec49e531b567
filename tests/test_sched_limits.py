"""Limits alone (lsb.resources): what each principal holds, the reason naming the limit, and a round."""

from __future__ import annotations

import pytest
from builders import T0, alloc, b, cap, caps, job

from xce.core.accounting import Ledger
from xce.core.model import JobState
from xce.core.placement import schedule
from xce.core.sched.limits import Limit, LimitBook, limits_of
from xce.site.config import from_dict


def running(id: int, slots: int = 1, mem: str = "1G", host: str = "n1", **kw):
    return job(id, mem=mem, slots=slots, state=JobState.RUN, start_time=T0, allocs=[alloc(host, slots, mem)], **kw)


USER_SLOTS = Limit("user_slots", "user", slots=8)
CASES = [
    # limits, running, the job to place (slots, mem), expected reason (None: within every limit)
    ((USER_SLOTS,), [running(1, 4, user="alice"), running(2, 4, user="alice")], job(9, user="alice"), (1, 0),
     "limit user_slots: alice uses 8 of 8 slots"),
    ((USER_SLOTS,), [running(1, 4, user="alice"), running(2, 4, user="alice")], job(9, user="bob"), (1, 0), None),
    ((USER_SLOTS,), [running(1, 7, user="alice")], job(9, user="alice"), (1, 0), None),
    ((Limit("vip", "user", members=frozenset({"bob"}), jobs=1),), [running(1, user="alice"), running(2, user="alice")],
     job(9, user="alice"), (1, 0), None),
    ((Limit("one_each", "user", jobs=1),), [running(1, user="alice")], job(9, user="alice"), (1, 0),
     "limit one_each: alice uses 1 of 1 running jobs"),
    ((Limit("proj_mem", "project", mem=b("4G")),), [running(1, mem="3G", project="p")], job(9, project="p"),
     (1, b("1G")), None),
    ((Limit("proj_mem", "project", mem=b("4G")),), [running(1, mem="3G", project="p")], job(9, project="p"),
     (1, b("2G")), "limit proj_mem: p uses 3.0G of 4.0G mem (charged)"),
    ((Limit("q", "queue", slots=2),), [running(1, 2)], job(9), (1, 0), "limit q: normal uses 2 of 2 slots"),
    ((Limit("grp", "group", jobs=1),), [running(1, group="bio")], job(9, group="bio"), (1, 0),
     "limit grp: bio uses 1 of 1 running jobs"),
]


@pytest.mark.parametrize("limits,run,j,need,expect", CASES)
def test_job_limit(limits, run, j, need, expect) -> None:
    book = LimitBook.build(limits, run)
    assert book.job_reason(j, *need) == expect


def test_memory_is_charged_from_the_ledger() -> None:
    """A job above its reservation counts max(reserved, actual) against a mem limit."""
    led = Ledger()
    led.open(1, "n1", b("1G"), {"slots": 1})
    led.report(1, "n1", b("3G"))
    lim = (Limit("m", "user", mem=b("4G")),)
    r = running(1, mem="1G", user="ann")
    assert LimitBook.build(lim, [r]).job_reason(job(9, user="ann"), 1, b("2G")) is None
    assert LimitBook.build(lim, [r], ledger=led).job_reason(job(9, user="ann"), 1, b("2G")) == \
        "limit m: ann uses 3.0G of 4.0G mem (charged)"


def test_host_limit_and_the_leaders_check() -> None:
    lim = (Limit("per_host", "host", jobs=2),)
    book = LimitBook.build(lim, [running(1), running(2)])
    assert book.host_reason("n1", 1, 0) == "limit per_host: n1 uses 2 of 2 running jobs"
    assert book.host_reason("n2", 1, 0) is None
    assert book.check(job(9), [alloc("n1")]) == "limit per_host: n1 uses 2 of 2 running jobs"
    assert book.check(job(9), [alloc("n2")]) is None


def test_pending_limit_is_for_the_submit_door() -> None:
    lim = (Limit("pend", "user", pending=2),)
    book = LimitBook.build(lim, [], [job(1, user="a"), job(2, user="a")])
    assert book.pending_reason(job(3, user="a").spec) == "limit pend: a has 2 of 2 pending jobs"
    assert book.pending_reason(job(3, user="b").spec) is None
    assert book.job_reason(job(3, user="a"), 1, 0) is None  # a round never holds a job for it


def test_a_round_holds_the_next_job_with_the_limits_reason() -> None:
    book = LimitBook.build((Limit("user_slots", "user", slots=2),), [running(1, user="alice")])
    pending = [job(2, user="alice"), job(3, user="alice"), job(4, user="bob")]
    plan = schedule(caps(cap("n1", slots=8), cap("n2", slots=8)), pending, T0, limits=book)
    assert sorted(jid for jid, _ in plan.placements) == [2, 4]
    assert plan.reasons == {3: "limit user_slots: alice uses 2 of 2 slots"}


def test_a_round_respects_a_host_limit() -> None:
    book = LimitBook.build((Limit("per_host", "host", members=frozenset({"n1"}), jobs=1),), [running(1)])
    plan = schedule(caps(cap("n1", slots=8), cap("n2", slots=1)), [job(2), job(3)], T0, limits=book)
    assert [(jid, [a.host for a in al]) for jid, al in plan.placements] == [(2, ["n2"])]
    assert plan.reasons[3] == "limit per_host: n1 uses 1 of 1 running jobs"


def test_limits_from_config() -> None:
    cfg = from_dict({"limits": [{"name": "u", "per": "user", "slots": 8, "mem": "64G"},
                                {"name": "h", "per": "host", "members": ["n1"], "jobs": 2}]})
    assert limits_of(cfg.limits) == (Limit("u", "user", slots=8, mem=b("64G")),
                                     Limit("h", "host", members=frozenset({"n1"}), jobs=2))


def test_xce_limits_names_the_jobs_with_no_project_apart_from_an_unused_limit() -> None:
    """Found from outside: a per-project limit listed the jobs without -P as "-", as it lists a
    limit nobody uses yet."""
    from xce.cli.fmt import limit_rows

    lims = (Limit(name="proj_mem", per="project", mem=1 << 30), Limit(name="grp", per="group", jobs=2))
    book = LimitBook.build(lims, [], [job(1, project="")])
    out = limit_rows(book.rows()).splitlines()
    assert out[1].split()[:3] == ["proj_mem", "project", "(no"] and "project)" in out[1], out
    assert out[2].split()[:3] == ["grp", "group", "(no"], out
    assert limit_rows(LimitBook.build(lims, [], []).rows()).splitlines()[1].split()[:3] == ["proj_mem", "project", "-"]
