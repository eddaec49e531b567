"""HyperQueue, the anchor XCE's throughput is compared with, measured in the same run.

    python bench/hq_anchor.py [--tasks 1000] [--cores 4] [--idle 20]   # with hyperqueue installed

Run it with a Python that has ``hyperqueue`` (its wheel embeds server and worker); the XCE
benches call it in a venv of its own (``anchor_python``).  It prints one JSON line:

- ``array_tasks_per_s``: one job of N ``true`` tasks on one worker with ``--cores`` cores;
- ``one_by_one_jobs_per_s``: N one-task jobs submitted one after another from one client;
- ``idle_latency_ms``: submit -> done of one ``true`` job, 0.2 s apart, median of ``--idle``.

``wait_for_jobs`` polls about once a second, too coarse for these figures.  So each measured
batch ends with a marker task that depends on every other task and runs ``date +%s%N`` into the
marker file: the time it prints is when the last task had ended, and the bench polls for it
every 1 ms.  Not the file's mtime: the kernel stamps files from its coarse clock, which lags
the real time by up to a tick or more (0.1-5.5 ms, median 3.6 ms, measured on this VM), so an
mtime made HyperQueue's idle latency look ~3 ms shorter than it was (``idle_latency_mtime_ms``
still reports that reading, for comparison).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def anchor_python(venv: Path) -> str:
    """A Python with hyperqueue, in a venv of its own (made once)."""
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "hyperqueue==0.27.0"], check=True)
    return str(py)


def _marker(path: Path, deps=()):  # noqa: ANN001, ANN202
    """The task that marks an end: the time it runs, from the fine clock, into ``path``."""
    return ([shutil.which("date") or "/bin/date", "+%s%N"], {"stdout": str(path), "stderr": None, "deps": deps})


def _done_at(marker: Path, deadline: float, mtime: list[float] | None = None) -> float:
    while time.time() < deadline:
        try:
            text = marker.read_text()
        except FileNotFoundError:
            text = ""
        if text.endswith("\n"):
            if mtime is not None:
                mtime.append(marker.stat().st_mtime_ns / 1e9)
            return int(text) / 1e9
        time.sleep(0.001)
    raise TimeoutError(f"{marker} never appeared")


def _batch(client, tasks: int, workdir: Path, name: str) -> float:  # noqa: ANN001
    from hyperqueue import Job

    marker = workdir / f"{name}.done"
    job = Job(default_workdir=workdir)
    deps = [job.program(["true"], stdout=None, stderr=None) for _ in range(tasks)]
    args, kw = _marker(marker, deps)
    job.program(args, **kw)
    t0 = time.time()
    client.submit(job)
    return _done_at(marker, t0 + 600) - t0


def _one_by_one(client, jobs: int, workdir: Path) -> float:  # noqa: ANN001
    from hyperqueue import Job

    marker = workdir / "one-by-one.done"
    t0 = time.time()
    for i in range(jobs):
        job = Job(default_workdir=workdir)
        if i == jobs - 1:  # the last one marks its end; the worker runs them in submit order
            args, kw = _marker(marker)
            job.program(args, **kw)
        else:
            job.program(["true"], stdout=None, stderr=None)
        client.submit(job)
    return _done_at(marker, t0 + 600) - t0


def _idle(client, runs: int, workdir: Path, mtimes: list[float]) -> list[float]:  # noqa: ANN001
    """Each run's latency by the marker's own clock; ``mtimes`` gets it by the file's mtime."""
    from hyperqueue import Job

    out = []
    for i in range(runs):
        time.sleep(0.2)
        marker = workdir / f"idle-{i}.done"
        job = Job(default_workdir=workdir)
        args, kw = _marker(marker)
        job.program(args, **kw)
        t0 = time.time()
        client.submit(job)
        m: list[float] = []
        out.append(_done_at(marker, t0 + 60, m) - t0)
        mtimes.append(m[0] - t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--cores", type=int, default=4)
    ap.add_argument("--idle", type=int, default=20)
    a = ap.parse_args()
    from hyperqueue import LocalCluster
    from hyperqueue.cluster import WorkerConfig

    work = Path(tempfile.mkdtemp(prefix="hq-anchor-"))
    try:
        with LocalCluster(server_dir=str(work / "server")) as cluster:
            cluster.start_worker(WorkerConfig(cores=a.cores))
            client = cluster.client()
            _batch(client, 10, work, "warm")  # the worker has connected and run something
            mtimes: list[float] = []
            idle = _idle(client, a.idle, work, mtimes) if a.idle else []
            array_s = _batch(client, a.tasks, work, "array")
            one_s = _one_by_one(client, a.tasks, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({
        "hyperqueue": "0.27.0", "tasks": a.tasks, "cores": a.cores,
        "array_tasks_per_s": round(a.tasks / array_s, 1),
        "one_by_one_jobs_per_s": round(a.tasks / one_s, 1),
        "idle_latency_ms": round(statistics.median(idle) * 1000, 2) if idle else None,
        "idle_latency_mtime_ms": round(statistics.median(mtimes) * 1000, 2) if idle else None,
        "load": os.getloadavg()[0],
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
