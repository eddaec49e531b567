"""The LSF and Slurm commands end to end: the scripts `xce compat path` writes, on a real cluster."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import conftest
from tests.conftest import STREAMING_JOB, Cluster, local_cluster, run_streaming
from xce.compat import shims


def wait_for(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    """conftest.wait_for with the deadline stretched by the machine's load (up to 4x): each poll
    here runs a command, which takes over a second at load 15 on 2 cores instead of ~0.1."""
    slowness = min(4.0, max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)))
    return conftest.wait_for(cond, timeout * slowness, what)


def _env(c: Cluster, flavor: str) -> dict[str, str]:
    d = c.xce("compat", "path", flavor).stdout.strip()
    env = {k: v for k, v in os.environ.items() if k != "XCE_STATE_DIR"}  # the scripts know their cluster
    env["PATH"] = f"{d}:{env['PATH']}"
    return env


def _run(env: dict[str, str], *argv: str, stdin: str | None = None, cwd: Path | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), env=env, input=stdin, capture_output=True, text=True, timeout=60, cwd=cwd)


def _imports(env: dict[str, str], *argv: str, stdin: str | None = None, cwd: Path | None = None
             ) -> tuple[set[str], set[str]]:
    """XCE's modules a command imported: (from its pack, through the path finder), by ``python -v``."""
    r = _run({**env, "PYTHONVERBOSE": "1"}, *argv, stdin=stdin, cwd=cwd)
    assert r.returncode == 0, r.stderr[-2000:]
    found = re.findall(r"^import '(xce[\w.]*)' # <([\w.]+) object", r.stderr, re.M)
    return {m for m, loader in found if loader == "xce.compat.packed.Packed"}, \
        {m for m, loader in found if loader != "xce.compat.packed.Packed"}


def _stat(env: dict[str, str], job: str) -> str:
    r = _run(env, "bjobs", "-noheader", "-o", "jobid stat", job)
    return r.stdout.split()[1] if r.returncode == 0 and r.stdout.split() else ""


def _same_through_both_paths(env: dict[str, str], *argv: str) -> None:
    """A listing through the read door (rows of the fields its format reads, no pyzmq) prints
    what the full path prints; retried while jobs change state between the two runs."""
    seen: list[tuple[str, str]] = []

    def both() -> bool:
        door = _run({**env, "XCE_DEBUG_PATH": "1"}, *argv)
        full = _run({**env, "XCE_DEBUG_PATH": "1", "XCE_QUICK": "0"}, *argv)
        assert door.stderr == "jobs path door; zmq not loaded\n", door.stderr
        assert full.stderr.startswith("jobs path full"), full.stderr
        assert door.stdout.count("\n") >= 2, door.stdout
        seen[:] = [(door.stdout, full.stdout)]
        return door.stdout == full.stdout
    try:
        wait_for(both, 30, f"{argv[0]} to print the same through the door and the full path")
    except AssertionError as e:
        raise AssertionError(f"{e}; the last door and full outputs: {seen}") from None


