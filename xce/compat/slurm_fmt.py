"""Slurm's output shapes: squeue ``-o``/``-O``, sacct's columns, sinfo, scontrol; hostlists. Pure.

Each field is one entry of a table (header, how it reads a JobView), shared by
squeue's ``%`` letters and ``-O`` names where Slurm shares them.  States, reasons
and memory come from mapping.py.
"""

from __future__ import annotations

import time

from xce.compat import mapping
from xce.compat.session import Refused
from xce.core.jobids import element_id, split_id

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: the commands start in ms
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    Getter = Callable[[Any], str]


def hostlist(hosts: Sequence[str]) -> str:
    """``node[1-3]``: Slurm's compressed list (xce/core/hostlist.py, loaded when a listing needs it:
    it imports re, and sbatch imports this module)."""
    from xce.core.hostlist import compress  # lazy: re, which sbatch's start-up does without

    return compress(list(hosts))


def elapsed(v: Any, now: float | None = None) -> float:
    if not v.start_time:
        return 0.0
    return max(0.0, (v.end_time or now or time.time()) - v.start_time)


def squeue_time(seconds: float) -> str:
    """``%M``: ``M:SS``, ``H:MM:SS``, ``D-HH:MM:SS``."""
    s = int(seconds)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}-{h:02d}:{m:02d}:{s:02d}"
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def sacct_time(seconds: float) -> str:
    """sacct's Elapsed: ``HH:MM:SS``, ``D-HH:MM:SS``."""
    s = int(seconds)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return (f"{d}-" if d else "") + f"{h:02d}:{m:02d}:{s:02d}"


def iso(t: float | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t)) if t else "Unknown"


def _nodes(v: Any) -> str:
    return hostlist(v.hosts) if v.hosts else ""


def _reason_or_nodes(v: Any) -> str:
    return f"({mapping.slurm_reason(v.state, v.reason)})" if v.state in ("PEND", "PSUSP") else _nodes(v)


def _limit(v: Any) -> str:
    """squeue ``%l``: the run limit as ``%M`` writes times, UNLIMITED without one."""
    return "UNLIMITED" if v.run_limit is None else squeue_time(v.run_limit)


def _sacct_limit(v: Any) -> str:
    """sacct Timelimit: as Elapsed writes times, UNLIMITED without one."""
    return "UNLIMITED" if v.run_limit is None else sacct_time(v.run_limit)


# Each field: its header, how it reads a JobView, and the JobView fields it reads (a listing
# asks the controller for these only; tests/test_compat_mapping.py checks them).
_COMMON: dict[str, tuple[str, Getter, tuple[str, ...]]] = {
    "jobid": ("JOBID", lambda v: getattr(v, "folded", None) or mapping.slurm_id(v.id), ("id",)),
    "name": ("NAME", lambda v: v.name, ("name",)),
    "user": ("USER", lambda v: v.user, ("user",)),
    "account": ("ACCOUNT", lambda v: mapping.account_of(v.project), ("project",)),
    "partition": ("PARTITION", lambda v: mapping.partition_of(v.queue), ("queue",)),
    "st": ("ST", lambda v: mapping.slurm_state(v.state, v.reason).short, ("state", "reason")),
    "state": ("STATE", lambda v: mapping.slurm_state(v.state, v.reason).long, ("state", "reason")),
    "time": ("TIME", lambda v: squeue_time(elapsed(v)), ("start_time", "end_time")),
    "limit": ("TIME_LIMIT", _limit, ("run_limit",)),
    "nodes": ("NODES", lambda v: str(len(v.hosts) or 1), ("hosts",)),
    "reason_nodes": ("NODELIST(REASON)", _reason_or_nodes, ("state", "reason", "hosts")),
    "cpus": ("CPUS", lambda v: str(v.slots), ("slots",)),
    "mem": ("MIN_MEMORY", lambda v: mapping.slurm_mem(v.mem_reserved), ("mem_reserved",)),
    "nodelist": ("NODELIST", _nodes, ("hosts",)),
    "reason": ("REASON", lambda v: mapping.slurm_reason(v.state, v.reason), ("state", "reason")),
    "exit": ("EXIT_CODE", lambda v: mapping.slurm_exit_code(v.exit_code, v.signal), ("exit_code", "signal")),
    "submit": ("SUBMIT_TIME", lambda v: iso(v.submit_time), ("submit_time",)),
    "start": ("START_TIME", lambda v: iso(v.start_time), ("start_time",)),
    "end": ("END_TIME", lambda v: iso(v.end_time), ("end_time",)),
}
SQUEUE_LETTERS = {"i": "jobid", "A": "jobid", "j": "name", "u": "user", "a": "account", "P": "partition", "t": "st",
                  "T": "state", "M": "time", "l": "limit", "D": "nodes", "R": "reason_nodes",
                  "C": "cpus", "m": "mem", "N": "nodelist", "r": "reason", "V": "submit", "S": "start",
                  "e": "end"}
