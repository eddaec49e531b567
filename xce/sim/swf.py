"""Reading Standard Workload Format traces (the Parallel Workloads Archive's format).

One job per line, 18 whitespace-separated fields, ``-1`` for unknown; header lines start
with ``;`` and carry ``Key: value`` pairs (``MaxNodes``, ``MaxProcs``, ``Queue: N name``).
Gzip or plain, told apart by the file's first bytes.  Pure but for opening the file:
``parse`` takes lines, ``load`` a path.  A malformed line is an error naming the line.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from xce.core.errors import InvalidRequest

FIELDS = ("job", "submit", "wait", "run", "procs", "cpu", "used_mem", "req_procs", "req_time",
          "req_mem", "status", "user", "group", "exe", "queue", "partition", "prev_job", "think")


class TraceError(InvalidRequest):
    """A trace that cannot be read: the message names the file, line and field."""


class SwfJob(NamedTuple):
    """One trace line; times in seconds, memory in KB per processor, -1 unknown."""

    job: int
    submit: float
    wait: float
    run: float
    procs: int
    used_mem: float
    req_procs: int
    req_time: float
    req_mem: float
    status: int
    user: int
    queue: int
    exe: int = -1  # executable number: with user and queue, what right-sizing calls the same job


@dataclass(slots=True)
class SwfHeader:
    max_nodes: int | None = None
    max_procs: int | None = None
    queues: dict[int, str] = field(default_factory=dict)
    fields: dict[str, str] = field(default_factory=dict)  # every other Key: value, first seen


@dataclass(slots=True)
class Trace:
    header: SwfHeader
    jobs: list[SwfJob]
    name: str = ""


def _header_line(h: SwfHeader, text: str) -> None:
    key, sep, value = text.lstrip(";").partition(":")
    key, value = key.strip(), value.strip()
    if not sep or not key:
        return  # a comment, or a continuation line of a multi-line field
    if key == "Queue":
        num, _, name = value.partition(" ")
        if num.lstrip("-").isdigit():
            h.queues[int(num)] = name.strip() or num
        return
    if key in ("MaxNodes", "MaxProcs"):
        try:
            n = int(value.split()[0])
        except (ValueError, IndexError):
            return  # an archive header may say "MaxNodes: unknown"
        setattr(h, "max_nodes" if key == "MaxNodes" else "max_procs", n)
        return
    h.fields.setdefault(key, value)


def _job_line(text: str, where: str) -> SwfJob:
    parts = text.split()
    if len(parts) < 18:
        raise TraceError(f"{where}: {len(parts)} fields, SWF has 18")
    try:
        v = [float(x) for x in parts[:18]]
    except ValueError:
        bad = next(x for x in parts[:18] if not _is_number(x))
        raise TraceError(f"{where}: field {FIELDS[parts.index(bad)]!r} is {bad!r}, not a number") from None
    return SwfJob(job=int(v[0]), submit=v[1], wait=v[2], run=v[3], procs=int(v[4]), used_mem=v[6],
                  req_procs=int(v[7]), req_time=v[8], req_mem=v[9], status=int(v[10]), user=int(v[11]),
                  queue=int(v[14]), exe=int(v[13]))


def _is_number(x: str) -> bool:
    try:
        float(x)
    except ValueError:
        return False
    return True


def parse(lines: Iterable[str], name: str = "trace", limit: int | None = None) -> Trace:
    """Header and jobs from SWF text; ``limit`` stops after that many jobs."""
    h = SwfHeader()
    jobs: list[SwfJob] = []
    for n, line in enumerate(lines, 1):
        text = line.strip()
        if not text:
            continue
        if text.startswith(";"):
            _header_line(h, text)
            continue
        if limit is not None and len(jobs) >= limit:
            break
        jobs.append(_job_line(text, f"{name} line {n}"))
    return Trace(h, jobs, name)


def load(path: str | Path, limit: int | None = None) -> Trace:
    p = Path(path)
    try:
        with p.open("rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        opener = gzip.open if gz else open
        with opener(p, "rt", encoding="utf-8", errors="replace") as f:
            return parse(f, p.name, limit)
    except (OSError, EOFError) as e:
        raise TraceError(f"cannot read trace {p}: {e}") from None
