"""A simulated fleet against the real daemons: `xce sim-fleet` at 1,000 / 5,000 hosts.

    .venv/bin/python bench/fleet_bench.py [--hosts 1000] [--jobs-per-host 20] [--controllers 3]
                                          [--heartbeat 1] [--run 300] [--console 15] [--no-failover]
                                          [--steady 10]

Starts `xce up --hosts 0` (controllers, scheduler, REST; no worker) in a fresh state
directory and `xce sim-fleet` as its own process (one CURVE connection and key per
simulated host), then measures, phase by phase:
  register   time until every host is registered (fresh keys: the allow-list re-read);
  idle       controller (leader) and scheduler CPU and RSS with every host heartbeating
             and no job; the event stream's rate (frames/s, KB/s on a SUB socket);
  streamed   half of hosts x jobs-per-host jobs (`sleep RUN`, rusage[mem=2G]) submitted by
             one client in batches of 2,000 and placed as they come: submit -> start
             latency p50 / p99 (the job records' own times), CPU of each daemon over the
             phase, the event stream's rate while it lasts;
  burst      the other half queued with every host closed, then every host opened:
             placements/s = jobs / (open -> all running), CPU, event stream;
  steady     the same figures for --steady seconds with every job running and reporting usage,
             and the heartbeats and usage reports the fleet sent a second;
  console    xce-top (headless, 160x50, hosts view, 4 fps, its LiveFeed) attached to the
             leader for --console seconds: render_frame wall time p50 / p95 / max against
             the 250 ms frame period, the process's CPU share, and heartbeat -> frame latency;
  failover   (3 controllers) SIGKILL of the leader by PID: time to a new leader's first
             committed submit, and until every simulated host has registered again;
  drain      until every job has ended (each runs --run seconds): the Finish storm.
After each phase: the leadership's churn (every controller's term, sampled each second, and
the samples with no leader), and the hosts `unavail` and jobs UNKWN at its end.
Everything runs on this machine: the fleet's own CPU is reported too, as it competes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import zmq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from xce.cli.main import _each_controller  # noqa: E402
from xce.client import Client, cluster_config  # noqa: E402
from xce.security.curve import client_keys  # noqa: E402
from xce.transport.sockets import subscriber  # noqa: E402

PY = [sys.executable, "-m", "xce.cli.main"]


def xce(sd: Path, *args: str, timeout: float = 300) -> str:
    r = subprocess.run([*PY, "--state-dir", str(sd), *args], capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        raise RuntimeError(f"xce {' '.join(args)}: {r.stderr or r.stdout}")
    return r.stdout


def wait(cond: Any, timeout: float, what: str, every: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            v = cond()
        except Exception:  # noqa: BLE001 - keep polling until the deadline
            v = None
        if v:
            return v
        time.sleep(every)  # a poll with a deadline
    raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


class Procs:
    """CPU seconds and RSS of the daemons (and the fleet) between two readings."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.p = {n: psutil.Process(pid) for n, pid in pids.items()}
        self.mark()

    def mark(self) -> None:
        self.t0 = time.monotonic()
        self.c0 = {n: sum(p.cpu_times()[:2]) for n, p in self.p.items() if p.is_running()}

    def since(self) -> dict[str, str]:
        dt = time.monotonic() - self.t0
        out = {}
        for n, p in self.p.items():
            if n in self.c0 and p.is_running():
                cpu = sum(p.cpu_times()[:2]) - self.c0[n]
                out[n] = f"CPU {100 * cpu / dt:5.1f} %  RSS {p.memory_info().rss / 2**20:6.0f} MB"
        return out


class Events(threading.Thread):
    """Counts the frames and bytes of the leader's event stream."""

    def __init__(self, sd: Path, endpoint: str) -> None:
        super().__init__(daemon=True)
        self.ctx = zmq.Context()
        self.sock = subscriber(self.ctx, endpoint, curve=client_keys(cluster_config(sd)))
        self.frames = self.bytes = 0
        self.stop = False

    def run(self) -> None:
        while not self.stop:
            if self.sock.poll(200):
                while True:
                    try:
                        b = self.sock.recv(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    self.frames += 1
                    self.bytes += len(b)
        self.sock.close(0)
        self.ctx.term()

    def rate(self, seconds: float, f0: int, b0: int) -> str:
        return f"{(self.frames - f0) / seconds:7.1f} events/s, {(self.bytes - b0) / seconds / 1024:8.1f} KB/s"


class Terms(threading.Thread):
    """Every controller's term and role, once a second (its own client): the leadership's churn."""

    def __init__(self, sd: Path) -> None:
        super().__init__(daemon=True)
        self.sd = sd
        self.terms: list[int] = []       # the highest term seen, per sample
        self.leaderless = 0              # samples with no controller calling itself leader
        self.stop = False

    def run(self) -> None:
        with Client(state_dir=self.sd, timeout=5) as c:
            while not self.stop:
                t0 = time.monotonic()
                try:
                    cs = _each_controller(c, [])
                    self.terms.append(max(x.term for x in cs))
                    self.leaderless += not any(x.role == "leader" for x in cs)
                except Exception:  # noqa: BLE001 - a sample lost while a controller is busy
                    pass
                time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))  # a sampling period

    def mark(self) -> tuple[int, int]:
        return len(self.terms), self.leaderless

    def since(self, m: tuple[int, int]) -> str:
        seen = self.terms[max(0, m[0] - 1):] or [0]
        return f"term {seen[0]} -> {seen[-1]}, {self.leaderless - m[1]} of {len(self.terms) - m[0]} samples leaderless"


