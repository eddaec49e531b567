"""The CLI tried as a new user would (issue 12, item 13).

Global options after any subcommand, `xce top` passing its options to the
console, a closed pipe on stdout, `-M` under the floor, `--dry-run` with no
controller, unknown job ids.  The parsing part needs no cluster; the rest runs
real `xce` processes against `xce up`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Cluster, local_cluster

from xce.cli import main as cli


def leaves(p: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, p
    for action in subs:
        for name, child in action.choices.items():
            yield from leaves(child, (*path, name))


def test_every_subcommand_takes_the_global_options_after_its_name() -> None:
    found = list(leaves(cli.parser()))
    assert len(found) > 20 and ("admin", "audit") in [p for p, _ in found]
    for path, leaf in found:
        assert "--state-dir" in leaf._option_string_actions, path
        own = leaf._option_string_actions.get("--timeout")
        assert own is not None and (own.dest == "timeout" or path == ("wait",)), path


@pytest.mark.parametrize("argv, state_dir, timeout", [
    (["up", "--state-dir", "/x", "--hosts", "2"], "/x", 10.0),
    (["--state-dir", "/a", "up", "--state-dir", "/b"], "/b", 10.0),   # the later one wins
    (["--state-dir", "/a", "jobs", "-l", "1"], "/a", 10.0),          # before still works
    (["jobs", "-l", "--timeout", "3", "1", "--state-dir=/x"], "/x", 3.0),
    (["admin", "audit", "--state-dir", "/x"], "/x", 10.0),
    (["keys", "list", "--timeout", "2"], None, 2.0),
    (["user", "list", "--state-dir", "/x"], "/x", 10.0),
    (["down", "--state-dir", "/x"], "/x", 10.0),
])
def test_global_options_parse_before_or_after_the_subcommand(argv: list[str], state_dir: str | None,
                                                             timeout: float, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XCE_STATE_DIR", raising=False)
    a = cli.parser().parse_args(argv)
    assert (a.state_dir, a.timeout) == (state_dir, timeout)


def test_wait_keeps_its_own_timeout_and_submit_its_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XCE_STATE_DIR", raising=False)
    a = cli.parser().parse_args(["--timeout", "4", "wait", "--timeout", "30", "7"])
    assert (a.timeout, a.timeout_wait, a.ids) == (4.0, 30.0, ["7"])
    a = cli.parser().parse_args(["submit", "--state-dir", "/x", "--", "echo", "--state-dir", "y"])
    assert a.state_dir == "/x" and a.command == ["--", "echo", "--state-dir", "y"]


@pytest.mark.parametrize("argv, passed", [
    (["top", "--view", "jobs"], ["--view", "jobs"]),
    (["top", "--state-dir", "/x", "--view=jobs", "--fps", "2"], ["--view=jobs", "--fps", "2"]),
    (["top", "--help"], ["--help"]),
    (["top"], []),
])
def test_top_passes_its_options_to_the_console(argv: list[str], passed: list[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import xce.tui.app

    got: list[list[str]] = []
    monkeypatch.setattr(xce.tui.app, "main", lambda args: got.append(args) or 0)  # the console's own entry
    monkeypatch.setenv("XCE_STATE_DIR", "/x")
    assert cli.main(argv) == 0
    assert got == [["--state-dir", "/x", *passed]]


def test_other_commands_still_refuse_unknown_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["jobs", "--view", "jobs"])
    assert e.value.code == 2 and "unrecognized arguments: --view" in capsys.readouterr().err


def run_into_a_closed_pipe(sd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`xce ARGS | head -0`, deterministically: stdout is a pipe whose reader is already gone."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run([sys.executable, "-m", "xce.cli.main", "--state-dir", str(sd), *args],
                              stdout=w, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(w)


def test_a_closed_pipe_ends_quietly_without_a_cluster(tmp_path: Path) -> None:
    r = run_into_a_closed_pipe(tmp_path, "config", "show")  # the defaults: no cluster file
    assert (r.returncode, r.stderr) == (141, "")
