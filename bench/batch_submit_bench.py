"""Batch SUBMIT on closed hosts: committed jobs/s and each process's CPU per 1,000 jobs.

    python bench/batch_submit_bench.py [--batch 5000] [--batches 3]

`xce up --hosts 2 --slots-per-host 2` with its hosts closed (nothing runs), then ``--batches``
SUBMITs of ``--batch`` identical `true` specs over one connection, each acknowledged (so
committed) before the next.  CPU: the client's own (getrusage), and each daemon's from
/proc/<pid>/stat over the batches and again 2 s later (the scheduler reads the events after).
Run it against an old tree with PYTHONPATH=/tmp/old-XYZ, interleaved: only same-run ratios count.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput_bench import daemon_cpu, xce  # noqa: E402

from xce.client import Client  # noqa: E402

SPEC = {"command": ["true"], "resreq": "rusage[mem=10]", "user": "b", "cwd": "/"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=5000)
    ap.add_argument("--batches", type=int, default=3)
    a = ap.parse_args()
    sd = Path(tempfile.mkdtemp()) / "xce"
    xce(sd, "up", "--detach", "--hosts", "2", "--slots-per-host", "2", "--mem-per-host", "4G")
    try:
        with Client(state_dir=sd, timeout=60) as c:
            c.host_admin([h.name for h in c.hosts()], "close")
            c.submit_many([{"command": ["true"]}] * 10)  # warm
            time.sleep(1)
            cpu0, r0 = daemon_cpu(sd), resource.getrusage(resource.RUSAGE_SELF)
            t0, total = time.perf_counter(), 0
            for _ in range(a.batches):
                total += len(c.submit_many([SPEC] * a.batch))
            dt = time.perf_counter() - t0
            r1, cpu1 = resource.getrusage(resource.RUSAGE_SELF), daemon_cpu(sd)
            time.sleep(2)
            cpu2 = daemon_cpu(sd)
    finally:
        xce(sd, "down")
    per = 1e6 / total  # seconds -> ms per 1,000 jobs
    client = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) * per
    print(f"{total} jobs in batches of {a.batch}: committed {total / dt:,.0f} jobs/s; load {os.getloadavg()[0]:.1f}")
    print(f"CPU ms per 1,000 jobs over the batches: client {client:.1f}, "
          + ", ".join(f"{k} {(cpu1[k][0] - cpu0[k][0]) * per:.1f}" for k in cpu1))
    print("... and 2 s later: " + ", ".join(f"{k} {(cpu2[k][0] - cpu0[k][0]) * per:.1f}" for k in cpu2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
