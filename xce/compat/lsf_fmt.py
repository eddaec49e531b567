"""LSF's output shapes: bjobs' default listing, ``-o`` columns, ``-json``, ``-l``; pure.

Each ``bjobs -o`` field is one entry of ``FIELDS``: its header, its default width and
how it reads a JobView (times as LSF prints them, memory in LSF_UNIT_FOR_LIMITS).
Missing values print ``-`` in columns and ``""`` in JSON, as LSF's do.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from xce.compat import mapping
from xce.compat.session import Refused


def lsf_time(t: float | None) -> str:
    """``Dec  1 22:36``: LSF's time in listings."""
    if not t:
        return ""
    return time.strftime("%b %e %H:%M", time.localtime(t))


def exec_hosts(v: Any) -> str:
    """``2*node1:node2``: slots per host, as LSF joins them ("" until placed)."""
    return ":".join(_exec_list(v))


def _exec_list(v: Any) -> list[str]:
    # host_slots is the allocation's, read off the job: no view (and its accounts) per job
    return [f"{n}*{h}" if n > 1 else h for h, n in zip(v.hosts, v.host_slots or [1] * len(v.hosts))]


def lsf_long_time(t: float | None) -> str:
    """``Wed Dec  3 16:33:01``: LSF's time in bjobs -l and bhist -l."""
    return time.strftime("%a %b %e %H:%M:%S", time.localtime(t)) if t else ""


def _pend_reason(v: Any) -> str:
    return v.reason if v.state == "PEND" else ""


def _exit_reason(v: Any) -> str:
    """``-o exit_reason``.  Empty for a job its owner killed: psij-python 0.9.11 fails every job
    it polls when any reason field of an entry is non-empty, and a cancel must stay a cancel
    (``bjobs -l`` still says TERM_OWNER)."""
    term = mapping.lsf_term(v.state, v.reason)
    return "" if term == "TERM_OWNER" else _term_text(v, term)


def _term_text(v: Any, term: str) -> str:
    if v.state != "EXIT":
        return ""
    return f"{term}: {v.reason}" if term else v.reason


def _exit_code(v: Any) -> str:
    if v.state != "EXIT":
        return ""
    return str(v.exit_code if v.exit_code is not None else 128 + (v.signal or 0))


class Field(NamedTuple):
    header: str
    width: int
    value: Callable[[Any], str]
    # The JobView fields ``value`` reads: a listing asks the controller for these only.
    # tests/test_compat_mapping.py checks each against a full view.
    reads: tuple[str, ...]


def reads_of(names: Sequence[str]) -> set[str]:
    """The JobView fields ``-o`` columns read."""
    return {r for n in names for r in FIELDS[n].reads}