def test_lsf_commands(tmp_path: Path) -> None:
    with local_cluster(tmp_path, "--hosts", "1", "--slots-per-host", "2", "--mem-per-host", "2G",
                       "--heartbeat", "0.5") as c:
        env = _env(c, "lsf")
        r = _run(env, "bsub", "-J", "hello", "-o", str(tmp_path / "out.%J"), "echo", "hi", "there", cwd=tmp_path)
        m = re.fullmatch(r"Job <(\d+)> is submitted to queue <normal>\.\n", r.stdout)
        assert m, (r.stdout, r.stderr)
        first = m.group(1)
        wait_for(lambda: _stat(env, first) == "DONE", 30, "the bsub job to be DONE")
        assert (tmp_path / f"out.{first}").read_text() == "hi there\n"
        here = os.uname().nodename
        r = _run(env, "bjobs", "-a", "-noheader", "-o", "jobid from_host delimiter='|'", first)
        assert r.stdout.strip() == f"{first}|{here}", r.stdout
        shown = here if len(here) <= 11 else "*" + here[-10:]  # the default listing cuts at 11, as LSF's
        assert _run(env, "bjobs", "-a", "-noheader", first).stdout.split()[4] == shown

        script = "#!/bin/sh\n#BSUB -J from_stdin\n#BSUB -n 2\nexit 3\n"
        r = _run(env, "bsub", stdin=script, cwd=tmp_path)
        second = re.fullmatch(r"Job <(\d+)> is submitted to queue <normal>\.\n", r.stdout).group(1)  # type: ignore[union-attr]
        wait_for(lambda: _stat(env, second) == "EXIT", 30, "the failing script to be EXIT")
        r = _run(env, "bjobs", "-a", "-noheader", "-o", "jobid job_name slots exit_code delimiter=','", "-J", "from_*")
        assert r.stdout.strip() == f"{second},from_stdin,2,3"

        r = _run(env, "bjobs", "-o", "JOBID STAT EXIT_REASON KILL_REASON SUSPEND_REASON", "-json", "-a", first, "99999")
        doc = json.loads(r.stdout)
        assert doc["JOBS"] == 2 and doc["RECORDS"][0] == {"JOBID": first, "STAT": "DONE", "EXIT_REASON": "",
                                                          "KILL_REASON": "", "SUSPEND_REASON": ""}
        assert doc["RECORDS"][1] == {"JOBID": "99999", "ERROR": "Job <99999> is not found"}

        r = _run(env, "bsub", "sleep", "60", cwd=tmp_path)
        third = re.search(r"Job <(\d+)>", r.stdout).group(1)  # type: ignore[union-attr]
        wait_for(lambda: _stat(env, third) == "RUN", 30, "the sleeper to run")
        r = _run(env, "bstop", third)
        assert (r.stdout, r.returncode) == (f"Job <{third}> is being stopped\n", 0)
        wait_for(lambda: _stat(env, third) == "USUSP", 30, "the stopped job to be USUSP")
        assert _run(env, "bresume", third).stdout == f"Job <{third}> is being resumed\n"
        wait_for(lambda: _stat(env, third) == "RUN", 30, "the resumed job to run again")
        hist = _run(env, "bhist", "-l", third).stdout
        assert hist.startswith(f"Job <{third}>:\n") and "Submitted" in hist, hist
        r = _run(env, "bkill", "-s", "CONT", third)  # a signal that changes nothing for a running sleep
        assert (r.stdout, r.returncode) == (f"Job <{third}> is being signaled\n", 0)
        assert _run(env, "bpeek", third).stdout.startswith("<< output from stdout >>")

        assert _run(env, "bjobs", "-noheader").stdout.split()[:3] == [third, c.client.job(int(third)).user, "RUN"]
        r = _run(env, "bkill", third)
        assert (r.stdout, r.returncode) == (f"Job <{third}> is being terminated\n", 0)
        wait_for(lambda: _stat(env, third) == "EXIT", 30, "the killed job to be EXIT")
        r = _run(env, "bkill", third)
        assert (r.stderr, r.returncode) == (f"Job <{third}>: Job has already finished\n", 255)
        r = _run(env, "bkill", "99999")
        assert (r.stderr, r.returncode) == ("Job <99999>: No matching job found\n", 255)
        r = _run(env, "bjobs", "99999")
        assert (r.stderr, r.returncode) == ("Job <99999> is not found\n", 255)

        r = _run(env, "bsub", "-J", "after", "-w", f"done({first}) && exit({second})", "-oo",
                 str(tmp_path / "dep.out"), "echo", "dependent", cwd=tmp_path)
        dep = re.search(r"Job <(\d+)>", r.stdout).group(1)  # type: ignore[union-attr]
        wait_for(lambda: _stat(env, dep) == "DONE", 30, "the dependent job to run")
        assert (tmp_path / "dep.out").read_text() == "dependent\n"
        r = _run(env, "bsub", "-w", f"done({second})", "true")  # job `second` ended EXIT: never satisfied
        never = re.search(r"Job <(\d+)>", r.stdout).group(1)  # type: ignore[union-attr]
        r = _run(env, "bjobs", "-noheader", "-o", "stat pend_reason delimiter='|'", never)
        assert r.stdout.startswith("PEND|") and "never" in r.stdout, r.stdout
        assert _run(env, "bkill", never).returncode == 0

        shim = Path(env["PATH"].split(":")[0]) / "bsub"  # started without site (no .pth file runs): both
        assert shim.read_text().partition("\n")[0].endswith(" -S")  # paths below find their imports
        fast = _run({**env, "XCE_DEBUG_PATH": "1"}, "bsub", "true", cwd=tmp_path)  # the local door serves
        full = _run({**env, "XCE_DEBUG_PATH": "1", "XCE_QUICK": "0"}, "bsub", "true", cwd=tmp_path)
        assert fast.stderr == "submit path door; zmq not loaded\n" and full.stderr.startswith("submit path full")
        for r in (fast, full):
            assert re.fullmatch(r"Job <\d+> is submitted to queue <normal>\.\n", r.stdout)
        # the door's path: every module from bsub's pack but the two packages before it (shims.PACKED)
        assert _imports(env, "bsub", "true", cwd=tmp_path) == (set(shims.PACKED["bsub"]),
                                                               {"xce", "xce.compat", "xce.compat.packed"})
        r = _run({**env, "XCE_DEBUG_PATH": "1"}, "bsub", "-J", "two[1-2]", "true", cwd=tmp_path)  # an array: door too
        assert r.stderr == "submit path door; zmq not loaded\n" and r.stdout.startswith("Job <"), (r.stdout, r.stderr)
        _same_through_both_paths(env, "bjobs", "-a", "-noheader", "-o", "jobid stat job_name exit_code pend_reason "
                                 "delimiter=','")  # rows of those fields through the door
        for argv in (["-a"], ["-a", "-l"], ["-a", "-w", first, second], ["-l", first]):  # default, -l, ids
            _same_through_both_paths(env, "bjobs", *argv)
        refused = _run(env, "bsub", "-q", "nope", "true")
        assert (refused.returncode, refused.stderr) == (255, "bsub: queue 'nope' does not exist (queues: high, "
                                                              "normal, reclaim, rerun)\n")

        r = _run(env, "bsub", "-ti", "true")
        assert (r.stdout, r.returncode) == ("", 255)
        assert r.stderr == "bsub: -ti ends the job when its dependency can never be met: give the dependency with -w\n"

        assert "normal" in _run(env, "bqueues").stdout
        assert "HOSTS:  all\n" in _run(env, "bqueues", "-l", "normal").stdout  # LSF's line; no host list: all
        name = c.client.status().cluster
        assert f"My cluster name is {name}\n" in _run(env, "lsid").stdout
        assert "CLEAN_PERIOD = 3600" in _run(env, "bparams", "-a").stdout
        assert "    LSF_UNIT_FOR_LIMITS = MB\n" in _run(env, "badmin", "showconf", "mbd").stdout
        conf = Path(c.xce("compat", "env", "lsf").stdout.split('LSF_ENVDIR="')[1].split('"')[0])
        assert "LSF_UNIT_FOR_LIMITS=MB" in (conf / "lsf.conf").read_text()
        assert "CLEAN_PERIOD = 3600" in (conf / "lsbatch" / name / "configdir" / "lsb.params").read_text()


