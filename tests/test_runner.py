"""xce.worker.runner / measure against real processes on this host.

Every wait polls a condition against a deadline; every fixture kills what its
runner started (by process group) and removes the cgroups it made.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from xce.core.errors import InvalidRequest
from xce.core.model import JobSpec
from xce.worker import measure
from xce.worker.runner import LOST_DOWN, Exit, Runner, Task

T = TypeVar("T")
MB = 1024 * 1024
ALLOC = [sys.executable, "-c",
         "b = bytearray(b'x') * (100 << 20)\nimport time\ntime.sleep(30)"]
_names = itertools.count()


def _name() -> str:
    return f"test{os.getpid()}-{next(_names)}"


def _cleanup(r: Runner) -> None:
    r.discard_spare()
    for t in r.tasks():
        try:
            os.killpg(t.pid, signal.SIGKILL)
        except OSError:
            pass
        r._signal_cgroup(t, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while r.tasks() and time.monotonic() < deadline:
        r.poll()
        time.sleep(0.01)
    for t in list(r._tasks.values()):
        r.forget(t)
    deadline = time.monotonic() + 5
    while r._closing and time.monotonic() < deadline:
        r.poll()
        time.sleep(0.01)
    for d in measure.worker_cgroup_dirs(r.cgroup_name):
        for sub in d.iterdir():
            if sub.is_dir():  # a sibling runner of the same name may still be closing it
                wait_for(lambda: measure._rmdir(sub))
        measure._rmdir(d)


@pytest.fixture
def make_runner(tmp_path: Path) -> Iterator[Callable[..., Runner]]:
    made: list[Runner] = []

    def make(state: Path | None = None, name: str | None = None, kill_grace: float = 0.5) -> Runner:
        r = Runner(name or _name(), state or tmp_path / "state", kill_grace=kill_grace)
        made.append(r)
        return r

    yield make
    for r in made:
        _cleanup(r)


@pytest.fixture
def runner(make_runner: Callable[..., Runner]) -> Runner:
    return make_runner()


@pytest.fixture(params=["auto", "proc"])
def method(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with the best method of this host and again with the /proc fallback."""
    if request.param == "proc":
        monkeypatch.setattr(measure, "detect_cgroup", lambda: None)
        return "proc"
    det = measure.detect_cgroup()
    return det[0] if det else "proc"


def spec(cmd: list[str], **kw: object) -> JobSpec:
    kw.setdefault("cwd", "/tmp")
    return JobSpec(command=cmd, **kw)  # type: ignore[arg-type]


def start(r: Runner, job: int, cmd: list[str], reserved: int = 0, **kw: object) -> Task:
    return r.start(job, 0, spec(cmd, **kw), reserved, None, False, {"XCE_JOBID": str(job)})


def wait_exit(r: Runner, task: Task, timeout: float = 10, sample: bool = False) -> Exit:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sample:
            r.sample_all(time.time())
        for ex in r.poll():
            if ex.task is task:
                return ex
        if task.ended is not None:
            return task.ended
        time.sleep(0.01)
    raise AssertionError(f"task {task.key} did not end within {timeout}s")


def wait_for(cond: Callable[[], T | None], timeout: float = 10) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.01)
    raise AssertionError("condition not met in time")


def at_least(items: list[int], n: int) -> list[int] | None:
    return items if len(items) >= n else None


def gone(pid: int) -> bool:
    st = measure.proc_stat(pid)
    return st is None or st.state in "ZX"


def tree(pid: int) -> list[int]:
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        st = measure.proc_stat(p)
        if st is not None:
            stack.extend(measure._children(p, st.threads))
    return out


# ------------------------------------------------------------------------ basics

def test_exit_codes(runner: Runner) -> None:
    ok = start(runner, 1, ["true"])
    bad = start(runner, 2, ["sh", "-c", "exit 3"])
    e1, e2 = wait_exit(runner, ok), wait_exit(runner, bad)
    assert (e1.exit_code, e1.signal, e1.reason) == (0, None, "")
    assert (e2.exit_code, e2.signal, e2.reason) == (3, None, "")
    assert runner.poll() == []  # each exit reported once
    assert runner.tasks() == []  # ended: no longer running...
    assert runner.find(2, 0) is bad  # ...but kept until forgotten
    runner.forget(bad)
    assert runner.find(2, 0) is None
    assert not (runner.task_dir / "2.0.rec").exists()


