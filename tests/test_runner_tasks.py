"""Tasks started inside a share (xce launch) against real processes, with a cgroup and with /proc:
measured as the share's, their output and exit code kept, ended with the share."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest
from conftest import wait_for
from test_runner import gone, make_runner, method, runner, spec, wait_exit  # noqa: F401 - fixtures

from xce.core.errors import InvalidRequest, NoShare
from xce.worker import tasks
from xce.worker.runner import Runner

HOG = [sys.executable, "-m", "xce.jobs.memhog"]


def until_ended(r: Runner, t: tasks.Launched) -> None:
    def done() -> bool:
        r.poll()
        return t.ended
    wait_for(done, 10, f"task {t.n} to end")


def test_a_task_in_a_holder_is_measured_as_the_share(runner: Runner, method: str, tmp_path: Path) -> None:
    share = runner.start(1, 0, spec(["true"]), 0, None, False, {}, holder=True)
    (s0,) = [s for t, s in runner.sample_all(time.time()) if t is share]
    assert s0.rss == 0
    t = tasks.start_task(runner, share, "k1", [*HOG, f"200:@{tmp_path / 'never'}"], str(tmp_path), {}, "")
    assert t.in_cgroup == (method != "proc")

    def share_rss() -> int:
        return next(s.rss for tk, s in runner.sample_all(time.time()) if tk is share)
    wait_for(lambda: share_rss() >= 190 << 20, 20, "the task's 200 MB in its share's sample")
    runner.kill(share, "the job's command ended on a")
    ex = wait_exit(runner, share)
    assert ex.task.peak >= 190 << 20
    until_ended(runner, t)
    assert gone(t.pid) and t.exit_code in (128 + signal.SIGTERM, 128 + signal.SIGKILL)


def test_a_tasks_output_and_exit_code_are_kept(runner: Runner, tmp_path: Path) -> None:
    share = runner.start(1, 0, spec(["true"]), 0, None, False, {}, holder=True)
    t = tasks.start_task(runner, share, "k1", ["sh", "-c", "echo out; echo err >&2; exit 3"], str(tmp_path),
                         {"A": "1"}, "")
    until_ended(runner, t)
    assert t.exit_code == 3 and t.signal is None
    out, err, done = tasks.read_output(t, 0, 0, 1024)
    assert (out, err, done) == (b"out\n", b"err\n", True)
    assert tasks.read_output(t, 2, 4, 1) == (b"t", b"", False)  # more to come: not done yet
    again = tasks.start_task(runner, share, "k1", ["false"], str(tmp_path), {}, "")
    assert again is t  # the same key: nothing started twice
    second = tasks.start_task(runner, share, "k2", ["sh", "-c", "echo $A"], str(tmp_path), {"A": "2"}, "")
    assert second.n == 2
    until_ended(runner, second)
    assert tasks.read_output(second, 0, 0, 1024)[0] == b"2\n"
    runner.kill(share, "done")
    wait_exit(runner, share)
    runner.forget(share)
    assert not (runner.state_dir / "jobs" / share.key).exists()  # the share's directory goes...
    assert Path(t.stdout).read_bytes() == b"out\n"  # ...its tasks' output is kept a while (tasks.KEEP_S)


def test_a_task_whose_directory_is_missing_runs_in_tmp_saying_so(runner: Runner, tmp_path: Path) -> None:
    """As LSF runs a job whose cwd is not on its execution host: in /tmp, and the task's stderr says why."""
    share = runner.start(1, 0, spec(["true"]), 0, None, False, {}, holder=True)
    t = tasks.start_task(runner, share, "k1", ["sh", "-c", "pwd; echo err >&2"], str(tmp_path / "gone"), {}, "")
    until_ended(runner, t)
    out, err, _ = tasks.read_output(t, 0, 0, 4096)
    assert t.exit_code == 0 and out == b"/tmp\n"
    assert err == (f"xce launch: directory {tmp_path / 'gone'} does not exist on host {runner.worker_name}: "
                   "the task runs in /tmp\nerr\n").encode()
    runner.kill(share, "done")
    wait_exit(runner, share)


