"""A controller's memory per job (issue 12): jobs at every spec limit, and typical jobs.

    python bench/spec_memory_bench.py [--big 40] [--typical 2000]

Starts `xce up --hosts 1` in a fresh temporary state directory, stops its scheduler
(SIGSTOP, so every job stays pending and held), and reads the controller's VmRSS before and
after submitting --big jobs at every limit of xce/core/limits.py (command and environment
each at 128 KiB, in thousands of entries) and --typical jobs (`sleep 1`, this shell's
environment).  Brings the cluster down after.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from xce.client import Client
from xce.core import limits
from xce.core.model import JobSpec


def xce(sd: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "xce.cli.main", "--state-dir", str(sd), *args], check=True, timeout=120)


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))


def biggest(user: str, i: int) -> JobSpec:
    """A spec at the command and environment limits, in many entries (the most objects)."""
    env = {f"V{k:04d}": "e" * 20 for k in range(4000)}
    env["PAD"] = "p" * (limits.SPEC_FIELD["env"].max_bytes - sum(len(k) + len(v) + 2 for k, v in env.items()) - 5)
    cmd = ["echo"] + ["a" * 30] * 4000
    cmd.append("b" * (limits.SPEC_FIELD["command"].max_bytes - sum(len(a) + 1 for a in cmd) - 1))
    spec = JobSpec(command=cmd, env=env, user=user, cwd="/tmp", name=f"big{i}")
    assert limits.spec_limit_reason(spec) is None
    return spec


def settled(pid: int) -> int:
    time.sleep(3)  # let the batch commit and the allocator settle: a measurement, not a test
    return rss(pid)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--big", type=int, default=40)
    p.add_argument("--typical", type=int, default=2000)
    a = p.parse_args()
    sd = Path(tempfile.mkdtemp()) / "xce"
    xce(sd, "up", "--detach", "--hosts", "1", "--slots-per-host", "1", "--heartbeat", "1")
    daemons = json.loads((sd / "up.json").read_text())["daemons"]
    ctl = next(pid for name, pid in daemons.items() if name.startswith("controller"))
    os.kill(daemons["scheduler"], signal.SIGSTOP)
    try:
        c = Client(state_dir=sd, timeout=60)
        user = getpass.getuser()
        base = settled(ctl)
        for i in range(a.big):
            c.submit_many([biggest(user, i)])
        big = settled(ctl)
        print(f"{a.big} jobs at every limit: RSS {base / 2**20:.0f} -> {big / 2**20:.0f} MB, "
              f"{(big - base) / a.big / 2**20:.2f} MB per job")
        env = dict(os.environ)
        for _ in range(0, a.typical, 100):
            c.submit_many([JobSpec(command=["sleep", "1"], env=env, user=user, cwd="/tmp") for _ in range(100)])
        typical = settled(ctl)
        env_bytes = sum(len(k) + len(v) + 2 for k, v in env.items())
        print(f"{a.typical} typical jobs ({env_bytes:,}-byte environment): RSS {big / 2**20:.0f} -> "
              f"{typical / 2**20:.0f} MB, {(typical - big) / a.typical / 1024:.1f} KB per job")
        c.close()
    finally:
        os.kill(daemons["scheduler"], signal.SIGCONT)
        xce(sd, "down")


if __name__ == "__main__":
    main()
