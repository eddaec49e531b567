"""End to end on a real cluster: `xce submit -E` (bsub's pre-execution command, issue 14).

The worker runs the -E line by /bin/sh on the first host, as the job's user, in its cwd and
environment, with its output in the job's; a failure sends the job back to PEND (its history
names the command and its exit code), and after the queue's max_preexec_retry failures (5) it
is held; resumed with the pre-exec now passing, the job runs after it.
"""

from __future__ import annotations

import os
from pathlib import Path

from conftest import Cluster, wait_for


def test_a_failing_pre_exec_requeues_then_holds_and_a_passing_one_runs_first(cluster2: Cluster,
                                                                             tmp_path: Path) -> None:
    c = cluster2.client
    out, gate = tmp_path / "out", tmp_path / "gate"
    r = cluster2.xce("submit", "-E", "echo pre $MARK in $PWD; test -e gate", "-o", str(out), "-cwd", str(tmp_path),
                     "--", "sh", "-c", "echo main", env={**os.environ, "MARK": "m1"})
    jid = int(r.stdout.split("<")[1].split(">")[0])
    held = wait_for(lambda: (v := c.job(jid)).state == "PSUSP" and v, 30, "the job held after 5 failures")
    assert held.reason == ('held: pre-execution command "echo pre $MARK in $PWD; test -e gate" exited 1, '
                           "5 failures (the queue's max_preexec_retry); xce resume to retry")
    requeued = [e for e in c.hist(jid) if e.event == "requeued"]
    assert [e.detail for e in requeued] == [
        f'pre-execution command "echo pre $MARK in $PWD; test -e gate" exited 1 (failure {n} of 5)'
        for n in range(1, 5)]
    assert out.read_text() == f"pre m1 in {tmp_path}\n" * 5  # its environment and cwd; the command never ran
    long = cluster2.xce("jobs", "-l", str(jid)).stdout
    assert "Pre-execution command: echo pre $MARK in $PWD; test -e gate" in long

    gate.touch()
    assert c.resume([jid]) == {jid: "PEND"}
    assert cluster2.wait_job(jid).state == "DONE"
    assert out.read_text().endswith(f"pre m1 in {tmp_path}\nmain\n")  # the pre-exec ran first
