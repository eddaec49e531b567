"""The runner's job-model parts against real processes: run limits, signals, holders, -oo/-eo, %I."""

from __future__ import annotations

import dataclasses
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import proc_state
from test_runner import gone, make_runner, runner, spec, wait_exit, wait_for  # noqa: F401 - fixtures

from xce.core.model import PREEXEC_TIMEOUT, PREEXEC_TIMEOUT_CODE
from xce.worker.runner import Runner, share_outcome, warning_due


def test_run_limit_ends_the_job_with_term_runlimit(runner: Runner) -> None:
    t = runner.start(1, 0, spec(["sleep", "30"], run_limit=0.3), 0, None, False, {})
    ex = wait_exit(runner, t, sample=True)
    assert ex.reason == "TERM_RUNLIMIT" and ex.signal == signal.SIGTERM


def test_run_limit_escalates_to_sigkill_after_the_grace(runner: Runner) -> None:
    t = runner.start(1, 0, spec(["sh", "-c", "trap '' TERM; sleep 30 & wait; sleep 30"], run_limit=0.3),
                     0, None, False, {})
    ex = wait_exit(runner, t, sample=True)
    assert ex.reason == "TERM_RUNLIMIT" and ex.exit_code == 128 + signal.SIGKILL


def test_stop_pauses_the_run_limit_clock_and_survives_a_restart(make_runner: Callable[..., Runner],
                                                               tmp_path: Path) -> None:
    a = make_runner(state=tmp_path / "s", name="rl")
    t = a.start(1, 0, spec(["sleep", "30"], run_limit=1.0), 0, None, False, {})
    assert a.send_signal(t, signal.SIGSTOP) is True
    wait_for(lambda: proc_state(t.pid) == "T")
    deadline = time.time() + 1.5  # past the limit, but all of it suspended
    while time.time() < deadline:
        a.sample_all(time.time())
        assert t.kill_reason is None
        time.sleep(0.05)
    b = make_runner(state=tmp_path / "s", name="rl")  # a restarted worker
    (tb,) = b.adopt()
    assert tb.suspended_at is not None and tb.run_limit == 1.0
    assert b.send_signal(tb, signal.SIGCONT) is False
    wait_for(lambda: proc_state(tb.pid) in "SR")
    ex = wait_exit(b, tb, sample=True)
    assert ex.reason == "TERM_RUNLIMIT"
    assert time.time() - deadline >= 0.9  # it ran its full second after the resume


def test_killing_a_stopped_job_continues_it_so_it_takes_the_term(runner: Runner) -> None:
    t = runner.start(1, 0, spec(["sleep", "30"]), 0, None, False, {})
    runner.send_signal(t, signal.SIGSTOP)
    wait_for(lambda: proc_state(t.pid) == "T")
    runner.kill(t, "killed by user", grace=30)
    ex = wait_exit(runner, t)
    assert ex.signal == signal.SIGTERM and not t.hard_killed


def test_holder_reports_no_usage_and_a_clean_end_when_released(runner: Runner) -> None:
    t = runner.start(1, 0, spec(["no-such-command-on-other-hosts"], stdout="/nonexistent/out"), 0, None,
                     False, {}, holder=True)
    (sample,) = [s for tk, s in runner.sample_all(time.time()) if tk is t]
    assert (sample.rss, sample.peak) == (0, 0)
    runner.kill(t, "the job's command ended on a")
    ex = wait_exit(runner, t)
    assert ex.exit_code != 0 and share_outcome(ex) == (0, None, "")


def test_holder_killed_for_its_own_memory_reports_it(runner: Runner) -> None:
    t = runner.start(1, 0, spec(["true"]), 0, None, False, {}, holder=True)
    runner.kill(t, "MEMLIMIT")
    assert share_outcome(wait_exit(runner, t))[2] == "MEMLIMIT"


def test_oo_overwrites_o_appends_and_percent_i_is_the_index(runner: Runner, tmp_path: Path) -> None:
    out, err = tmp_path / "o.%J.%I", tmp_path / "e.%J.%I"
    for attempt in (0, 1):
        t = runner.start(5, attempt, spec(["sh", "-c", "echo out; echo err >&2"], stdout=str(out), stderr=str(err),
                                          stdout_overwrite=True), 0, None, False, {}, index=3)
        wait_exit(runner, t)
    assert (tmp_path / "o.5.3").read_text() == "out\n"
    assert (tmp_path / "e.5.3").read_text() == "err\nerr\n"
    t = runner.start(5, 2, spec(["sh", "-c", "echo err >&2"], stdout=str(out), stderr=str(err),
                                stderr_overwrite=True), 0, None, False, {}, index=3)
    wait_exit(runner, t)
    assert (tmp_path / "e.5.3").read_text() == "err\n"


def test_env_function_sees_the_resolved_cwd_and_output(runner: Runner, tmp_path: Path) -> None:
    seen: list[tuple[str, str | None]] = []

    def env(cwd: str, stdout: str | None) -> dict[str, str]:
        seen.append((cwd, stdout))
        return {"LSB_OUTPUTFILE": stdout or ""}
    t = runner.start(9, 0, spec(["sh", "-c", "echo $LSB_OUTPUTFILE"], cwd=str(tmp_path), stdout="o.%J"),
                     0, None, False, env)
    wait_exit(runner, t)
    assert seen == [(str(tmp_path), str(tmp_path / "o.9"))]
    assert (tmp_path / "o.9").read_text() == f"{tmp_path / 'o.9'}\n"


