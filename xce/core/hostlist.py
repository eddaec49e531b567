"""Slurm's hostlists: ``node[1-3,5],login`` and back, and the order Slurm numbers a job's nodes in.

Slurm keeps a job's nodes sorted (by the name's stem, then its trailing number as a number:
node2 before node10), writes them compressed (SLURM_JOB_NODELIST, squeue's NODELIST) and
numbers them in that order (SLURM_NODEID).  ``order`` is that order, ``compress`` writes it,
``expand`` reads it back: ``expand(compress(h)) == order(h)``.  Pure: the worker's job
environment, srun's steps and the Slurm listings all use these.
"""

from __future__ import annotations

import re

_TAIL = re.compile(r"(.*?)(\d+)")


def _key(host: str) -> tuple[str, int, str]:
    m = _TAIL.fullmatch(host)
    return (m.group(1), int(m.group(2)), host) if m else (host, -1, host)


def order(hosts: list[str] | tuple[str, ...]) -> list[str]:
    """Each host once, as Slurm sorts a job's nodes (its node ids are indices into this)."""
    return sorted(dict.fromkeys(hosts), key=_key)


def compress(hosts: list[str] | tuple[str, ...]) -> str:
    """``node1,node3,node2`` -> ``node[1-3]``: Slurm's compressed form, in ``order``."""
    out: list[str] = []
    group: list[str] = []  # digits of the run of hosts with one stem, being gathered
    stem = ""

    def flush() -> None:
        if group:
            out.append(f"{stem}{group[0]}" if len(group) == 1 and "-" not in group[0] else f"{stem}[{','.join(group)}]")

    for h in order(hosts):
        m = _TAIL.fullmatch(h)
        if m is None:
            flush()
            group, stem = [], ""
            out.append(h)
            continue
        digits = m.group(2)
        if group and m.group(1) == stem:
            last = group[-1].rpartition("-")[2]
            if int(digits) == int(last) + 1 and (len(digits) == len(last) or not digits.startswith("0")):
                first = group[-1].partition("-")[0]
                group[-1] = f"{first}-{digits}"
            else:
                group.append(digits)
            continue
        flush()
        group, stem = [digits], m.group(1)
    flush()
    return ",".join(out)


def expand(text: str) -> list[str]:
    """``node[1-3,5],login`` -> each name, in the order written; a bad range is ValueError."""
    out: list[str] = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]*)\])?([^,]*)", text):
        prefix, ranges, suffix = m.group(1), m.group(2), m.group(3)
        if ranges is None:
            out.append(prefix + suffix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            if not lo.isdigit() or hi and not hi.isdigit():
                raise ValueError(f"hostlist {text!r}: {part!r} is not a number or a range N-M")
            out += [f"{prefix}{str(n).zfill(len(lo))}{suffix}" for n in range(int(lo), int(hi or lo) + 1)]
    return out
