"""Scheduling policy end to end on a real local cluster: EASY backfill, on by default."""

from __future__ import annotations

import json
import time

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
    # An exclusive job (-x) takes no host that runs a job: both do, so it waits, saying why.
    x = c.submit("true", exclusive=True)
    xv = wait_for(lambda: (v := c.job(x)).reason and v, 20, "the exclusive job's reason")
    assert xv.state == "PEND" and xv.reason.startswith("exclusive: node"), xv.reason
    c.kill([x])
    wait_for(lambda: c.job(x).state == "EXIT", 20, "the exclusive job killed")
    wide, long_, short = c.submit_many([
        {"command": "sleep 2", "slots": 2, "resreq": "span[hosts=1]", "run_limit": 30.0},
        {"command": "sleep 60", "run_limit": 600.0},
        {"command": "sleep 1", "run_limit": 3.0}])
    wait_for(lambda: c.job(short).state in ("RUN", "DONE"), 20, "the short job backfilled")
    assert c.job(short).hosts == [other]
    w = wait_for(lambda: (v := c.job(wide)).reason and v, 10, "the wide job's reason")
    assert "reserved to start at" in w.reason and w.reason.endswith(f"on {other}"), w.reason
    # (While the short job runs no slot is free, and the long one is told so; once it ends, the veto again.)
    lv = wait_for(lambda: ((v := c.job(long_)).reason or "").startswith(f"backfill: would delay job {wide}") and v, 10,
                  "the long job's reason")
    assert lv.state == "PEND", lv
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


SITE = """
[queues.low]
priority = 10
default = true
preempt_action = "suspend"

[queues.high]
priority = 70
preempt = ["low"]
hosts = ["all", "~far/"]

[queues.elsewhere]
priority = 20
hosts = ["far"]

[host_groups]
far = ["node9"]

[preemption]
min_run_time = 0.0

[[limits]]
name = "user_jobs"
per = "user"
jobs = 2
"""


def test_a_site_config_its_limit_holds_a_job_and_a_high_queue_preempts_a_low_one(tmp_path) -> None:
    """`xce up --config FILE` on one host of 4 slots: the user's third job is held by the
    per-user limit with its reason; a high job suspends the low one (SSUSP), runs on its
    slots, and the low job resumes."""
    from conftest import local_cluster

    site = tmp_path / "site.toml"
    site.write_text(SITE)
    with local_cluster(tmp_path, "--hosts", "1", "--slots-per-host", "4", "--mem-per-host", "2G",
                       "--heartbeat", "0.5", "--config", str(site)) as cl:
        c = cl.client
        assert {q.name for q in c.queues().queues} == {"low", "high", "elsewhere", "reclaim"}  # reclaim: built in (accounting.md)
        ids = c.submit_many([{"command": "sleep 30"}] * 3)
        held = wait_for(lambda: (v := c.job(ids[2])).reason and v, 20, "the third job's reason")
        assert [c.job(j).state for j in ids[:2]] == ["RUN", "RUN"] and held.state == "PEND"
        assert held.reason == f"limit user_jobs: {held.user} uses 2 of 2 running jobs", held.reason
        (row,) = [r for r in c.limits() if r.who == held.user]
        assert (row.jobs, row.max_jobs, row.held) == (2, 2, [ids[2]])
        c.kill(ids)
        wait_for(lambda: all(c.job(j).state == "EXIT" for j in ids), 20, "the three jobs killed")
        # A queue whose host list (a host group) names no registered host: its job waits, saying so.
        away = c.submit("true", queue="elsewhere")
        av = wait_for(lambda: (v := c.job(away)).reason and v, 20, "the elsewhere job's reason")
        assert av.state == "PEND" and av.reason == "queue elsewhere: none of its hosts (node9) has registered", av
        hosts_of = {ln.split()[0]: ln.split()[-1] for ln in cl.xce("queues").stdout.splitlines()[1:]}
        assert (hosts_of["high"], hosts_of["elsewhere"], hosts_of["reclaim"]) == ("~node9", "node9", "all"), hosts_of
        c.kill([away])
        wait_for(lambda: c.job(away).state == "EXIT", 20, "the elsewhere job killed")
        low = c.submit("sleep 60", slots=4)
        wait_for(lambda: c.job(low).state == "RUN", 20, "the low job running")
        high = c.submit("sleep 3", slots=4, queue="high")
        wait_for(lambda: c.job(low).state == "SSUSP", 20, "the low job preempted")
        (why,) = [e.detail for e in c.hist(low) if e.event == "suspended by system"]
        assert why == f"preempted by job {high} of queue high", why
        wait_for(lambda: c.job(high).state in ("RUN", "DONE"), 30, "the high job on the freed slots")
        assert c.audit().problems == []  # the suspended job's slots are free, its memory charged
        wait_for(lambda: c.job(high).state == "DONE", 30, "the high job ran on the freed slots")
        wait_for(lambda: c.job(low).state == "RUN", 30, "the low job resumed")
        events = [e.event for e in c.hist(low)]
        assert "suspended by system" in events and "resumed by system" in events, events
        c.kill([low])


