"""XCE against HyperQueue in the same run: trivial jobs through the whole spine.

    python bench/throughput_bench.py [--jobs 1000] [--idle 20] [--hq-venv DIR] [--no-hq]

Both systems run the same work on 4 slots of this machine: XCE as `xce up --hosts 2
--slots-per-host 2` (`true`, rusage[mem=10]), HyperQueue as LocalCluster with one worker of
4 cores (bench/hq_anchor.py, in a venv of its own).  Figures, each as submit -> the last
process exited (XCE: the workers' exit times in the finish records; HyperQueue: a marker
task's mtime, see hq_anchor.py):

- array: one N-element job array (XCE `-J "a[1-N]"`: one submit, one Raft entry; HyperQueue
  one job of N tasks);
- batch: N separate jobs in one submit (XCE `submit_many`; HyperQueue again one job of N tasks);
- one by one: N submits from one client, each acknowledged before the next;
- idle latency: one job, 0.2 s apart, median (HyperQueue: by its marker task's own clock, not
  the file's mtime, which the kernel stamps from a coarse clock up to ~5 ms behind).

XCE's daemon CPU per job is measured over the array, the batch and the one-by-one runs from /proc/<pid>/stat of the daemons
`xce up` records (up.json): each daemon's own user+system time, and, for the workers, apart
from it, that of the job processes they reaped (`sh` and `true`).

Only ratios within one run mean anything: this VM's speed varies by 3x between days.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from xce.client import Client

HERE = Path(__file__).resolve().parent
SPEC = {"command": ["true"], "resreq": "rusage[mem=10]"}


def xce(sd: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "xce.cli.main", "--state-dir", str(sd), *args],
                   capture_output=True, text=True, check=True)


def last_end(c: Client, ids: list[int]) -> float:
    views = c.wait(ids, timeout=600)
    bad = [v for v in views if v.state != "DONE"]
    if bad:
        raise SystemExit(f"{len(bad)} job(s) did not end DONE, e.g. {bad[0].id}: {bad[0].state} {bad[0].reason}")
    return max(v.end_time or 0.0 for v in views)


def array_end(c: Client, jobs: int) -> float:
    """Submit one `true` array of ``jobs`` elements; the time its last element's process exited."""
    from xce.core.jobspec.arrays import parse_lsf_job_name

    name, spec = parse_lsf_job_name(f"a[1-{jobs}]", max_size=max(jobs, 1000))
    aid = c.submit_many([{**SPEC, "name": name, "array": spec}])[0]
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        (arr,) = c.arrays([aid])
        if arr.counts.get("DONE", 0) + arr.counts.get("EXIT", 0) == jobs:
            break
        # The time is the last exit in the records, so the poll's pace only delays the look; a
        # summary costs the controller a walk of the array, 20 ms apart a third of its main thread.
        time.sleep(0.2)
    views = c.jobs([aid], all=True)
    if len(views) != jobs or any(v.state != "DONE" for v in views):
        raise SystemExit(f"the array's elements did not all end DONE: {len(views)} listed")
    return max(v.end_time or 0.0 for v in views)


