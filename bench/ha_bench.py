"""HA figures (issue 6's numbers).

    python bench/ha_bench.py [--kills 20] [--batch 20000]

1. Failover: SIGKILL the leader of `xce up --controllers 3`, time until the first
   submit is committed by the new leader; median and max over --kills kills (the
   supervisor restarts each killed controller, which rejoins, before the next kill).
2. Committed submits/s (client batches over one connection) on 1 and on 3 controllers.
3. The fsync policy: single-submit commit latency and batch submits/s with
   durability "mmap" and "fsync", on 3 controllers.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from xce.cli.main import _each_controller
from xce.client import Client


def up(*args: str) -> Path:
    sd = Path(tempfile.mkdtemp()) / "xce"
    subprocess.run([sys.executable, "-m", "xce.cli.main", "--state-dir", str(sd), "up", "--detach",
                    "--hosts", "1", "--slots-per-host", "2", *args], check=True, capture_output=True)
    return sd


def down(sd: Path) -> None:
    subprocess.run([sys.executable, "-m", "xce.cli.main", "--state-dir", str(sd), "down"], capture_output=True)


def wait_leader(c: Client, want: int) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ctl = _each_controller(c, [])
        leaders = [x for x in ctl if x.role == "leader"]
        if leaders and sum(1 for x in ctl if x.role in ("leader", "follower")) >= want:
            return leaders[0].pid
        time.sleep(0.1)
    raise RuntimeError("no leader with a full cluster")


def failover(kills: int) -> None:
    sd = up("--controllers", "3")
    try:
        with Client(state_dir=sd, timeout=30) as c:
            c.submit(["true"])
            times = []
            for _ in range(kills):
                pid = wait_leader(c, 3)
                t0 = time.monotonic()
                os.kill(pid, signal.SIGKILL)
                c.submit(["true"])
                times.append(time.monotonic() - t0)
            print(f"failover, leader SIGKILL -> first committed submit, {kills} kills: median "
                  f"{statistics.median(times):.3f} s, max {max(times):.3f} s, min {min(times):.3f} s")
    finally:
        down(sd)


def throughput(sd: Path, batch: int, rounds: int = 3) -> float:
    with Client(state_dir=sd, timeout=120) as c:
        c.host_admin([h.name for h in c.hosts()], "close")
        specs = [{"command": ["true"], "user": "b", "cwd": "/"}] * batch
        c.submit_many(specs[:100])
        t0 = time.perf_counter()
        for _ in range(rounds):
            c.submit_many(specs)
        return batch * rounds / (time.perf_counter() - t0)


def latency(sd: Path, n: int = 50) -> float:
    with Client(state_dir=sd, timeout=30) as c:
        lat = []
        for _ in range(n):
            t0 = time.perf_counter()
            c.submit(["true"], user="b", cwd="/")
            lat.append(time.perf_counter() - t0)
        return statistics.median(lat)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--batch", type=int, default=20000)
    a = ap.parse_args()
    failover(a.kills)
    for n in ("1", "3"):
        for durability in ("mmap", "fsync"):
            sd = up("--controllers", n, "--durability", durability)
            try:
                lat = latency(sd)
                rate = throughput(sd, a.batch)
            finally:
                down(sd)
            print(f"{n} controller(s), durability={durability}: committed submits {rate:,.0f}/s "
                  f"(batches of {a.batch}), single-submit commit latency median {lat * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
