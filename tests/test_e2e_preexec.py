"""End to end on a real cluster: `xce submit -E` (bsub's pre-execution command, issue 14).

The worker runs the -E line by /bin/sh on the first host, as the job's user, in its cwd and
environment, with its output in the job's; a failure sends the job back to PEND (its history
names the command and its exit code), and after the queue's max_preexec_retry failures (5) it
is held; resumed with the pre-exec now passing, the job runs after it.
"""

from __future__ import annotations

import os
from pathlib import Path

from conftest import Cluster, proc_state, wait_for


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


TIMEOUT_SITE = """
[queues.pre]
default = true
preexec_timeout = 1.0
max_preexec_retry = 2
"""


def test_a_pre_exec_that_hangs_is_killed_at_its_queues_timeout_and_frees_the_slot(tmp_path: Path) -> None:
    """LSF's JOB_PREPROC_TIMEOUT as a queue's preexec_timeout, on one host of one slot: a -E that
    hangs is killed (its processes too) after 1 s, twice, then the job is held (PSUSP), and the job
    queued behind it runs.  Before, the hanging -E held the only slot for ever."""
    from conftest import local_cluster

    site = tmp_path / "site.toml"
    site.write_text(TIMEOUT_SITE)
    pids = tmp_path / "pre.pids"
    with local_cluster(tmp_path, "--hosts", "1", "--slots-per-host", "1", "--mem-per-host", "2G",
                       "--heartbeat", "0.5", "--config", str(site)) as cl:
        c = cl.client
        hung, behind = c.submit_many([{"command": "true", "pre_exec": f"echo $$ >> {pids}; exec sleep 60"},
                                      {"command": "true"}])
        held = wait_for(lambda: (v := c.job(hung)).state == "PSUSP" and v, 40, "the hung job held after 2 timeouts")
        assert held.reason.startswith('held: pre-execution command "echo $$ >> ') and held.reason.endswith(
            "\" ran past the queue's preexec_timeout (1 s): killed, exit 98, 2 failures (the queue's "
            "max_preexec_retry); xce resume to retry"), held.reason  # (the command cut to 60 characters)
        (requeued,) = [e.detail for e in c.hist(hung) if e.event == "requeued"]
        assert requeued.endswith("ran past the queue's preexec_timeout (1 s): killed, exit 98 (failure 1 of 2)")
        assert cl.wait_job(behind).state == "DONE"  # the slot was freed
        tried = [int(p) for p in pids.read_text().split()]
        assert len(tried) == 2 and all(proc_state(p) in "?Z" for p in tried), [proc_state(p) for p in tried]
