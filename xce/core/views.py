"""User-facing shapes: the one vocabulary of the CLI's --json, REST, events and console.

Everything derived here comes from xce/core/accounting.py; no formula is written
twice.  The views are computed from the domain model (hard state) plus the
leader's soft state (latest usage, OS-available memory) and are what every door
shows.  Field names follow the design brief's "One vocabulary" section.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec

from xce.core import accounting
from xce.core.accounting import Account, HostTotals, Ledger
from xce.core.arrays import unmaterialised, unstarted
from xce.core.jobspec.depend import format_expr
from xce.core.model import ACTIVE, ArrayJob, Host, HostState, Job, JobSpec, JobState
from xce.core.placement import job_demand, total_mem
from xce.core.sched.order import OrderView
from xce.core.units import fmt_bytes


class JobAccountView(msgspec.Struct, kw_only=True):
    host: str
    slots: int
    mem_reserved: int
    mem_actual: int | None
    mem_peak: int
    mem_charged: int
    mem_slack: int
    mem_overage: int
    allocated: dict[str, int] = {}
    mem_asked: int = 0  # what the share was placed with; mem_reserved is the reservation in force (shrink.py)


class ArrayView(msgspec.Struct, kw_only=True):
    """One job array's summary (xce jobs -A): its elements by state, the unmaterialised as PEND."""

    id: int
    name: str
    user: str
    queue: str
    indices: str        # the index list as submitted ("1-100:2"; bjobs -A's ARRAY_SPEC), else the canonical
    limit: int | None   # %N
    elements: int
    counts: dict[str, int]
    held: bool = False  # stopped as a whole
    unstarted: str = ""  # index list of the pending elements without a Job yet (squeue/sacct fold them)


def array_view(arr: ArrayJob) -> ArrayView:

    spec = arr.spec.array
    assert spec is not None
    counts = {s: n for s, n in arr.counts.items() if n}
    if unmaterialised(arr):
        counts["PEND"] = counts.get("PEND", 0) + unmaterialised(arr)
    return ArrayView(id=arr.id, name=arr.spec.name, user=arr.spec.user, queue=arr.spec.queue, indices=spec.shown(),
                     limit=spec.limit, elements=spec.count, counts=counts, held=arr.held,
                     unstarted=unstarted(arr).text() if unmaterialised(arr) else "")




class JobView(msgspec.Struct, kw_only=True):
    id: int
    name: str
    user: str
    queue: str
    state: str
    slots: int
    hosts: list[str]
    command: list[str]
    resreq: str
    mem_reserved: int
    mem_actual: int | None
    mem_peak: int
    mem_charged: int
    mem_limit: int | None
    efficiency: float | None
    reason: str
    exit_code: int | None
    signal: int | None
    submit_time: float
    start_time: float | None
    end_time: float | None
    mem_slack_integral: float = 0.0
    accounts: list[JobAccountView] = []
    # What `xce jobs -l` shows of the spec besides (bjobs -l); appended with defaults.
    cwd: str = ""
    stdout: str | None = None
    stderr: str | None = None
    depend: str = ""                # the -w expression, canonical (depend.format_expr)
    priority: int = 0               # -sp
    run_limit: float | None = None  # seconds (-W, or the queue's)
    submit_host: str = ""           # where it was submitted from (LSB_SUB_HOST, bjobs FROM_HOST)
    script: bool = False            # a job script (its text is in the spec; command is [FILE, ARG ...])
    order: OrderView | None = None  # a pending job's place in the order, when asked (JobsRequest.order)
    mem_basis: str = ""             # how the leader sized its reservation at submit (xce/core/autosize.py)
    exclusive: bool = False         # -x: alone on its hosts (bjobs -l "Exclusive Execution")
    project: str = ""               # -P
    group: str = ""                 # -G
    run_estimate: float | None = None  # seconds (-We)
    array: str = ""                 # an element's array as -J names it: "sweep[1-1000]%50"
    evictions: int = 0              # times preempted or reclaimed (a queue's max_preempt counts them)
    pre_exec: str = ""              # -E (bjobs -l: "Pre-execute Command <CMD>")
    cpu_time: float = 0.0           # user+system seconds: the live accounts' so far, else the finish records' sum
    warn_signal: int = 0            # sbatch --signal, bsub -wa: sent warn_time s before the run limit (0: none)
    warn_time: float = 0.0
    warn_to: str = ""               # "" all its processes, "batch" its command, "steps" its launched tasks
    cpus_per_task: int = 1          # sbatch -c: its tasks are slots / this
    host_slots: list[int] = []      # slots on each of ``hosts``, in that order: the allocation's (bjobs EXEC_HOST)
    # Shrinking (docs/accounting.md): mem_reserved is the reservation in force; what the job asked
    # (was placed with), and the last move of its reservation in force: when, and what and why.
    mem_asked: int = 0
    mem_resized_time: float | None = None
    mem_resized: str = ""           # "shrunk on node1 to 120.0M: peak ..." / "restored on ..."; "" never moved