SQUEUE_NAMES = {"jobid": "jobid", "jobarrayid": "jobid", "name": "name", "username": "user", "account": "account",
                "partition": "partition", "statecompact": "st", "state": "state", "timeused": "time",
                "timelimit": "limit", "numnodes": "nodes", "numcpus": "cpus", "nodelist": "nodelist",
                "reason": "reason", "minmemory": "mem", "exitcode": "exit", "submittime": "submit",
                "starttime": "start", "endtime": "end"}
SQUEUE_DEFAULT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
SQUEUE_LONG = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"  # -l (its TIME_LIMIT header cut to TIME_LIMI)
_PCT = r"%(\.)?(\d+)?([a-zA-Z])"  # compiled where used: sbatch imports this module and must not load re


def _cell(text: str, width: int | None, right: bool) -> str:
    if width is None:
        return text
    text = text[:width]
    return text.rjust(width) if right else text.ljust(width)


# ---- job arrays: pending elements folded into one row, as Slurm lists them -------------------

class Pending:
    """A pending element (or, with ``folded``, all of an array's) read through another element's
    fields: elements share their spec, and one without a Job yet has no view of its own."""

    def __init__(self, like: Any, job_id: int, folded: str = "", reason: str = "", held: bool = False) -> None:
        self._like = like
        self.id = job_id
        self.folded = folded
        self.state, self.hosts = "PSUSP" if held else "PEND", []  # held: the array's (sbatch -H, scontrol hold)
        self.reason = reason or (getattr(like, "reason", "") if like.state == "PEND" else "")
        self.start_time = self.end_time = self.exit_code = self.signal = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._like, name)


class _Summary:
    """An array with no element in the listing: what its summary says, the rest left empty."""

    def __init__(self, a: Any) -> None:
        self.id, self.name, self.user, self.queue, self.state, self.reason = a.id, a.name, a.user, a.queue, "PEND", ""
        self.slots, self.run_limit, self.mem_reserved, self.submit_time, self.hosts = 1, None, 0, None, []
        self.project, self.mem_peak = "", 0


def fold_arrays(views: Sequence[Any], arrays: Sequence[Any], *, each: bool, only: set[int] | None = None) -> list[Any]:
    """The listing with each array's pending elements, materialised (PEND views) or not (its
    summary's ``unstarted``), as one row ``A_[4-10%2]`` (``each``: a row per element, squeue -r);
    ``only``: the element ids asked for (squeue -j A_I), each shown alone."""
    by_array = {a.id: a for a in arrays}
    rows: list[Any] = []
    pending: dict[int, list[int]] = {}
    like: dict[int, Any] = {}
    for v in views:
        array, index = split_id(v.id)
        if index is None or array not in by_array:
            rows.append(v)
            continue
        like.setdefault(array, v)
        if v.state == "PEND":
            like[array] = v
            pending.setdefault(array, []).append(index)
        else:
            rows.append(v)
    for a in by_array.values():
        indices = sorted({*pending.get(a.id, ()), *_unstarted(a)})
        if only is not None:
            indices = [i for i in indices if element_id(a.id, i) in only or a.id in only]
        if not indices:
            continue
        template = like.get(a.id) or _Summary(a)
        active = sum(n for state, n in a.counts.items() if state not in ("PEND", "PSUSP", "DONE", "EXIT"))
        held = mapping.ARRAY_LIMIT if a.limit and active >= a.limit else ""
        stopped = bool(getattr(a, "held", False))
        if each or only is not None and a.id not in only:
            rows += [Pending(template, element_id(a.id, i), reason=held, held=stopped) for i in indices]
            continue
        text = _index_text(indices) + (f"%{a.limit}" if a.limit else "")
        rows.append(Pending(template, element_id(a.id, indices[0]), f"{a.id}_[{text}]", held, stopped))
    return sorted(rows, key=lambda v: split_id(v.id)[0] << 32 | (split_id(v.id)[1] or 0))


