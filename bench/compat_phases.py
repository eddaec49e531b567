"""Where a bsub or sbatch process spends its time, phase by phase (issue 15 "Numbers", issue 19 item 4).

    python bench/compat_phases.py [--runs 40] [--anchor DIR] [--jobs N]

On a fresh `xce up --detach --hosts 1 --slots-per-host 1` cluster (one `sleep` holds the slot,
so every submitted job pends; ``--jobs N``: N more pending behind it first), each run starts the interpreter as the script `xce compat path`
writes (``python -S``, the same sys.path), times the phases inside the process with
``time.time()`` stamps and the whole process from outside, and prints the median and the
25th percentile of each phase:

  start       exec to the script's first line (the interpreter's own start)
  imports     the script's lines: its pack read (xce/compat/packed.py), the command's module
              (xce/compat/lsf_submit.py or slurm_submit.py) and session.py
  parse       bsub_spec / sbatch_spec: options, script, environment (with the parser's imports)
  door        finding the cluster: state dir, cluster file, token, door path; the user; the key;
              the door's modules (xce/transport/door.py, xce/proto/lite.py, zmtp.py)
  connect     the Unix socket and ZMTP's greeting and READY both ways
  request     the SUBMIT sent, committed by the controller (Raft), the reply read
  print       the reply decoded, the line printed
  exit        from ``leave`` to the process reaped by the bench

The probe is the script `xce compat path` wrote, a stamp before its lines and wrappers around
the functions the command calls (``bsub_spec``/``sbatch_spec``, ``Dealer.connect``,
``Dealer.recv``, ``leave``), so the command runs its own code and its own imports, not a copy.
``python -S -c pass`` is timed beside it, interleaved; so is the anchor tree's command, whole.
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
from xce.compat import shims

# Runs inside the measured process: the script `xce compat path` wrote, with stamps (``probe``).
STAMPS = """from xce.compat import session, {module} as cmd
from xce.proto import zmtp
T.append(time.time())
def stamp(f, after=True):
    def g(*a, **k):
        if not after: T.append(time.time())
        r = f(*a, **k)
        if after: T.append(time.time())
        return r
    return g
cmd.{spec} = stamp(cmd.{spec})
zmtp.Dealer.connect = classmethod(stamp(zmtp.Dealer.connect.__func__, after=False))
zmtp.Dealer.connect = classmethod(stamp(zmtp.Dealer.connect.__func__))
zmtp.Dealer.recv = stamp(zmtp.Dealer.recv)
def stamped_leave(rc):
    T.append(time.time())
    os.write(2, (" ".join(map(repr, T)) + chr(10)).encode())
    session.leave(rc)
