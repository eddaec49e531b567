"""Which stage holds a pending job (xce/core/sched/holds.py), on builders."""

from __future__ import annotations

from builders import job

from xce.core.sched.holds import stage_reasons, waits_for_room
from xce.core.sched.order import Ordering

FULL = "slots: needs 1; the cluster has 0 free"


def test_the_first_job_waiting_for_room_is_held_by_it_each_one_behind_by_the_order() -> None:
    o = Ordering({"high": 70, "normal": 30})
    a, b, c, d = job(1, queue="high"), job(2, queue="high"), job(3), job(4, priority=5)
    ordered = o.order([a, b, c, d])
    assert [j.id for j in ordered] == [1, 2, 4, 3]
    reasons = {1: "limit u: alice uses 1 of 1 running jobs", 2: FULL, 3: FULL,
               4: "mem: needs 4.0G, node2 has 3.1G available for scheduling (OS 6.2G - slack 3.1G)"}
    got = stage_reasons(o, ordered, reasons, {1, 2, 3, 4})
    assert set(got) == {4, 3}  # 1 keeps its limit; 2 waits first, for the slots
    assert got[4] == f"queue: high has priority 70, normal 30 (job 2 goes first); {reasons[4]}"
    assert got[3] == f"job priority: job 4 has 5, job 3 0 (job 4 goes first); {FULL}"
    assert stage_reasons(o, ordered, reasons, {3}).keys() == {3}


def test_a_wait_on_no_shared_room_holds_nobody() -> None:
    assert waits_for_room(FULL) and waits_for_room("backfill: would delay job 12, reserved ...")
    assert waits_for_room("preemption: waiting for job 3 to be preempted (suspend)")
    for own in ("limit u: alice uses 1 of 1 running jobs", "select: no host matches gpu==a100",
                "queue short: none of its hosts (node9) has registered", "", "no host could ever run it: ..."):
        assert not waits_for_room(own), own
