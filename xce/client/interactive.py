"""What `xce submit -K`/`-I` and ``bsub -K``/``-I`` do on the submitting side, once for both doors.

``wait_for_job`` (-K) waits for the end, as LSF's bsub -K says it, and gives the job's exit
code.  ``follow_job`` (-I) polls the job's worker for the tail of its stdout and stderr
(Client.peek) while it runs and writes what is new to this terminal, then the rest from the
files when this host can read them, and gives the job's exit code.  Polled, not pushed:
the worker keeps output in files, and a peek every FOLLOW_POLL_S is one small request.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from xce.core.errors import Unavailable
from xce.core.jobspec.filenames import lsf_filename

FOLLOW_POLL_S = 0.5   # -I asks the job's worker for its output this often
FOLLOW_WINDOW = 1 << 20  # the worker's PEEK_MAX: -I streams while the output fits in one peek


def job_exit_code(view: Any) -> int:
    """What -K and -I exit with: the job's exit code (0 for DONE; 1 for an EXIT without one)."""
    if view.state == "DONE":
        return 0
    return view.exit_code if view.exit_code else 1


def wait_for_job(c: Any, job_id: int) -> int:
    """-K: wait for the end, as bsub -K says it, and exit with the job's code."""
    print("<<Waiting for dispatch ...>>", file=sys.stderr, flush=True)
    view = c.wait([job_id])[0]
    print("<<Job is finished>>", file=sys.stderr, flush=True)
    return job_exit_code(view)


class Stream:
    """One output file followed through peeks: what was shown, and the part that is new."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self.shown = 0  # characters of the file's text written to ``out``
        self.stopped = ""  # why following stopped ("" while it goes on)

    def take(self, text: str, path: str) -> None:
        """``text``: the file's tail; the whole file while shorter than the window."""
        if self.stopped:
            return
        if len(text.encode()) >= FOLLOW_WINDOW:
            self.stopped = f"<<output over {FOLLOW_WINDOW >> 20} MiB: the rest is in {path}>>"
            print(self.stopped, file=sys.stderr, flush=True)
            return
        end = len(text) - 1 if text.endswith("\ufffd") else len(text)  # a character not yet whole
        if end > self.shown:
            self.out.write(text[self.shown:end])
            self.out.flush()
            self.shown = end

    def finish(self, path: str) -> None:
        """After the end: the rest from the file itself when this host can read it, else where it is."""
        if self.stopped or not path:
            return
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                self.out.write(f.read()[self.shown:])
                self.out.flush()
        except OSError:
            print(f"<<the rest of the output is in {path} on the job's host>>", file=sys.stderr, flush=True)


def follow_job(c: Any, job_id: int, spec: Any, cluster_dir: str) -> int:
    """-I: the job's stdout and stderr here while it runs (peek polled), then its exit code."""
    print("<<Waiting for dispatch ...>>", file=sys.stderr, flush=True)
    out, err = Stream(sys.stdout), Stream(sys.stderr)
    paths = ("", "")
    started = False
    while True:
        view = c.job(job_id)
        if view.state in ("DONE", "EXIT"):
            break
        if view.state == "RUN":
            try:
                r = c.peek(job_id, max_bytes=FOLLOW_WINDOW)
            except Unavailable:  # the host did not answer this time; the next poll asks again
                r = None
            if r is not None and not r.note:
                if not started:
                    print(f"<<Starting on {r.host}>>", file=sys.stderr, flush=True)
                    started = True
                paths = (r.stdout_path, r.stderr_path)
                out.take(r.stdout, r.stdout_path)
                if r.stderr_path:
                    err.take(r.stderr, r.stderr_path)
        time.sleep(FOLLOW_POLL_S)  # a poll of the job's worker, not a wait for an event
    known = output_paths(spec, job_id, view.hosts[0] if view.hosts else "", cluster_dir)
    out.finish(paths[0] or known[0])
    if paths[1] or known[1]:
        err.finish(paths[1] or known[1])
    return job_exit_code(view)


def output_paths(spec: Any, job_id: int, host: str, cluster_dir: str) -> tuple[str, str]:
    """Where the job's stdout and (its own) stderr went, as the worker resolves them (docs/jobs.md);
    without -o, a local cluster's worker directory (``xce up``), which only this host can read."""
    def resolve(name: str | None) -> str:
        return os.path.join(spec.cwd, lsf_filename(name, job_id, spec.index)) if name else ""

    out = resolve(spec.stdout) or os.path.join(cluster_dir, f"worker-{host}", "output", f"{job_id}.out")
    err = resolve(spec.stderr)
    return out, "" if err == out else err