def _sacct(env: dict[str, str], job: str) -> list[str]:
    r = _run(env, "sacct", "-X", "--noheader", "--parsable2", "-j", job, "-o", "JobID,State,ExitCode,AllocCPUS")
    return r.stdout.strip().split("|")


def test_slurm_commands(tmp_path: Path) -> None:
    with local_cluster(tmp_path, "--hosts", "1", "--slots-per-host", "2", "--mem-per-host", "2G",
                       "--heartbeat", "0.5") as c:
        env = _env(c, "slurm")
        script = tmp_path / "fail.sh"
        script.write_text('#!/bin/bash\n#SBATCH --job-name="failing one"\n#SBATCH -n 2\n#SBATCH -o out-%j.txt\n'
                          "echo from slurm\nexit 3\n")
        r = _run(env, "sbatch", str(script), cwd=tmp_path)
        m = re.fullmatch(r"Submitted batch job (\d+)\n", r.stdout)
        assert m, (r.stdout, r.stderr)
        job = m.group(1)
        wait_for(lambda: _sacct(env, job)[1:] == ["FAILED", "3:0", "2"], 30, "sacct to show the job FAILED")
        assert (tmp_path / f"out-{job}.txt").read_text() == "from slurm\n"
        r = _run(env, "squeue", "-O", "JobArrayID,StateCompact,Reason", "-t", "all", "-j", job)
        assert [line.split() for line in r.stdout.splitlines()] == [["JOBID", "ST", "REASON"],
                                                                     [job, "F", "NonZeroExitCode"]]

        r = _run({**env, "XCE_DEBUG_PATH": "1"}, "sbatch", "--parsable", stdin="#!/bin/sh\nsleep 60\n", cwd=tmp_path)
        assert r.stderr == "submit path door; zmq not loaded\n"
        sleeper = r.stdout.strip()
        assert sleeper.isdigit(), (r.stdout, r.stderr)
        wait_for(lambda: _run(env, "squeue", "-h", "-o", "%i %t").stdout.split() == [sleeper, "R"], 30,
                 "squeue to show the sleeper running")
        _same_through_both_paths(env, "squeue", "-t", "all", "-o", "%i %j %t %T %R %C %l")
        assert _run(env, "scancel", "-Q", sleeper).returncode == 0
        wait_for(lambda: _sacct(env, sleeper)[1] == "CANCELLED", 30, "the cancelled job")
        # Elapsed once every job has ended: a running job's grows each second, so the door's and
        # the full path's runs (each over a second at load 15) could never print the same
        _same_through_both_paths(env, "sacct", "-X", "-o", "JobID,JobName,State,ExitCode,Elapsed,AllocCPUS,Account")
        assert _run(env, "squeue", "-h", "-o", "%i %t").stdout == ""  # finished: not listed without -t

        # sbatch --array: elements A_I with SLURM_ARRAY_* set, %A_%a paths, the %N running limit
        arrayjob = tmp_path / "arr.sh"
        arrayjob.write_text("#!/bin/sh\n#SBATCH --array=1-3%2\n#SBATCH -J arr\n#SBATCH -o arr-%A_%a.out\n"
                            "echo $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_MIN "
                            "$SLURM_ARRAY_TASK_MAX $SLURM_ARRAY_TASK_STEP $SLURM_ARRAY_TASK_COUNT\n")
        r = _run(env, "sbatch", "--parsable", str(arrayjob), cwd=tmp_path)
        arr = r.stdout.strip()
        assert arr.isdigit(), (r.stdout, r.stderr)

        def elements() -> list[str]:
            r = _run(env, "sacct", "-X", "-n", "-P", "-j", arr, "-o", "JobID,JobName,State")
            return sorted(r.stdout.splitlines())

        wait_for(lambda: elements() == [f"{arr}_{i}|arr|COMPLETED" for i in (1, 2, 3)], 30,
                 "sacct to list the array's elements as A_I")
        for i in (1, 2, 3):
            assert (tmp_path / f"arr-{arr}_{i}.out").read_text() == f"{arr} {i} 1 3 1 3\n"
        r = _run(env, "squeue", "-h", "-t", "all", "-o", "%i %j %t", "-j", f"{arr}_2")
        assert r.stdout == f"{arr}_2 arr CD\n", r.stdout

        # -a with a time limit: squeue %l and sacct Timelimit show it; scancel A_I, then A
        r = _run(env, "sbatch", "--parsable", "-a", "1-3", "-t", "5", stdin="#!/bin/sh\nsleep 60\n", cwd=tmp_path)
        sleepers = r.stdout.strip()
        assert sleepers.isdigit(), (r.stdout, r.stderr)
        running = [f"{sleepers}_1 R 5:00", f"{sleepers}_2 R 5:00"]
        wait_for(lambda: _run(env, "squeue", "-h", "-o", "%i %t %l").stdout.splitlines()[:2] == running, 30,
                 "squeue to show two elements running, with their limit")
        assert _run(env, "scancel", f"{sleepers}_1").returncode == 0
        wait_for(lambda: _sacct(env, f"{sleepers}_1")[1] == "CANCELLED", 30, "the cancelled element")
        assert _run(env, "scancel", sleepers).returncode == 0
        wait_for(lambda: sorted(_run(env, "sacct", "-X", "-n", "-P", "-j", sleepers, "-o",
                                     "JobID,State,Timelimit").stdout.splitlines())
                 == [f"{sleepers}_{i}|CANCELLED|00:05:00" for i in (1, 2, 3)], 30, "scancel of the whole array")

        r = _run(env, "srun", "-n", "1", "echo", "hello from srun", cwd=tmp_path)
        assert (r.stdout, r.returncode) == ("hello from srun\n", 0)
        r = _run(env, "sbatch", "--array=3-1", str(script))
        assert (r.returncode, r.stderr) == (1, "sbatch: --array=3-1: array range 3-1 ends before it starts\n")
        assert _run(env, "salloc").returncode == 1
        assert "normal*" in _run(env, "sinfo").stdout
        assert _imports(env, "sbatch", stdin="#!/bin/sh\ntrue\n", cwd=tmp_path) == (
            set(shims.PACKED["sbatch"]), {"xce", "xce.compat", "xce.compat.packed"})  # as bsub's (test_lsf_commands)


