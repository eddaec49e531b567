"""The reactors are pure: importing them needs no zmq and loads no transport, client or daemon."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
sys.modules["zmq"] = None  # any import of zmq now fails
import xce.reactors.table, xce.reactors.timers, xce.reactors.after_apply
loaded = [m for m in sys.modules if m.split(".")[:2] in
          (["xce", "transport"], ["xce", "client"], ["xce", "daemons"], ["xce", "worker"])]
print(loaded)
"""


def test_the_reactors_import_without_zmq_and_without_the_upper_layers() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