FIELDS: dict[str, Field] = {
    "jobid": Field("JOBID", 7, lambda v: mapping.lsf_id(v.id), ("id",)),
    "stat": Field("STAT", 5, lambda v: v.state, ("state",)),
    "user": Field("USER", 7, lambda v: v.user, ("user",)),
    "queue": Field("QUEUE", 10, lambda v: v.queue, ("queue",)),
    "job_name": Field("JOB_NAME", 10, lambda v: mapping.lsf_name(v.id, v.name), ("id", "name")),
    "name": Field("JOB_NAME", 10, lambda v: mapping.lsf_name(v.id, v.name), ("id", "name")),
    "from_host": Field("FROM_HOST", 11, lambda v: v.submit_host, ("submit_host",)),
    "proj_name": Field("PROJ_NAME", 11, lambda v: v.project or DEFAULT_PROJECT, ("project",)),
    "exec_host": Field("EXEC_HOST", 11, exec_hosts, ("hosts", "host_slots")),
    "nexec_host": Field("NEXEC_HOST", 10, lambda v: str(len(v.hosts)) if v.hosts else "", ("hosts",)),
    "slots": Field("SLOTS", 5, lambda v: str(v.slots), ("slots",)),
    "nalloc_slot": Field("NALLOC_SLOT", 11, lambda v: str(v.slots) if v.hosts else "", ("slots", "hosts")),
    "command": Field("COMMAND", 15, lambda v: " ".join(v.command[2:] if v.command[:2] == ["/bin/sh", "-c"]
                                                        else v.command), ("command",)),
    "exit_code": Field("EXIT_CODE", 9, _exit_code, ("state", "exit_code", "signal")),
    "exit_reason": Field("EXIT_REASON", 11, _exit_reason, ("state", "reason")),
    "pend_reason": Field("PEND_REASON", 11, _pend_reason, ("state", "reason")),
    # LSF's KILL_REASON is the text of `bkill -C`, which XCE does not take: always empty.
    "kill_reason": Field("KILL_REASON", 11, lambda v: "", ()),
    "suspend_reason": Field("SUSPEND_REASON", 14, lambda v: v.reason if "SUSP" in v.state else "",
                            ("state", "reason")),
    "submit_time": Field("SUBMIT_TIME", 15, lambda v: lsf_time(v.submit_time), ("submit_time",)),
    "start_time": Field("START_TIME", 15, lambda v: lsf_time(v.start_time), ("start_time",)),
    "finish_time": Field("FINISH_TIME", 15, lambda v: lsf_time(v.end_time), ("end_time",)),
    "max_mem": Field("MAX_MEM", 10, lambda v: mapping.lsf_mb(v.mem_peak), ("mem_peak",)),
    "mem": Field("MEM", 10, lambda v: mapping.lsf_mb(v.mem_actual), ("mem_actual",)),
    "memlimit": Field("MEMLIMIT", 10, lambda v: mapping.lsf_mb(v.mem_limit), ("mem_limit",)),
    "run_time": Field("RUN_TIME", 12, lambda v: _run_time(v), ("start_time", "end_time")),
    "runtimelimit": Field("RUNTIMELIMIT", 12, lambda v: _run_limit(v), ("run_limit",)),
}
DEFAULT_PROJECT = "default"  # LSF's name for a job submitted without -P
DEFAULT_FIELDS = ("jobid", "user", "stat", "queue", "from_host", "exec_host", "job_name", "submit_time")
# What bjobs -l (long_listing) reads; tests/test_compat_mapping.py checks it against a full view.
LONG_READS = ("id", "name", "user", "state", "queue", "command", "submit_time", "submit_host", "cwd", "exclusive", "project",
              "pre_exec", "run_limit", "start_time", "slots", "hosts", "reason", "end_time", "exit_code", "signal", "mem_peak")


def _run_limit(v: Any) -> str:
    """-o runtimelimit: minutes with one decimal, as LSF writes RUNLIMIT ("" without one)."""
    return "" if v.run_limit is None else f"{v.run_limit / 60:.1f} min"


def _run_time(v: Any) -> str:
    if not v.start_time:
        return "0 second(s)"
    return f"{int((v.end_time or time.time()) - v.start_time)} second(s)"


class Columns(NamedTuple):
    names: tuple[str, ...]
    widths: tuple[int | None, ...]
    delimiter: str | None


def parse_o(spec: str) -> Columns:
    """``-o "jobid stat:8 exit_code delimiter=','"`` -> fields, widths, delimiter (names any case)."""
    names, widths, delim = [], [], None
    for word in spec.split():
        if word.lower().startswith("delimiter="):
            delim = word.split("=", 1)[1].strip("'\"")
            continue
        name, _, width = word.partition(":")
        key = name.lower()
        if key not in FIELDS:
            raise Refused(f'-o: field "{name}" is not supported by this XCE ({", ".join(sorted(FIELDS))})')
        names.append(key)
        widths.append(int(width.rstrip("LR")) if width.rstrip("LR").isdigit() else None)
    if not names:
        raise Refused("-o: no field given")
    return Columns(tuple(names), tuple(widths), delim)