class HostView(msgspec.Struct, kw_only=True):
    name: str
    state: str
    slots_total: int
    slots_used: int
    mem_total: int
    mem_os_available: int
    mem_reserved: int
    mem_actual: int
    mem_slack: int
    mem_overage: int
    mem_charged: int
    mem_available: int
    mem_reclaimable: int = 0  # accounting's reclaimable(host): settled jobs' slack less the margin
    ncpus: int = 1
    last_seen: float | None = None
    virtual_total: dict[str, int] = {}
    virtual_used: dict[str, int] = {}
    attrs: dict[str, str | int | float] = {}  # what select[] reads of it: type, model, the site's attributes


def host_state(host: Host, totals: HostTotals) -> HostState:
    if host.unavail:
        return HostState.UNAVAIL
    if host.closed:
        return HostState.CLOSED
    if totals.allocated.get("slots", 0) >= host.slots_total:
        return HostState.FULL
    return HostState.OK


def host_view(host: Host, ledger: Ledger, os_available: int | None,
              last_seen: float | None = None, reclaimable: int = 0) -> HostView:
    t = ledger.host_totals(host.name)
    osa = accounting.os_figure(os_available, host.mem_total)
    return HostView(
        name=host.name, state=host_state(host, t).value, slots_total=host.slots_total,
        slots_used=t.allocated.get("slots", 0), mem_total=host.mem_total,
        mem_os_available=osa, mem_reserved=t.mem_reserved, mem_actual=t.mem_actual,
        mem_slack=t.mem_slack, mem_overage=t.mem_overage, mem_charged=t.mem_charged,
        mem_available=accounting.available_mem(osa, t), mem_reclaimable=reclaimable,
        ncpus=host.ncpus, last_seen=last_seen,
        virtual_total=dict(host.virtual),
        virtual_used={k: v for k, v in t.allocated.items() if k != "slots"},
        attrs={k: v for k, v in host.attrs.items() if k != "measure"},  # measure: how it measures, not what it is
    )


Figures = tuple[int, int | None, int, int]  # reserved, actual (None: unreported), peak, charged


def job_reason(job: Job) -> str:
    """Why it pends or ended, or why the system suspended it (the controller's reasons aside)."""
    return job.reason or (job.suspend_reason if job.state == JobState.SSUSP else "")


# The JobView fields that are the job's own, read straight off it: job_view takes them from
# here, and a JOBS request naming only these (bjobs -o 'jobid stat', squeue -o '%i %t') is
# answered without building a view per job (views_row).
OWN: dict[str, Callable[[Job], Any]] = {
    "id": lambda j: j.id, "name": lambda j: j.spec.name, "user": lambda j: j.spec.user,
    "queue": lambda j: j.spec.queue, "state": lambda j: j.state.value, "slots": lambda j: j.spec.slots,
    "hosts": lambda j: j.hosts, "command": lambda j: j.spec.command, "resreq": lambda j: j.spec.resreq,
    "mem_limit": lambda j: j.spec.mem_limit, "reason": job_reason, "exit_code": lambda j: j.exit_code,
    "signal": lambda j: j.signal, "submit_time": lambda j: j.submit_time,
    "start_time": lambda j: j.start_time, "end_time": lambda j: j.end_time, "cwd": lambda j: j.spec.cwd,
    "stdout": lambda j: j.spec.stdout, "stderr": lambda j: j.spec.stderr,
    "priority": lambda j: j.spec.priority, "run_limit": lambda j: j.spec.run_limit,
    "submit_host": lambda j: j.spec.submit_host, "script": lambda j: bool(j.spec.script),
    "depend": lambda j: format_expr(j.spec.depend) if j.spec.depend is not None else "",
    "mem_basis": lambda j: j.req.mem_basis, "exclusive": lambda j: j.spec.exclusive,
    "project": lambda j: j.spec.project, "group": lambda j: j.spec.group, "run_estimate": lambda j: j.spec.run_estimate,
    "array": lambda j: array_title(j.spec),
    "evictions": lambda j: j.evictions, "pre_exec": lambda j: j.spec.pre_exec,
    "warn_signal": lambda j: j.spec.warn_signal, "warn_time": lambda j: j.spec.warn_time,
    "warn_to": lambda j: j.spec.warn_to, "cpus_per_task": lambda j: j.spec.cpus_per_task,
    "host_slots": lambda j: [a.slots for a in j.allocs],
    "mem_resized_time": lambda j: j.resized.time if j.resized is not None else None,
    "mem_resized": lambda j: resized_text(j)}