# ---- what issue 15's last gaps added: bsub -I, scontrol update, bmod, squeue's array rows ----

@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with local_cluster(tmp_path_factory.mktemp("compat"), "--hosts", "1", "--slots-per-host", "2",
                       "--mem-per-host", "2G", "--heartbeat", "0.5") as c:
        yield c


def test_bsub_minus_i_streams_the_output_and_exits_with_the_jobs_code(cluster: Cluster, tmp_path: Path) -> None:
    """The job writes "two" only once "one" has reached this terminal: the output streams, not only at the end."""
    job = STREAMING_JOB.format(marker=tmp_path / "seen")
    lines, rest, err, code = run_streaming(["bsub", "-I", job], tmp_path, env=_env(cluster, "lsf"))
    assert re.fullmatch(r"Job <\d+> is submitted to queue <normal>\.\n", lines[0]) and lines[1] == "one\n", \
        (lines, err)
    assert rest == "oops\ntwo\n", (lines, rest, err)
    assert code == 4, err
    assert "<<Waiting for dispatch ...>>" in err and "<<Starting on" in err
    r = _run(_env(cluster, "lsf"), "bsub", "-Is", "bash")
    assert (r.returncode, r.stdout) == (255, "") and "-Is is not supported" in r.stderr


def _pending_behind(c: Cluster, env: dict[str, str], tmp_path: Path) -> tuple[str, str]:
    """A running sleeper and a job that pends on its end (a dependency): (sleeper, pending)."""
    r = _run(env, "bsub", "sleep", "60", cwd=tmp_path)
    sleeper = re.search(r"Job <(\d+)>", r.stdout).group(1)  # type: ignore[union-attr]
    r = _run(env, "bsub", "-J", "waiting", "-w", f"done({sleeper})", "true", cwd=tmp_path)
    pending = re.search(r"Job <(\d+)>", r.stdout).group(1)  # type: ignore[union-attr]
    return sleeper, pending