# A command that says it runs (READY), traps USR1 to exit 5 and otherwise waits on short sleeps.
def _trapping(ready: Path) -> list[str]:
    return ["sh", "-c", f"trap 'exit 5' USR1; touch {ready}; while :; do sleep 0.05; done"]


def test_a_signal_the_command_traps_leaves_the_wrapper_to_report_its_exit(runner: Runner, tmp_path: Path) -> None:
    """kill -s USR1 (scancel --signal, a warning): the wrapper used to die of it (exit 138, the
    command's own handling lost); now only the command decides.  Fails on the old wrapper."""
    t = runner.start(1, 0, spec(_trapping(tmp_path / "ready")), 0, None, False, {})
    wait_for(lambda: (tmp_path / "ready").exists())
    runner.send_signal(t, signal.SIGUSR1)
    ex = wait_exit(runner, t)
    assert (ex.exit_code, ex.signal, ex.reason) == (5, None, "")


@pytest.mark.parametrize("to", ["batch", ""])
def test_the_warning_signal_goes_its_time_before_the_run_limit(runner: Runner, tmp_path: Path, to: str) -> None:
    """sbatch --signal=B:USR1@T ("batch": the command alone), bsub -wa USR1 ("": all its processes)."""
    t = runner.start(1, 0, spec(_trapping(tmp_path / "ready"), run_limit=30.0, warn_signal=signal.SIGUSR1,
                                warn_time=29.5, warn_to=to), 0, None, False, {})
    wait_for(lambda: (tmp_path / "ready").exists())
    started = t.start_time
    ex = wait_exit(runner, t, sample=True)
    assert (ex.exit_code, ex.reason, t.warned) == (5, "", True)
    assert time.time() - started >= 0.5  # not before its time


def test_without_a_run_limit_the_warning_never_goes(runner: Runner) -> None:
    t = runner.start(1, 0, spec(["sleep", "30"], warn_signal=signal.SIGUSR1, warn_time=65535.0), 0, None, False, {})
    assert not warning_due(t, time.time() + 1e6)
    assert warning_due(dataclasses.replace(t, run_limit=65536.0), time.time() + 1.5)


def test_a_restarted_worker_keeps_the_warning_and_sends_it_once(make_runner: Callable[..., Runner],
                                                                 tmp_path: Path) -> None:
    ready, got = tmp_path / "ready", tmp_path / "got"
    cmd = ["sh", "-c", f"trap 'echo w >> {got}' USR1; touch {ready}; while :; do sleep 0.05; done"]
    a = make_runner(state=tmp_path / "s", name="warn")
    t = a.start(1, 0, spec(cmd, run_limit=30.0, warn_signal=signal.SIGUSR1, warn_time=29.5, warn_to="batch"),
                0, None, False, {})
    wait_for(lambda: ready.exists())
    wait_for(lambda: a.sample_all(time.time()) is not None and got.exists())
    b = make_runner(state=tmp_path / "s", name="warn")  # a restarted worker
    (tb,) = b.adopt()
    assert (tb.warning, tb.warned) == ((signal.SIGUSR1, 29.5, "batch"), True)
    for _ in range(5):
        b.sample_all(time.time())
        time.sleep(0.05)
    assert got.read_text() == "w\n"  # once


def test_a_pre_exec_past_its_timeout_is_killed_with_its_whole_group_and_reports_98(runner: Runner,
                                                                                    tmp_path: Path) -> None:
    """LSF's JOB_PREPROC_TIMEOUT: the pre-exec's process group is killed, the job reports exit 98
    (PREEXEC_TIMEOUT) and its command never runs."""
    pids, ran = tmp_path / "pids", tmp_path / "ran"
    t = runner.start(1, 0, spec(["touch", str(ran)], pre_exec=f"sleep 30 & echo $! > {pids}; wait"), 0, None,
                     False, {}, preexec_timeout=0.5)
    child = int(wait_for(lambda: pids.exists() and pids.read_text().strip()))
    ex = wait_exit(runner, t, sample=True)
    assert (ex.reason, ex.exit_code, ex.signal) == (PREEXEC_TIMEOUT, PREEXEC_TIMEOUT_CODE, None)
    assert wait_for(lambda: gone(child)) and not ran.exists()


def test_a_pre_exec_that_ends_in_time_leaves_the_command_to_run_past_the_timeout(
        make_runner: Callable[..., Runner], tmp_path: Path) -> None:
    """Only the pre-exec is timed: a command that runs longer is not touched, nor after a restart;
    its status line (after the wrapper's PREEXEC_DONE line) still gives its own exit code."""
    a = make_runner(state=tmp_path / "s", name="pt")
    t = a.start(1, 0, spec(["sh", "-c", "sleep 1; exit 3"], pre_exec="true"), 0, None, False, {},
                preexec_timeout=0.2)
    wait_for(lambda: "PREEXEC_DONE" in Path(a._rec(t.key)).read_text())
    b = make_runner(state=tmp_path / "s", name="pt")  # a restarted worker adopts it, timeout and all
    (tb,) = b.adopt()
    assert tb.preexec_timeout == 0.2
    ex = wait_exit(b, tb, sample=True)
    assert (ex.reason, ex.exit_code) == ("", 3) and tb.kill_reason is None
