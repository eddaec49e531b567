"""What bsub loads before it reaches the cluster: the interpreter started without site (the
scripts' ``#!python -S``, xce/compat/shims.py) and the stdlib modules a submission needs, no
more.  re (with enum, functools and collections), typing and msgspec each cost the command
milliseconds of a ~10 ms interpreter (docs/benchmarks.md "The front-ends' start-up")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from xce.compat import shims

HEAVY = {"re", "enum", "functools", "collections", "typing", "msgspec", "zmq", "site"}


def test_a_workflow_tools_bsub_parses_without_the_heavy_modules() -> None:
    """dask-jobqueue's options (-J -n -R -M -W -o -e -env) through the one builder, as the script runs it."""
    code = ("import sys; sys.path[0:1] = []; sys.path += %r\n"
            "from xce.compat.lsf import bsub_spec\n"
            "fields, _ = bsub_spec(['-J', 'dask', '-n', '2', '-R', 'rusage[mem=100] span[hosts=1]', '-M', '100',"
            " '-W', '1:30', '-o', 'o', '-e', 'e', '-env', 'all, FOO=1', 'true'], lambda: None)\n"
            "import xce.compat.fast, xce.transport.door\n"
            "assert fields['run_limit'] == 5400 and fields['mem_limit'] == 100 << 20, fields\n"
            "print(' '.join(sorted(set(sys.modules) & %r)))") % (shims.import_paths(), HEAVY)
    r = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=Path(__file__).parent)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [], f"bsub's start-up path loads {r.stdout.strip()}"