def test_scontrol_update_and_bmod_change_a_pending_job(cluster: Cluster, tmp_path: Path) -> None:
    lsf, slurm = _env(cluster, "lsf"), _env(cluster, "slurm")
    sleeper, pending = _pending_behind(cluster, lsf, tmp_path)
    r = _run(slurm, "scontrol", "update", f"JobId={pending}", "TimeLimit=1:30:00", "Partition=high",
             "JobName=renamed", "NumTasks=2", "Priority=7")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")  # silent, as Slurm's
    r = _run(slurm, "squeue", "-h", "-j", pending, "-o", "%i %j %P %l %C %t")
    assert r.stdout == f"{pending} renamed high 1:30:00 2 PD\n", r.stdout
    assert cluster.client.job(int(pending)).priority == 7
    r = _run(slurm, "scontrol", "update", f"JobId={pending}", "MinMemoryNode=2G")
    assert r.returncode == 1 and "Update of this parameter is not supported: MinMemoryNode=2G" in r.stderr
    r = _run(lsf, "bmod", "-q", "normal", "-J", "again", "-W", "20", "-n", "1", pending)  # 1 slot: fits
    assert (r.returncode, r.stdout) == (0, f"Parameters of job <{pending}> are being changed\n"), r.stderr
    r = _run(lsf, "bjobs", "-noheader", "-o", "queue job_name runtimelimit slots delimiter='|'", pending)
    assert r.stdout == "normal|again|20.0 min|1\n", r.stdout
    r = _run(lsf, "bmod", "-x", pending)
    assert r.returncode == 255 and "-x cannot be changed" in r.stderr
    assert _run(slurm, "scontrol", "hold", pending).returncode == 0  # held: Slurm's PD (JobHeldUser)
    assert _run(slurm, "squeue", "-h", "-j", pending, "-o", "%i %t %r").stdout == f"{pending} PD JobHeldUser\n"
    assert _run(slurm, "scontrol", "release", pending).returncode == 0
    wait_for(lambda: _stat(lsf, pending) == "PEND", 30, "the released job to pend again")
    # Dependency= drops the dependency: the job starts while the sleeper still runs
    assert _run(slurm, "scontrol", "update", f"JobId={pending}", "Dependency=").returncode == 0
    wait_for(lambda: _stat(lsf, pending) == "DONE", 30, "the job freed of its dependency to run")
    assert _stat(lsf, sleeper) == "RUN"
    r = _run(slurm, "scontrol", "update", f"JobId={sleeper}", "JobName=late")  # XCE changes pending jobs only
    assert r.returncode == 1 and r.stderr.startswith("scontrol: "), r.stderr
    assert _run(lsf, "bkill", sleeper).returncode == 0