def _unstarted(a: Any) -> Sequence[int]:
    """An array's elements not yet materialised (its summary's ``1-3,7``), as indices."""
    if not a.unstarted:
        return ()
    # lazy: arrays.py loads msgspec (~20 ms of a listing), so only a listing with such elements pays
    from xce.core.jobspec.arrays import ARRAY_SIZE_CAP, parse_index_list

    return parse_index_list(a.unstarted, where="unstarted", min_index=0, max_size=ARRAY_SIZE_CAP)


def _index_text(indices: list[int]) -> str:
    """Sorted indices -> ``1-3,7,9-10``, as Slurm writes an array's task list."""
    parts, start = [], indices[0]
    for a, b in zip(indices, indices[1:] + [None]):
        if b != a + 1:
            parts.append(str(start) if start == a else f"{start}-{a}")
            start = b
    return ",".join(parts)


def _format_parts(fmt: str) -> tuple[list[tuple[str, str, int | None, bool]], str]:
    """``-o "%.18i %t"`` -> (literal before, field, width, right-aligned) per ``%`` field, and the tail."""
    import re  # lazy: see _PCT

    parts: list[tuple[str, str, int | None, bool]] = []
    pos = 0
    for m in re.finditer(_PCT, fmt):
        if m.group(3) not in SQUEUE_LETTERS:
            raise Refused(f"--format: %{m.group(3)} is not supported by this XCE "
                          f"({' '.join('%' + k for k in SQUEUE_LETTERS)})")
        parts.append((fmt[pos:m.start()], SQUEUE_LETTERS[m.group(3)],
                      int(m.group(2)) if m.group(2) else None, bool(m.group(1))))
        pos = m.end()
    return parts, fmt[pos:]


def _field_cols(spec: str) -> list[tuple[str, int]]:
    """``-O JobArrayID,StateCompact,Reason[:width]`` -> (field, width) per column."""
    cols: list[tuple[str, int]] = []
    for item in spec.split(","):
        name, _, width = item.strip().partition(":")
        key = SQUEUE_NAMES.get(name.lower())
        if key is None:
            raise Refused(f"--Format: {name} is not supported by this XCE ({','.join(sorted(SQUEUE_NAMES))})")
        cols.append((key, int(width.lstrip(".")) if width.lstrip(".").isdigit() else 20))
    return cols


def squeue_reads(fmt: str | None, spec: str | None) -> set[str]:
    """The JobView fields an ``-o`` format (or an ``-O`` spec) reads."""
    keys = [k for k, _ in _field_cols(spec)] if spec is not None else \
        [p[1] for p in _format_parts(fmt or SQUEUE_DEFAULT)[0]]
    return {r for k in keys for r in _COMMON[k][2]}


def squeue_format(views: Sequence[Any], fmt: str, header: bool) -> str:
    """``-o "%.18i %t"``: literal text kept, each ``%[.][width]X`` a field."""
    parts, tail = _format_parts(fmt)

    def line(get: Callable[[str], str]) -> str:
        return "".join(lit + _cell(get(key), w, right) for lit, key, w, right in parts if key) + tail

    rows = [line(lambda k: _COMMON[k][0])] if header else []
    rows += [line(lambda k, v=v: _COMMON[k][1](v)) for v in views]
    return "".join(r.rstrip() + "\n" for r in rows)


def squeue_fields(views: Sequence[Any], spec: str, header: bool) -> str:
    """``-O JobArrayID,StateCompact,Reason[:width]``: fields padded to 20 (or their width)."""
    cols = _field_cols(spec)

    def line(get: Callable[[str], str]) -> str:
        return "".join(get(k)[:w - 1].ljust(w - 1) + " " for k, w in cols).rstrip() + "\n"

    rows = [line(lambda k: _COMMON[k][0])] if header else []
    return "".join(rows + [line(lambda k, v=v: _COMMON[k][1](v)) for v in views])


