"""Restarting a local cluster: compacted Raft state, changed and unchanged ports, jobs in flight.

A controller compacts its journal into ``raft.dump`` (here after a fraction of a second,
through ``--compact-seconds``); the dump must not bring back the Raft addresses of an
earlier run.  Each test restarts a compacted state directory twice, first on other ports,
then on the same ones, with a job running and one pending, and checks that a leader is
elected, every acknowledged job is still there and the jobs in flight end DONE.
"""

from __future__ import annotations

import contextlib
import socket
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import pid_alive, wait_for, xce
from xce.client import Client

# Heartbeats of 1 s: a restarted worker has 3 s (and the new leader's grace) to re-attach before
# its host counts as lost, which a loaded 2-core machine needs.
ARGS = ("--hosts", "2", "--slots-per-host", "1", "--mem-per-host", "2G", "--heartbeat", "1",
        "--compact-seconds", "0.3")


class Run:
    """One state directory brought up and down several times; every PID it ever saw."""

    def __init__(self, sd: Path, args: tuple[str, ...]) -> None:
        self.sd, self.args, self.pids = sd, args, set()

    def up(self) -> None:
        r = xce(self.sd, "up", "--detach", *self.args, check=False, timeout=150)
        self._note_pids()
        assert r.returncode == 0, f"xce up failed: {r.stdout}{r.stderr}\n{self.logs()}"

    def down(self) -> None:
        self._note_pids()
        xce(self.sd, "down", check=False)
        wait_for(lambda: not any(pid_alive(p) for p in self.pids), 20, "every daemon to exit")

    def _note_pids(self) -> None:
        import json

        with contextlib.suppress(OSError, ValueError):
            info = json.loads((self.sd / "up.json").read_text())
            self.pids |= {info["pid"], *info["daemons"].values()}

    def rafts(self) -> list[str]:
        cfg = tomllib.loads((self.sd / "cluster.toml").read_text())["controller"]
        return [cfg["raft_address"], *cfg["peers"]]

    def dumps(self) -> list[Path]:
        return sorted(self.sd.glob("controller-*/**/raft.dump"))

    def logs(self) -> str:
        return "\n".join(f"==== {f.name}\n{f.read_text()[-3000:]}" for f in sorted(self.sd.glob("logs/*.log")))


def write_then_compact(run: Run, controllers: int, pending: int) -> None:
    """One more committed entry, then wait until every controller has dumped it.

    pysyncobj compacts only when something was applied since its last dump.
    """
    t = time.time()
    with Client(state_dir=run.sd, timeout=15) as c:
        c.modify(pending, None)  # changes nothing, but is an entry of the log
    wait_for(lambda: compacted_since(run, controllers, t), 20, "every journal compacted")


def compacted_since(run: Run, controllers: int, t: float) -> bool:
    dumps = run.dumps()
    return len(dumps) == controllers and all(d.stat().st_mtime > t for d in dumps)