def test_squeue_and_sacct_fold_an_arrays_pending_elements(cluster: Cluster, tmp_path: Path) -> None:
    env = _env(cluster, "slurm")
    r = _run(env, "sbatch", "--parsable", "--array=1-6%2", "-J", "sweep", stdin="#!/bin/sh\nsleep 60\n", cwd=tmp_path)
    a = r.stdout.strip()
    assert a.isdigit(), (r.stdout, r.stderr)
    want = [f"{a}_1 R", f"{a}_2 R", f"{a}_[3-6%2] PD"]
    wait_for(lambda: _run(env, "squeue", "-h", "-o", "%i %t", "-j", a).stdout.splitlines() == want, 30,
             "squeue to fold the pending elements into one row")
    r = _run(env, "squeue", "-h", "-r", "-o", "%i %t %j", "-j", a)
    assert r.stdout.splitlines() == [f"{a}_{i} {'R' if i < 3 else 'PD'} sweep" for i in range(1, 7)], r.stdout
    r = _run(env, "squeue", "-h", "-o", "%i %t %R", "-j", f"{a}_5")  # an element not yet materialised
    assert r.stdout == f"{a}_5 PD (JobArrayTaskLimit)\n", (r.stdout, r.stderr)  # held back by %2
    r = _run(env, "sinfo", "-N", "-h", "-p", "normal")
    assert r.stdout.split() == ["node1", "1", "normal*", "alloc"], r.stdout  # two elements on its two slots
    r = _run(env, "sacct", "-X", "-n", "-P", "--format=JobIdRaw,State", "--starttime", "now-2days", "--endtime", "now",
             "--name", "sweep")  # snakemake's Slurm executor asks so
    assert len(r.stdout.splitlines()) == 3 and "|PENDING" in r.stdout, (r.stdout, r.stderr)
    r = _run(env, "sacct", "-X", "-n", "-P", "-o", "JobID,JobName,State", "-j", a)
    assert sorted(r.stdout.splitlines()) == [f"{a}_1|sweep|RUNNING", f"{a}_2|sweep|RUNNING",
                                             f"{a}_[3-6%2]|sweep|PENDING"], r.stdout
    assert _run(env, "scancel", a).returncode == 0


def test_sbatch_wait_exits_with_the_jobs_code(cluster: Cluster, tmp_path: Path) -> None:
    env = _env(cluster, "slurm")
    r = _run(env, "sbatch", "--wait", "-o", str(tmp_path / "w.out"), stdin="#!/bin/sh\necho waited\nexit 3\n",
             cwd=tmp_path)
    assert re.fullmatch(r"Submitted batch job \d+\n", r.stdout) and r.returncode == 3, (r.stdout, r.stderr)
    assert (tmp_path / "w.out").read_text() == "waited\n"  # ended before sbatch returned
    r = _run(env, "sbatch", "-W", "--parsable", stdin="#!/bin/sh\ntrue\n", cwd=tmp_path)
    assert r.stdout.strip().isdigit() and r.returncode == 0, (r.stdout, r.stderr)


# ---- sbatch --signal and --hold (issue 15's Slurm gaps) ----------------------------------------