stamped_leave(main("""


def stamped(script: str, module: str, spec: str) -> str:
    """The script's own lines, a first stamp before them and the others around its calls."""
    lines = script.splitlines(keepends=True)
    body = "".join(lines[2:])  # after the #! line and the comment
    head, sep, call = body.rpartition("leave(main(")
    if not sep:
        raise SystemExit(f"unexpected script: {script}")
    return "import time; T = [time.time()]\n" + head + STAMPS.format(module=module, spec=spec) + call


PHASES = ("start", "imports", "parse", "door", "connect", "request", "print", "exit")
COMMANDS = {"bsub": ("lsf", "lsf_submit", "bsub_spec", ["true"], None),
            "sbatch": ("slurm", "slurm_submit", "sbatch_spec", [], "#!/bin/sh\ntrue\n")}


def xce(sd: Path, *args: str) -> str:
    return subprocess.run([sys.executable, "-m", "xce.cli.main", "--state-dir", str(sd), *args],
                          capture_output=True, text=True, check=True).stdout


def run(argv: list[str], stdin: str | None, env: dict[str, str]) -> tuple[float, list[float], float]:
    """(start, the process's stamps, end): wall clock, as the stamps are."""
    t0 = time.time()
    r = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    t1 = time.time()
    if r.returncode != 0:
        raise SystemExit(f"{argv} exited {r.returncode}: {r.stderr}")
    stamps = [float(x) for x in r.stderr.split()] if r.stderr.strip() else []
    if stamps and len(stamps) != len(PHASES) - 1:  # the door did not serve: no connect, no request
        raise SystemExit(f"{argv}: {len(stamps)} stamps, not {len(PHASES) - 1}: {r.stderr}")
    return t0, stamps, t1


def phases(t0: float, stamps: list[float], t1: float) -> list[float]:
    points = [t0, *stamps, t1]
    return [(b - a) * 1000 for a, b in zip(points, points[1:])]


def q(values: list[float], p: float) -> float:
    return sorted(values)[int(len(values) * p)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--anchor", help="an old tree (git worktree add DIR COMMIT): its bsub and sbatch, whole, beside")
    ap.add_argument("--jobs", type=int, default=0, help="pending jobs in the cluster before the runs")
    a = ap.parse_args()
    sd = Path(tempfile.mkdtemp()) / "xce"
    xce(sd, "up", "--detach", "--hosts", "1", "--slots-per-host", "1", "--mem-per-host", "4G")
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}, load average {os.getloadavg()}, {sys.executable}")
    probes = Path(tempfile.mkdtemp())
    env = {**os.environ, "XCE_STATE_DIR": str(sd)}
    try:
        xce(sd, "compat", "path", "lsf")
        xce(sd, "compat", "path", "slurm")
        old = {}
        if a.anchor:
            code = ("import sys; from pathlib import Path; from xce.compat import shims; "
                    "[print(shims.ensure_bin(Path(sys.argv[1]), f)) for f in ('lsf', 'slurm')]")
            # cwd: the tree, since ``-c`` puts the working directory first on sys.path
            dirs = subprocess.run([sys.executable, "-c", code, str(probes / "anchor")], capture_output=True, text=True,
                                  check=True, env={**os.environ, "PYTHONPATH": a.anchor}, cwd=a.anchor).stdout.split()
            old = {"bsub": str(Path(dirs[0]) / "bsub"), "sbatch": str(Path(dirs[1]) / "sbatch")}
            if not all(repr(os.path.abspath(a.anchor)) in Path(s).read_text() for s in old.values()):
                raise SystemExit(f"the anchor's scripts do not run {a.anchor}'s code")
        with Client(state_dir=sd, timeout=60) as c:
            sleeper = c.submit_many([{"command": ["sleep", "3600"]}])
            for start in range(0, a.jobs, 1000):
                c.submit_many([{"command": ["true"]}] * min(1000, a.jobs - start))
            for name, (flavor, module, spec, args, stdin) in COMMANDS.items():
                real = [str(shims.bin_dir(sd, flavor) / name), *args]
                probe = probes / name
                probe.write_text(stamped(Path(real[0]).read_text(), module, spec))
                cmds = {"probe": [sys.executable, "-S", str(probe), *args], "script": real,
                        "python -S -c pass": [sys.executable, "-S", "-c", "pass"]}
                if old:
                    cmds["anchor"] = [old[name], *args]
                got: dict[str, list[list[float]]] = {k: [] for k in cmds}
                for _ in range(a.runs):
                    for k, argv in cmds.items():
                        got[k].append(phases(*run(argv, stdin if k != "python -S -c pass" else None, env)))
                print(f"\n{name} ({a.runs} runs, {len(c.jobs())} unfinished jobs, load average now "
                      f"{os.getloadavg()[0]:.2f}): phase  median  p25  (ms)")
                for i, ph in enumerate(PHASES):
                    col = [r[i] for r in got["probe"]]
                    print(f"  {ph:<9} {statistics.median(col):6.2f} {q(col, .25):6.2f}")
                total = [sum(r) for r in got["probe"]]
                print(f"  {'total':<9} {statistics.median(total):6.2f} {q(total, .25):6.2f}   (the probe, whole)")
                for k in cmds:
                    if k != "probe":
                        col = [sum(r) for r in got[k]]
                        print(f"  {k:<18} {statistics.median(col):6.2f} {q(col, .25):6.2f}")
            c.kill(sleeper + [v.id for v in c.jobs()])
    finally:
        xce(sd, "down")


if __name__ == "__main__":
    main()
