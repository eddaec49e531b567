"""Spine figures on a real local cluster (issue 2's numbers).

    python bench/spine_bench.py [--jobs 1000] [--batch 20000]

1. `xce submit` as its own process: median wall time of 20 runs.
2. xce.client batch submit over one connection, committed: jobs/s (hosts
   closed, so nothing runs meanwhile).
3. N trivial jobs (`true`, rusage[mem=10]) on `--hosts 2 --slots-per-host 2`:
   seconds from first submit to all DONE, jobs/s.
4. Median submit-to-done latency of one job on an idle cluster (20 runs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from xce.client import Client


def xce(sd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xce.cli.main", "--state-dir", str(sd), *args],
                          capture_output=True, text=True, check=True)


def xce_bin() -> str:
    return str(Path(sys.executable).with_name("xce"))


def install_kind() -> str:
    import xce

    return "site-packages install" if "site-packages" in xce.__file__ else "editable install"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=20000)
    a = ap.parse_args()
    sd = Path(tempfile.mkdtemp()) / "xce"
    xce(sd, "up", "--detach", "--hosts", "2", "--slots-per-host", "2", "--mem-per-host", "4G")
    try:
        with Client(state_dir=sd, timeout=60) as c:
            # 4. idle latency first, on a quiet cluster
            lat = []
            for _ in range(20):
                t0 = time.perf_counter()
                jid = c.submit(["true"], resreq="rusage[mem=10]")
                c.wait([jid])
                lat.append(time.perf_counter() - t0)
            print(f"submit-to-done latency, one job, idle cluster: median {statistics.median(lat) * 1000:.1f} ms "
                  f"(min {min(lat) * 1000:.1f}, max {max(lat) * 1000:.1f})")

            # 1. the CLI as its own process: the local door, then the full path for comparison
            print(f"`xce submit` conditions: {install_kind()}, "
                  f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '(unset)')}")
            submitted = []
            for label, env in (("local door", {}), ("full path, XCE_QUICK=0", {"XCE_QUICK": "0"})):
                walls = []
                for _ in range(20):
                    t0 = time.perf_counter()
                    r = subprocess.run([xce_bin(), "--state-dir", str(sd), "submit", "-R", "rusage[mem=10]", "--",
                                        "true"], check=True, capture_output=True, text=True,
                                       env={**os.environ, **env})
                    walls.append(time.perf_counter() - t0)
                    submitted.append(int(r.stdout.split("<", 1)[1].split(">", 1)[0]))
                print(f"`xce submit` wall time ({label}): median {statistics.median(walls) * 1000:.1f} ms "
                      f"(min {min(walls) * 1000:.1f}, max {max(walls) * 1000:.1f})")
            c.wait(submitted, timeout=60)

            # 3. N trivial jobs through the whole pipeline
            specs = [{"command": ["true"], "resreq": "rusage[mem=10]"}] * a.jobs
            t0 = time.perf_counter()
            ids = c.submit_many(specs)
            c.wait(ids, timeout=600)
            dt = time.perf_counter() - t0
            print(f"{a.jobs} trivial jobs, 2 hosts x 2 slots: {dt:.2f} s first submit to all DONE, "
                  f"{a.jobs / dt:.0f} jobs/s")

            # 2. committed batch submits, nothing running
            names = [h.name for h in c.hosts()]
            c.host_admin(names, "close")
            total, t0 = 0, time.perf_counter()
            for _ in range(3):
                total += len(c.submit_many([{"command": ["true"], "resreq": "rusage[mem=10]", "user": "b",
                                             "cwd": "/"}] * a.batch))
            dt = time.perf_counter() - t0
            print(f"batch submit over one connection, committed: {total} jobs in {dt:.2f} s = "
                  f"{total / dt:,.0f} jobs/s (batches of {a.batch})")
    finally:
        xce(sd, "down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