def test_sbatch_signal_warns_the_batch_shell_or_the_steps_before_the_time_limit(cluster: Cluster,
                                                                                tmp_path: Path) -> None:
    """-t 1 --signal=...@55: the signal comes 5 s after the start.  B: reaches the batch shell's trap;
    without B: Slurm signals the job's steps (srun's tasks), not the batch shell, which would die of it."""
    env = _env(cluster, "slurm")
    loop = "while :; do sleep 0.1; done"
    batch = f"#!/bin/bash\n#SBATCH -t 1 --signal=B:USR1@55\ntrap 'echo batch > batch.flag; exit 0' USR1\n{loop}\n"
    step = (f"#!/bin/sh\n#SBATCH -t 1\n#SBATCH --signal=USR1@55\n"
            f"srun sh -c 'trap \"echo step > step.flag; exit 0\" USR1; {loop}'\necho shell lived on $?\n")
    ids = []
    for text in (batch, step):
        r = _run(env, "sbatch", "--parsable", "-o", "%j.out", stdin=text, cwd=tmp_path)
        assert r.stdout.strip().isdigit(), (r.stdout, r.stderr)
        ids.append(r.stdout.strip())
    # -o without %i: squeue failed on it (its rows lacked the id the array folding reads)
    wait_for(lambda: _run(env, "squeue", "-h", "-o", "%t", "-j", ids[0]).stdout == "R\n", 30, "the batch job to run")
    text = _run(env, "scontrol", "show", "job", ids[0]).stdout
    assert "TimeLimit=00:01:00 Signal=B:USR1@55" in text, text
    wait_for(lambda: all(_sacct(env, j)[1] == "COMPLETED" for j in ids), 40, "both jobs to end on their warning")
    assert (tmp_path / "batch.flag").read_text() == "batch\n"
    assert (tmp_path / "step.flag").read_text() == "step\n"
    assert (tmp_path / f"{ids[1]}.out").read_text().endswith("shell lived on 0\n")


def test_scancel_signal_goes_to_the_steps_and_with_b_to_the_batch_shell_alone(cluster: Cluster,
                                                                             tmp_path: Path) -> None:
    """Slurm's scancel --signal: not KILL, so the job is not cancelled; without -b the job's steps
    (srun's tasks) get it and the batch shell does not (submitit's job._interrupt() sends TERM then
    USR2 so); with -b the batch shell alone.  Before, every process got it, and TERM ended the job."""
    env = _env(cluster, "slurm")
    loop = "while [ ! -e stop ]; do sleep 0.1; done"
    script = ("#!/bin/bash\ntrap 'echo batch USR1 >> batch.log' USR1\ntrap 'echo batch USR2 >> batch.log' USR2\n"
              "srun sh -c 'trap \"echo step USR1 >> step.log\" USR1; trap \"echo step TERM >> step.log\" TERM; "
              f"touch step.up; {loop}' &\n{loop}\nwait\n")
    r = _run(env, "sbatch", "--parsable", "-o", "sig.out", stdin=script, cwd=tmp_path)
    job = r.stdout.strip()
    assert job.isdigit(), (r.stdout, r.stderr)
    step = tmp_path / "step.log"
    wait_for(lambda: (tmp_path / "step.up").exists(), 30, "the step to run")
    assert _run(env, "scancel", "--signal=USR1", job).returncode == 0
    wait_for(lambda: step.exists() and step.read_text() == "step USR1\n", 20, "the step to take USR1")
    assert _run(env, "scancel", "-s", "TERM", job).returncode == 0  # a signal: the job goes on
    wait_for(lambda: step.read_text() == "step USR1\nstep TERM\n", 20, "the step to take TERM")
    assert _run(env, "squeue", "-h", "-j", job, "-o", "%t").stdout == "R\n"
    assert _run(env, "scancel", "-b", "--signal=USR2", job).returncode == 0
    wait_for(lambda: (tmp_path / "batch.log").exists(), 20, "the batch shell to take USR2")
    (tmp_path / "stop").touch()
    wait_for(lambda: _sacct(env, job)[1] == "COMPLETED", 30, "the job to end")
    assert (tmp_path / "batch.log").read_text() == "batch USR2\n"  # never USR1 or TERM
    assert step.read_text() == "step USR1\nstep TERM\n"  # never USR2 (it would have died of it)


def test_sbatch_and_bsub_hold_pend_held_until_released(cluster: Cluster, tmp_path: Path) -> None:
    env = _env(cluster, "slurm")
    r = _run(env, "sbatch", "--parsable", "-H", "-o", "held.out", stdin="#!/bin/sh\necho released\n", cwd=tmp_path)
    job = r.stdout.strip()
    assert job.isdigit(), (r.stdout, r.stderr)
    assert _run(env, "squeue", "-h", "-j", job, "-o", "%i %t %r").stdout == f"{job} PD JobHeldUser\n"
    lines = _run(env, "squeue", "-l", "-j", job).stdout.splitlines()
    assert re.fullmatch(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}", lines[0]), lines  # the time, as ctime(3)
    assert lines[1].split() == ["JOBID", "PARTITION", "NAME", "USER", "STATE", "TIME", "TIME_LIMI", "NODES",
                                "NODELIST(REASON)"], lines
    assert lines[2].split()[4:] == ["PENDING", "0:00", "UNLIMITED", "1", "(JobHeldUser)"], lines
    assert _run(env, "scontrol", "release", job).returncode == 0
    wait_for(lambda: _sacct(env, job)[1] == "COMPLETED", 30, "the released job to run")
    assert (tmp_path / "held.out").read_text() == "released\n"
    lsf = _env(cluster, "lsf")  # bsub -H: the same field, LSF's words
    r = _run(lsf, "bsub", "-H", "-o", str(tmp_path / "lsf.out"), "echo", "resumed", cwd=tmp_path)
    held = re.search(r"Job <(\d+)>", r.stdout).group(1)  # type: ignore[union-attr]
    assert _stat(lsf, held) == "PSUSP"
    assert _run(lsf, "bresume", held).returncode == 0
    wait_for(lambda: _stat(lsf, held) == "DONE", 30, "the resumed bsub -H job")
    assert (tmp_path / "lsf.out").read_text() == "resumed\n"


