"""Every example in README.md runs, as written, against a real local cluster, within a deadline.

The blocks are read from README.md itself (```sh and ```python fences), so an example that
stops working, or that never ends (issue 12 item 10: ``c.events(timeout=5)`` restarted its
timeout on every event), fails here.  Each command runs with XCE_STATE_DIR in the test's
temporary directory and this interpreter's ``xce`` first on PATH.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import ROOT, pid_alive, wait_for, xce

FENCE = re.compile(r"^```(sh|python)\n(.*?)^```", re.M | re.S)
INSTALL = "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/xce up"
CI = "bash .ci/run"


def blocks() -> list[tuple[str, str]]:
    return [(lang, text) for lang, text in FENCE.findall((ROOT / "README.md").read_text())]


def env_for(state_dir: Path) -> dict[str, str]:
    env = dict(os.environ, XCE_STATE_DIR=str(state_dir))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.pop("XCE_CONTROLLER", None)
    return env


def test_the_readme_examples_are_the_ones_these_tests_run() -> None:
    """A new example must get a runner here; the install and CI lines are run as they stand."""
    got = blocks()
    assert [lang for lang, _ in got] == ["sh", "sh", "sh", "python"]
    assert got[0][1].strip() == INSTALL and got[1][1].strip() == CI
    # The CI line is what CI itself runs (this test is one of the tests it runs).
    assert (ROOT / ".ci" / "run").read_text().startswith("#!")


def test_using_it_and_scripting_run_to_the_end(tmp_path: Path) -> None:
    """The "Using it" lines one by one (each must succeed); the scripting example before `xce down`."""
    sd = tmp_path / "xce"
    env = env_for(sd)
    (_, using), (_, script) = blocks()[2], blocks()[3]
    lines = [cmd for line in using.splitlines() if (cmd := line.split("#", 1)[0].strip())]
    assert lines[0].startswith("xce up") and lines[-1] == "xce down"
    try:
        for cmd in lines:
            if cmd == "xce down":  # the cluster the lines made: the scripting example's too
                started = time.monotonic()
                r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                                   capture_output=True, text=True, timeout=60)
                assert r.returncode == 0, r.stderr
                assert time.monotonic() - started < 30  # ten 1 s jobs on 4 slots, then 5 s of events
                assert len([ln for ln in r.stdout.splitlines() if " DONE " in ln]) == 10, r.stdout
            r = subprocess.run(cmd, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True,
                               timeout=120)
            assert r.returncode == 0, f"{cmd!r} exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    finally:
        xce(sd, "down", check=False)


def test_the_install_line_installs_and_runs_a_cluster(tmp_path: Path) -> None:
    """The first example, verbatim, in a copy of the source tree: `xce up` stays up until Ctrl-C."""
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", ".venv", ".ci-venv", "*.egg-info",
                                                             "__pycache__", ".pytest_cache", "build"))
    sd = tmp_path / "state"
    env = dict(os.environ, XCE_STATE_DIR=str(sd))
    env.pop("XCE_CONTROLLER", None)
    proc = subprocess.Popen(INSTALL, shell=True, cwd=src, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        installed = src / ".venv" / "bin" / "xce"
        wait_for(lambda: installed.exists() and subprocess.run(
            [str(installed), "status"], env=env, capture_output=True, text=True, timeout=20).returncode == 0,
            240, "the installed `xce up` to serve `xce status`", interval=1.0)
        assert proc.poll() is None  # still in the foreground
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            raise AssertionError(f"`xce up` did not stop on Ctrl-C:\n{out[-3000:]}") from None
    wait_for(lambda: not pid_alive(proc.pid), 10, "xce up to exit")
