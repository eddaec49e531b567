"""The order of pending work alone: each stage, and the explanation of a pairwise order."""

from __future__ import annotations

import msgspec
import pytest
from builders import T0, job

from xce.core.model import JobSpec, JobState
from xce.core.sched.fairshare import EQUAL_SHARES, Fairshare
from xce.core.sched.order import Ordering, pending_order

PRIO = {"high": 50, "normal": 30, "low": 10}


def share(**usage: float) -> dict:
    """A cluster-wide equal-shares Fairshare where each named user used that many slot-seconds."""
    return {None: Fairshare(EQUAL_SHARES, {(u, "", "", "normal"): (s, 0.0) for u, s in usage.items()},
                            [(u, "", "", "normal") for u in ("alice", "bob", "carol")])}


ORDER_CASES = [
    # (name, jobs, fairshare, expected order of ids)
    ("queue first", [job(1, queue="low"), job(2, queue="high"), job(3)], None, [2, 3, 1]),
    ("fairshare within a queue", [job(1, user="alice"), job(2, user="bob"), job(3, user="carol")],
     share(alice=100.0, bob=10.0), [3, 2, 1]),
    ("queue before fairshare", [job(1, user="carol", queue="low"), job(2, user="alice")],
     share(alice=100.0), [2, 1]),
    ("job priority within a user", [job(1, user="bob"), job(2, user="bob", priority=5),
                                    job(3, user="bob", priority=-1)], share(), [2, 1, 3]),
    ("fairshare before job priority", [job(1, user="alice", priority=99), job(2, user="bob")],
     share(alice=5.0), [2, 1]),
    ("submit time, then id", [job(3, submit_time=T0 + 1), job(2, submit_time=T0 + 1), job(1, submit_time=T0 + 2)],
     None, [2, 3, 1]),
    ("only pending jobs", [job(1, state=JobState.RUN), job(2)], None, [2]),
]


@pytest.mark.parametrize("name,jobs,fs,expect", ORDER_CASES, ids=[c[0] for c in ORDER_CASES])
def test_order(name: str, jobs, fs, expect: list[int]) -> None:
    assert [j.id for j in pending_order(jobs, PRIO, fs)] == expect


EXPLAIN_CASES = [
    (job(1, queue="low"), job(2, queue="high"), None, "queue: high has priority 50, low 10"),
    (job(1, user="alice"), job(2, user="bob"), share(alice=100.0, bob=10.0),
     "fairshare: alice's priority {a:.2f} is below bob's {b:.2f}"),
    (job(1, user="bob"), job(2, user="bob", priority=5), share(), "job priority: job 2 has 5, job 1 0"),
    (job(2, submit_time=T0 + 5), job(1, submit_time=T0 + 9), None, "submit: job 2 was submitted before job 1"),
    (job(2), job(1), None, "submit: job 1 has the lower id"),
]


@pytest.mark.parametrize("a,b,fs,expect", EXPLAIN_CASES)
def test_explain_names_the_stage_that_decides(a, b, fs, expect: str) -> None:
    o = Ordering(PRIO, fs)
    if fs:
        f = fs[None]
        expect = expect.format(a=f.priority(("alice", "", "", "normal")), b=f.priority(("bob", "", "", "normal")))
    assert o.explain(a, b) == expect == o.explain(b, a)


def test_figures_per_stage() -> None:
    o = Ordering(PRIO, share(alice=100.0))
    f = o.figures(job(7, user="alice", priority=3, queue="high"))
    assert f["queue"] == 50 and f["job"] == 3 and f["submit"] == T0 and 0 < f["fairshare"] < 1


def test_an_old_senders_spec_decodes_with_the_policy_defaults() -> None:
    """A JobSpec encoded without the policy fields (a client or journal from before them)."""

    class Before(msgspec.Struct, frozen=True, kw_only=True):
        command: list[str]
        user: str = ""
        slots: int = 1

    got = msgspec.msgpack.decode(msgspec.msgpack.encode(Before(command=["x"], user="ann", slots=2)), type=JobSpec)
    assert (got.user, got.slots, got.priority, got.run_limit, got.run_estimate, got.project, got.group) == \
        ("ann", 2, 0, None, None, "", "")
    # And the other way: an older decoder skips the fields it does not know.
    new = JobSpec(command=["x"], priority=3, run_limit=60.0, project="p")
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(new), type=Before).command == ["x"]
