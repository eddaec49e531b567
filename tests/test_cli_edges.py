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
from conftest import Cluster, local_cluster, wait_for

from xce.cli import main as cli
from xce.cli import submit


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
    args = submit.split_args(["--state-dir", "/x", "--", "echo", "--state-dir", "y"])
    assert args.values["--state-dir"] == "/x" and args.command == ["echo", "--state-dir", "y"]


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


# ---- memory limits under the floor: one rule in the core, the same refusal from every door ----

def test_the_floor_is_one_rule_of_the_core() -> None:
    from xce.client import make_spec
    from xce.core.errors import InvalidRequest
    from xce.core.model import MEM_LIMIT_FLOOR, check_mem_limit

    check_mem_limit(None)
    check_mem_limit(MEM_LIMIT_FLOOR)
    for bad in (0, 1, MEM_LIMIT_FLOOR - 1, -5):
        with pytest.raises(InvalidRequest, match="mem_limit must be at least 4.0M"):
            check_mem_limit(bad)
    with pytest.raises(InvalidRequest, match="mem_limit must be at least 4.0M, got 0B"):
        make_spec(["true"], mem_limit="0")  # xce.client's door refuses before sending


# ---- --dry-run with no controller --------------------------------------------------------------

def xce_here(sd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XCE_CONTROLLER", "XCE_STATE_DIR")}
    return subprocess.run([sys.executable, "-m", "xce.cli.main", "--state-dir", str(sd), *args],
                          capture_output=True, text=True, timeout=60, env=env)


def test_dry_run_works_with_no_controller_and_prints_the_request_readably(tmp_path: Path) -> None:
    r = xce_here(tmp_path, "--timeout", "1", "submit", "--dry-run", "-n", "2", "-M", "1G", "-J", "x",
                 "-R", "select[mem>1G] rusage[mem=512M] span[hosts=1]", "--", "sleep", "5")
    assert r.returncode == 0, r.stderr
    assert "ResReq(" not in r.stdout and "JobSpec(" not in r.stdout
    lines = r.stdout.splitlines()
    assert lines[0].startswith("Dry run: nothing was submitted. No controller answered")
    for want in ("Command:       sleep 5", "Slots:         2", "Mem limit:     1.0G", "Name:          x",
                 "Requirements:  select[mem>1G] rusage[mem=512M] span[hosts=1]", "Reserve:       mem 512.0M per host",
                 "Select:        mem>1G", "Span:          hosts=1"):
        assert want in [ln.strip() for ln in lines], (want, r.stdout)
    r = xce_here(tmp_path, "--timeout", "1", "submit", "--dry-run", "--json", "-R", "rusage[mem=2G]", "--", "true")
    out = json.loads(r.stdout)
    assert (out["checked_by"], out["queue"], out["job"]["command"]) == ("local", None, ["true"])
    assert out["resreq"]["rusage"][0]["amount"] == 2 << 30


def test_dry_run_refuses_locally_what_a_submit_would(tmp_path: Path) -> None:
    r = xce_here(tmp_path, "--timeout", "1", "submit", "--dry-run", "-M", "1K", "--", "true")
    assert r.returncode == 2 and r.stderr == "xce submit: mem_limit must be at least 4.0M, got 1.0K " \
        "(the worker kills a job whose memory exceeds its limit)\n"
    r = xce_here(tmp_path, "--timeout", "1", "submit", "--dry-run", "-M", "0", "--", "true")
    assert r.returncode == 2 and r.stderr == "xce submit: -M 0: the limit must be more than 0\n"
    r = xce_here(tmp_path, "--timeout", "1", "submit", "--dry-run", "-R", "rusage[mem=2X]", "--", "true")
    assert r.returncode == 2 and "^" in r.stderr


# ---- against a cluster ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def one_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with local_cluster(tmp_path_factory.mktemp("e"), "--hosts", "1", "--slots-per-host", "2",
                       "--mem-per-host", "1G", "--heartbeat", "0.5") as c:
        yield c


