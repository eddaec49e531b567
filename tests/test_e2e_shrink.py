"""Shrinking a settled reservation, end to end (docs/accounting.md "Shrinking a settled reservation").

One host capped at 2G, heartbeat 0.5 s, `--reclaim-settle 5 --shrink-age 0.5`: a job asks 1.5G and
holds ~200M; once its peak has held still it is shrunk (a Reserve committed through Raft), and a
normal job of 1.2G that could not fit before is placed in the memory that frees.  Then the first
grows back past its shrunk reservation and is restored, untouched.  The audit is clean throughout,
and the worker holds the reservation in force the controller committed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import Cluster, audit_ok, local_cluster, memhog, wait_for

MB = 1024 * 1024
ENV = dict(os.environ)


def worker_in_force(c: Cluster, job_id: int) -> int | None:
    """What the worker saved of the job's reservation in force (its task's .upd file), if anything."""
    for path in c.state_dir.glob(f"**/tasks/{job_id}.*.upd"):
        return json.loads(path.read_text()).get("in_force")
    return None


def hist_time(c: Cluster, job_id: int, event: str) -> float:
    return next(e.time for e in c.client.hist(job_id) if e.event == event)


def test_a_settled_reservation_shrinks_a_normal_job_runs_in_what_it_freed_and_growth_restores_it(
        tmp_path: Path) -> None:
    # Settling takes 5 s (min_run, window), so the second job is seen pending well before the
    # first can shrink: at shrink_age 0.5 the moment is about 6 s after the first starts.
    with local_cluster(tmp_path, "--hosts", "1", "--slots-per-host", "4", "--mem-per-host", "2G",
                       "--heartbeat", "0.5", "--reclaim-settle", "5", "--shrink-age", "0.5") as cl:
        c = cl.client
        grow = tmp_path / "grow"
        a = c.submit(memhog("200:@" + str(grow), "600:300"), resreq="rusage[mem=1500M]", env=ENV, name="A")
        wait_for(lambda: c.job(a).state == "RUN", 30, "A running")
        # B asks 1.2G: with A's whole 1.5G promised (unreported, or its slack once reported) it cannot fit.
        b = c.submit(memhog("50:300"), resreq="rusage[mem=1200M]", env=ENV, name="B")
        vb = wait_for(lambda: (v := c.job(b)).reason.startswith("mem:") and v, 30, "B pending on mem")
        assert vb.state == "PEND" and "needs 1.2G" in vb.reason, vb.reason
        assert c.job(a).mem_resized == "", "A shrank before B was seen pending: the test lost its race"
        audit_ok(cl)

        # A's peak holds still: the leader shrinks it to its peak + 10 %, and B is placed in what that freed.
        va = wait_for(lambda: (v := c.job(a)).mem_resized.startswith("shrunk") and v, 60, "A shrunk")
        assert va.mem_asked == 1500 * MB and va.mem_reserved < 400 * MB, va
        assert va.mem_reserved >= va.mem_peak, va  # its peak + margin: never below what it has used
        wait_for(lambda: c.job(b).state == "RUN", 30, "B placed in the memory A's shrink freed")
        assert hist_time(cl, b, "dispatched") >= hist_time(cl, a, "reservation shrunk")
        wait_for(lambda: worker_in_force(cl, a) == va.mem_reserved, 20, "the worker told A's reservation in force")
        audit_ok(cl)
        r = cl.xce("jobs", "-l", str(a))
        assert "Reservation in force: " in r.stdout and "of 1.5G asked;" in r.stdout and " shrunk on node1 to " \
            in r.stdout, r.stdout
        (row,) = json.loads(cl.xce("jobs", "--json", str(a)).stdout)
        assert (row["mem_asked"], row["mem_reserved"]) == (1500 * MB, va.mem_reserved), row
        assert row["mem_resized"].startswith("shrunk on node1") and row["mem_resized_time"] > 0, row

        # A grows to 600M, past its shrunk reservation: it is restored (as far as the host's room
        # reaches: B's promise stays whole), and nothing is killed.
        grow.touch()
        va = wait_for(lambda: (v := c.job(a)).mem_resized.startswith("restored") and (v.mem_actual or 0) > 500 * MB
                      and v, 60, "A restored after it grew")
        assert va.state == "RUN" and va.mem_reserved > 400 * MB and va.mem_reserved <= 1500 * MB, va
        assert c.job(b).state == "RUN"
        wait_for(lambda: worker_in_force(cl, a) == c.job(a).mem_reserved, 20, "the worker told A's restore")
        assert not any("kill" in e.event or "suspend" in e.event for e in c.hist(a)), c.hist(a)
        audit_ok(cl)
        if os.environ.get("XCE_TIMELINE"):  # docs/accounting.md's timeline
            for jid in (a, b):
                for e in c.hist(jid):
                    print(f"TIMELINE {e.time:.2f} job {jid} {e.event} {e.by} {e.detail}")
        c.kill([a, b])