def test_sbatch_cpus_per_task_gives_tasks_not_slots_in_slurm_ntasks(cluster: Cluster, tmp_path: Path) -> None:
    """-n 1 -c 2: one task of two CPUs, two slots reserved; the node list in Slurm's form."""
    env = _env(cluster, "slurm")
    script = ("#!/bin/sh\n#SBATCH -n 1 -c 2\n"
              "echo $SLURM_NTASKS $SLURM_CPUS_PER_TASK $SLURM_CPUS_ON_NODE $SLURM_NODEID $SLURM_JOB_NODELIST\n")
    r = _run(env, "sbatch", "--parsable", "-o", "cpus.out", stdin=script, cwd=tmp_path)
    job = r.stdout.strip()
    assert job.isdigit(), (r.stdout, r.stderr)
    wait_for(lambda: _sacct(env, job)[1] == "COMPLETED", 30, "the -c 2 job to end")
    assert _sacct(env, job)[3] == "2"  # AllocCPUS: the slots it held
    assert (tmp_path / "cpus.out").read_text() == "1 2 2 0 node1\n"
    assert "NumCPUs=2 NumTasks=1 CPUs/Task=2" in _run(env, "scontrol", "show", "job", job).stdout


def test_tasks_of_c_slots_stay_whole_on_a_host_and_numtasks_counts_tasks(tmp_path: Path) -> None:
    """-n 2 -c 2 on two hosts of 3 slots: each host holds one whole task (2 + 2; before, 3 + 1 split
    the second task's CPUs); scontrol update NumTasks=1 of a held -c 2 job gives it 2 slots, and
    NumTasks=3 (6 slots, but 2 whole tasks fit on these hosts) is refused naming why."""
    with local_cluster(tmp_path, "--hosts", "2", "--slots-per-host", "3", "--mem-per-host", "2G",
                       "--heartbeat", "0.5") as c:
        env = _env(c, "slurm")
        script = "#!/bin/sh\n#SBATCH -n 2 -c 2\necho $SLURM_NTASKS $SLURM_CPUS_ON_NODE\nsleep 60\n"
        job = _run(env, "sbatch", "--parsable", "-o", "tasks.out", stdin=script, cwd=tmp_path).stdout.strip()
        assert job.isdigit()
        wait_for(lambda: c.client.job(int(job)).state == "RUN", 30, "the -n 2 -c 2 job to run")
        assert sorted(a.slots for a in c.client.job(int(job)).accounts) == [2, 2]
        wait_for(lambda: (tmp_path / "tasks.out").exists() and (tmp_path / "tasks.out").read_text(), 20, "its output")
        assert (tmp_path / "tasks.out").read_text() == "2 2\n"
        held = _run(env, "sbatch", "--parsable", "-H", "-n", "2", "-c", "2", stdin="#!/bin/sh\ntrue\n",
                    cwd=tmp_path).stdout.strip()
        assert _run(env, "scontrol", "update", f"JobId={held}", "NumTasks=1").returncode == 0  # (before: 1 slot, refused)
        assert "NumCPUs=2 NumTasks=1 CPUs/Task=2" in _run(env, "scontrol", "show", "job", held).stdout
        r = _run(env, "scontrol", "update", f"JobId={held}", "NumTasks=3")  # 6 slots: each host holds one task of 2
        assert r.returncode == 1 and "no host could ever run it: needs 6 slot(s), at least 2" in r.stderr, r.stderr
        assert _run(env, "scancel", job, held).returncode == 0
