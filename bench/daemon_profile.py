"""Where the daemons' CPU goes over throughput_bench's runs: py-spy on the running daemons.

    python bench/daemon_profile.py [--jobs 1000] [--phase array|batch|one] [--daemons controller,scheduler]
                                   [--top 25] [--rate 250]

Starts the cluster throughput_bench starts (`xce up --hosts 2 --slots-per-host 2`), warms it
with 10 jobs, then records each named daemon with `py-spy record --format raw --nonblocking`
(all threads, idle ones left out: a thread waiting in poll or on a lock is not sampled) while
one phase runs: an N-element array, N jobs in one submit, or N submits one by one.  Prints per
daemon the busiest functions by own samples and by inclusive samples, as shares of the
daemon's samples, and its CPU per job from /proc over the same phase.  py-spy must be on PATH
or beside the interpreter (`pip install py-spy`); it needs ptrace rights over the daemons.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput_bench import SPEC, array_end, cpu_per_job, daemon_cpu, last_end, xce  # noqa: E402

from xce.client import Client  # noqa: E402


SPY_FLAGS = os.environ.get("XCE_PYSPY_FLAGS", "--gil").split()  # --gil: what holds the interpreter


def py_spy() -> str:
    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(exe).exists():
        raise SystemExit("py-spy not found: pip install py-spy")
    return exe


def thread_cpu(pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds per (daemon, thread): the main thread, ZeroMQ's I/O threads by their names,
    every other thread (the controller's Raft thread) as `other`."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = collections.defaultdict(float)
    for name, pid in pids.items():
        for task in Path(f"/proc/{pid}/task").iterdir():
            comm = (task / "comm").read_text().strip()
            f = (task / "stat").read_text().rsplit(")", 1)[1].split()
            kind = "main" if int(task.name) == pid else ("zmq" if comm.startswith("ZMQbg") else "other")
            out[f"{name}/{kind}"] += (int(f[11]) + int(f[12])) / tick
    return out


def run_phase(c: Client, phase: str, jobs: int) -> None:
    if phase == "array":
        array_end(c, jobs)
    elif phase == "batch":
        last_end(c, c.submit_many([SPEC] * jobs))
    else:
        last_end(c, [c.submit(**SPEC) for _ in range(jobs)])


def frame_name(frame: str) -> str:
    """`fn (path/to/mod.py:12)` -> `mod.py:fn` (line numbers are off with --nolineno)."""
    fn, _, where = frame.partition(" (")
    return f"{Path(where.rstrip(')')).name}:{fn}"


def summarize(raw: Path, top: int) -> list[str]:
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack:
            continue
        count = int(n)
        frames = [frame_name(f) for f in stack.split(";") if f and not f.startswith("process ")
                  and not f.startswith("thread ")]
        if not frames:
            continue
        total += count
        own[frames[-1]] += count
        for f in set(frames):
            incl[f] += count
    out = [f"  {total} samples; own:"]
    out += [f"    {n * 100 / total:5.1f}%  {f}" for f, n in own.most_common(top)]
    out.append("  inclusive:")
    out += [f"    {n * 100 / total:5.1f}%  {f}" for f, n in incl.most_common(top)]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--phase", choices=("array", "batch", "one"), default="array")
    ap.add_argument("--daemons", default="controller,scheduler")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--rate", type=int, default=250)
    ap.add_argument("--keep", help="directory to keep the raw stacks in")
    a = ap.parse_args()
    spy = py_spy()
    sd = Path(tempfile.mkdtemp()) / "xce"
    keep = Path(a.keep) if a.keep else sd.parent
    keep.mkdir(parents=True, exist_ok=True)
    xce(sd, "up", "--detach", "--hosts", "2", "--slots-per-host", "2", "--mem-per-host", "4G")
    load0 = os.getloadavg()[0]
    try:
        with Client(state_dir=sd, timeout=60) as c:
            last_end(c, c.submit_many([SPEC] * 10))
            pids = json.loads((sd / "up.json").read_text())["daemons"]
            wanted = [d.strip() for d in a.daemons.split(",")]
            spies = {}
            for name, pid in pids.items():
                if any(w in name for w in wanted):
                    raw = keep / f"{name}-{a.phase}.raw"
                    spies[name] = (raw, subprocess.Popen(
                        [spy, "record", "--pid", str(pid), "--format", "raw", "--nolineno", *SPY_FLAGS,
                         "--rate", str(a.rate), "--output", str(raw)],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            time.sleep(1.0)  # py-spy attached
            watched = {n: p for n, p in pids.items() if any(w in n for w in wanted)}
            entries0, seq0 = c.status().controllers[0].commit_index, c.snapshot().seq
            cpu0, th0 = daemon_cpu(sd), thread_cpu(watched)
            run_phase(c, a.phase, a.jobs)
            cpu, th1 = cpu_per_job(cpu0, daemon_cpu(sd), a.jobs), thread_cpu(watched)
            entries, events = c.status().controllers[0].commit_index - entries0, c.snapshot().seq - seq0
            for _, p in spies.values():
                p.send_signal(signal.SIGINT)
            for _, p in spies.values():
                p.wait(timeout=60)
    finally:
        xce(sd, "down")
    print(f"{a.jobs} jobs, phase {a.phase}; load average {load0:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    print("CPU per job, ms: " + ", ".join(f"{k[7:]} {v}" for k, v in cpu.items()))
    print(f"per job: {entries / a.jobs:.2f} Raft entries, {events / a.jobs:.2f} events")
    print("per thread, ms/job: " + ", ".join(f"{k} {(v - th0.get(k, 0.0)) * 1000 / a.jobs:.2f}"
                                              for k, v in sorted(th1.items())))
    for name, (raw, _) in spies.items():
        print(f"{name} (py-spy, {raw}):")
        print("\n".join(summarize(raw, a.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