def test_child_killed_by_signal_reads_as_128_plus_n(runner: Runner) -> None:
    t = start(runner, 1, ["sh", "-c", "kill -USR1 $$"])
    ex = wait_exit(runner, t)
    assert (ex.exit_code, ex.signal, ex.reason) == (128 + signal.SIGUSR1, signal.SIGUSR1, "")


def test_kill_before_the_command_started(runner: Runner) -> None:
    t = start(runner, 1, ["sleep", "30"])
    runner.kill(t, "killed by user")  # most likely still in the wrapper's read
    ex = wait_exit(runner, t)
    assert ex.reason == "killed by user" and ex.signal in (signal.SIGTERM, signal.SIGKILL)


def test_start_is_idempotent_per_attempt(runner: Runner) -> None:
    t = start(runner, 1, ["sleep", "30"])
    assert start(runner, 1, ["sleep", "30"]) is t
    assert len(runner.tasks()) == 1


def test_output_cwd_env(runner: Runner, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    t = runner.start(42, 0, JobSpec(command=["sh", "-c", "pwd; echo $FOO $XCE_JOBID; echo oops >&2"],
                                    cwd=str(work), env={"FOO": "bar"}, stdout="out-%J.txt"),
                     0, None, False, {"XCE_JOBID": "42"})
    assert wait_exit(runner, t).exit_code == 0
    assert (work / "out-42.txt").read_text() == f"{work}\nbar 42\noops\n"
    assert t.stdout == t.stderr == str(work / "out-42.txt")
    # appended, and stderr separately when asked
    t2 = runner.start(42, 1, JobSpec(command=["sh", "-c", "echo again; echo oops >&2"], cwd=str(work),
                                     stdout="out-%J.txt", stderr=str(work / "err-%J")),
                      0, None, False, {})
    assert wait_exit(runner, t2).exit_code == 0
    assert (work / "out-42.txt").read_text().endswith("oops\nagain\n")
    assert (work / "err-42").read_text() == "oops\n"


def test_default_output_goes_to_state_dir(runner: Runner) -> None:
    t = start(runner, 7, ["echo", "hello"])
    wait_exit(runner, t)
    assert (runner.output_dir / "7.out").read_text() == "hello\n"


def test_stdin_is_dev_null_and_no_fd_leaks(runner: Runner, tmp_path: Path) -> None:
    out = tmp_path / "fds"
    t = start(runner, 1, ["sh", "-c", "cat; ls /proc/self/fd"], stdout=str(out))
    assert wait_exit(runner, t).exit_code == 0
    # cat read EOF at once; ls sees only 0,1,2 and its own directory fd
    assert sorted(out.read_text().split()) == ["0", "1", "2", "3"]


def test_a_job_takes_sigpipe_and_sigxfsz_as_a_shell_would_on_a_spare_or_not(runner: Runner, tmp_path: Path) -> None:
    """The worker (Python) ignores SIGPIPE and SIGXFSZ; a job must not inherit that, whether its
    wrapper was spawned fresh (posix_spawn) or was the spare (Popen)."""
    for job, on_spare in ((1, False), (2, True)):
        if on_spare:
            runner.prepare_spare()
        out = tmp_path / f"sig{job}"
        t = start(runner, job, ["sh", "-c", "grep ^SigIgn /proc/self/status; yes | head -1 >/dev/null"],
                  stdout=str(out))
        assert wait_exit(runner, t).exit_code == 0
        ignored = int(out.read_text().split()[1], 16)
        assert not ignored & (1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1)), out.read_text()


def test_a_command_found_on_path_before_and_removed_since_is_refused_as_not_found(runner: Runner,
                                                                                  tmp_path: Path) -> None:
    """The file a PATH search found is remembered (a search a launch was ~0.05 ms), never trusted."""
    cmd = tmp_path / "xce-found-once"
    cmd.write_text("#!/bin/sh\nexit 4\n")
    cmd.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    ex = wait_exit(runner, runner.start(1, 0, spec([cmd.name], env=env), 0, None, False, {}))
    assert ex.exit_code == 4
    cmd.unlink()
    with pytest.raises(InvalidRequest, match="command not found: xce-found-once"):
        runner.start(2, 0, spec([cmd.name], env=env), 0, None, False, {})