def columns(views: Sequence[Any], cols: Columns, header: bool) -> str:
    getters = [FIELDS[n].value for n in cols.names]  # looked up once: 10,000 rows call them
    rows = [[get(v) or "-" for get in getters] for v in views]
    heads = [FIELDS[n].header for n in cols.names]
    if cols.delimiter is not None:
        lines = ([cols.delimiter.join(heads)] if header else []) + [cols.delimiter.join(r) for r in rows]
        return "\n".join(lines)
    widths = [w or max(FIELDS[n].width, len(FIELDS[n].header)) for n, w in zip(cols.names, cols.widths)]
    table = ([heads] if header else []) + rows
    return "\n".join(" ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table)


def default_listing(views: Sequence[Any], wide: bool, header: bool) -> str:
    """bjobs without -o: LSF's eight columns; -w keeps long names and host lists whole."""
    lines = ["JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   JOB_NAME   SUBMIT_TIME"] if header else []
    when: dict[int, str] = {}  # SUBMIT_TIME shows minutes: 10,000 jobs share a few of them
    for v in views:
        name, sub = mapping.lsf_name(v.id, v.name) or "-", v.submit_host or "-"
        # -w: the hosts joined on the line; else one per line, the further ones under the first
        hosts = [] if not v.hosts else [exec_hosts(v)] if wide else [cut(h, 11) for h in _exec_list(v)]
        if not wide:
            name, sub = cut(name, 10), cut(sub, 11)
        minute = int(v.submit_time) // 60 if v.submit_time else -1  # time zones are whole minutes off UTC
        shown = when.get(minute)
        if shown is None:
            shown = when[minute] = lsf_time(v.submit_time)
        lines.append(f"{mapping.lsf_id(v.id):<7} {v.user[:7]:<7} {v.state:<5} {v.queue[:10]:<10} {sub:<11} "
                     f"{hosts[0] if hosts else '':<11} {name:<10} {shown}")  # EXEC_HOST blank until placed
        lines += [" " * 45 + h for h in hosts[1:]]  # under EXEC_HOST
    return "\n".join(lines)


def cut(text: str, width: int) -> str:
    """LSF's cut of a long value in the default listing: ``*`` and its tail."""
    return text if len(text) <= width else "*" + text[-(width - 1):]


def to_json(records: Sequence[dict[str, str]]) -> str:
    """LSF's ``-json``: two-space indents, ``"KEY":"value"`` with no space, string values."""

    def rec(r: dict[str, str]) -> str:
        inner = ",\n".join(f"      {json.dumps(k)}:{json.dumps(val)}" for k, val in r.items())
        return "    {\n" + inner + "\n    }"

    body = ",\n".join(rec(r) for r in records)
    return ('{\n  "COMMAND":"bjobs",\n  "JOBS":' + str(len(records)) + ',\n  "RECORDS":[\n'
            + (body + "\n" if body else "") + "  ]\n}")


def json_record(v: Any, names: Sequence[str]) -> dict[str, str]:
    return {FIELDS[n].header: FIELDS[n].value(v) for n in names}


def _submit_details(v: Any) -> str:
    """The "Submitted from host" line's tail, in the order LSF's bjobs -l writes it (openlava's
    prtSubDetails: ..., Exclusive Execution, ..., Pre-execute Command <CMD>, ...)."""
    return (", Exclusive Execution" if v.exclusive else "") + \
        (f", Pre-execute Command <{v.pre_exec}>" if v.pre_exec else "")


def long_listing(v: Any) -> str:
    """bjobs -l: the lines tools and people read (not LSF's every line)."""
    cmd = FIELDS["command"].value(v)
    out = [f"Job <{mapping.lsf_job(v.id)}>, Job Name <{mapping.lsf_name(v.id, v.name)}>, User <{v.user}>, Project <{v.project or DEFAULT_PROJECT}>, Status <{v.state}>, "
           f"Queue <{v.queue}>, Command <{cmd}>",
           f"{lsf_long_time(v.submit_time)}: Submitted from host <{v.submit_host or '-'}>, CWD <{v.cwd or '-'}>"
           + _submit_details(v) + ";"]
    if v.run_limit is not None:
        out += ["", " RUNLIMIT", f" {v.run_limit / 60:.1f} min", ""]
    if v.start_time:
        out.append(f"{lsf_long_time(v.start_time)}: Started {v.slots} Task(s) on Host(s) "
                   + " ".join(f"<{h}>" for h in v.hosts) + ";")
    if v.state == "PEND" and v.reason:
        out += [" PENDING REASONS:", f" {v.reason};"]
    if v.end_time:
        what = "Done successfully." if v.state == "DONE" else f"Exited with exit code {_exit_code(v)}."
        out.append(f"{lsf_long_time(v.end_time)}: {what} {_term_text(v, mapping.lsf_term(v.state, v.reason))}".rstrip())
    if v.mem_peak:
        out.append(f" MEMORY USAGE:\n MAX MEM: {mapping.lsf_mb(v.mem_peak)};  AVG MEM: -")
    return "\n".join(out)