@contextlib.contextmanager
def holding(addresses: list[str]) -> Iterator[None]:
    """Keep the given 127.0.0.1 ports bound, so `xce up` must choose others."""
    socks = []
    try:
        for a in addresses:
            s = socket.socket()
            socks.append(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past the last run's TIME_WAIT
            s.bind(("127.0.0.1", int(a.rsplit(":", 1)[1])))
            s.listen()  # a listener: no other socket binds the port, SO_REUSEADDR or not
        yield
    finally:
        for s in socks:
            s.close()


def check_in_flight(sd: Path, running: list[int], pending: int, done: list[int]) -> None:
    with Client(state_dir=sd, timeout=15) as c:
        wait_for(lambda: c.status().leader, 20, "a leader")
        assert [c.job(j).state for j in running] == ["RUN"] * len(running)
        assert c.job(pending).state == "PEND"
        assert [c.job(j).state for j in done] == ["DONE"] * len(done)
        assert len(c.jobs(all=True)) == len(done) + len(running) + 1  # nothing lost, nothing doubled


@pytest.mark.parametrize("controllers", [1, 3])
def test_compacted_state_restarts_on_changed_then_unchanged_ports(tmp_path: Path, controllers: int) -> None:
    sd, go = tmp_path / "xce", tmp_path / "go"
    run = Run(sd, ("--controllers", str(controllers), *ARGS))
    run.up()
    try:
        with Client(state_dir=sd, timeout=15) as c:
            done = [c.submit(["true"]) for _ in range(3)]
            for j in done:
                wait_for(lambda j=j: c.job(j).state == "DONE", 30, f"job {j} DONE")
            # Both hosts' single slots: one job waits for the file, the next one-host job pends.
            running = c.submit(["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.1; done"])
            wait_for(lambda: c.job(running).state == "RUN", 20, "RUN")
            blocker = c.submit(["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.1; done"])
            wait_for(lambda: c.job(blocker).state == "RUN", 20, "RUN")
            pending = c.submit(["true"])
        write_then_compact(run, controllers, pending)
        run.down()

        old = run.rafts()
        with holding(old):  # the next run cannot have these ports
            run.up()
        assert set(run.rafts()).isdisjoint(old)
        check_in_flight(sd, [running, blocker], pending, done)
        write_then_compact(run, controllers, pending)
        run.down()

        old = run.rafts()
        run.up()
        assert run.rafts() == old  # a state directory keeps its Raft addresses while they are free
        check_in_flight(sd, [running, blocker], pending, done)
        go.touch()
        with Client(state_dir=sd, timeout=15) as c:
            for j in (running, blocker, pending):
                wait_for(lambda j=j: c.job(j).state == "DONE", 30, f"job {j} DONE")
    except BaseException:
        print(run.logs())
        raise
    finally:
        go.touch()
        run.down()


def processes_under(sd: Path) -> list[int]:
    """PIDs whose command line names ``sd``: the supervisor and the daemons of that cluster."""
    mine = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError):
                if str(sd).encode() in (d / "cmdline").read_bytes() and pid_alive(int(d.name)):
                    mine.append(int(d.name))
    return mine


def test_a_failed_detach_stops_every_daemon_it_started(tmp_path: Path) -> None:
    import os
    import signal

    sd = tmp_path / "xce"
    journal = sd / "controller-1" / "controller" / "raft.journal"
    journal.parent.mkdir(parents=True)
    journal.write_bytes(b"\x07" * 4093)  # unreadable: the controller dies at every start
    try:
        r = xce(sd, "up", "--detach", "--ready-timeout", "4", check=False, timeout=60)
        assert r.returncode == 1
        assert "did not become ready within 4 s" in r.stderr
        assert "stopped" in r.stderr
        wait_for(lambda: not processes_under(sd), 15, "every daemon of the failed up to exit")
    finally:
        for pid in processes_under(sd):  # only what this test started
            os.kill(pid, signal.SIGKILL)


def test_down_leaves_running_jobs_to_the_next_up_and_kill_jobs_ends_them(tmp_path: Path) -> None:
    import os
    import signal

    sd, pidfile = tmp_path / "xce", tmp_path / "pid"
    run = Run(sd, ("--hosts", "1", "--slots-per-host", "1", "--mem-per-host", "1G", "--heartbeat", "1"))
    run.up()
    pid = 0
    try:
        with Client(state_dir=sd, timeout=15) as c:
            job = c.submit(["sh", "-c", f"echo $$ > {pidfile}.tmp && mv {pidfile}.tmp {pidfile} && exec sleep 300"])
            pid = wait_for(lambda: pidfile.exists() and int(pidfile.read_text()), 20, "the job's pid")
            queued = c.submit(["true"])  # the only slot is taken: it pends
            wait_for(lambda: c.job(queued).reason, 10, "a reason for the pending job")
            held = c.submit(["true"])
            c.stop([held])  # PSUSP: held, but pending, with no process to kill
        run.down()
        assert pid_alive(pid)  # plain `down`: the job runs on, for the next `up` to re-attach
        run.up()
        with Client(state_dir=sd, timeout=15) as c:
            wait_for(lambda: c.job(job).state == "RUN" and c.job(queued).state == "PEND", 20, "still RUN, PEND")
        r = xce(sd, "down", "--kill-jobs")
        assert f"killed 1 running job(s): {job}" in r.stdout
        assert not pid_alive(pid)  # ended before the daemons stopped, not orphaned
        run.down()
        run.up()
        with Client(state_dir=sd, timeout=15) as c:
            v = c.job(job)
            assert (v.state, v.reason) == ("EXIT", "killed by xce down --kill-jobs")
            assert wait_for(lambda: c.job(queued).state == "DONE", 20, "the queued job to run")
            assert c.job(held).state == "PSUSP"  # still queued for its owner's bresume
    finally:
        if pid and pid_alive(pid):
            os.kill(pid, signal.SIGKILL)  # the test's own job, if the kill failed
        run.down()


