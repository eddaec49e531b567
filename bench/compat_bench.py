"""The LSF and Slurm commands as workflow tools call them: one process per command.

    python bench/compat_bench.py [--runs 30] [--jobs 10000] [--anchor DIR] [--loaded-runs 30] [--no-listings]
                                 [--installed VENV]
    (--jobs 0: start-up only)

On a fresh `xce up --detach --hosts 1 --slots-per-host 1` cluster, with the commands of
`xce compat path lsf|slurm`:

- ``bsub true`` and ``sbatch`` of a two-line script: median wall time of ``--runs`` processes
  (goal 20 ms), each through the script `xce compat path` writes (``#!python -S``: no site), with
  ``xce submit true`` (scripts/xce as pip installs it: site runs), ``python -c pass`` and
  ``python -S -c pass`` (no site: the interpreter's own start) of the same interpreter beside
  them, all interleaved, so the machine's load hits each alike; with ``--anchor DIR`` (an old
  tree: ``git worktree add DIR COMMIT``) also its ``bsub`` and ``sbatch`` through the scripts
  that tree's own `xce compat path` writes (its code, its script form), against this cluster;
  with ``--loaded-runs N``, the same start-up figures again once ``--jobs`` jobs are in the
  cluster (does the controller's load matter?); with ``--installed VENV`` (a venv made as
  README's first command makes it: ``python3 -m venv VENV && VENV/bin/pip install .``), also
  that venv's ``xce submit true`` and ``python -c pass``: `xce` as a user runs it, without the
  editable install's import hook that this tree's own venv runs at every start (~11 ms);
- with ``--jobs`` jobs in the cluster (one running, the rest pending behind it), the median
  of 5 ``bjobs -noheader -o 'jobid stat'``, ``bjobs -noheader`` (LSF's default columns) and
  ``squeue -h -o '%i %t'`` (goal 300 ms), ``squeue -h`` (Slurm's default columns), and
  ``xce jobs`` beside them (the same request through the same client).

It prints the date, the load average before and after, and one line per figure.
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


WORK = tempfile.mkdtemp()  # where the commands run: sbatch writes its slurm-N.out there


def wall_ms(argv: list[str], env: dict[str, str], stdin: str | None = None) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, input=stdin, capture_output=True, text=True, cwd=WORK)
    ms = (time.perf_counter() - t0) * 1000
    if r.returncode != 0:
        raise SystemExit(f"{argv} exited {r.returncode}: {r.stderr}")
    return ms


Cmd = tuple[list[str], "str | None"] | tuple[list[str], "str | None", dict[str, str]]


def medians(cmds: dict[str, Cmd], env: dict[str, str], runs: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(runs):  # interleaved: a load spike hits every command alike
        for name, (argv, stdin, *extra) in cmds.items():
            times[name].append(wall_ms(argv, {**env, **extra[0]} if extra else env, stdin))
    return {k: statistics.median(v) for k, v in times.items()}


def anchor_scripts(tree: str, into: Path) -> list[str]:
    """The anchor tree's own bsub and sbatch scripts, as its `xce compat path` writes them (its
    shims.py with its code on sys.path); they reach this cluster through XCE_STATE_DIR."""
    code = ("import sys; from pathlib import Path; from xce.compat import shims; "
            "[print(shims.ensure_bin(Path(sys.argv[1]), f)) for f in ('lsf', 'slurm')]")
    # cwd: the tree, since ``-c`` puts the working directory first on sys.path (this tree, run from here)
    dirs = subprocess.run([sys.executable, "-c", code, str(into)], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": tree}, cwd=tree).stdout.split()
    scripts = [str(Path(dirs[0]) / "bsub"), str(Path(dirs[1]) / "sbatch")]
    if not all(repr(os.path.abspath(tree)) in Path(s).read_text() for s in scripts):
        raise SystemExit(f"the anchor's scripts do not run {tree}'s code")
    return scripts


def xce_script() -> str:
    """The `xce` script pip installed beside this interpreter (scripts/xce; site runs first), else the module."""
    script = Path(sys.executable).parent / "xce"
    return str(script) if script.exists() else ""


def settle(sd: Path, idle: float = 0.05, deadline: float = 120.0) -> float:
    """Wait until the cluster's daemons together use under ``idle`` of a CPU over a second (after
    a fill, the scheduler and the controller's compaction are busy for a while); the seconds waited."""
    import json

    pids = json.loads((sd / "up.json").read_text())["daemons"].values()
    tick = os.sysconf("SC_CLK_TCK")

    def cpu() -> float:
        total = 0
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rpartition(")")[2].split()
                total += int(fields[11]) + int(fields[12])  # utime, stime
            except OSError:
                pass
        return total / tick

    t0 = time.monotonic()
    while time.monotonic() - t0 < deadline:
        before = cpu()
        time.sleep(1.0)
        if cpu() - before < idle:
            break
    return time.monotonic() - t0


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--anchor", help="an old tree (git worktree add DIR COMMIT): its bsub and sbatch beside")
    ap.add_argument("--loaded-runs", type=int, default=0,
                    help="also time the start-up with --jobs in the cluster, this many processes each")
    ap.add_argument("--no-listings", action="store_true", help="skip bjobs/squeue (start-up figures only)")
    ap.add_argument("--installed", help="a venv with a regular install (pip install .): its xce submit beside")
    a = ap.parse_args()
    sd = Path(tempfile.mkdtemp()) / "xce"
    xce(sd, "up", "--detach", "--hosts", "1", "--slots-per-host", "1", "--mem-per-host", "4G")
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}, load average {load()} (1, 5, 15 min), {os.cpu_count()} CPUs,"
          f" {sys.executable} (Python {sys.version.split()[0]})")
    try:
        env = {k: v for k, v in os.environ.items() if k != "XCE_STATE_DIR"}
        bins = [Path(xce(sd, "compat", "path", f).strip()) for f in ("lsf", "slurm")]
        env["PATH"] = ":".join([*map(str, bins), env["PATH"]])
        old = anchor_scripts(a.anchor, Path(tempfile.mkdtemp())) if a.anchor else []
        submit_cmd = [xce_script()] if xce_script() else [sys.executable, "-m", "xce.cli.main"]
        with Client(state_dir=sd, timeout=60) as c:
            sleeper = c.submit_many([{"command": ["sleep", "3600"]}])  # holds the one slot: the rest pend
            anchor: dict[str, Cmd] = {} if not a.anchor else {
                "bsub true (anchor tree)": ([old[0], "true"], None, {"XCE_STATE_DIR": str(sd)}),
                "sbatch script (anchor tree)": ([old[1]], "#!/bin/sh\ntrue\n", {"XCE_STATE_DIR": str(sd)})}
            startup: dict[str, Cmd] = {
                "bsub true": (["bsub", "true"], None),
                "sbatch script": (["sbatch"], "#!/bin/sh\ntrue\n"),
                **anchor,
                "xce submit true": ([*submit_cmd, "--state-dir", str(sd), "submit", "true"], None),
                "python -c pass": ([sys.executable, "-c", "pass"], None),
                **({} if not a.installed else {
                    "xce submit true (regular install)": ([str(Path(a.installed) / "bin" / "xce"), "--state-dir",
                                                           str(sd), "submit", "true"], None),
                    "python -c pass (regular install)": ([str(Path(a.installed) / "bin" / "python"), "-c", "pass"],
                                                         None)}),
                # without site: the interpreter's own start, no .pth files (an editable install's finder)
                "python -S -c pass": ([sys.executable, "-S", "-c", "pass"], None)}
            n = len(c.jobs())
            for name, ms in medians(startup, env, a.runs).items():
                print(f"{name:<34} median {ms:7.1f} ms over {a.runs} processes, {n} unfinished jobs before")
            print(f"load average after the start-up runs: {load()}")
            if a.jobs <= 0:
                c.kill([v.id for v in c.jobs()] or sleeper)
                return
            left = a.jobs - len(c.jobs(all=True))
            for start in range(0, max(0, left), 1000):
                c.submit_many([{"command": ["true"]}] * min(1000, left - start))
            n = len(c.jobs())
            print(f"{n} unfinished jobs; the daemons settled in {settle(sd):.0f} s; load average {load()}")
            if a.loaded_runs:  # the same start-up with the queue full: does the controller's load matter?
                for name, ms in medians(startup, env, a.loaded_runs).items():
                    print(f"{name:<30} median {ms:7.1f} ms over {a.loaded_runs} processes, {n} unfinished jobs before")
                print(f"load average after the start-up runs with {n} jobs: {load()}")
            if a.no_listings:
                c.kill([v.id for v in c.jobs()] or sleeper)
                return
            listing = medians({"bjobs -noheader -o 'jobid stat'": (["bjobs", "-noheader", "-o", "jobid stat"], None),
                               "bjobs -noheader (default columns)": (["bjobs", "-noheader"], None),
                               "squeue -h -o '%i %t'": (["squeue", "-h", "-o", "%i %t"], None),
                               "squeue -h (default columns)": (["squeue", "-h"], None),
                               "xce jobs": ([sys.executable, "-m", "xce.cli.main", "--state-dir", str(sd), "jobs"],
                                            None)}, env, 5)
            for name, ms in listing.items():
                print(f"{name:<34} median {ms:7.1f} ms with {n} unfinished jobs")
            print(f"load average after the listings: {load()}")
            c.kill([v.id for v in c.jobs()] or sleeper)  # a job's processes outlive `xce down`
    finally:
        xce(sd, "down")


if __name__ == "__main__":
    main()
