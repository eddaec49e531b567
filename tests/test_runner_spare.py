"""Jobs started on a spare wrapper (xce/worker/spare.py): the same job as a fresh wrapper runs.

The spare pays for the job's session and cgroup before the job arrives; these tests check
that what the job sees and what re-attach needs do not depend on which wrapper ran it.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from test_runner import make_runner, runner, spec, wait_exit, wait_for  # noqa: F401  (fixtures)
from xce.core.model import JobSpec
from xce.worker import measure, runner as runner_mod
from xce.worker.runner import Runner

SEES = ("pwd; echo \"PWD=$PWD\"; env | LC_ALL=C sort; ls /proc/self/fd | LC_ALL=C sort -n | tr '\\n' ' '; "
        "echo; cat /proc/self/cgroup | grep -c xce-; ps -o sid=,pgid= -p $$")


def _no_spawn(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("a job on a spare must start no process")
    monkeypatch.setattr(runner_mod.subprocess, "Popen", refuse)


def test_a_job_on_a_spare_starts_no_process_and_ends_as_usual(runner: Runner,  # noqa: F811
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    runner.prepare_spare()
    waiting = runner._spare
    assert waiting is not None and not runner.wants_spare()
    _no_spawn(monkeypatch)
    t = runner.start(1, 0, spec(["sh", "-c", "exit 7"]), 0, None, False, {})
    assert t.pid == waiting.proc.pid and runner.wants_spare()
    ex = wait_exit(runner, t)
    assert (ex.exit_code, ex.signal, ex.reason) == (7, None, "")
    assert not (runner.task_dir / f"{waiting.name}.rec").exists()


def _sees(r: Runner, job: int, work: Path, env: dict[str, str], on_spare: bool) -> str:
    if on_spare:
        r.prepare_spare()
    else:
        r.discard_spare()
    out = work / f"sees-{job}"
    t = r.start(job, 0, JobSpec(command=["sh", "-c", SEES], cwd=str(work), env=env, stdout=str(out)),
                0, None, False, {"XCE_JOBID": str(job)})
    assert (t.pid == r._spare.proc.pid if r._spare else True)
    assert wait_exit(r, t).exit_code == 0
    return out.read_text().replace(f"XCE_JOBID={job}", "XCE_JOBID=N").replace(str(t.pid), "PID")


@pytest.mark.parametrize("pwd", ["same", "other", "none"])
def test_the_job_sees_the_same_cwd_env_fds_and_session_either_way(runner: Runner, tmp_path: Path,  # noqa: F811
                                                                   pwd: str) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    env = {"PATH": os.environ["PATH"], "QUOTED": "it's \"x\" $HOME `id`\nline two", "OLDPWD": "/elsewhere",
           "EMPTY": ""}
    if pwd != "none":
        env["PWD"] = str(link) if pwd == "same" else "/tmp"
    fresh = _sees(runner, 1, link, env, on_spare=False)
    spared = _sees(runner, 2, link, env, on_spare=True)
    assert spared == fresh
    assert "QUOTED=it's \"x\" $HOME `id`" in spared and "OLDPWD=/elsewhere" in spared


def test_a_job_sh_cannot_take_from_a_spare_starts_a_fresh_wrapper(runner: Runner) -> None:  # noqa: F811
    runner.prepare_spare()
    waiting = runner._spare
    t = runner.start(1, 0, spec(["true"], env={"IFS": ":"}), 0, None, False, {})
    assert t.pid != waiting.proc.pid and runner._spare is waiting
    assert wait_exit(runner, t).exit_code == 0


def test_a_kill_right_after_the_start_on_a_spare_is_not_lost(runner: Runner) -> None:  # noqa: F811
    for job in range(5):
        runner.prepare_spare()
        t = runner.start(job, 0, spec(["sleep", "30"]), 0, None, False, {})
        runner.kill(t, "killed by user")  # most likely while the spare still reads its program
        ex = wait_exit(runner, t)
        assert ex.reason == "killed by user" and ex.signal in (signal.SIGTERM, signal.SIGKILL)


def test_a_job_on_a_spare_is_adopted_after_a_restart(make_runner: Callable[..., Runner],  # noqa: F811
                                                     tmp_path: Path) -> None:
    a = make_runner(tmp_path / "s", "spare-adopt")
    a.prepare_spare()
    ta = a.start(5, 0, spec(["sh", "-c", "sleep 0.5; exit 7"]), 0, None, False, {})
    assert ta.cgroup.startswith("spare-")
    a._tasks.clear()  # the worker "restarts": A is dropped without killing anything
    b = make_runner(tmp_path / "s", "spare-adopt")
    (tb,) = b.adopt()
    assert tb.pid == ta.pid and tb.cgroup == ta.cgroup and tb.meter.method == ta.meter.method
    assert b.sample_all(time.time())
    ex = wait_exit(b, tb)
    assert (ex.exit_code, ex.signal, ex.reason) == (7, None, "")


def test_a_discarded_spare_leaves_no_process_record_or_cgroup(runner: Runner) -> None:  # noqa: F811
    runner.prepare_spare()
    sp = runner._spare
    assert sp is not None
    runner.discard_spare()
    assert sp.proc.returncode == 125 and not sp.rec_path.exists()
    name = getattr(sp.meter, "name", sp.name)
    wait_for(lambda: all(not (d / name).exists() for d in measure.worker_cgroup_dirs(runner.cgroup_name)))
