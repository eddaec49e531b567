"""Scheduling policy end to end on a real local cluster: EASY backfill, on by default."""

from __future__ import annotations

import json

from conftest import Cluster, wait_for, xce


def test_a_short_job_backfills_beside_a_blocked_wide_job_and_a_long_one_does_not(cluster2: Cluster) -> None:
    """node1 and node2, 2 slots each.  r1 fills one host for a minute, r2 half the other for 8 s:
    the wide job is reserved the host r2 leaves, the short job takes the free slot there
    (it ends before), the long one may not (it would delay the wide job)."""
    c = cluster2.client
    r1 = c.submit("sleep 60", slots=2, resreq="span[hosts=1]", run_limit=120.0)
    wait_for(lambda: c.job(r1).state == "RUN", 20, "r1 running")
    other = "node2" if c.job(r1).hosts == ["node1"] else "node1"
    r2 = c.submit("sleep 8", resreq=f"select[hname=={other}]", run_limit=8.0)
    wait_for(lambda: c.job(r2).state == "RUN", 20, "r2 running")
    wide, long_, short = c.submit_many([
        {"command": "sleep 2", "slots": 2, "resreq": "span[hosts=1]", "run_limit": 30.0},
        {"command": "sleep 60", "run_limit": 600.0},
        {"command": "sleep 1", "run_limit": 3.0}])
    wait_for(lambda: c.job(short).state in ("RUN", "DONE"), 20, "the short job backfilled")
    assert c.job(short).hosts == [other]
    w = wait_for(lambda: (v := c.job(wide)).reason and v, 10, "the wide job's reason")
    assert "reserved to start at" in w.reason and w.reason.endswith(f"on {other}"), w.reason
    lv = wait_for(lambda: (v := c.job(long_)).reason and v, 10, "the long job's reason")
    assert lv.state == "PEND" and lv.reason.startswith(f"backfill: would delay job {wide}"), lv.reason
    # The doors show the round's figures: the long job's place in the order (behind the wide
    # one, submitted with it), and the user's usage in the share tree.
    long_view = xce(cluster2.state_dir, "jobs", "-l", str(long_)).stdout
    assert "Order: 2 of 2 pending" in long_view and f"Behind job {wide}: submit: job {wide}" in long_view, long_view
    share = json.loads(xce(cluster2.state_dir, "fairshare", "--json").stdout)
    (me,) = [r for r in share["rows"] if r["path"] == [lv.user]]
    assert me["slot_seconds"] > 0 and 0 < me["priority"] < 1 and me["share"] == 1.0, share
    assert "No limit configured" in xce(cluster2.state_dir, "limits").stdout
    # When r2 ends, the wide job starts where it was reserved, ahead of the long one.
    wait_for(lambda: c.job(wide).state in ("RUN", "DONE"), 30, "the wide job started")
    assert c.job(wide).hosts == [other] and c.job(long_).state == "PEND"
    c.kill([r1, long_])