# Each sacct field: its width, how it reads a JobView, and the JobView fields it reads (sacct asks
# the controller for these only; tests/test_compat_mapping.py checks them).
SACCT: dict[str, tuple[int, Getter, tuple[str, ...]]] = {
    "jobid": (12, lambda v: getattr(v, "folded", None) or mapping.slurm_id(v.id), ("id",)),
    "jobidraw": (12, lambda v: str(v.id), ("id",)),
    "jobname": (10, lambda v: v.name, ("name",)),
    "partition": (10, lambda v: mapping.partition_of(v.queue), ("queue",)),
    "account": (10, lambda v: mapping.account_of(v.project), ("project",)),
    "user": (9, lambda v: v.user, ("user",)),
    "alloccpus": (10, lambda v: str(v.slots if v.hosts else 0), ("slots", "hosts")),
    "ncpus": (10, lambda v: str(v.slots), ("slots",)),
    "state": (10, lambda v: mapping.slurm_state(v.state, v.reason).long, ("state", "reason")),
    "exitcode": (8, lambda v: mapping.slurm_exit_code(v.exit_code, v.signal), ("exit_code", "signal")),
    "elapsed": (10, lambda v: sacct_time(elapsed(v)), ("start_time", "end_time")),
    "elapsedraw": (10, lambda v: str(int(elapsed(v))), ("start_time", "end_time")),
    "timelimit": (10, _sacct_limit, ("run_limit",)),
    "maxrss": (10, lambda v: mapping.slurm_mem(v.mem_peak) if v.mem_peak else "", ("mem_peak",)),
    "reqmem": (10, lambda v: mapping.slurm_mem(v.mem_reserved), ("mem_reserved",)),
    "nodelist": (15, lambda v: _nodes(v) or "None assigned", ("hosts",)),
    "nnodes": (8, lambda v: str(len(v.hosts)), ("hosts",)),
    "submit": (19, lambda v: iso(v.submit_time), ("submit_time",)),
    "start": (19, lambda v: iso(v.start_time), ("start_time",)),
    "end": (19, lambda v: iso(v.end_time), ("end_time",)),
    "reason": (20, lambda v: mapping.slurm_reason(v.state, v.reason), ("state", "reason")),
}
SACCT_HEADERS = {"jobid": "JobID", "jobidraw": "JobIDRaw", "jobname": "JobName", "partition": "Partition",
                 "account": "Account", "user": "User", "alloccpus": "AllocCPUS", "ncpus": "NCPUS",
                 "state": "State", "exitcode": "ExitCode", "elapsed": "Elapsed", "elapsedraw": "ElapsedRaw",
                 "timelimit": "Timelimit", "maxrss": "MaxRSS", "reqmem": "ReqMem", "nodelist": "NodeList",
                 "nnodes": "NNodes", "submit": "Submit", "start": "Start", "end": "End", "reason": "Reason"}
SACCT_DEFAULT = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode"


def _sacct_cols(fmt: str) -> list[tuple[str, int]]:
    """``JobID,State%20`` -> (field, width) per column."""
    cols: list[tuple[str, int]] = []
    for item in fmt.replace(" ", ",").split(","):
        if not item:
            continue
        name, _, width = item.partition("%")
        key = name.lower()
        if key not in SACCT:
            raise Refused(f"--format: {name} is not supported by this XCE ({','.join(SACCT_HEADERS.values())})")
        cols.append((key, int(width) if width.isdigit() else SACCT[key][0]))
    return cols


def sacct_reads(fmt: str) -> set[str]:
    """The JobView fields a sacct format reads."""
    return {r for k, _ in _sacct_cols(fmt) for r in SACCT[k][2]}


def sacct_rows(views: Sequence[Any], fmt: str, header: bool, sep: str | None, trailing: bool) -> str:
    """sacct's table (right-justified, dashes under the header) or ``|``-separated rows."""
    cols = _sacct_cols(fmt)
    heads = [SACCT_HEADERS[k] for k, _ in cols]
    rows = [[SACCT[k][1](v) for k, _ in cols] for v in views]
    if sep is not None:
        end = sep if trailing else ""
        return "".join(sep.join(r) + end + "\n" for r in ([heads] if header else []) + rows)

    def fit(text: str, w: int) -> str:
        return text.rjust(w) if len(text) <= w else text[:w - 1] + "+"

    lines = [[fit(h, w) for h, (_, w) in zip(heads, cols)], ["-" * w for _, w in cols]] if header else []
    lines += [[fit(c, w) for c, (_, w) in zip(r, cols)] for r in rows]
    return "".join(" ".join(line) + " \n" for line in lines)


