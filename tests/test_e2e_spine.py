"""End to end on `xce up --hosts 2`: real daemons, real jobs, real processes."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from conftest import Cluster, local_cluster, memhog, wait_for

MB = 1024 * 1024
ENV = dict(os.environ)  # jobs run python with xce importable, as a bsub-like submit would


def test_jobs_run_with_exit_codes_and_output_files(cluster2: Cluster, tmp_path: Path) -> None:
    c = cluster2.client
    ok = c.submit(["sh", "-c", "echo hello from $XCE_JOBID"], resreq="rusage[mem=100M]",
                  stdout=str(tmp_path / "out.%J"), cwd=str(tmp_path))
    bad = c.submit(["sh", "-c", "echo oops >&2; exit 3"], resreq="rusage[mem=50M]",
                   stderr=str(tmp_path / "err.%J"), cwd=str(tmp_path))
    done, failed = c.wait([ok, bad], timeout=30)
    assert (done.state, done.exit_code) == ("DONE", 0)
    assert (failed.state, failed.exit_code) == ("EXIT", 3)
    assert (tmp_path / f"out.{ok}").read_text() == f"hello from {ok}\n"
    assert (tmp_path / f"err.{bad}").read_text() == "oops\n"
    assert done.mem_reserved == 100 * MB and done.hosts


def test_cli_submit_prints_lsf_line_and_wait_exit_code(cluster2: Cluster) -> None:
    r = cluster2.xce("submit", "-R", "rusage[mem=10]", "--", "true")
    assert r.stdout.startswith("Job <") and r.stdout.rstrip().endswith("is submitted to queue <normal>.")
    jid = r.stdout.split("<")[1].split(">")[0]
    assert cluster2.xce("wait", jid, "--timeout", "30").returncode == 0
    r = cluster2.xce("submit", "--", "false")
    jid = r.stdout.split("<")[1].split(">")[0]
    assert cluster2.xce("wait", jid, "--timeout", "30", check=False).returncode == 1


def test_invalid_request_exits_2_naming_the_part(cluster2: Cluster) -> None:
    r = cluster2.xce("submit", "-R", "rusage[mem=5X]", "--", "true", check=False)
    assert r.returncode == 2 and "unknown unit" in r.stderr and "^" in r.stderr
    r = cluster2.xce("submit", "-q", "nosuch", "--", "true", check=False)
    assert r.returncode == 2 and "queue 'nosuch' does not exist" in r.stderr
    r = cluster2.xce("submit", "-R", "rusage[mem=64G]", "--", "true", check=False)
    assert r.returncode == 2 and "no host could ever run it" in r.stderr


def test_dry_run_json_submits_nothing(cluster2: Cluster) -> None:
    import json

    r = cluster2.xce("submit", "--dry-run", "--json", "-R", "rusage[mem=2G/task] span[hosts=1]", "-n", "2",
                     "--", "true", check=False)
    # 2 slots x 2G per task cannot fit a 2G host: refused before anything is submitted
    assert r.returncode == 2
    r = cluster2.xce("submit", "--dry-run", "--json", "-R", "rusage[mem=512M] span[hosts=1]", "--", "true")
    out = json.loads(r.stdout)
    assert out["resreq"]["rusage"][0]["amount"] == 512 * MB and out["resreq"]["span_hosts"] == 1
    assert cluster2.client.jobs(all=True) == []


def test_memory_is_measured_while_running_and_peak_kept(cluster2: Cluster) -> None:
    c = cluster2.client
    jid = c.submit(memhog("100:4"), resreq="rusage[mem=50M]", env=ENV)
    running = wait_for(lambda: (v := c.job(jid)).mem_actual is not None and v.mem_actual >= 90 * MB and v,
                       20, "actual >= 90 MB while running")
    assert running.state == "RUN"
    acc = running.accounts[0]
    assert acc.mem_overage == acc.mem_actual - 50 * MB and acc.mem_slack == 0
    host = c.hosts([acc.host])[0]
    assert host.mem_overage >= acc.mem_overage and host.mem_slack == 0
    (final,) = c.wait([jid], timeout=30)
    assert final.state == "DONE" and final.mem_peak >= 90 * MB
    assert cluster2.xce("admin", "audit").returncode == 0


def test_kill_running_job(cluster2: Cluster) -> None:
    c = cluster2.client
    jid = c.submit(["sh", "-c", "sleep 60 & sleep 60"], resreq="rusage[mem=10]")
    wait_for(lambda: c.job(jid).state == "RUN", 20, "RUN")
    assert c.kill([jid]) == {jid: "kill requested"}
    (v,) = c.wait([jid], timeout=20)
    assert v.state == "EXIT" and "killed" in v.reason
    pend = c.submit(["true"], resreq="rusage[mem=1G]", queue="normal")
    c.kill([pend])
    assert c.job(pend).state in ("EXIT", "DONE", "RUN")


def test_memlimit_kill_ends_memlimit_with_peak(cluster2: Cluster) -> None:
    r = cluster2.xce("submit", "-M", "60M", "-R", "rusage[mem=50M]", "--", *memhog("150:30"))
    jid = int(r.stdout.split("<")[1].split(">")[0])
    v = cluster2.wait_job(jid, timeout=30)
    assert v.state == "EXIT" and v.reason == "MEMLIMIT"
    assert v.mem_peak > 60 * MB


def test_stopped_worker_makes_host_unavail_and_jobs_follow_queue_policy(cluster2: Cluster) -> None:
    """A hung worker's jobs are UNKWN, and RUN again when it answers; hung past lost_after, its
    host is lost and its jobs follow queue policy."""
    c = cluster2.client
    rerun = c.submit(["sleep", "60"], queue="rerun", resreq="select[hname==node1] rusage[mem=10]")
    plain = c.submit(["sleep", "60"], resreq="select[hname==node1] rusage[mem=10]")
    wait_for(lambda: {v.state for v in c.jobs([rerun, plain])} == {"RUN"}, 20, "both RUN on node1")
    pid = cluster2.daemon_pid("worker-node1")
    os.kill(pid, signal.SIGSTOP)  # a hung host: alive for the supervisor, silent for the controller
    try:  # unknown after 3 heartbeats of 0.5 s, lost after 4.5 s: continue it in between
        wait_for(lambda: {v.state for v in c.jobs([rerun, plain])} == {"UNKWN"}, 20, "both UNKWN")
        assert c.hosts(["node1"])[0].state == "unavail"
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_for(lambda: {v.state for v in c.jobs([rerun, plain])} == {"RUN"}, 20, "both RUN again")
    assert c.hosts(["node1"])[0].state == "full" and [e.event for e in c.hist(plain)][-2:] == \
        ["host unknown", "host back"]
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: c.hosts(["node1"])[0].state == "unavail", 10, "node1 unavail")
        v = cluster2.wait_job(plain, timeout=10)
        assert v.state == "EXIT" and "host node1 lost" in v.reason
        r = c.job(rerun)
        assert r.state == "PEND" and "requeued" in r.reason
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_for(lambda: c.hosts(["node1"])[0].state != "unavail", 15, "node1 back")
    # The requeued job may only run again somewhere; the stale copy on node1 was killed.
    wait_for(lambda: c.job(rerun).state == "RUN", 20, "rerunnable job running again")
    c.kill([rerun])


def test_restarted_worker_reattaches_to_running_job(tmp_path: Path) -> None:
    # 1 s heartbeats: the host is lost only after 9 s of silence, longer than a loaded machine
    # takes to restart a worker (with 0.5 s it was lost first, now and then, under load).
    with local_cluster(tmp_path, "--hosts", "2", "--slots-per-host", "2", "--mem-per-host", "2G",
                       "--heartbeat", "1") as cluster2:
        _reattach(cluster2, tmp_path)


def _reattach(cluster2: Cluster, tmp_path: Path) -> None:
    c = cluster2.client
    marker = tmp_path / "runs"
    jid = c.submit(["sh", "-c", f"echo started >> {marker}; sleep 4; exit 7"],
                   resreq="select[hname==node2] rusage[mem=10]")
    wait_for(lambda: c.job(jid).state == "RUN" and marker.exists(), 20, "RUN")
    old = cluster2.daemon_pid("worker-node2")
    os.kill(old, signal.SIGKILL)
    wait_for(lambda: cluster2.daemon_pid("worker-node2") != old, 10, "worker restarted by the supervisor")
    v = cluster2.wait_job(jid, timeout=30)
    assert (v.state, v.exit_code) == ("EXIT", 7), v.reason  # the real exit code, read after re-attaching
    assert marker.read_text() == "started\n"      # ran exactly once
    assert c.hosts(["node2"])[0].state == "ok"


def test_jobs_run_in_the_submitting_environment(cluster2: Cluster, tmp_path: Path) -> None:
    env = {**os.environ, "XCE_TEST_MARK": "carried over"}
    r = cluster2.xce("submit", "-o", str(tmp_path / "env.%J"), "--", "sh", "-c", "echo $XCE_TEST_MARK", env=env)
    jid = int(r.stdout.split("<")[1].split(">")[0])
    assert cluster2.wait_job(jid).state == "DONE"
    assert (tmp_path / f"env.{jid}").read_text() == "carried over\n"
    # ...while snapshots and the event stream never carry environments (they hold secrets).
    snap = cluster2.client.snapshot()
    assert jid in {j.id for j in snap.jobs} and all(not j.spec.env for j in snap.jobs)


def test_a_full_cluster_still_gives_every_new_job_its_reason_and_runs_the_queue(cluster2: Cluster) -> None:
    """The scheduler skips rounds while every slot is taken, but never for a job it has not seen."""
    c = cluster2.client
    blockers = [c.submit(["sleep", "60"], resreq="rusage[mem=10]") for _ in range(4)]  # 2 hosts x 2 slots
    wait_for(lambda: all(c.job(j).state == "RUN" for j in blockers), 20, "every slot taken")
    first = c.submit(["true"], resreq="rusage[mem=10]")
    wait_for(lambda: "the cluster has 0 free" in (c.job(first).reason or ""), 10, "a reason for the first")
    later = c.submit(["true"], resreq="rusage[mem=10]")  # the cluster was already full in the last round
    wait_for(lambda: "the cluster has 0 free" in (c.job(later).reason or ""), 10, "a reason for the later one")
    c.kill(blockers[:1])
    for jid in (first, later):
        assert c.wait([jid], timeout=30)[0].state == "DONE"
    c.kill(blockers[1:])


def test_a_job_told_one_reason_gets_the_full_clusters_once_the_walk_stops_before_it(cluster2: Cluster) -> None:
    """A full round reads the queue only up to its first job (xce/daemons/scheduler.py): a job an
    earlier round walked, and told why, is told again when the cluster fills up ahead of it."""
    c = cluster2.client
    blockers = [c.submit(["sleep", "60"], resreq="rusage[mem=10]") for _ in range(3)]  # 2 hosts x 2 slots
    wait_for(lambda: all(c.job(j).state == "RUN" for j in blockers), 20, "three slots taken")
    wide = c.submit(["true"], slots=2, resreq="rusage[mem=10]")
    wait_for(lambda: c.job(wide).reason == "slots: needs 2; the cluster has 1 free", 10, "the walk's reason")
    last = c.submit(["sleep", "60"], resreq="rusage[mem=10]")
    wait_for(lambda: c.job(last).state == "RUN", 20, "the last slot taken")
    wait_for(lambda: c.job(wide).reason == "slots: needs 2; the cluster has 0 free", 10, "the full cluster's reason")
    c.kill([*blockers, last, wide])
