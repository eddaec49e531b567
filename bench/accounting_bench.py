"""Accounting figures (issue 3's numbers).

    python bench/accounting_bench.py [--hosts 5000] [--jobs-per-host 20] [--seconds 10]

1. In process: microseconds per usage report applied to a Ledger holding
   hosts x jobs-per-host running accounts, and a full re-derivation of all host totals.
2. A real controller process: register the hosts, submit and place hosts x
   jobs-per-host jobs (this script plays the scheduler), then send every host's
   heartbeat with a usage report for each of its jobs once per second, and
   measure the controller's CPU (user+system) per wall second.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import zmq

from xce.cli.up import free_port
from xce.core.accounting import Ledger
from xce.core.model import Alloc
from xce.daemons.worker import ACK_EVERY
from xce.proto import schema as S
from xce.proto.codec import decode_envelope, encode
from xce.proto.opcodes import Op
from xce.replica.live import Live
from xce.transport.connection import Connection
from xce.transport.sockets import subscriber, use_curve

MB = 1024 * 1024
SLICES = 50  # a second's heartbeats go out in this many bursts, 20 ms apart


def in_process(hosts: int, per_host: int) -> None:
    led = Ledger()
    n = 0
    for h in range(hosts):
        for _ in range(per_host):
            n += 1
            led.open(n, f"h{h}", 512 * MB, {"slots": 1})
    rnd = random.Random(1)
    reports = [(rnd.randrange(1, n + 1), rnd.randrange(64, 1024) * MB) for _ in range(200_000)]
    live = Live()
    live.ledger = led
    t0 = time.perf_counter()
    for jid, actual in reports:
        led.report(jid, f"h{(jid - 1) // per_host}", actual)
    dt = time.perf_counter() - t0
    print(f"usage report applied (Ledger.report, delta only): {dt / len(reports) * 1e6:.2f} us/report "
          f"({len(led.accounts):,} running accounts)")
    # The controller's path: one host's heartbeat at a time, every job's figure moved.
    batches = []
    for k in range(4):
        for h in range(hosts):
            jobs = list(range(h * per_host + 1, (h + 1) * per_host + 1))
            batches.append((f"h{h}", jobs, [0] * per_host, [rnd.randrange(64, 1024) * MB for _ in jobs],
                            [2048 * MB] * per_host, [float(k)] * per_host))
    t0 = time.perf_counter()
    for b in batches:
        led.observe_host(*b)
    dt = time.perf_counter() - t0
    print(f"usage report applied (Ledger.observe_host, a heartbeat's {per_host} reports at once): "
          f"{dt / (len(batches) * per_host) * 1e6:.2f} us/report")
    t0 = time.perf_counter()
    led.rederive()
    dt = time.perf_counter() - t0
    print(f"full re-derivation of host totals: {len(led.accounts):,} running jobs on {hosts:,} hosts: "
          f"{dt * 1000:.1f} ms")
    assert led.audit() == []


def controller_cpu(hosts: int, per_host: int, seconds: float, bare: bool) -> None:
    """``bare``: no tokens, no CURVE, nobody subscribed (the first published figures' conditions).

    Otherwise as `xce up` runs it: a token key ring (every heartbeat carries the daemon token
    and is checked against the policy), CURVE on both sockets (the bench's "workers" hold an
    allowed key), and one subscriber draining the event stream as the scheduler does.
    """
    sd = Path(tempfile.mkdtemp())
    router, pub, raft = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    cfg = sd / "c.toml"
    cfg.write_text(f'state_dir = "{sd}"\n[controller]\naddress = "{router}"\npub_address = "{pub}"\n'
                   f'raft_address = "{raft}"\nheartbeat_misses = 30\n[worker]\nheartbeat = 1.0\n'
                   f'[security]\ncurve = {"false" if bare else "true"}\n'
                   # One socket plays 5,000 workers with one key, so the key cannot be bound to a host.
                   f'bind_hosts = false\n')
    admin = daemon = ""
    worker_keys = sched_keys = client = None
    if not bare:
        from xce.security.auth import ensure_daemon_token, ensure_local_admin
        from xce.security.curve import ClientKeys, KeyStore, ephemeral

        store = KeyStore(sd / "keys")
        server = store.init()
        worker_keys = ClientKeys(server, store.new_daemon("bench"), store.daemon("bench")[1])
        # PLACE is the scheduler key's alone, and that key speaks for no host.
        sched_keys = ClientKeys(server, store.new_daemon("scheduler"), store.daemon("scheduler")[1])
        client = ephemeral(server)
        admin, daemon = ensure_local_admin(sd), ensure_daemon_token(sd)
    proc = subprocess.Popen([sys.executable, "-m", "xce.daemons.controller", "--config", str(cfg),  # noqa: S603
                             "--state-dir", str(sd), "--log-level", "WARNING"])
    stop = threading.Event()
    try:
        # It plays the scheduler (PLACE), so it holds the scheduler's daemon key.
        conn = Connection([router], token=admin, timeout=60, curve=sched_keys)
        deadline = time.monotonic() + 30
        while True:
            try:
                conn.request(Op.HOSTS, S.HostsRequest())
                break
            except Exception:  # noqa: BLE001 - not leader yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        ctx = zmq.Context.instance()
        w = ctx.socket(zmq.DEALER)
        w.setsockopt(zmq.SNDHWM, 0)
        w.setsockopt(zmq.RCVHWM, 0)
        use_curve(w, worker_keys)
        w.connect(router)
        if not bare:
            threading.Thread(target=drain, args=(ctx, pub, client, stop), daemon=True).start()
        names = [f"h{i:05d}" for i in range(hosts)]
        for n in names:
            w.send(encode(Op.REGISTER, 1, S.RegisterRequest(host=n, slots=per_host, ncpus=per_host,
                                                            mem_total=64 * 1024 * MB, os_available=60 * 1024 * MB,
                                                            version="bench"), token=daemon))
        got = 0
        while got < hosts:
            w.recv()
            got += 1
        ids = conn.request(Op.SUBMIT, S.SubmitRequest(jobs=[S.JobSpec(command=["true"], user="b", cwd="/",
                                                                      resreq="rusage[mem=512M]")] * (hosts * per_host),
                                                      key="bench-setup"),
                           timeout=120).ids
        placements = [S.Placement(jid, 0, [Alloc(names[i // per_host], 1, 512 * MB, {"slots": 1})])
                      for i, jid in enumerate(ids)]
        for k in range(0, len(placements), 20000):
            r = conn.request(Op.PLACE, S.PlaceRequest(placements=placements[k:k + 20000]), timeout=120)
            assert not r.rejected, list(r.rejected.items())[:2]
        by_host = {n: ids[i * per_host:(i + 1) * per_host] for i, n in enumerate(names)}
        for n, jids in by_host.items():  # as real workers would: confirm every start
            for j in jids:
                w.send(encode(Op.JOB_STARTED, 3, S.JobStarted(host=n, job_id=j, attempt=1, pid=1, time=time.time()),
                              token=daemon))
        acked = 0
        while acked < len(ids):
            if decode_envelope(w.recv()).rid == 3:
                acked += 1
        rnd = random.Random(2)
        beats = 0
        # Pre-encoded rounds (every job's usage differs from the round before), so the sender
        # keeps pace and the controller sees hosts x jobs changed reports each second.
        for label, share in (("worst case: every job's usage moved past the reporting step", 1.0),
                             ("typical: a fifth of the jobs moved (the rest are steady and not sent)", 0.2)):
            measure_phase(w, proc.pid, names, by_host, seconds, label, share, rnd, daemon)
        audit = conn.request(Op.AUDIT, S.Empty(), timeout=60)
        print(f"audit after the run: {len(audit.problems)} violation(s), {audit.checked}")
    finally:
        stop.set()
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def measure_phase(w: zmq.Socket, pid: int, names: list[str], by_host: dict[str, list[int]], seconds: float,
                  label: str, share: float, rnd: random.Random, token: str) -> None:
    """Send every host's heartbeat once a second, spread over the second as real workers'
    are (in SLICES bursts); like workers, every ACK_EVERY-th heartbeat of a host asks for a reply."""
    per = max(1, int(len(by_host[names[0]]) * share))
    rounds = [[encode(Op.HEARTBEAT, 2, S.Heartbeat(
        host=n, time=time.time(), os_available=40 * 1024 * MB, ack=k % ACK_EVERY == 0,
        usage=usage_of(sorted(rnd.sample(by_host[n], per)), k, rnd)), token=token) for n in names]
        for k in range(ACK_EVERY)]
    p = psutil.Process(pid)
    print(f"controller pid {pid}: measuring", flush=True)
    c0 = sum(p.cpu_times()[:2])
    th0 = thread_cpu(pid)
    t0 = time.monotonic()
    beats = k = 0
    step = -(-len(names) // SLICES)
    while time.monotonic() - t0 < seconds:
        tick = time.monotonic()
        msgs = rounds[k % ACK_EVERY]
        for i in range(SLICES):
            for msg in msgs[i * step:(i + 1) * step]:
                w.send(msg)
                beats += 1
            while w.poll(0):
                w.recv()
            left = tick + (i + 1) / SLICES - time.monotonic()
            if left > 0:
                time.sleep(left)  # the workers' pace, not a wait for a state
        k += 1
    wall = time.monotonic() - t0
    cpu = sum(p.cpu_times()[:2]) - c0
    th1 = thread_cpu(pid)
    print(f"controller CPU, {len(names):,} hosts x {len(by_host[names[0]])} jobs, heartbeat every second, "
          f"{label}: {cpu / wall * 100:.1f}% of one core ({beats / wall:,.0f} heartbeats/s, "
          f"{beats * per / wall:,.0f} reports/s)")
    by_thread = sorted(((th1[t][1] - th0.get(t, ("", 0.0))[1], th1[t][0]) for t in th1), reverse=True)
    print("    by thread: " + ", ".join(f"{name} {c / wall * 100:.1f}%" for c, name in by_thread if c / wall >= 0.005))


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """CPU seconds per thread, named (libzmq names its I/O thread ZMQbg/IO/0)."""
    out = {}
    for tid in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (tid / "comm").read_text().strip()
            fields = (tid / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(tid.name) == pid:
            name = "main"
        elif name.startswith("python") or name.startswith("xce"):
            name = f"py-thread-{tid.name}"
        out[int(tid.name)] = (name, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
    return out


def usage_of(jobs: list[int], k: int, rnd: random.Random) -> S.UsageColumns:
    """What a worker sends: every listed job's figures moved since the last heartbeat.

    In the worker's order, as it lists its tasks (start order: here, job id order).
    """
    return S.UsageColumns(job_id=jobs, attempt=[1] * len(jobs),
                          memory_rss=[(64 + 7 * k + rnd.randrange(0, 900)) * MB for _ in jobs],
                          memory_peak=[2048 * MB] * len(jobs), cpu_time=[1.0 + k] * len(jobs))


def drain(ctx: zmq.Context, pub: str, keys: object, stop: threading.Event) -> None:
    """A subscriber like the scheduler's, so the controller encodes and sends its events."""
    sub = subscriber(ctx, pub, keys)  # type: ignore[arg-type]
    while not stop.is_set():
        if sub.poll(200):
            while True:
                try:
                    sub.recv(zmq.NOBLOCK)
                except zmq.Again:
                    break
    sub.close(0)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=5000)
    ap.add_argument("--jobs-per-host", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--bare", action="store_true", help="no tokens, no CURVE, no subscriber")
    ap.add_argument("--skip-in-process", action="store_true")
    a = ap.parse_args()
    if not a.skip_in_process:
        in_process(a.hosts, a.jobs_per_host)
    controller_cpu(a.hosts, a.jobs_per_host, a.seconds, a.bare)
    return 0


if __name__ == "__main__":
    sys.exit(main())
