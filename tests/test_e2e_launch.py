"""`xce launch` (blaunch) and srun inside a job, end to end on a real local cluster: a task started
on the job's second host runs inside that host's share (its memory on that host's account), its
output and exit code come back to the caller, and it ends with the job."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from conftest import ROOT, Cluster, pid_alive, wait_for

PY = shlex.quote(sys.executable)
XCE = f"{PY} -m xce.cli.main"


def job_env(cluster: Cluster) -> dict[str, str]:
    """What a user's shell would carry into the job: where the cluster is, and this checkout."""
    return {"XCE_STATE_DIR": str(cluster.state_dir), "PYTHONPATH": str(ROOT)}


def test_a_launched_task_runs_on_the_second_host_and_its_output_and_exit_code_come_back(
        cluster2: Cluster, tmp_path: Path) -> None:
    task = ("import os, sys; print('task on', os.environ['XCE_HOST'], os.environ['LSB_JOBID']); "
            "print('to stderr', file=sys.stderr); sys.exit(7)")
    script = (f'set -- $XCE_HOSTS; {XCE} launch -n "$2" {PY} -c {shlex.quote(task)} >task.out 2>task.err; '
              'echo "$?" >task.code; echo "$2" >second')
    c = cluster2.client
    jid = c.submit(script, slots=4, resreq="span[ptile=2]", cwd=str(tmp_path), env=job_env(cluster2))
    v = cluster2.wait_job(jid)
    assert v.state == "DONE", (v, (tmp_path / "task.err").read_text())
    second = (tmp_path / "second").read_text().strip()
    assert second == v.hosts[1]
    assert (tmp_path / "task.out").read_text() == f"task on {second} {jid}\n"
    assert (tmp_path / "task.err").read_text() == "to stderr\n"
    assert (tmp_path / "task.code").read_text() == "7\n"


def test_a_launched_memory_hog_lands_on_its_hosts_account_and_ends_with_the_killed_job(
        cluster2: Cluster, tmp_path: Path) -> None:
    hog = f"echo $$ >hog.pid; exec {PY} -m xce.jobs.memhog 300:@{tmp_path / 'never'}"
    script = f'set -- $XCE_HOSTS; {XCE} launch "$2" sh -c {shlex.quote(hog)}'
    c = cluster2.client
    jid = c.submit(script, slots=4, resreq="span[ptile=2] rusage[mem=50]", cwd=str(tmp_path),
                   env=job_env(cluster2))
    pid_file = tmp_path / "hog.pid"
    # the shell creates the file before it writes the number: wait for the number
    pid = int(wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), 30, "the launched task to start"))
    v = c.job(jid)
    first, second = v.hosts

    def usage_on(h: str) -> int:
        return next(a for a in c.job(jid).accounts if a.host == h).mem_actual or 0

    wait_for(lambda: usage_on(second) >= 250 << 20, 30, f"300 MB on {second}'s account of job {jid}")
    assert usage_on(first) < 200 << 20  # the hog is the second host's, not the first's
    wait_for(lambda: next(h for h in c.hosts() if h.name == second).mem_actual >= 250 << 20, 10,
             f"{second}'s actual memory (xce hosts -l) to hold the task's")
    c.kill([jid])
    assert cluster2.wait_job(jid).state == "EXIT"
    wait_for(lambda: not pid_alive(pid), 20, "the launched task to end with its job")


def test_launch_is_refused_for_a_host_outside_the_job(cluster2: Cluster, tmp_path: Path) -> None:
    script = f'{XCE} launch nosuchhost true 2>refused; echo "$?" >code'
    jid = cluster2.client.submit(script, slots=1, cwd=str(tmp_path), env=job_env(cluster2))
    assert cluster2.wait_job(jid).state == "DONE"
    assert (tmp_path / "code").read_text() == "1\n"
    assert f"job {jid} has no share on nosuchhost" in (tmp_path / "refused").read_text()


def test_srun_and_blaunch_inside_a_two_host_job(cluster2: Cluster, tmp_path: Path) -> None:
    slurm_bin = cluster2.xce("compat", "path", "slurm").stdout.strip()
    lsf_bin = cluster2.xce("compat", "path", "lsf").stdout.strip()
    step = 'echo "$SLURM_PROCID $SLURM_LOCALID $SLURM_NODEID $XCE_HOST"'
    script = (f'PATH={shlex.quote(slurm_bin)}:{shlex.quote(lsf_bin)}:$PATH; '
              f'srun sh -c {shlex.quote(step)} | sort >all; '
              f'srun -n 2 --output=task.%j.%t sh -c {shlex.quote(step)}; '
              'blaunch -z "$XCE_HOSTS" sh -c \'echo "$XCE_HOST"; exit 3\' >blaunched; echo "$?" >blaunch.code')
    c = cluster2.client
    jid = c.submit(script, slots=4, resreq="span[ptile=2]", cwd=str(tmp_path), env=job_env(cluster2))
    v = cluster2.wait_job(jid)
    assert v.state == "DONE", v
    first, second = sorted(v.hosts)  # ranks follow SLURM_NODEID: Slurm's sorted node list
    assert (tmp_path / "all").read_text().splitlines() == [
        f"0 0 0 {first}", f"1 1 0 {first}", f"2 0 1 {second}", f"3 1 1 {second}"]
    assert (tmp_path / f"task.{jid}.0").read_text() == f"0 0 0 {first}\n"
    assert (tmp_path / f"task.{jid}.1").read_text() == f"1 0 1 {second}\n"
    assert sorted((tmp_path / "blaunched").read_text().splitlines()) == sorted(v.hosts)
    assert (tmp_path / "blaunch.code").read_text() == "3\n"