def test_bad_requests_raise_invalid_request(runner: Runner, tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="command not found: no-such-cmd-xce"):
        start(runner, 1, ["no-such-cmd-xce", "x"])
    with pytest.raises(InvalidRequest, match="command not found"):
        start(runner, 2, ["./nope.sh"])
    with pytest.raises(InvalidRequest, match="working directory"):
        start(runner, 3, ["true"], cwd=str(tmp_path / "missing"))
    with pytest.raises(InvalidRequest, match="non-empty"):
        start(runner, 4, [])
    with pytest.raises(InvalidRequest, match="cannot open output file"):
        start(runner, 5, ["true"], stdout=str(tmp_path / "nodir" / "out"))
    if os.geteuid() == 0:
        with pytest.raises(InvalidRequest, match="does not exist"):
            start(runner, 6, ["true"], user="no-such-user-xce")
    assert runner.tasks() == []
    assert list(runner.task_dir.iterdir()) == []


def test_non_root_worker_runs_jobs_as_itself(runner: Runner, tmp_path: Path) -> None:
    runner._euid = 1000  # as if not root: spec.user is not looked up nor switched to
    out = tmp_path / "id"
    t = start(runner, 1, ["id", "-u"], user="no-such-user-xce", stdout=str(out))
    assert wait_exit(runner, t).exit_code == 0
    assert out.read_text().strip() == str(os.geteuid())


def test_host_memory_figures() -> None:
    assert 0 < measure.os_available() <= measure.mem_total()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch users")
def test_runs_as_job_user_and_opens_output_as_that_user(runner: Runner) -> None:
    d = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        d.chmod(0o777)
        t = start(runner, 1, ["sh", "-c", "id -u; id -g; echo $HOME"], user="nobody",
                  stdout=str(d / "%J.out"))
        assert wait_exit(runner, t).exit_code == 0
        assert (d / "1.out").read_text().split() == ["65534", "65534", "/nonexistent"]
        assert (d / "1.out").stat().st_uid == 65534
        # a job must not be able to append to a file only root may write
        t = start(runner, 2, ["true"], user="nobody", stdout="/root/xce-forbidden-%J")
        ex = wait_exit(runner, t)
        assert ex.exit_code == 126 and "cannot open the output file" in ex.reason
        assert not Path("/root/xce-forbidden-2").exists()
    finally:
        for p in d.iterdir():
            p.unlink()
        d.rmdir()


# ------------------------------------------------------------------ measuring