# What a row may name: every JobView field but the pending order, which only full views carry.
ROW_FIELDS = frozenset(JobView.__struct_fields__) - {"order"}


def resized_text(job: Job) -> str:
    """The last move of the job's reservation in force, as `xce jobs -l` says it; "" if none."""
    r = job.resized
    return "" if r is None else f"{r.event} on {r.host} to {fmt_bytes(r.mem)}: {r.detail}"


def array_title(spec: JobSpec) -> str:
    """``sweep[1-1000:2]%50``: an element's array as ``-J`` named it; "" for any other job."""
    a = spec.array
    return "" if a is None else f"{spec.name}[{a.shown()}]" + (f"%{a.limit}" if a.limit is not None else "")


def row_fields_problem(fields: Sequence[str]) -> str | None:
    """Why ``fields`` cannot name a row's columns (None: they can)."""
    unknown = [f for f in fields if f not in ROW_FIELDS]
    if unknown:
        return f"jobs: no such job field {unknown[0]!r} (fields: {', '.join(sorted(ROW_FIELDS))})"
    return None


def job_view(job: Job, ledger: Ledger) -> JobView:
    accounts: list[JobAccountView] = []
    live = job.state in ACTIVE
    asked = {a.host: a.mem for a in job.allocs}
    if live:
        for acc in ledger.by_job.get(job.id, []):
            accounts.append(JobAccountView(
                host=acc.host, slots=acc.allocated.get("slots", 0), mem_reserved=acc.reserved,
                mem_actual=acc.actual, mem_peak=acc.peak, mem_charged=acc.charged,
                mem_slack=acc.slack, mem_overage=acc.used,
                allocated={k: v for k, v in acc.allocated.items() if k != "slots"}, mem_asked=asked.get(acc.host, 0)))
    else:
        for u in job.usage:
            slots = next((a.slots for a in job.allocs if a.host == u.host), 0)
            accounts.append(JobAccountView(
                host=u.host, slots=slots, mem_reserved=u.reserved, mem_actual=u.actual,
                mem_peak=u.peak, mem_charged=u.charged_peak,
                mem_slack=accounting.slack(u.reserved, u.actual),
                mem_overage=accounting.overage(u.reserved, u.actual), mem_asked=asked.get(u.host, u.reserved)))
    if accounts and live:
        reserved, actual, peak, charged = live_figures(ledger.by_job[job.id])
    elif accounts:
        reserved, actual, peak, charged = summed(
            (a.mem_reserved, a.mem_actual, a.mem_peak, a.mem_charged) for a in accounts)
    else:
        reserved = sum(a.mem for a in job.allocs) if job.allocs else pend_reservation(job)
        actual, peak, charged = None, 0, reserved
    return JobView(
        **{f: get(job) for f, get in OWN.items()}, mem_reserved=reserved, mem_actual=actual, mem_peak=peak,
        mem_charged=charged, efficiency=efficiency(peak, reserved),
        mem_slack_integral=sum(u.slack_integral for u in job.usage), accounts=accounts,
        mem_asked=sum(asked.values()) if job.allocs else reserved,
        cpu_time=sum(a.cpu_time for a in ledger.by_job.get(job.id, [])) if live else sum(u.cpu_time for u in job.usage))


def live_figures(accs: Sequence[Account]) -> Figures:
    """A running job's (reserved, actual, peak, charged) over its live accounts: what its
    JobView shows, and what the console sorts 20,000 rows by without building the views."""
    if len(accs) == 1:
        a = accs[0]
        return a.reserved, a.actual, a.peak, a.charged
    return summed((a.reserved, a.actual, a.peak, a.charged) for a in accs)


def summed(rows: Iterable[Figures]) -> Figures:
    """Per-host figures of one job added up; actual stays None until some host reported."""
    reserved = peak = charged = 0
    actual: int | None = None
    for r, a, p, c in rows:
        reserved, peak, charged = reserved + r, peak + p, charged + c
        if a is not None:
            actual = a if actual is None else actual + a
    return reserved, actual, peak, charged


def efficiency(peak: int, reserved: int) -> float | None:
    """Peak over reservation: below 1 the estimate was generous, above it too small."""
    return (peak / reserved) if reserved and peak else None


def pend_reservation(job: Job) -> int:
    """What a pending job would reserve in all, if placed on one host (display only)."""
    return total_mem(job_demand(job), 1)