HOSTS_SITE = """
[resources.cores]
kind = "attribute"
type = "numeric"

[resources.arch]
kind = "attribute"

[worker]
type = "X86_64"
attrs = { arch = "zen3", cores = 8 }

[hosts.node2]
attrs = { arch = "zen4", cores = 32 }
"""


def test_a_site_configs_host_attributes_place_jobs_by_select(tmp_path) -> None:
    """`xce up --config FILE` with [worker] and [hosts.node2] attributes on two local hosts:
    each worker reports its own (xce hosts -l), a numeric select[] and a string one land on the
    host that matches, a job no host matches waits saying so, and a string compared with >
    is refused at submit by name."""
    from conftest import local_cluster

    site = tmp_path / "site.toml"
    site.write_text(HOSTS_SITE)
    with local_cluster(tmp_path, "--hosts", "2", "--slots-per-host", "1", "--mem-per-host", "1G",
                       "--heartbeat", "0.5", "--config", str(site)) as cl:
        c = cl.client
        wait_for(lambda: len(c.hosts()) == 2, 20, "both hosts registered")
        hl = cl.xce("hosts", "-l").stdout
        assert "attributes: arch=zen3 cores=8 type=X86_64" in hl and "attributes: arch=zen4 cores=32" in hl, hl
        big, old, none = c.submit_many([{"command": "true", "resreq": "select[cores>16 && type==X86_64]"},
                                        {"command": "true", "resreq": "select[arch==zen3 && cores>=8]"},
                                        {"command": "true", "resreq": "select[cores>64]"}])
        wait_for(lambda: c.job(big).state == "DONE" and c.job(old).state == "DONE", 30, "both jobs ran")
        assert (c.job(big).hosts, c.job(old).hosts) == (["node2"], ["node1"])
        nv = wait_for(lambda: (v := c.job(none)).reason and v, 20, "the unmatched job's reason")
        assert nv.state == "PEND" and nv.reason == "select: no host matches cores>64", nv.reason
        refused = cl.xce("submit", "-R", "select[arch>zen3]", "true", check=False)
        assert refused.returncode != 0 and "'>' cannot compare string attribute 'arch'" in refused.stderr, refused
        c.kill([none])
        # Every run is charged: a run that was requeued (and whose job then never ran again)
        # still counts in `xce fairshare`, from the hard state the controller keeps.
        def slot_seconds() -> float:
            rows = json.loads(cl.xce("fairshare", "--json").stdout)["rows"]
            return sum(r["slot_seconds"] for r in rows if r["leaf"])

        before = slot_seconds()
        again = c.submit("sleep 30", resreq="select[cores>16]")
        t0 = wait_for(lambda: (v := c.job(again)).state == "RUN" and v.start_time, 20, "the job running")
        wait_for(lambda: time.time() > t0 + 2, 5, "two seconds of its run")
        cl.xce("hosts", "close", "node2")  # so the requeued job waits: its one run is the requeued one
        cl.xce("requeue", str(again))
        wait_for(lambda: c.job(again).state == "PEND", 20, "the job requeued")
        c.kill([again])
        wait_for(lambda: c.job(again).state == "EXIT", 20, "the requeued job killed while pending")
        assert slot_seconds() > before + 2 * 0.9  # a slot for 2 s at least, barely decayed


FAIR_SITE = """
[fairshare]
mem_weight = 0.0

[fairshare.tree]
by = "project"
members = { default = 1 }
"""


def test_equal_share_projects_interleave_where_submit_order_would_not(tmp_path) -> None:
    """Fairshare end to end (issue 16): project a submits three jobs, then b three, behind a
    blocker on one slot.  Submit order would run a, a, a; equal shares run b's first job second
    (a has used a slot, b nothing) and give each project two of the first four.  (By project:
    users would need Unix accounts to run as; the tree's principal is the only difference.)"""
    from conftest import local_cluster

    site = tmp_path / "site.toml"
    site.write_text(FAIR_SITE)
    with local_cluster(tmp_path, "--hosts", "1", "--slots-per-host", "1", "--heartbeat", "0.5",
                       "--config", str(site)) as cl:
        c = cl.client
        blocker = c.submit("sleep 30")
        wait_for(lambda: c.job(blocker).state == "RUN", 20, "the blocker running")
        ids = c.submit_many([{"command": "sleep 1", "project": p} for p in "aaabbb"])
        c.kill([blocker])
        views = c.wait(ids, timeout=90)
        started = [v.project for v in sorted(views, key=lambda v: v.start_time or 0)]
        assert all(v.state == "DONE" for v in views), views
        assert started[:2] == ["a", "b"] and sorted(started[:4]) == ["a", "a", "b", "b"], started
        share = {tuple(r.path): r for r in c.fairshare().rows}
        assert share[("a",)].slot_seconds > 0 and share[("b",)].slot_seconds > 0, share
