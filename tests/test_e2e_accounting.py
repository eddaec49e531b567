"""The heart, end to end: one host capped at 2G, reservations against real usage."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from conftest import Cluster, audit_ok, local_cluster, memhog, wait_for

MB = 1024 * 1024
G = 1024 * MB
ENV = dict(os.environ)


def test_overage_blocks_and_slack_holds_the_promise(tmp_path: Path) -> None:
    # --reclaim-settle 1: the second half (reclaim_in_settled_slack) runs in this cluster.
    with local_cluster(tmp_path, "--hosts", "1", "--slots-per-host", "4", "--mem-per-host", "2G",
                       "--heartbeat", "0.5", "--reclaim-settle", "1") as cl:
        c = cl.client
        # A reserves 500M and grows to ~1.2G: its overage is charged on the host.
        a = c.submit(memhog("1200:120"), resreq="rusage[mem=500M]", env=ENV, name="A")
        wait_for(lambda: (c.job(a).mem_actual or 0) >= 1150 * MB, 30, "A at ~1.2G")
        host = c.hosts()[0]
        assert host.mem_overage >= 650 * MB and host.mem_slack == 0
        assert host.mem_available == host.mem_os_available - host.mem_slack
        assert host.mem_available < 1 * G
        audit_ok(cl)

        # B asks 1G: a flat reservation count (2G - 500M) would place it and oversubscribe the host.
        b = c.submit(memhog("50:120"), resreq="rusage[mem=1G]", env=ENV, name="B")
        v = wait_for(lambda: (v := c.job(b)).reason.startswith("mem:") and v, 10, "B pending on mem")
        assert v.state == "PEND"
        assert "needs 1.0G" in v.reason and "available for scheduling (OS" in v.reason
        r = cl.xce("jobs", "-l", str(b))
        assert "Pending reason: mem: needs 1.0G" in r.stdout
        audit_ok(cl)

        # When A ends, B starts.
        c.kill([a])
        wait_for(lambda: c.job(b).state == "RUN", 15, "B running after A ended")
        vb = wait_for(lambda: (v := c.job(b)).mem_actual is not None and v, 10, "B reported")
        assert vb.accounts[0].mem_slack == vb.mem_reserved - vb.mem_actual

        # B reserved 1G but uses ~50M: its slack keeps the promise, so D asking 1.5G waits
        # even though the OS shows ~1.9G free (a load-based scheduler would place D).
        d = c.submit(["true"], resreq="rusage[mem=1.5G]", name="D")
        vd = wait_for(lambda: (v := c.job(d)).reason.startswith("mem:") and v, 10, "D pending on mem")
        host = c.hosts()[0]
        assert host.mem_os_available >= int(1.5 * G)
        assert host.mem_slack >= 900 * MB
        assert vd.state == "PEND" and "needs 1.5G" in vd.reason
        audit_ok(cl)
        r = cl.xce("admin", "audit")
        assert "0 violation(s)" in r.stdout

        c.kill([b])
        wait_for(lambda: c.job(d).state in ("RUN", "DONE"), 15, "D placed once B ended")
        final = c.wait([a, b, d], timeout=20)
        rec = {v.name: v for v in final}
        # The accounting record keeps per host: reserved, peak, charged peak and the slack integral.
        assert rec["A"].accounts[0].mem_peak >= 1150 * MB
        assert rec["A"].accounts[0].mem_charged >= 1150 * MB
        assert rec["B"].mem_slack_integral > 0
        audit_ok(cl)
        # xce recommend: B asked 1G and peaked near 50M; its slack integral is the waste.
        rows = {r["job"]: r for r in json.loads(cl.xce("recommend", "--json").stdout)}
        assert rows["B"]["mem_requested"] == 1 * G and rows["B"]["mem_peak_max"] < 200 * MB
        assert rows["B"]["mem_wasted_hours"] > 0 and rows["B"]["mem_recommended"] < 300 * MB
        # rusage[mem=auto]: with fewer runs of B than the queue's mem_auto_min_runs (3) the leader
        # takes the fallback (none here) and says why; from the third run on it sizes B from that
        # history, as recommend does.
        for runs in (1, 2):
            early = c.submit(["true"], resreq="rusage[mem=auto]", name="B")
            (ve,) = c.wait([early], timeout=20)
            assert ve.mem_reserved == 0 and ve.mem_basis == (
                f"auto: only {runs} run{'s' * (runs > 1)} of {ve.user}/B in normal (auto needs 3), no reservation")
        rows = {r["job"]: r for r in json.loads(cl.xce("recommend", "--json").stdout)}
        sized = c.submit(["true"], resreq="rusage[mem=auto]", name="B")
        (vs,) = c.wait([sized], timeout=20)
        assert vs.mem_reserved == rows["B"]["mem_recommended"], (vs.mem_reserved, rows["B"])
        assert vs.mem_basis.startswith(f"auto: p95 of 3 runs of {vs.user}/B in normal, "), vs.mem_basis
        assert f"Reservation sized: {vs.mem_basis}" in cl.xce("jobs", "-l", str(sized)).stdout
        reclaim_in_settled_slack(cl, tmp_path)


def reclaim_in_settled_slack(cl: Cluster, tmp_path: Path) -> None:
    """docs/accounting.md "Reclaimable memory", the live timeline: a reclaiming job starts in a settled
    job's slack that a normal job cannot use, and is requeued (RECLAIMED) when the owner grows back;
    the owner is untouched and the audit clean throughout."""
    c = cl.client
    grow = tmp_path / "grow"
    # The owner reserves 1.5G and settles at 100M until told to grow to 1.3G (within its reservation).
    owner = c.submit(memhog("100:@" + str(grow), "1300:120"), resreq="rusage[mem=1500M]", env=ENV, name="owner")
    wait_for(lambda: (c.hosts()[0].mem_reclaimable or 0) >= 1 * G, 30, "the owner settled, its slack reclaimable")
    host = c.hosts()[0]
    assert host.mem_available < 1 * G <= host.mem_reclaimable + host.mem_available
    assert host.mem_reclaimable <= host.mem_slack
    r = cl.xce("hosts", "-l")
    assert "reclaimable " in r.stdout and "slack " in r.stdout
    audit_ok(cl)
    # A normal job of 1G cannot use that slack; a reclaiming one of 1G runs in it.
    normal = c.submit(["true"], resreq="rusage[mem=1G]", name="normal")
    lent = c.submit(memhog("200:120"), resreq="rusage[mem=1G]", queue="reclaim", env=ENV, name="lent")
    wait_for(lambda: c.job(lent).state == "RUN" and (c.job(lent).mem_actual or 0) >= 150 * MB, 20,
             "the reclaiming job running")
    vn = c.job(normal)
    assert vn.state == "PEND" and vn.reason.startswith("mem: needs 1.0G"), vn.reason
    audit_ok(cl)
    # The owner grows back into its reservation: the reclaiming job goes (requeued), the owner stays.
    grow.touch()
    grown_at = time.time()
    v = wait_for(lambda: (v := c.job(lent)).state == "PEND" and v, 20, "the reclaiming job requeued")
    assert "RECLAIMED" in v.reason, v.reason
    assert any(e.event == "requeued" and "RECLAIMED" in e.detail for e in c.hist(lent)), c.hist(lent)
    vo = wait_for(lambda: (v := c.job(owner)).mem_actual and v.mem_actual >= 1200 * MB and v, 20, "owner at 1.3G")
    assert vo.state == "RUN" and not vo.reason
    assert not any("kill" in e.event or "suspend" in e.event for e in c.hist(owner)), c.hist(owner)
    audit_ok(cl)
    # A new reclaiming job waits with the reclaim step's reason (the requeued one shows why it was requeued).
    late = c.submit(["true"], resreq="rusage[mem=1G]", queue="reclaim", name="late")
    wait_for(lambda: c.job(late).reason.startswith("reclaim: needs 1.0G, node1 has"), 20, "the reclaim step's reason")
    if os.environ.get("XCE_TIMELINE"):  # docs/accounting.md's timeline
        print(f"TIMELINE {grown_at:.2f} the owner is told to grow")
        for jid in (owner, lent):
            for e in c.hist(jid):
                print(f"TIMELINE {e.time:.2f} job {jid} {e.event} {e.by} {e.detail}")
    c.kill([owner, lent, normal, late])


def test_memory_pressure_kills_the_largest_overage_never_a_job_within_its_reservation(tmp_path: Path) -> None:
    with local_cluster(tmp_path, "--hosts", "1", "--slots-per-host", "4", "--mem-per-host", "2G",
                       "--heartbeat", "0.5", "--mem-floor", "500M") as cl:
        c = cl.client
        # Within its reservation, and bigger than the offender: must survive.
        keep = c.submit(memhog("600:120"), resreq="rusage[mem=800M]", env=ENV, name="within")
        wait_for(lambda: (c.job(keep).mem_actual or 0) >= 550 * MB, 30, "the well-behaved job at 600M")
        # Reserved 100M, grows to 1.1G: OS-available falls to ~300M, under the 500M floor.
        grow = c.submit(memhog("100:2", "1100:120"), resreq="rusage[mem=100M]", env=ENV, name="over")
        v = cl.wait_job(grow, timeout=40)
        assert v.state == "EXIT" and v.reason == "MEMPRESSURE", v
        assert v.mem_peak > 100 * MB
        assert c.job(keep).state == "RUN"
        c.kill([keep])
