"""`xce up --demo`: a mix of real jobs whose usage lands under, at, above and across
their reservations, so every colour of the console shows within the first minute.

    above   uses 3x its reservation                    -> red (overage)
    limit   grows past its 250 MB memory limit at 5 s  -> killed: EXIT with its reason
    idle    uses 2% of 1 GB                            -> yellow (a small share), idle slack
    across  grows 50 -> 150 -> 350 MB, past its 250 MB at 16 s -> turns red
    decay   300 MB reservation decaying to 0 over 30 s, uses 100 MB -> red from 20 s
    at      uses 95%; under uses 15% (yellow); short is DONE after 5 s
Jobs are short (30 s) and ordered so that even a laptop whose one host has two
slots shows overage, an EXIT, low use and a crossing within the first minute
(the rest wait PEND with their reason).  Each round is submitted again when the
previous one has ended.

Lazy imports: the demo's client and job programs load only for `xce demo`.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

DEMO: list[tuple[str, str, list[str], dict[str, Any]]] = [
    # (name, rusage, memhog steps MB:SECONDS, extra job fields)
    ("above", "rusage[mem=100M]", ["300:30"], {}),
    ("limit", "rusage[mem=100M]", ["50:5", "300:20"], {"mem_limit": "250M"}),
    ("idle", "rusage[mem=1G]", ["20:30"], {}),
    ("across", "rusage[mem=250M]", ["50:8", "150:8", "350:14"], {}),
    ("decay", "rusage[mem=300M:duration=30s:decay=1]", ["100:30"], {}),
    ("at", "rusage[mem=200M]", ["190:30"], {}),
    ("under", "rusage[mem=400M]", ["60:30"], {}),
    ("short", "rusage[mem=50M]", ["40:5"], {}),
]


def demo_jobs() -> list[dict[str, Any]]:
    return [{"command": [sys.executable, "-m", "xce.jobs.memhog", *steps], "name": f"demo-{name}",
             "resreq": rusage, "env": dict(os.environ), **extra} for name, rusage, steps, extra in DEMO]


def run_demo(state_dir: Path, rounds: int = 1000) -> None:
    from xce.client import Client
    from xce.core.errors import XceError

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
                c.wait(c.submit_many(demo_jobs()))
        except XceError:
            time.sleep(1)