def _node_state(h: Any) -> str:
    if h.state == "unavail":
        return "down"
    if h.state == "closed":
        return "drain"
    if h.slots_used == 0:
        return "idle"
    return "alloc" if h.slots_used >= h.slots_total else "mix"


def _partitions(queues: Any, partitions: Sequence[str] | None) -> list[tuple[str, str]]:
    """(partition as shown, ``*`` for the default queue) of the queues asked for (all: None)."""
    return [(mapping.partition_of(q.name), "*" if q.name == queues.default else "") for q in queues.queues
            if partitions is None or mapping.partition_of(q.name) in partitions]


def sinfo_rows(queues: Any, hosts: Sequence[Any], header: bool, partitions: Sequence[str] | None = None) -> str:
    """sinfo's default: a line per partition and node state; every XCE host serves every queue."""
    lines = ["PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST"] if header else []
    by_state: dict[str, list[str]] = {}
    for h in hosts:
        by_state.setdefault(_node_state(h), []).append(h.name)
    for name, mark in _partitions(queues, partitions):
        for state, names in by_state.items():
            lines.append(f"{name + mark:<9} {'up':>5} {'infinite':>10} {len(names):>6} {state:>6} {hostlist(names)}")
    return "".join(line + "\n" for line in lines)


def sinfo_nodes(queues: Any, hosts: Sequence[Any], header: bool, partitions: Sequence[str] | None = None) -> str:
    """sinfo -N: a line per node and partition."""
    lines = ["NODELIST   NODES PARTITION STATE"] if header else []
    for h in hosts:
        lines += [f"{h.name:<10} {1:>5} {name + mark:>9} {_node_state(h)}" for name, mark in _partitions(queues, partitions)]
    return "".join(line + "\n" for line in lines)


def _cpus(v: Any) -> int:
    return getattr(v, "cpus_per_task", 1) or 1


def _warning(v: Any) -> str:
    """`` Signal=B:USR1@55``: the job's --signal as sbatch takes it ("" without one)."""
    sig = getattr(v, "warn_signal", 0)
    if not sig:
        return ""
    import signal  # lazy: signal's enums only for a job with --signal (the listings start in ms)

    try:
        name = signal.Signals(sig).name.removeprefix("SIG")
    except ValueError:
        name = str(sig)
    return f" Signal={'B:' if v.warn_to == 'batch' else ''}{name}@{v.warn_time:g}"


def scontrol_job(v: Any) -> str:
    st = mapping.slurm_state(v.state, v.reason)
    array, index = split_id(v.id)
    elem = "" if index is None else f" ArrayJobId={array} ArrayTaskId={index}"
    return (f"JobId={v.id}{elem} JobName={v.name}\n"
            f"   UserId={v.user} Account={mapping.account_of(v.project)} QOS=normal\n"
            f"   JobState={st.long} Reason={mapping.slurm_reason(v.state, v.reason)} Dependency=(null)\n"
            f"   ExitCode={mapping.slurm_exit_code(v.exit_code, v.signal)}\n"
            f"   RunTime={sacct_time(elapsed(v))} TimeLimit={_sacct_limit(v)}{_warning(v)}\n"
            f"   SubmitTime={iso(v.submit_time)} StartTime={iso(v.start_time)} EndTime={iso(v.end_time)}\n"
            f"   Partition={mapping.partition_of(v.queue)}\n"
            f"   NodeList={_nodes(v) or '(null)'}\n"
            f"   NumNodes={len(v.hosts) or 1} NumCPUs={v.slots} NumTasks={v.slots // _cpus(v)} "
            f"CPUs/Task={_cpus(v)}\n"
            f"   MinMemoryNode={mapping.slurm_mem(v.mem_reserved)}\n"
            f"   Command={' '.join(v.command)}")
