"""The end-to-end harness: real daemons as real processes on 127.0.0.1 with free ports.

``local_cluster(...)`` runs `xce up --detach` in a fresh state directory, yields
a handle with a Client, and on exit runs `xce down` and checks that every
daemon it started has exited.  Nothing here sleeps a fixed time: ``wait_for``
polls a condition until a deadline and fails with what it last saw.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def wait_for(cond: Callable[[], Any], timeout: float = 20.0, what: str = "condition",
             interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = cond()
        except Exception as e:  # noqa: BLE001 - keep polling; report the last failure
            last = e
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last saw: {last!r}")


def xce(state_dir: Path, *args: str, check: bool = True, timeout: float = 60, **kw: Any) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, "-m", "xce.cli.main", "--state-dir", str(state_dir), *args],
                       capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"xce {' '.join(args)} exited {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}")
    return r


def proc_state(pid: int | Path) -> str:
    """A process's state letter from /proc ("?" if it is gone); ``pid`` may be a file holding it.

    "T" also for a shell that is stopped in all but name: a shell that had just vforked a
    command when SIGSTOP reached its group waits in the kernel ("D") for a child that is
    itself stopped before its exec, and stays so until SIGCONT.
    """
    try:
        n = int(pid.read_text()) if isinstance(pid, Path) else pid
        state = Path(f"/proc/{n}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "D":
            kids = Path(f"/proc/{n}/task/{n}/children").read_text().split()
            if kids and all(proc_state(int(k)) == "T" for k in kids):
                return "T"
        return state
    except (OSError, ValueError, IndexError):
        return "?"


def sigstop(pid: int, timeout: float = 10.0) -> None:
    """SIGSTOP ``pid`` and wait until every thread of it is stopped.

    The kernel wakes one thread for a SIGSTOP; the others stop only once that thread has run
    and spread the group stop (do_signal_stop).  On a loaded machine that thread may wait for
    a core for a while, and meanwhile another thread woken by I/O runs on: a "stopped"
    follower's Raft thread answered the leader's append-entries 9-219 ms after the kill, so
    a leader cut off by the test still committed (test_e2e_ha, 1 run in ~30 at load 4+)."""
    os.kill(pid, signal.SIGSTOP)

    def stopped() -> bool:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
            return all(Path(f"/proc/{pid}/task/{t}/stat").read_text().rsplit(")", 1)[1].split()[0] in "Tt"
                       for t in tasks)
        except OSError:
            return False
    wait_for(stopped, timeout, f"every thread of {pid} stopped", interval=0.005)


def memhog(*steps: str) -> list[str]:
    """A job that holds resident memory in ``MB:SECONDS`` steps (xce/jobs/memhog.py)."""
    return [sys.executable, "-m", "xce.jobs.memhog", *steps]


def audit_ok(c: Cluster) -> None:
    r = c.client.audit()
    assert r.problems == [], r.problems


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False
    return True


class Cluster:
    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        from xce.client import Client

        self.client = Client(state_dir=state_dir, timeout=15)

    def xce(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return xce(self.state_dir, *args, **kw)

    def up_info(self) -> dict[str, Any]:
        return json.loads((self.state_dir / "up.json").read_text())

    def daemon_pid(self, name: str) -> int:
        return self.up_info()["daemons"][name]

    def wait_job(self, job_id: int, states: tuple[str, ...] = ("DONE", "EXIT"), timeout: float = 30) -> Any:
        return wait_for(lambda: (v := self.client.job(job_id)).state in states and v,
                        timeout, f"job {job_id} in {states}")

    def logs(self) -> str:
        out = []
        for f in sorted((self.state_dir / "logs").glob("*.log")):
            out.append(f"==== {f.name}\n{f.read_text()[-4000:]}")
        return "\n".join(out)


STREAMING_JOB = "echo one; echo oops >&2; while [ ! -e {marker} ]; do sleep 0.1; done; echo two; exit 4"


def run_streaming(argv: list[str], tmp_path: Path, **kw: Any) -> tuple[list[str], str, str, int]:
    """Run an interactive submit (``-I``) of STREAMING_JOB: the job writes "two" only once "one"
    has reached us, so the output must stream, not only arrive at the end.  Returns (the first
    two stdout lines, the rest of stdout, stderr, exit code)."""
    import threading

    p = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=(tmp_path / "stderr").open("w"),
                         text=True, **kw)
    watchdog = threading.Timer(60, p.kill)  # a broken stream would wait for the marker for ever
    watchdog.start()
    try:
        assert p.stdout is not None
        lines = [p.stdout.readline(), p.stdout.readline()]
        (tmp_path / "seen").touch()
        rest = p.stdout.read()  # from the same buffered reader: communicate() would skip what it holds
        p.wait()
    finally:
        watchdog.cancel()
    return lines, rest, (tmp_path / "stderr").read_text(), p.returncode


@contextlib.contextmanager
def local_cluster(tmp_path: Path, *args: str) -> Iterator[Cluster]:
    sd = tmp_path / "xce"
    xce(sd, "up", "--detach", *args, timeout=90)
    c = Cluster(sd)
    pids = [c.up_info()["pid"], *c.up_info()["daemons"].values()]
    try:
        yield c
    except BaseException:
        sys.stderr.write(c.logs())
        raise
    finally:
        c.client.close()
        info = None
        with contextlib.suppress(Exception):
            info = c.up_info()
        if info:
            pids += list(info["daemons"].values())
        # --kill-jobs: a test's jobs must not outlive it as orphans (plain `down` leaves them
        # for the next `up` to re-attach); if that cannot finish, plain down still stops the daemons.
        if xce(sd, "down", "--kill-jobs", check=False, timeout=60).returncode != 0:
            xce(sd, "down", check=False)
        wait_for(lambda: not any(pid_alive(p) for p in pids), 20, "every daemon to exit")


@pytest.fixture
def cluster2(tmp_path: Path) -> Iterator[Cluster]:
    """Two hosts of 2 slots and 2G each, fast heartbeats."""
    with local_cluster(tmp_path, "--hosts", "2", "--slots-per-host", "2", "--mem-per-host", "2G",
                       "--heartbeat", "0.5") as c:
        yield c