def test_a_new_layout_retires_the_old_hosts(tmp_path: Path) -> None:
    """Three hosts of 4G, then two of 2G: the third goes, capacity and refusals follow."""
    import json
    import urllib.error
    import urllib.request

    sd, go = tmp_path / "xce", tmp_path / "go"
    wait = ["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.1; done"]
    run = Run(sd, ("--hosts", "3", "--slots-per-host", "1", "--mem-per-host", "4G", "--heartbeat", "1"))
    run.up()
    try:
        with Client(state_dir=sd, timeout=15) as c:
            jobs = [c.submit(wait) for _ in range(3)]  # one slot per host: one job on each
            wait_for(lambda: all(c.job(j).state == "RUN" for j in jobs), 20, "three jobs RUN")
            on = {c.job(j).hosts[0]: j for j in jobs}
        run.down()  # plain down: the jobs run on
        run.args = ("--hosts", "2", "--slots-per-host", "1", "--mem-per-host", "2G", "--heartbeat", "1")
        r = xce(sd, "up", "--detach", *run.args, timeout=150)
        run._note_pids()
        assert "2 host(s) ok" in r.stdout, r.stdout
        with Client(state_dir=sd, timeout=15) as c:
            # node3's job is lost with its host (it was not rerunnable), then node3 is retired.
            v = wait_for(lambda: (v := c.job(on["node3"])).state == "EXIT" and v, 30, "node3's job to end")
            assert v.reason == "host node3 lost"
            wait_for(lambda: [h.name for h in c.hosts()] == ["node1", "node2"], 30, "node3 retired")
            assert c.status().mem["capacity"] == 4 << 30
            assert (c.job(on["node1"]).state, c.job(on["node2"]).state) == ("RUN", "RUN")

        big = xce(sd, "submit", "-R", "rusage[mem=3G]", "--", "true", check=False)
        assert big.returncode == 2 and "the largest host has 1 slots and 2.0G" in big.stderr, big.stderr
        busy = xce(sd, "hosts", "remove", "node1", check=False)
        assert busy.returncode == 1
        assert busy.stderr.strip() == (f"xce hosts: host node1 runs job {on['node1']}: kill it or wait for "
                                       "its end before removing it")

        url = tomllib.loads((sd / "cluster.toml").read_text())["rest_url"]
        token = (sd / "auth" / "admin.token").read_text().strip()

        def delete(name: str) -> int:
            req = urllib.request.Request(f"{url}/v1/hosts/{name}", method="DELETE",
                                         headers={"Authorization": f"Bearer {token}"})
            try:
                with urllib.request.urlopen(req, timeout=15) as resp:
                    return resp.status
            except urllib.error.HTTPError as e:
                return e.code

        assert wait_for(lambda: delete("nosuch") == 404, 20, "xce-rest to answer")
        assert delete("node2") == 409
        go.touch()
        with Client(state_dir=sd, timeout=15) as c:
            wait_for(lambda: c.job(on["node2"]).state == "DONE", 30, "node2's job DONE")
            assert delete("node2") == 204
            # A removed host whose worker still runs registers again, as a new host.
            wait_for(lambda: [h.name for h in c.hosts()] == ["node1", "node2"], 20, "node2 back")
            assert json.loads(xce(sd, "hosts", "--json").stdout)[1]["state"] == "ok"
            after = c.submit(["true"])  # the scheduler followed the new event epoch of each removal
            wait_for(lambda: c.job(after).state == "DONE", 30, "a job after the removals DONE")
    except BaseException:
        print(run.logs())
        raise
    finally:
        go.touch()
        run.down()
