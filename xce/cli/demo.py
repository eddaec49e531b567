"""`xce up --demo`: a mix of real jobs whose usage lands under, at, above and across
their reservations, so every colour of the console shows within the first minute."""

from __future__ import annotations

import sys
import time
from pathlib import Path

DEMO = [
    # (name, rusage, memhog steps)
    ("under", "rusage[mem=400M]", ["60:120"]),
    ("at", "rusage[mem=200M]", ["190:120"]),
    ("above", "rusage[mem=100M]", ["300:120"]),
    ("across", "rusage[mem=250M]", ["50:20", "150:20", "350:80"]),
    ("decay", "rusage[mem=300M:duration=2m:decay=1]", ["100:120"]),
    ("idle", "rusage[mem=1G]", ["20:120"]),
    ("short", "rusage[mem=50M]", ["40:5"]),
]


def run_demo(state_dir: Path, rounds: int = 1000) -> None:
    from xce.client import Client
    from xce.errors import XceError

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with Client(state_dir=state_dir, timeout=2) as c:
                if c.hosts():
                    break
        except XceError:
            pass
        time.sleep(0.5)
    for _ in range(rounds):
        try:
            with Client(state_dir=state_dir, timeout=5) as c:
                ids = c.submit_many([
                    {"command": [sys.executable, "-m", "xce.jobs.memhog", *steps], "name": f"demo-{name}",
                     "resreq": rusage} for name, rusage, steps in DEMO])
                c.wait(ids)
        except XceError:
            time.sleep(1)
