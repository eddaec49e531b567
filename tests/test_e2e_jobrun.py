"""Running jobs as LSF does, end to end on a real local cluster: parallel jobs once on the
first host with the LSB_* environment, run limits, signals (stop/continue), peek."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from conftest import Cluster, proc_state, wait_for



def test_a_two_host_job_runs_its_command_once_with_the_lsf_environment(cluster2: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    out.mkdir()
    script = ('env > "$XCE_HOST.env"; cp "$LSB_DJOB_HOSTFILE" "$XCE_HOST.hostfile"; '
              'echo ran >> runs.log')
    c = cluster2.client
    jid = c.submit(script, slots=4, resreq="span[ptile=2]", cwd=str(out), name="par", stdout="o.%J")
    v = cluster2.wait_job(jid)
    assert v.state == "DONE", v
    assert sorted(v.hosts) == ["node1", "node2"] and len(v.accounts) == 2
    first, second = v.hosts
    assert (out / "runs.log").read_text() == "ran\n"  # once, not once per host
    assert sorted(p.name for p in out.glob("*.env")) == [f"{first}.env"]
    env = dict(line.split("=", 1) for line in (out / f"{first}.env").read_text().splitlines() if "=" in line)
    assert env["LSB_JOBID"] == str(jid) and env["LSB_JOBNAME"] == "par"
    assert env["LSB_HOSTS"] == f"{first} {first} {second} {second}"
    assert env["LSB_MCPU_HOSTS"] == f"{first} 2 {second} 2"
    assert env["LSB_DJOB_NUMPROC"] == "4" and env["LSB_JOBINDEX"] == "0"
    assert env["LSB_OUTPUTFILE"] == str(out / f"o.{jid}") and env["LSB_SUB_HOST"]
    assert env["SLURM_JOB_NODELIST"] == "node[1-2]" and env["SLURM_NTASKS"] == "4"  # Slurm's sorted, compressed list
    assert env["SLURM_CPUS_ON_NODE"] == "2" and env["SLURM_NODEID"] == str(["node1", "node2"].index(first))
    assert (out / f"{first}.hostfile").read_text() == f"{first}\n{first}\n{second}\n{second}\n"


def test_a_job_over_its_run_limit_ends_exit_term_runlimit(cluster2: Cluster) -> None:
    c = cluster2.client
    jid = c.submit("sleep 60", run_limit=1.0)
    v = cluster2.wait_job(jid, timeout=30)
    assert v.state == "EXIT" and v.reason == "TERM_RUNLIMIT" and v.signal == signal.SIGTERM, v


def test_stop_and_continue_a_running_job_keeps_its_memory_charged(cluster2: Cluster, tmp_path: Path) -> None:
    c = cluster2.client
    pidfile = tmp_path / "pid"
    jid = c.submit(f'echo $$ > {pidfile}; exec {sys.executable} -m xce.jobs.memhog 150:120',
                   resreq="rusage[mem=100M]", cwd=str(tmp_path))
    wait_for(lambda: (v := c.job(jid)).mem_actual and v.mem_actual > 120 << 20, 30, "the job's memory seen")
    pid = int(wait_for(lambda: pidfile.read_text().strip(), 10, "the pid file"))
    assert c.kill([jid], signal=signal.SIGSTOP) == {jid: f"signal {int(signal.SIGSTOP)} sent"}
    wait_for(lambda: proc_state(pid) == "T", 10, "the process stopped")
    host = c.job(jid).hosts[0]
    stopped_at = time.time()
    # Stopped, its pages stay resident: a second of heartbeats later (samples every 0.5 s or
    # less), the job and its host are still charged for them.
    wait_for(lambda: (c.hosts([host])[0].last_seen or 0) > stopped_at + 1.0, 10, "heartbeats after the stop")
    assert proc_state(pid) == "T" and (c.job(jid).mem_actual or 0) > 120 << 20
    assert c.hosts([host])[0].mem_actual > 120 << 20
    r = cluster2.xce("kill", "-s", "CONT", str(jid))
    assert r.stdout.strip() == f"Job <{jid}>: signal {int(signal.SIGCONT)} sent"
    wait_for(lambda: proc_state(pid) in "SR", 10, "the process continued")
    c.kill([jid])
    assert cluster2.wait_job(jid).state == "EXIT"


def test_peek_shows_the_tail_of_a_running_job(cluster2: Cluster, tmp_path: Path) -> None:
    c = cluster2.client
    jid = c.submit("seq 1 5000; echo oops >&2; sleep 60", cwd=str(tmp_path), stdout="out.%J", stderr="err.%J")
    wait_for(lambda: c.job(jid).state == "RUN", 20, "running")
    r = wait_for(lambda: (p := c.peek(jid, max_bytes=100)).stderr and p, 10, "peeked output")
    assert r.stdout.endswith("4999\n5000\n") and len(r.stdout) <= 100 and r.stderr == "oops\n"
    assert r.stdout_path == str(tmp_path / f"out.{jid}") and r.host == c.job(jid).hosts[0]
    text = cluster2.xce("peek", "--bytes", "20", str(jid)).stdout
    assert "<< output from stdout" in text and "5000\n" in text and "oops" in text
    c.kill([jid])
    cluster2.wait_job(jid)
    done = c.peek(jid)
    assert done.state == "EXIT" and "out.%J" in done.note and not done.stdout