def test_a_tasks_output_outlives_its_share_until_read_or_kept_long_enough(runner: Runner, tmp_path: Path) -> None:
    """Output the caller had not polled yet when the share ended (and was forgotten) is still served,
    from the task's record kept for KEEP_S after its share; it used to go with the share's directory."""
    share = runner.start(1, 0, spec(["true"]), 0, None, False, {}, holder=True)
    t = tasks.start_task(runner, share, "k1", ["sh", "-c", "echo last words; exit 5"], str(tmp_path), {}, "")
    until_ended(runner, t)
    runner.kill(share, "the job's command ended on a")
    wait_exit(runner, share)
    runner.forget(share)
    assert runner.find(1, 0) is None
    kept = tasks.kept_task(runner, 1, 0, t.n)
    assert kept is t and tasks.read_output(kept, 0, 0, 1024) == (b"last words\n", b"", True) and t.exit_code == 5
    assert tasks.kept_task(runner, 1, 0, 9) is None and tasks.kept_task(runner, 2, 0, 1) is None
    runner.clock = lambda: time.time() + tasks.KEEP_S + 1  # long enough: dropped, its files too
    assert tasks.kept_task(runner, 1, 0, t.n) is None and not Path(t.stdout).exists()
    stale = runner.state_dir / "ended-tasks" / "7.1"  # kept by a worker that then stopped
    stale.mkdir(parents=True)
    share = runner.start(2, 0, spec(["true"]), 0, None, False, {}, holder=True)
    tasks.start_task(runner, share, "k2", ["true"], str(tmp_path), {}, "")
    runner.kill(share, "done")
    wait_exit(runner, share)
    runner.forget(share)
    assert not stale.exists() and tasks.kept_task(runner, 2, 0, 1) is not None


def test_a_task_is_refused_clearly(runner: Runner, tmp_path: Path) -> None:
    share = runner.start(1, 0, spec(["true"]), 0, None, False, {}, holder=True)
    with pytest.raises(InvalidRequest, match="command not found: no-such-command"):
        tasks.start_task(runner, share, "k1", ["no-such-command"], str(tmp_path), {}, "")
    runner.kill(share, "done")
    wait_exit(runner, share)
    with pytest.raises(NoShare, match="share on .* is ending"):
        tasks.start_task(runner, share, "k3", ["true"], str(tmp_path), {}, "")


def test_a_task_in_the_first_hosts_share_ends_when_its_command_ends(runner: Runner, method: str,
                                                                     tmp_path: Path) -> None:
    go = tmp_path / "go"
    share = runner.start(1, 0, spec(["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done"]), 0, None, False, {})
    t = tasks.start_task(runner, share, "k1", ["sleep", "60"], str(tmp_path), {}, "")
    go.touch()
    wait_exit(runner, share)
    until_ended(runner, t)
    assert gone(t.pid) and t.exit_code == 128 + signal.SIGKILL


def test_a_killed_shares_tasks_get_the_grace_to_clean_up(make_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = make_runner(kill_grace=5.0)
    share = r.start(1, 0, spec(["true"]), 0, None, False, {}, holder=True)
    done, ready = tmp_path / "cleaned", tmp_path / "ready"
    t = tasks.start_task(r, share, "k1", ["sh", "-c", f"trap 'sleep 0.3; touch {done}; exit 0' TERM; "
                                                   f"touch {ready}; while :; do sleep 0.05; done"],
                         str(tmp_path), {}, "")
    wait_for(ready.exists, 10, "the task to set its trap")
    r.kill(share, "killed by user")
    wait_exit(r, share)
    until_ended(r, t)
    assert done.exists() and t.exit_code == 0  # it cleaned up before the share ended


def test_a_restarted_worker_re_attaches_to_a_shares_tasks(make_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a = make_runner(state=tmp_path / "s", name="rt")
    share = a.start(1, 0, spec(["true"]), 0, None, False, {}, holder=True)
    done = tasks.start_task(a, share, "k1", ["sh", "-c", "echo first; exit 4"], str(tmp_path), {}, "")
    running = tasks.start_task(a, share, "k2", ["sh", "-c", "echo second; exec sleep 60"], str(tmp_path), {}, "")
    wait_for(lambda: Path(running.stdout).read_text() == "second\n", 10, "the second task's output")
    wait_for(lambda: gone(done.pid), 10, "the first task to exit")  # a zombie of the old runner
    b = make_runner(state=tmp_path / "s", name="rt")  # a restarted worker
    (share_b,) = b.adopt()
    first, second = share_b.launched
    assert (first.n, first.key, first.ended, first.exit_code) == (1, "k1", True, 4)
    assert tasks.read_output(first, 0, 0, 100) == (b"first\n", b"", True)
    assert (second.n, second.ended) == (2, False) and second.pid == running.pid
    assert tasks.start_task(b, share_b, "k2", ["false"], str(tmp_path), {}, "") is second  # still deduplicated
    b.kill(share_b, "killed by user")
    wait_exit(b, share_b)
    until_ended(b, second)
    wait_for(lambda: gone(running.pid), 10, "the adopted task to end with its share")


def test_a_task_takes_a_signal_of_its_own(runner: Runner, tmp_path: Path) -> None:
    share = runner.start(1, 0, spec(["true"]), 0, None, False, {}, holder=True)
    t = tasks.start_task(runner, share, "k1", ["sleep", "60"], str(tmp_path), {}, "")
    tasks.signal_task(t, signal.SIGTERM)
    until_ended(runner, t)
    assert t.exit_code == 128 + signal.SIGTERM and t.signal == signal.SIGTERM
    assert share.ended is None  # the share goes on
    tasks.signal_task(t, signal.SIGKILL)  # an ended task is signalled no more