def health(c: Client, terms: Terms, m: tuple[int, int]) -> dict[str, str]:
    """What a phase cost the cluster: term changes, hosts gone unavail, jobs UNKWN."""
    try:
        st = c.status()
        bad = f"{st.hosts_by_state.get('unavail', 0)} hosts unavail, {st.jobs_by_state.get('UNKWN', 0)} jobs UNKWN"
    except Exception as e:  # noqa: BLE001 - report it, do not stop the bench
        bad = f"status unanswered: {e}"
    return {"leadership": terms.since(m), "at the end": bad}


def reports_rate(stats: Path, before: dict[str, Any]) -> str:
    now = fleet_stats(stats)
    dt = now["time"] - before["time"]
    return (f"{(now['beats'] - before['beats']) / dt:.0f} heartbeats/s carrying "
            f"{(now.get('reports', 0) - before.get('reports', 0)) / dt:.0f} usage reports/s")


def fleet_stats(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def leader_pid(c: Client) -> tuple[int, str]:
    """The leader's PID (every controller asked for its own role) and its event endpoint."""
    led = wait(lambda: next((x for x in _each_controller(c, []) if x.role == "leader" and x.pid), None), 60,
               "a leader")
    cfg = c.cfg  # the leader's own PUB: a follower's stream carries no soft news (heartbeats, samples)
    routers = [cfg.controller.address, *cfg.controller.peer_addresses]
    pubs = [cfg.controller.pub_address, *cfg.controller.peer_pub_addresses]
    return led.pid, pubs[routers.index(led.address)]


def all_jobs(c: Client) -> list[Any]:
    out, after = [], 0
    while True:
        page = c.jobs(all=True, after=after, limit=10_000)
        if not page:
            return out
        out += page
        after = page[-1].id


def phase(name: str, lines: dict[str, str]) -> None:
    print(f"{name}:")
    for k, v in lines.items():
        print(f"  {k:30} {v}")
    sys.stdout.flush()


SPEC = {"resreq": "rusage[mem=2G]", "cwd": "/"}


def submit(c: Client, n: int, run: float) -> float:
    """Seconds to submit ``n`` jobs in batches of 2,000."""
    t0 = time.monotonic()
    for i in range(0, n, 2000):
        c.submit_many([{**SPEC, "command": ["sleep", str(int(run))]}] * min(2000, n - i))
    return time.monotonic() - t0


def running(c: Client, n: int) -> float:
    t0 = time.monotonic()
    wait(lambda: c.status().jobs_by_state.get("RUN", 0) >= n, 1800, f"{n} jobs running", every=0.5)
    return time.monotonic() - t0


def stream_phase(c: Client, procs: Procs, ev: Events, n: int, run: float) -> dict[str, str]:
    """Jobs submitted as fast as one client can: each placed as it comes."""
    procs.mark()
    f0, b0, t0 = ev.frames, ev.bytes, time.monotonic()
    took = submit(c, n, run)
    running(c, n)
    dt = time.monotonic() - t0
    jobs = all_jobs(c)
    lat = [j.start_time - j.submit_time for j in jobs if j.start_time]
    return {"jobs": f"{len(jobs)}", "submit": f"{took:.1f} s ({n / took:.0f} jobs/s, one client)",
            "all running after": f"{dt:.1f} s",
            "submit -> start p50 / p99": f"{pct(lat, 0.5):.2f} s / {pct(lat, 0.99):.2f} s",
            "event stream": ev.rate(dt, f0, b0), **procs.since()}


def burst_phase(c: Client, procs: Procs, ev: Events, hosts: list[str], n: int, run: float) -> dict[str, str]:
    """Jobs queued behind closed hosts, then every host opened: the placement rate alone."""
    c.host_admin(hosts, "close")
    total = c.status().jobs_by_state.get("RUN", 0) + n
    submit(c, n, run)
    procs.mark()
    f0, b0, t0 = ev.frames, ev.bytes, time.monotonic()
    c.host_admin(hosts, "open")
    running(c, total)
    dt = time.monotonic() - t0
    return {"jobs": f"{n} queued", "all running after open": f"{dt:.1f} s",
            "placements/s": f"{n / dt:.0f}", "event stream": ev.rate(dt, f0, b0), **procs.since()}


def steady_phase(procs: Procs, ev: Events, seconds: float, stats: Path) -> dict[str, str]:
    procs.mark()
    f0, b0, s0 = ev.frames, ev.bytes, fleet_stats(stats)
    time.sleep(seconds)  # a measuring window, not a wait for an event
    return {"fleet sends": reports_rate(stats, s0), "event stream": ev.rate(seconds, f0, b0), **procs.since()}


def drain_phase(c: Client, procs: Procs, stats: Path, total: int) -> dict[str, str]:
    """Until every job has ended (each runs --run seconds from its start): the Finish storm."""
    procs.mark()
    t0 = time.monotonic()
    done = wait(lambda: (s := c.status().jobs_by_state) and not any(s.get(k, 0) for k in ("PEND", "RUN", "UNKWN"))
                and s, 1800, "every job ended", every=1.0)
    return {"every job ended after": f"{time.monotonic() - t0:.1f} s (from the end of the phase before)",
            "jobs by state": json.dumps(dict(done)), "fleet ended": str(fleet_stats(stats)["ended"]),
            **procs.since()}


async def console(sd: Path, seconds: float) -> dict[str, str]:
    from xce.tui.app import XceTop
    from xce.tui.live import LiveFeed
    from xce.tui.model import ConsoleModel

    m = ConsoleModel()
    app = XceTop(m, feed=LiveFeed(m, sd), view="hosts")
    walls: list[float] = []
    lat: list[float] = []
    oldest: list[float] = []  # the controller's time of the oldest heartbeat not yet drawn
    orig, take = app.render_frame, m._take_heartbeats

    def took(samples: Any, lives: Any, t: float) -> None:  # the receiver thread, under m.lock
        take(samples, lives, t)
        if lives and not oldest:
            oldest.append(min(hl.last_seen for hl in lives))

    def timed(only: Any = None) -> None:
        t = time.perf_counter()
        orig(only)
        walls.append(time.perf_counter() - t)
        with m.lock:
            if oldest:
                lat.append(time.time() - oldest.pop())
    m._take_heartbeats = took  # type: ignore[method-assign]
    app.render_frame = timed  # type: ignore[method-assign]
    me = psutil.Process()
    async with app.run_test(size=(160, 50)) as pilot:
        t_attach = time.monotonic()
        while not m.mirror.hosts and time.monotonic() - t_attach < 120:  # the first snapshot, with a deadline
            await pilot.pause(0.5)
        synced = time.monotonic() - t_attach
        await pilot.pause(1.0)  # the first frames after it settle
        walls.clear()
        lat.clear()
        c0, t0 = sum(me.cpu_times()[:2]), time.monotonic()
        await pilot.pause(seconds)
        cpu = (sum(me.cpu_times()[:2]) - c0) / (time.monotonic() - t0)
        hosts = len(m.mirror.hosts)
    return {"hosts in its model": str(hosts), "first snapshot after": f"{synced:.1f} s", "frames": str(len(walls)),
            "render_frame p50 / p95 / max": f"{pct(walls, 0.5) * 1e3:.0f} / {pct(walls, 0.95) * 1e3:.0f} / "
                                            f"{max(walls, default=0) * 1e3:.0f} ms (period 250 ms)",
            "console CPU": f"{100 * cpu:.0f} % of a core",
            "oldest heartbeat -> frame p50 / p95": f"{pct(lat, 0.5) * 1e3:.0f} / {pct(lat, 0.95) * 1e3:.0f} ms"}


def failover(c: Client, sd: Path, stats: Path, hosts: int) -> dict[str, str]:
    pid, _ = leader_pid(c)
    before = fleet_stats(stats)["registrations"]
    t0 = time.time()
    os.kill(pid, signal.SIGKILL)
    c.submit(["true"], cwd="/")
    first = time.time() - t0
    st = wait(lambda: (s := fleet_stats(stats))["registrations"] - before >= hosts and s, 600,
              "every host registered again", every=0.5)
    ok = wait(lambda: (n := c.status().hosts_by_state.get("ok", 0) + c.status().hosts_by_state.get("full", 0))
              >= hosts and n, 120, "every host ok")
    settle = []
    for _ in range(20):  # do they stay registered?  (10 s, the fleet's counters every 0.5 s)
        time.sleep(0.5)  # a measuring window
        settle.append(fleet_stats(stats)["registered"])
    return {"leader SIGKILL -> committed submit": f"{first:.2f} s",
            "registered in the 10 s after": f"min {min(settle)}, last {settle[-1]} of {hosts}",
            "-> every host registered again": f"{st['last_registered'] - t0:.2f} s "
                                               f"({st['registrations'] - before} registrations, {st['moves']} moves)",
            "hosts ok after": f"{ok} at {time.time() - t0:.1f} s"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--jobs-per-host", type=int, default=20)
    ap.add_argument("--controllers", type=int, default=3, choices=[1, 3, 5])
    ap.add_argument("--heartbeat", type=float, default=1.0)
    ap.add_argument("--run", type=float, default=300.0, help="seconds each job runs (sleep N)")
    ap.add_argument("--console", type=float, default=15.0, help="seconds of xce-top attached (0: skip)")
    ap.add_argument("--no-failover", action="store_true")
    ap.add_argument("--steady", type=float, default=10.0, help="seconds of the steady phase (every job running)")
    ap.add_argument("--election-timeout", default=None, metavar="MIN,MAX",
                    help="controller.election_timeout passed to `xce up` (default: XCE's 0.3,0.8)")
    a = ap.parse_args()
    sd = Path(tempfile.mkdtemp(prefix="fleet-bench-")) / "xce"
    stats = sd.parent / "fleet.json"
    print(f"fleet bench: {a.hosts} hosts x {a.jobs_per_host} jobs, {a.controllers} controller(s), heartbeat "
          f"{a.heartbeat:g} s, python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
          f"load {os.getloadavg()[0]:.1f}, election timeout {a.election_timeout or '0.3,0.8'} s", flush=True)
    xce(sd, "up", "--detach", "--hosts", "0", "--controllers", str(a.controllers), "--heartbeat", str(a.heartbeat),
        *(["--election-timeout", a.election_timeout] if a.election_timeout else []))
    fleet = None
    try:
        t0 = time.monotonic()
        fleet = subprocess.Popen([*PY, "--state-dir", str(sd), "sim-fleet", "--hosts", str(a.hosts), "--slots",
                                  str(a.jobs_per_host), "--mem", "64G", "--stats", str(stats)],
                                 stdout=subprocess.DEVNULL, stderr=open(sd.parent / "fleet.log", "wb"))
        try:
            wait(lambda: stats.exists() and fleet_stats(stats)["registered"] >= a.hosts, 300, "every host registered")
        except RuntimeError:  # say how far it got, and measure the rest on what registered
            print(f"  not every host registered within 300 s: {fleet_stats(stats)['registered']} of {a.hosts}")
        with Client(state_dir=sd, timeout=120) as c:
            pid, events = leader_pid(c)
            up = json.loads((sd / "up.json").read_text())
            procs = Procs({"leader": pid, "scheduler": up["daemons"]["scheduler"], "fleet": fleet.pid})
            phase("register", {"every host registered after": f"{time.monotonic() - t0:.1f} s "
                                                              "(fleet start, keys made)"})
            ev = Events(sd, events)
            ev.start()
            terms = Terms(sd)
            terms.start()
            m = terms.mark()
            phase("idle (heartbeats only), 10 s", {**steady_phase(procs, ev, 10, stats), **health(c, terms, m)})
            n = a.hosts * a.jobs_per_host
            m = terms.mark()
            phase("jobs streamed (half)", {**stream_phase(c, procs, ev, n // 2, a.run), **health(c, terms, m)})
            names = [h.name for h in c.hosts()]
            m = terms.mark()
            phase("jobs in a burst (the other half)",
                  {**burst_phase(c, procs, ev, names, n - n // 2, a.run), **health(c, terms, m)})
            m = terms.mark()
            phase(f"steady (every job running), {a.steady:g} s",
                  {**steady_phase(procs, ev, a.steady, stats), **health(c, terms, m)})
            if a.console:
                leader_pid(c)  # a leader to follow first: the steady phase may have cost the leadership
                phase(f"console attached, {a.console:g} s", asyncio.run(console(sd, a.console)))
            ev.stop = True
            if a.controllers > 1 and not a.no_failover:
                m = terms.mark()
                phase("failover", {**failover(c, sd, stats, a.hosts), **health(c, terms, m)})
            m = terms.mark()
            phase("drain (every job ends)", {**drain_phase(c, procs, stats, n), **health(c, terms, m)})
            terms.stop = True
            phase("fleet", {"its counters": json.dumps(fleet_stats(stats))})
    finally:
        if fleet is not None:
            fleet.send_signal(signal.SIGTERM)
            fleet.wait(60)
        subprocess.run([*PY, "--state-dir", str(sd), "down"], capture_output=True, timeout=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