def daemon_cpu(sd: Path) -> dict[str, tuple[float, float]]:
    """Per daemon kind (controller, scheduler, worker): (own CPU s, reaped children's CPU s)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, tuple[float, float]] = {}
    for name, pid in json.loads((sd / "up.json").read_text())["daemons"].items():
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        own, kids = (int(f[11]) + int(f[12])) / tick, (int(f[13]) + int(f[14])) / tick
        kind = next((k for k in ("controller", "scheduler", "worker") if k in name), name)
        o, c = out.get(kind, (0.0, 0.0))
        out[kind] = (o + own, c + kids)
    return out


def cpu_per_job(before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]],
                jobs: int) -> dict[str, float]:
    per = {f"cpu_ms_{k}": round((after[k][0] - before[k][0]) * 1000 / jobs, 3) for k in after}
    per["cpu_ms_jobs"] = round(sum(after[k][1] - before[k][1] for k in after) * 1000 / jobs, 3)
    per["cpu_ms_daemons"] = round(sum(v for k, v in per.items() if k != "cpu_ms_jobs"), 3)
    return per


def run_xce(jobs: int, idle: int) -> dict[str, float]:
    sd = Path(tempfile.mkdtemp()) / "xce"
    xce(sd, "up", "--detach", "--hosts", "2", "--slots-per-host", "2", "--mem-per-host", "4G")
    try:
        with Client(state_dir=sd, timeout=60) as c:
            last_end(c, c.submit_many([SPEC] * 10))  # warm: every daemon has run a job
            lat = []
            for _ in range(idle):
                time.sleep(0.2)
                t0 = time.time()
                lat.append(last_end(c, [c.submit(**SPEC)]) - t0)
            t0, cpu0 = time.time(), daemon_cpu(sd)
            array = array_end(c, jobs) - t0
            array_cpu = cpu_per_job(cpu0, daemon_cpu(sd), jobs)
            t0, cpu0 = time.time(), daemon_cpu(sd)
            batch = last_end(c, c.submit_many([SPEC] * jobs)) - t0
            cpu = cpu_per_job(cpu0, daemon_cpu(sd), jobs)
            t0, cpu0 = time.time(), daemon_cpu(sd)
            ids = [c.submit(**SPEC) for _ in range(jobs)]
            one = last_end(c, ids) - t0
            one_cpu = cpu_per_job(cpu0, daemon_cpu(sd), jobs)
    finally:
        xce(sd, "down")
    return {"array_jobs_per_s": round(jobs / array, 1), "batch_jobs_per_s": round(jobs / batch, 1), "one_by_one_jobs_per_s": round(jobs / one, 1),
            "idle_latency_ms": round(statistics.median(lat) * 1000, 2) if lat else float("nan"), **cpu,
            **{f"array_{k}": v for k, v in array_cpu.items()}, **{f"one_{k}": v for k, v in one_cpu.items()}}


def run_hq(jobs: int, idle: int, venv: Path) -> dict[str, float]:
    sys.path.insert(0, str(HERE))
    from hq_anchor import anchor_python

    out = subprocess.run([anchor_python(venv), str(HERE / "hq_anchor.py"), "--tasks", str(jobs), "--idle", str(idle)],
                         capture_output=True, text=True, check=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return {"array_jobs_per_s": r["array_tasks_per_s"], "batch_jobs_per_s": r["array_tasks_per_s"], "one_by_one_jobs_per_s": r["one_by_one_jobs_per_s"],
            "idle_latency_ms": r["idle_latency_ms"], "idle_latency_mtime_ms": r.get("idle_latency_mtime_ms")}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--idle", type=int, default=20)
    ap.add_argument("--hq-venv", default=str(Path(tempfile.gettempdir()) / "xce-bench-hq-venv"))
    ap.add_argument("--no-hq", action="store_true")
    a = ap.parse_args()
    load0 = os.getloadavg()[0]
    rows = {"XCE": run_xce(a.jobs, a.idle)}
    if not a.no_hq:
        rows["HyperQueue 0.27"] = run_hq(a.jobs, a.idle, Path(a.hq_venv))
    print(f"{a.jobs} trivial jobs on 4 slots; load average {load0:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    print(f"{'':18} {'array jobs/s':>13} {'batch jobs/s':>13} {'one by one jobs/s':>18} {'idle latency ms':>16}")
    for name, r in rows.items():
        print(f"{name:18} {r['array_jobs_per_s']:>13} {r['batch_jobs_per_s']:>13} {r['one_by_one_jobs_per_s']:>18} "
              f"{r['idle_latency_ms']:>16}")
    if len(rows) == 2:
        x, h = rows["XCE"], rows["HyperQueue 0.27"]
        print(f"{'XCE / HyperQueue':18} {x['array_jobs_per_s'] / h['array_jobs_per_s']:>13.2f} "
              f"{x['batch_jobs_per_s'] / h['batch_jobs_per_s']:>13.2f} "
              f"{x['one_by_one_jobs_per_s'] / h['one_by_one_jobs_per_s']:>18.2f} "
              f"{x['idle_latency_ms'] / h['idle_latency_ms']:>16.2f}")
    if rows.get("HyperQueue 0.27", {}).get("idle_latency_mtime_ms") is not None:
        print(f"HyperQueue's idle latency by its marker's mtime, the coarse clock (as before): "
              f"{rows['HyperQueue 0.27']['idle_latency_mtime_ms']} ms")
    for run, pre in (("array", "array_cpu_ms_"), ("batch", "cpu_ms_"), ("one-by-one", "one_cpu_ms_")):
        cpu = {k[len(pre):]: v for k, v in rows["XCE"].items() if k.startswith(pre)}
        print(f"XCE CPU per job over the {run} run, ms: " + ", ".join(f"{k} {v}" for k, v in cpu.items()))
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