def test_memory_is_measured_and_peak_survives_kill(runner: Runner, method: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    t = start(runner, 1, ALLOC)
    assert t.meter.method == method
    s = wait_for(lambda: next((s for tk, s in runner.sample_all(time.time())
                               if tk is t and s.rss >= 90 * MB), None))
    assert s.method == method and s.cpu_time > 0
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        t.meter.sample()
    us = (time.perf_counter() - t0) / n * 1e6
    with capsys.disabled():
        print(f"\n[xce] measure method on this host: {method}; {us:.0f} us/sample (1 process)")
    runner.kill(t, "killed by user")
    ex = wait_exit(runner, t)
    assert (ex.signal, ex.reason) == (signal.SIGTERM, "killed by user")
    assert t.peak >= 90 * MB and t.last is not None and t.last.peak >= 90 * MB


def test_mem_limit_kills_with_memlimit(runner: Runner, method: str) -> None:
    t = runner.start(1, 0, spec(ALLOC, mem_limit=50 * MB), 0, None, False, {})
    ex = wait_exit(runner, t, sample=True)
    assert ex.reason == "MEMLIMIT"
    assert ex.signal in (signal.SIGTERM, signal.SIGKILL)
    assert t.peak > 50 * MB


def test_proc_meter_sums_the_tree_and_cpu(runner: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measure, "detect_cgroup", lambda: None)
    t = start(runner, 1, ["sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; "
                          "sleep 30 & sleep 30 & sleep 30"])
    wait_for(lambda: len(tree(t.pid)) >= 4)
    s = t.meter.sample()
    assert s is not None and s.method == "proc" and s.cpu_time > 0
    assert s.rss >= 4 * 100 * 1024  # four processes, each well above 100 kB
    os.killpg(t.pid, signal.SIGKILL)
    wait_for(lambda: t.meter.sample() is None)


def test_slack_integral_and_largest_overage(runner: Runner) -> None:
    big = start(runner, 1, ALLOC, reserved=10 * MB)
    small = start(runner, 2, ["sleep", "30"], reserved=200 * MB)
    wait_for(lambda: (runner.sample_all(time.time()), big.last and big.last.rss >= 90 * MB)[1])
    assert runner.largest_overage() is big
    # slack of `small`: ~200 MB reserved, ~1 MB used, integrated over 3 s of explicit time
    small.slack_integral, small._last_t = 0.0, None
    t0 = small.start_time
    small.last = None
    runner.sample_all(t0 + 1)
    runner.sample_all(t0 + 3)
    assert 2.9 * 200 * MB < small.slack_integral <= 3 * 200 * MB
    big.reserved = 1024 * MB
    assert runner.largest_overage() is None


def test_slack_integral_follows_decay(runner: Runner) -> None:
    t = runner.start(1, 0, spec(["sleep", "30"]), 100 * MB, 10, True, {})
    t0 = t.start_time
    runner.sample_all(t0)
    runner.sample_all(t0 + 10)
    # linear decay 100 MB -> 0 over 10 s: ~500 MB*s minus the little the job uses
    assert 480 * MB < t.slack_integral <= 500 * MB


# -------------------------------------------------------------------- killing

def test_kill_ends_the_whole_group(runner: Runner) -> None:
    t = start(runner, 1, ["sh", "-c", "sleep 60 & sleep 60"])
    pids = wait_for(lambda: at_least(tree(t.pid), 4))
    runner.kill(t, "killed by user")
    runner.kill(t, "second reason is ignored")
    ex = wait_exit(runner, t)
    assert ex.reason == "killed by user" and ex.signal == signal.SIGTERM
    wait_for(lambda: all(gone(p) for p in pids))


def test_kill_escalates_to_sigkill_when_term_is_ignored(runner: Runner) -> None:
    t = start(runner, 1, ["sh", "-c", "trap '' TERM; sleep 60 & sleep 60"])
    pids = wait_for(lambda: at_least(tree(t.pid), 4))
    t0 = time.monotonic()
    runner.kill(t, "killed by user", grace=0.3)
    ex = wait_exit(runner, t)
    assert time.monotonic() - t0 >= 0.3
    assert (ex.exit_code, ex.signal, ex.reason) == (137, signal.SIGKILL, "killed by user")
    wait_for(lambda: all(gone(p) for p in pids))


def test_leftovers_are_killed_when_the_job_ends(runner: Runner, tmp_path: Path) -> None:
    pidfile = tmp_path / "bg.pid"
    t = start(runner, 1, ["sh", "-c", f"sleep 60 & echo $! > {pidfile}; exit 0"])
    ex = wait_exit(runner, t)
    assert ex.exit_code == 0
    wait_for(lambda: gone(int(pidfile.read_text())))


def test_cgroup_catches_processes_that_leave_the_session(runner: Runner) -> None:
    if measure.detect_cgroup() is None:
        pytest.skip("no writable memory cgroup here")
    t = start(runner, 1, ["sh", "-c", "setsid sleep 60 & sleep 60"])
    pids = wait_for(lambda: at_least(t.meter.pids(), 3))  # type: ignore[attr-defined]
    runner.kill(t, "killed by user")
    wait_exit(runner, t)
    wait_for(lambda: all(gone(p) for p in pids))


def test_an_emptied_job_cgroup_measures_the_next_job_alone(runner: Runner) -> None:
    """A job cgroup its job left empty is kept and reset for the next job (making and removing two
    cgroups a job was a third of the worker's launch); one a job left a process in is removed."""
    det = measure.detect_cgroup()
    if det is None or det[0] != "cgroup1":
        pytest.skip("job cgroups are kept on cgroup v1 only")
    a = start(runner, 1, [sys.executable, "-c", "b = bytearray(b'x') * (100 << 20); sum(range(3_000_000))"])
    wait_exit(runner, a)
    assert a.last is not None and a.peak >= 100 * MB and a.last.cpu_time > 0.05
    runner.forget(a)
    b = start(runner, 2, ["true"])
    assert b.cgroup == a.cgroup
    wait_exit(runner, b)
    assert b.last is not None and b.peak < 20 * MB and b.last.cpu_time < 0.05
    runner.forget(b)
    c = start(runner, 3, ["sh", "-c", "setsid sleep 60 & exit 0"])
    assert c.cgroup == a.cgroup
    wait_exit(runner, c)
    runner.forget(c)
    d = start(runner, 4, ["true"])
    assert d.cgroup != c.cgroup
    wait_exit(runner, d)


def test_a_job_in_a_kept_cgroup_is_adopted_after_a_restart(make_runner: Callable[..., Runner],
                                                           tmp_path: Path) -> None:
    det = measure.detect_cgroup()
    if det is None or det[0] != "cgroup1":
        pytest.skip("job cgroups are kept on cgroup v1 only")
    name = _name()
    a = make_runner(tmp_path / "s", name)
    first = start(a, 1, ["true"])
    wait_exit(a, first)
    a.forget(first)
    a.prepare_spare()  # the spare takes the kept cgroup, and the job the spare
    ta = start(a, 2, ["sh", "-c", "sleep 0.5; exit 7"])
    assert ta.cgroup == first.cgroup == "1.0"
    a._tasks.clear()  # the worker "restarts": A is dropped without killing anything
    b = make_runner(tmp_path / "s", name)
    (tb,) = b.adopt()
    assert tb.cgroup == "1.0" and tb.meter.method == "cgroup1" and ta.pid in tb.meter.pids()
    ex = wait_exit(b, tb)
    assert (ex.exit_code, ex.signal, ex.reason) == (7, None, "")


# ------------------------------------------------------------------- adoption

def test_adopt_running_task_after_restart(make_runner: Callable[..., Runner], tmp_path: Path) -> None:
    name = _name()
    a = make_runner(tmp_path / "s", name)
    ta = start(a, 5, ["sh", "-c", "sleep 0.5; exit 7"], reserved=10 * MB)
    a._tasks.clear()  # the worker "restarts": A is dropped without killing anything
    b = make_runner(tmp_path / "s", name)
    adopted = b.adopt()
    assert [t.key for t in adopted] == ["5.0"]
    tb = adopted[0]
    assert tb.adopted and tb.pid == ta.pid and tb.reserved == 10 * MB
    assert tb.meter.method == ta.meter.method
    assert b.sample_all(time.time())  # measurable after re-attaching
    ex = wait_exit(b, tb)
    assert (ex.exit_code, ex.signal, ex.reason) == (7, None, "")


def test_adopt_reports_exit_that_happened_while_down(make_runner: Callable[..., Runner],
                                                     tmp_path: Path) -> None:
    name = _name()
    a = make_runner(tmp_path / "s", name)
    t1 = start(a, 1, ["sh", "-c", "exit 5"])
    t2 = start(a, 2, ["sh", "-c", "exit 6"])
    wait_for(lambda: gone(t1.pid) and gone(t2.pid))
    a._tasks.clear()
    rec = a.task_dir / "2.0.rec"
    rec.write_text(rec.read_text().split("\n")[0] + "\n")  # as if the wrapper had been SIGKILLed
    b = make_runner(tmp_path / "s", name)
    assert b.adopt() == []
    exits = {e.task.job_id: e for e in b.poll()}
    assert (exits[1].exit_code, exits[1].reason) == (5, "")
    assert (exits[2].exit_code, exits[2].signal, exits[2].reason) == (None, None, LOST_DOWN)
    assert b.poll() == []


def test_adopted_task_can_be_killed(make_runner: Callable[..., Runner], tmp_path: Path) -> None:
    name = _name()
    a = make_runner(tmp_path / "s", name)
    ta = start(a, 1, ["sh", "-c", "sleep 60 & sleep 60"])
    wait_for(lambda: at_least(tree(ta.pid), 4))  # a TERM racing the command's exec is lost
    a._tasks.clear()
    b = make_runner(tmp_path / "s", name)
    (t,) = b.adopt()
    b.kill(t, "killed by user")
    ex = wait_exit(b, t)
    assert (ex.exit_code, ex.signal, ex.reason) == (143, signal.SIGTERM, "killed by user")


def test_kill_before_restart_is_finished_after_it(make_runner: Callable[..., Runner],
                                                 tmp_path: Path) -> None:
    name = _name()
    a = make_runner(tmp_path / "s", name)
    t = start(a, 1, ["sh", "-c", "trap '' TERM; sleep 60"])
    wait_for(lambda: at_least(tree(t.pid), 3))
    a.kill(t, "killed by user", grace=30)
    a._tasks.clear()
    b = make_runner(tmp_path / "s", name, kill_grace=0.2)
    (tb,) = b.adopt()
    ex = wait_exit(b, tb)
    assert (ex.signal, ex.reason) == (signal.SIGKILL, "killed by user")


def test_pid_reuse_is_not_mistaken_for_the_task(make_runner: Callable[..., Runner], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measure, "detect_cgroup", lambda: None)  # a stranger is in no job cgroup
    name = _name()
    a = make_runner(tmp_path / "s", name)
    t = start(a, 1, ["sleep", "30"])
    a._tasks.clear()
    rec = a.task_dir / "1.0.rec"
    head, _, rest = rec.read_text().partition("\n")
    rec.write_text(json.dumps({**json.loads(head), "proc_start": t.proc_start + 1}) + "\n" + rest)  # another process
    b = make_runner(tmp_path / "s", name)
    assert b.adopt() == []
    (ex,) = b.poll()
    assert ex.reason == LOST_DOWN
    assert not gone(t.pid)  # the stranger was left alone
    os.killpg(t.pid, signal.SIGKILL)
    wait_for(lambda: gone(t.pid))


def test_adopt_sweeps_job_cgroups_without_a_record(make_runner: Callable[..., Runner],
                                                   tmp_path: Path) -> None:
    if measure.detect_cgroup() is None:
        pytest.skip("no writable memory cgroup here")
    name = _name()
    a = make_runner(tmp_path / "s", name)
    t = start(a, 1, ["sleep", "60"])
    wait_for(lambda: at_least(tree(t.pid), 2))
    a._tasks.clear()
    (a.task_dir / "1.0.rec").unlink()  # a job nobody tracks any more
    b = make_runner(tmp_path / "s", name)
    assert b.adopt() == []
    wait_for(lambda: gone(t.pid))
    wait_for(lambda: (b.poll(), not any((d / "1.0").exists()
                                        for d in measure.worker_cgroup_dirs(b.cgroup_name)))[1])


def test_one_host_jobs_share_a_read_only_hostfile_and_make_no_private_directory(runner: Runner) -> None:
    a = runner.hostfile(1, 0, "h\nh\n", one_host=True)
    b = runner.hostfile(2, 0, "h\nh\n", one_host=True)
    c = runner.hostfile(3, 0, "h\n", one_host=True)
    assert a == b != c
    assert Path(a).read_text() == "h\nh\n" and Path(c).read_text() == "h\n"
    assert not os.access(a, os.W_OK) or os.geteuid() == 0  # root may write anything
    assert Path(a).stat().st_mode & 0o777 == 0o444
    assert not (runner.state_dir / "jobs").exists()
    task = start(runner, 1, ["true"])
    wait_exit(runner, task)
    runner.forget(task)
    assert Path(a).read_text() == "h\nh\n"  # a job's end leaves the shared file to the next


def test_a_parallel_jobs_hostfile_is_its_own_and_goes_with_it(runner: Runner) -> None:
    path = runner.hostfile(4, 0, "h\ng\n", one_host=False)
    assert path == str(runner.state_dir / "jobs" / "4.0" / "hostfile")
    assert Path(path).read_text() == "h\ng\n"
    task = start(runner, 4, ["true"])
    wait_exit(runner, task)
    runner.forget(task)
    assert not Path(path).parent.exists()