def run_xce(sd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    e = {**os.environ, "XCE_DEBUG_PATH": "1", **env}
    return subprocess.run([sys.executable, "-m", "xce.cli.main", "--state-dir", str(sd), *args],
                          capture_output=True, text=True, timeout=60, env=e)


@pytest.mark.parametrize("limit", ["1", "3M", "4095K"])  # -M 0: bsub's parser names it (full path)
def test_a_limit_under_the_floor_is_refused_alike_by_both_submit_paths(one_host: Cluster, limit: str) -> None:
    door = run_xce(one_host.state_dir, "submit", "-M", limit, "true")
    full = run_xce(one_host.state_dir, "submit", "-M", limit, "true", XCE_QUICK="0")
    assert "submit path door" in door.stderr and "submit path full" in full.stderr
    strip = [ln for ln in door.stderr.splitlines() if not ln.startswith("xce: submit path")]
    assert strip == [ln for ln in full.stderr.splitlines() if not ln.startswith("xce: submit path")]
    assert (door.returncode, full.returncode, door.stdout, full.stdout) == (2, 2, "", "")
    assert strip[0].startswith("xce submit: mem_limit must be at least 4.0M, got ")
    assert all(j.mem_limit is None or j.mem_limit >= 4 << 20 for j in one_host.client.jobs(all=True))


def test_modify_refuses_a_limit_under_the_floor(one_host: Cluster) -> None:
    jid = int(one_host.xce("submit", "-R", "rusage[mem=10M]", "--", "sleep", "30").stdout.split("<")[1].split(">")[0])
    try:
        r = one_host.xce("modify", "-M", "1", str(jid), check=False)
        assert r.returncode == 2 and "mem_limit must be at least 4.0M, got 1.0M" in r.stderr
        from xce.core.errors import InvalidRequest

        with pytest.raises(InvalidRequest, match="at least 4.0M"):
            one_host.client.modify(jid, 1024)  # the controller refuses what a script sends
        assert one_host.client.job(jid).mem_limit is None
    finally:
        one_host.xce("kill", str(jid), check=False)


def test_unknown_job_ids_are_named_and_the_found_ones_printed(one_host: Cluster) -> None:
    jid = int(one_host.xce("submit", "--", "true").stdout.split("<")[1].split(">")[0])
    one_host.wait_job(jid)
    r = one_host.xce("jobs", "99999", str(jid), "99998", check=False)
    assert r.returncode == 1 and r.stderr == "Job <99999> is not found\nJob <99998> is not found\n"
    assert r.stdout.splitlines()[1].split()[0] == str(jid)
    r = one_host.xce("jobs", "--json", str(jid), "99999", check=False)
    assert r.returncode == 1 and [j["id"] for j in json.loads(r.stdout)] == [jid]
    r = one_host.xce("jobs", "99999", check=False)
    assert (r.returncode, r.stdout, r.stderr) == (1, "", "Job <99999> is not found\n")


@pytest.mark.parametrize("args", [["jobs", "-l", "-a"], ["status"], ["jobs", "-a"], ["hosts", "-l"]])
def test_a_reader_that_went_away_ends_the_command_quietly(one_host: Cluster, args: list[str]) -> None:
    one_host.xce("submit", "--", "true")
    r = run_into_a_closed_pipe(one_host.state_dir, *args)
    assert (r.returncode, r.stderr) == (141, "")


def test_global_options_after_the_subcommand_reach_the_cluster(one_host: Cluster) -> None:
    r = subprocess.run([sys.executable, "-m", "xce.cli.main", "status", "--json", "--state-dir",
                        str(one_host.state_dir), "--timeout", "5"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["leader"]


def test_dry_run_with_a_controller_says_it_checked_and_submits_nothing(one_host: Cluster) -> None:
    before = len(one_host.client.jobs(all=True))
    r = one_host.xce("submit", "--dry-run", "-q", "high", "-R", "rusage[mem=10M]", "--", "true")
    assert r.stdout.splitlines()[0] == \
        "Dry run: nothing was submitted. The controller would accept the job into queue <high>."
    r = one_host.xce("submit", "--dry-run", "--json", "--", "true")
    assert (json.loads(r.stdout)["checked_by"], json.loads(r.stdout)["queue"]) == ("controller", "normal")
    r = one_host.xce("submit", "--dry-run", "-R", "rusage[mem=64G]", "--", "true", check=False)
    assert r.returncode == 2 and "no host could ever run it" in r.stderr
    assert len(one_host.client.jobs(all=True)) == before


def test_modify_applies_to_a_running_job_at_once(one_host: Cluster) -> None:
    """As docs/cli.md says: a lower limit reaches the worker now, not at the next start."""
    hog = [sys.executable, "-m", "xce.jobs.memhog", "40:60"]
    r = one_host.xce("submit", "-M", "500M", "-R", "rusage[mem=50M]", "--", *hog)
    jid = int(r.stdout.split("<")[1].split(">")[0])
    try:
        one_host.wait_job(jid, states=("RUN",))
        wait_for(lambda: (one_host.client.job(jid).mem_actual or 0) > 30 << 20, 20, "the job to hold 40M")
        one_host.xce("modify", "-M", "20M", str(jid))
        v = one_host.wait_job(jid, timeout=20)
        assert (v.state, v.reason, v.mem_limit) == ("EXIT", "MEMLIMIT", 20 << 20)
    finally:
        one_host.xce("kill", str(jid), check=False)


def test_up_with_a_bad_site_file_is_refused_before_anything_starts(tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text("[queues.q]\ndefault = true\npreempt = ['nope']\n")
    r = subprocess.run([sys.executable, "-m", "xce.cli.main", "--state-dir", str(tmp_path / "xce"), "up", "--detach",
                        "--config", str(site)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "key queues.q.preempt: no such queue 'nope'" in r.stderr, r.stderr
    assert not (tmp_path / "xce" / "up.json").exists() and not (tmp_path / "xce" / "up.log").exists()


def test_queues_long_shows_every_limit_and_policy_and_names_an_unknown_queue(one_host: Cluster) -> None:
    """`xce queues -l` (bqueues -l): run and memory limits, sizing, retries, reclaim, per queue."""
    r = one_host.xce("queues", "-l", "reclaim")
    assert r.stdout.startswith("Queue <reclaim>") and "Queue <normal>" not in r.stdout, r.stdout
    assert "Reclaimable: yes, evicted by requeue" in r.stdout, r.stdout
    for line in ("Run limit: default -, maximum -", "Memory limit (-M): default -, maximum -",
                 "Reservation without mem: -", "Retry after a memory kill: no", "Hosts: all"):
        assert line in r.stdout, (line, r.stdout)
    r = one_host.xce("queues", "normal", "nope", "nope2", check=False)
    assert (r.returncode, r.stdout) == (1, "") and "no such queue: nope, nope2" in r.stderr, r
    assert [q["name"] for q in json.loads(one_host.xce("queues", "--json", "normal").stdout)["queues"]] == ["normal"]


def test_queue_long_words_each_setting() -> None:
    from xce.cli.fmt import queue_long
    from xce.core.model import Queue

    G = 1 << 30
    q = Queue(name="big", priority=40, rerunnable=True, run_limit_default=600, run_limit_max=7200,
              mem_limit_default=2 * G, mem_limit_max=8 * G, mem_default_auto=True, mem_auto_fallback=G,
              mem_auto_margin=0.25, mem_retries=2, mem_retry_factor=1.5, mem_retry_max=16 * G, dep_never="kill")
    text = queue_long(q, {"PEND": 3, "RUN": 1}, False, "node1 node2")
    assert text.splitlines() == [
        "Queue <big>",
        "  Priority: 40   Rerunnable: yes   Jobs: PEND 3  RUN 1",
        "  Run limit: default 10 min, maximum 120 min",
        "  Memory limit (-M): default 2.0G, maximum 8.0G",
        "  Reservation without mem: auto (p95 of past peaks + 25 % from 3 runs, fewer runs: 1.0G)"
        "   Retry after a memory kill: 2 x1.5 up to 16.0G",
        "  Reclaimable: no   Dependency never satisfied: kill",
        "  Hosts: node1 node2"]
