"""LSF's accounting and queue views end to end on a real cluster, through the scripts `xce compat
path lsf` writes: bacct, bhist's time per state, bsub -ti, bqueues' slot counts, showconf."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Cluster, local_cluster, wait_for


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with local_cluster(tmp_path_factory.mktemp("lsf"), "--hosts", "1", "--slots-per-host", "2",
                       "--mem-per-host", "2G", "--heartbeat", "0.5") as c:
        yield _env(c)


def _env(c: Cluster) -> dict[str, str]:
    d = c.xce("compat", "path", "lsf").stdout.strip()
    e = {k: v for k, v in os.environ.items() if k != "XCE_STATE_DIR"}
    e["PATH"] = f"{d}:{e['PATH']}"
    return e


def _run(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=60, cwd="/tmp")


def _bsub(env: dict[str, str], *argv: str) -> str:
    r = _run(env, "bsub", *argv)
    m = re.fullmatch(r"Job <(\d+)> is submitted to queue <\w+>\.\n", r.stdout)
    assert m, (r.stdout, r.stderr)
    return m.group(1)


def _stat(env: dict[str, str], job: str) -> str:
    r = _run(env, "bjobs", "-a", "-noheader", "-o", "stat", job)
    return r.stdout.strip()


def _figure(text: str, label: str) -> float:
    return float(re.search(re.escape(label) + r"\s*([\d.]+)", text).group(1))  # type: ignore[union-attr]


BURN = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"  # a few tenths of a second of CPU


def test_bacct_reports_finished_jobs_with_their_cpu_time(env: dict[str, str]) -> None:
    busy = _bsub(env, "-P", "acct_a", BURN)
    failed = _bsub(env, "-P", "acct_a", "exit 3")
    wait_for(lambda: _stat(env, busy) == "DONE" and _stat(env, failed) == "EXIT", 60, "both jobs to end")
    r = _run(env, "bacct", busy, failed)
    assert r.returncode == 0 and r.stdout.startswith("Accounting information about jobs that are: \n"), r.stderr
    assert " Total number of done jobs:       1      Total number of exited jobs:     1\n" in r.stdout
    assert _figure(r.stdout, "Total CPU time consumed:") >= 0.1  # the finish record's CPU time, not 0
    assert _figure(r.stdout, "Maximum Run time of a job:") >= 0
    long = _run(env, "bacct", "-l", busy).stdout
    row = long.split("CPU_T     WAIT     TURNAROUND   STATUS     HOG_FACTOR    MEM    SWAP\n")[1].split()
    assert float(row[0]) >= 0.1 and row[3] == "done", long
    assert f"Job <{busy}>, Job Name <{BURN}>" in long and "Completed <done>." in long
    assert "Completed <exit>." in _run(env, "bacct", "-l", failed).stdout
    # selections: -d/-e, -P, -q, -u all, time windows
    assert "done jobs:       0      Total number of exited jobs:     1" in _run(env, "bacct", "-e", busy, failed).stdout
    by_project = _run(env, "bacct", "-u", "all", "-P", "acct_a", "-q", "normal", "-C", ".-1,").stdout
    assert "  - accounted on projects acct_a, \n" in by_project and "done jobs:       1      " in by_project
    assert "No matching job found" in _run(env, "bacct", "-u", "all", "-S", "2001/01/01,2001/01/02").stdout
    r = _run(env, "bacct", "-b")
    assert r.returncode == 255 and "-b: option not supported by this XCE's bacct" in r.stderr


def test_bhist_sums_the_seconds_of_each_state(env: dict[str, str]) -> None:
    job = _bsub(env, "-J", "napper", "sleep", "60")
    wait_for(lambda: _stat(env, job) == "RUN", 30, "the sleeper to run")
    assert _run(env, "bstop", job).returncode == 0
    wait_for(lambda: _stat(env, job) == "USUSP", 30, "the sleeper to be stopped")

    def columns() -> list[str]:
        lines = _run(env, "bhist", job).stdout.splitlines()
        assert lines[:2] == ["Summary of time in seconds spent in various states:",
                             "JOBID   USER    JOB_NAME  PEND    PSUSP   RUN     USUSP   SSUSP   UNKWN   TOTAL"], lines
        return lines[2].split()

    wait_for(lambda: float(columns()[6]) >= 1, 30, "a second in USUSP")  # counted up to now while it lasts
    assert _run(env, "bresume", job).returncode == 0
    wait_for(lambda: _stat(env, job) == "RUN", 30, "the sleeper to run again")
    assert _run(env, "bkill", job).returncode == 0
    wait_for(lambda: _stat(env, job) == "EXIT", 30, "the sleeper to end")
    jid, _, name, pend, psusp, run, ususp, ssusp, unkwn, total = columns()
    assert (jid, name) == (job, "napper")
    assert float(ususp) >= 1 and float(psusp) == float(ssusp) == float(unkwn) == 0
    assert abs(float(total) - sum(map(float, (pend, run, ususp)))) <= 1  # each printed rounded
    long = _run(env, "bhist", "-l", job).stdout
    assert "Summary of time in seconds spent in various states by  " in long and "Suspended by <" in long
    assert _run(env, "bhist").stderr == "No matching job found\n"  # none unfinished: -a lists the ended


def test_bsub_ti_ends_a_job_whose_dependency_can_never_be_met(env: dict[str, str]) -> None:
    failed = _bsub(env, "false")
    wait_for(lambda: _stat(env, failed) == "EXIT", 30, "the failing job to end")
    ended = _bsub(env, "-w", f"done({failed})", "-ti", "true")
    kept = _bsub(env, "-w", f"done({failed})", "true")  # without -ti: pends, as the queue's dep_never=keep
    r = _run(env, "bjobs", "-a", "-noheader", "-o", "stat exit_reason pend_reason delimiter='|'", ended, kept)
    assert r.stdout.splitlines() == [f"EXIT|never satisfied: done({failed}): job {failed} ended EXIT|-",
                                     f"PEND|-|never satisfied: done({failed}): job {failed} ended EXIT"], r.stdout
    sleeper = _bsub(env, "sleep", "60")  # a dependency that becomes never later: ended then
    later = _bsub(env, "-w", f"done({sleeper})", "-ti", "true")
    assert _stat(env, later) == "PEND"
    assert _run(env, "bkill", sleeper, kept).returncode == 0
    wait_for(lambda: _stat(env, later) == "EXIT", 30, "the -ti job to end when its dependency can never be met")
    r = _run(env, "bsub", "-U", "resv1", "true")
    assert (r.returncode, r.stderr) == (255, "bsub: -U (advance reservations): XCE has no advance reservations "
                                             "(LSF's brsvadd); submit without -U\n")


def test_bqueues_counts_slots_not_jobs(env: dict[str, str]) -> None:
    wide = _bsub(env, "-q", "rerun", "-n", "2", "sleep", "60")  # both slots of the one host
    wait_for(lambda: _stat(env, wide) == "RUN", 30, "the two-slot job to run")
    array = _bsub(env, "-q", "rerun", "-n", "2", "-J", "a[1-3]", "true")  # 3 elements of 2 slots pend behind it
    r = _run(env, "bqueues", "rerun")
    assert r.stdout.splitlines()[1].split()[-4:] == ["8", "6", "2", "0"], r.stdout  # NJOBS PEND RUN SUSP
    long = _run(env, "bqueues", "-l", "rerun").stdout.splitlines()
    stats = long[long.index("PARAMETERS/STATISTICS") + 2].split()
    assert stats[-6:] == ["8", "6", "2", "0", "0", "0"], long  # NJOBS PEND RUN SSUSP USUSP RSV
    assert _run(env, "bkill", wide, array).returncode == 0


def test_showconf_prints_lsfs_whole_time_line(env: dict[str, str]) -> None:
    for argv, daemon in ((["badmin", "showconf", "mbd"], "MBD"), (["lsadmin", "showconf", "lim"], "LIM")):
        first = _run(env, *argv).stdout.partition("\n")[0]
        assert re.fullmatch(daemon + r" configuration at \w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}", first), first


def test_bsub_e_runs_the_pre_execution_command_first(env: dict[str, str], tmp_path: Path) -> None:
    """-E is the job model's (xce submit -E, tests/test_e2e_preexec.py); through bsub's own parsing too."""
    out = tmp_path / "out"
    job = _bsub(env, "-E", "echo pre", "-o", str(out), "echo main")
    wait_for(lambda: _stat(env, job) == "DONE", 30, "the job to run after its pre-execution command")
    assert out.read_text() == "pre\nmain\n"
    assert "CWD <" in (long := _run(env, "bjobs", "-l", job).stdout) and ", Pre-execute Command <echo pre>;" in long
    failing = _bsub(env, "-E", "exit 7", "true")
    wait_for(lambda: 'pre-execution command "exit 7" exited 7' in _run(env, "bhist", "-l", failing).stdout, 30,
             "the failing pre-execution command in the job's history")
    assert _stat(env, failing) in ("PEND", "RUN", "PSUSP") and _run(env, "bkill", failing).returncode == 0
