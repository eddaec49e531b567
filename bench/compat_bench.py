"""The LSF and Slurm commands as workflow tools call them: one process per command.

    python bench/compat_bench.py [--runs 30] [--jobs 10000]

On a fresh `xce up --detach --hosts 1 --slots-per-host 1` cluster, with the commands of
`xce compat path lsf|slurm`:

- ``bsub true`` and ``sbatch`` of a two-line script: median wall time of ``--runs`` processes
  (goal 20 ms), with ``xce submit true``, ``python -c pass`` and ``python -S -c pass`` (no site:
  the interpreter's own start) of the same interpreter beside them, interleaved, so the machine's
  load shows;
- with ``--jobs`` jobs in the cluster (one running, the rest pending behind it), the median
  of 5 ``bjobs -noheader -o 'jobid stat'``, ``bjobs -noheader`` (LSF's default columns) and
  ``squeue -h -o '%i %t'`` (goal 300 ms), and
  ``xce jobs`` beside them (the same request through the same client).
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


def xce(sd: Path, *args: str) -> str:
    return subprocess.run([sys.executable, "-m", "xce.cli.main", "--state-dir", str(sd), *args],
                          capture_output=True, text=True, check=True).stdout


def wall_ms(argv: list[str], env: dict[str, str], stdin: str | None = None) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, input=stdin, capture_output=True, text=True)
    ms = (time.perf_counter() - t0) * 1000
    if r.returncode != 0:
        raise SystemExit(f"{argv} exited {r.returncode}: {r.stderr}")
    return ms


def medians(cmds: dict[str, tuple[list[str], str | None]], env: dict[str, str], runs: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(runs):  # interleaved: a load spike hits every command alike
        for name, (argv, stdin) in cmds.items():
            times[name].append(wall_ms(argv, env, stdin))
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--jobs", type=int, default=10_000)
    a = ap.parse_args()
    sd = Path(tempfile.mkdtemp()) / "xce"
    xce(sd, "up", "--detach", "--hosts", "1", "--slots-per-host", "1", "--mem-per-host", "4G")
    try:
        env = {k: v for k, v in os.environ.items() if k != "XCE_STATE_DIR"}
        bins = [xce(sd, "compat", "path", f).strip() for f in ("lsf", "slurm")]
        env["PATH"] = ":".join([*bins, env["PATH"]])
        with Client(state_dir=sd, timeout=60) as c:
            sleeper = c.submit_many([{"command": ["sleep", "3600"]}])  # holds the one slot: the rest pend
            submit = medians({
                "bsub true": (["bsub", "true"], None),
                "sbatch script": (["sbatch"], "#!/bin/sh\ntrue\n"),
                "xce submit true": ([sys.executable, "-m", "xce.cli.main", "--state-dir", str(sd), "submit", "true"], None),
                "python -c pass": ([sys.executable, "-c", "pass"], None),
                # without site: the interpreter's own start, no .pth files (an editable install's finder)
                "python -S -c pass": ([sys.executable, "-S", "-c", "pass"], None)}, env, a.runs)
            for name, ms in submit.items():
                print(f"{name:<18} median {ms:7.1f} ms over {a.runs} processes")
            left = a.jobs - len(c.jobs(all=True))
            for start in range(0, max(0, left), 1000):
                c.submit_many([{"command": ["true"]}] * min(1000, left - start))
            n = len(c.jobs())
            listing = medians({"bjobs -noheader -o 'jobid stat'": (["bjobs", "-noheader", "-o", "jobid stat"], None),
                               "bjobs -noheader (default columns)": (["bjobs", "-noheader"], None),
                               "squeue -h -o '%i %t'": (["squeue", "-h", "-o", "%i %t"], None),
                               "xce jobs": ([sys.executable, "-m", "xce.cli.main", "--state-dir", str(sd), "jobs"],
                                            None)}, env, 5)
            for name, ms in listing.items():
                print(f"{name:<34} median {ms:7.1f} ms with {n} unfinished jobs")
            c.kill([v.id for v in c.jobs()] or sleeper)  # a job's processes outlive `xce down`
    finally:
        xce(sd, "down")


if __name__ == "__main__":
    main()
