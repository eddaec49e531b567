"""The domain model shared by every part of XCE: jobs, hosts, queues.

These msgspec Structs are the hard state the controller replicates through Raft
and the entities the event stream carries; the daemons, REST, CLI and console
all read these same classes.  Memory is in bytes, times in Unix seconds.
Derived figures (charge, slack, availability) are never stored here: they come
from xce/core/accounting.py, and the user-facing shapes from xce/core/views.py.

Entities are ``gc=False``: they hold no reference cycles, and a controller
holding 100,000 jobs must not have the cyclic collector rescan them on every
burst of submits.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from enum import StrEnum
from typing import TypeVar

import msgspec

from xce.core.errors import InvalidRequest
from xce.core.jobspec.arrays import ArraySpec
from xce.core.jobspec.depend import Expr
from xce.core.limits import spec_limit_reason
from xce.core.resreq import ResReq
from xce.core.units import MIB, fmt_bytes

# The smallest hard memory limit a job may have.  A POSIX shell alone is 1-3 MiB resident, and
# the worker kills a job whose memory exceeds its limit, so a smaller limit kills every job at
# its first sample (`-M 0` did).  docs/cli.md states it; every door checks it through check_spec.
MEM_LIMIT_FLOOR = 4 * MIB


class JobState(StrEnum):
    PEND = "PEND"
    RUN = "RUN"
    PSUSP = "PSUSP"
    USUSP = "USUSP"
    SSUSP = "SSUSP"
    DONE = "DONE"
    EXIT = "EXIT"
    UNKWN = "UNKWN"


TERMINAL = frozenset({JobState.DONE, JobState.EXIT})
ACTIVE = frozenset({JobState.RUN, JobState.USUSP, JobState.SSUSP, JobState.UNKWN})


class HostState(StrEnum):
    OK = "ok"
    CLOSED = "closed"
    UNAVAIL = "unavail"
    FULL = "full"


class JobSpec(msgspec.Struct, frozen=True, kw_only=True, gc=False, omit_defaults=True):
    """What the user asked for; never changes after submission (but for mem_limit).

    Encoded without the fields at their defaults (``omit_defaults``): a typical spec is 67 bytes
    instead of 268, which every copy of it pays (the SUBMIT, the Raft entry and journal, events,
    RUN_JOB).  A missing field decodes as its default, so the full form decodes the same.
    """

    command: list[str]
    name: str = ""
    user: str = ""
    queue: str = ""
    slots: int = 1
    resreq: str = ""
    mem_limit: int | None = None
    cwd: str = ""
    env: dict[str, str] = {}
    stdout: str | None = None
    stderr: str | None = None
    rerunnable: bool | None = None  # None: the queue decides
    # Scheduling policy (xce/core/sched/, docs/scheduling.md).  Appended with defaults: a message
    # from a sender that predates them decodes with these values.
    priority: int = 0                  # per-job priority within its queue (-sp); higher first
    run_limit: float | None = None     # seconds (-W); None: none given
    run_estimate: float | None = None  # seconds (-We), what backfill plans with; None: none given
    project: str = ""                  # fairshare and limits principal (-P)
    group: str = ""                    # fairshare and limits principal (-G)
    # The job model (docs/jobmodel.md), appended with defaults likewise.
    depend: Expr | None = None         # the parsed -w expression (hard state: evaluated, never re-parsed)
    array: ArraySpec | None = None     # an array's indices and %limit (the array and its elements)
    index: int = 0                     # an array element's index (LSB_JOBINDEX); an element's id says it is one
    # Job execution (docs/jobs.md).  Appended with defaults, as above.
    stdout_overwrite: bool = False     # -oo: truncate stdout at start (-o appends)
    stderr_overwrite: bool = False     # -eo: truncate stderr at start (-e appends)
    submit_host: str = ""              # where it was submitted from: LSB_SUB_HOST
    # A job script, kept as submitted (xce/core/jobspec/build.py); then command is [name, *args] and
    # the worker runs its own copy of the script under its #! line or /bin/sh (docs/jobs.md).
    script: str = ""
    # Reclamation (docs/accounting.md): the job accepts to run on memory other jobs reserved and do
    # not use, and to be the first to go when they want it back.  Appended with a default, as above.
    reclaim: bool = False
    # Placement controls (docs/scheduling.md): -x, the only job on each of its hosts while it runs.
    # Appended with a default, as above.
    exclusive: bool = False
    # -E (docs/jobs.md "Pre-execution"): a /bin/sh command the first host runs before the job's, as
    # its user, in its environment and cwd; "" (the default, so absent on the wire): none.
    pre_exec: str = ""
    # -ti: ended at once when its -w dependency can never be met, as its queue's dep_never = "kill"
    # does for all its jobs (xce/core/state.py).  Appended with a default, as above.
    dep_never_kill: bool = False
    # Slurm's and LSF's job-control extras (docs/jobs.md, docs/compat.md).  Appended with defaults.
    hold: bool = False                 # submitted held (PSUSP) until released (sbatch -H, bsub -H)
    warn_signal: int = 0               # sent warn_time seconds before the run limit (sbatch --signal, bsub -wa); 0: none
    warn_time: float = 0.0             # seconds before the run limit the warning signal goes (-wt, @TIME)
    warn_to: str = ""                  # who gets it: "" all the job's processes (LSF), "batch" its command only
                                       # (Slurm's B:), "steps" the tasks srun/blaunch started in it (Slurm's default)
    cpus_per_task: int = 1             # sbatch -c: slots = tasks x cpus_per_task; SLURM_NTASKS is slots / this


def check_mem_limit(limit: int | None) -> None:
    """None (no limit) or at least MEM_LIMIT_FLOOR; InvalidRequest naming the floor otherwise."""
    if limit is not None and limit < MEM_LIMIT_FLOOR:
        raise InvalidRequest(f"mem_limit must be at least {fmt_bytes(MEM_LIMIT_FLOOR)}, got {fmt_bytes(limit)} "
                             "(the worker kills a job whose memory exceeds its limit)")


L = TypeVar("L", int, float)


def apply_queue_limits(spec: JobSpec, queue: Queue) -> JobSpec:
    """A job's run and memory limits under its queue (LSF RUNLIMIT and MEMLIMIT): without -W or
    -M the queue's default, else its maximum; one above the maximum is refused naming both figures."""
    run = _under(queue.name, "run limit", spec.run_limit, queue.run_limit_default, queue.run_limit_max,
                 lambda t: f"{t:g} s")
    mem = _under(queue.name, "memory limit", spec.mem_limit, queue.mem_limit_default, queue.mem_limit_max,
                 fmt_bytes)
    if (run, mem) == (spec.run_limit, spec.mem_limit):
        return spec
    return msgspec.structs.replace(spec, run_limit=run, mem_limit=mem)


def into_queue(spec: JobSpec, old: Queue | None, new: Queue) -> JobSpec:
    """``spec`` moved from queue ``old`` into ``new`` (bswitch, bmod -q): a limit equal to what
    ``old`` gives a job without one came from that queue, not from the job, so ``new``'s applies
    (a -W or -M of exactly that figure is taken as the queue's: the spec does not keep which)."""
    if old is not None:
        if spec.run_limit is not None and spec.run_limit == (old.run_limit_default or old.run_limit_max):
            spec = msgspec.structs.replace(spec, run_limit=None)
        if spec.mem_limit is not None and spec.mem_limit == (old.mem_limit_default or old.mem_limit_max):
            spec = msgspec.structs.replace(spec, mem_limit=None)
    return apply_queue_limits(msgspec.structs.replace(spec, queue=new.name), new)


def _under(queue: str, what: str, given: L | None, default: L | None, top: L | None,
           say: Callable[[L], str]) -> L | None:
    if given is None:
        return default if default is not None else top
    if top is not None and given > top:
        raise InvalidRequest(f"{what} {say(given)} is above queue {queue}'s maximum {what} {say(top)}")
    return given


_ENCODER = msgspec.msgpack.Encoder()


def spec_bytes(spec: JobSpec) -> bytes:
    """The spec as MessagePack (its defaults omitted, one canonical form), so two specs with equal
    bytes are equal: a door checks each distinct spec of a batch once."""
    return _ENCODER.encode(spec)


def check_spec(spec: JobSpec, encoded: bytes | None = None) -> None:
    """What every job must be, whichever door it came through (CLI, REST, xce.client, the controller).

    ``encoded``: ``spec_bytes(spec)`` if the caller has it already.
    """
    if not spec.command:
        raise InvalidRequest("no command given")
    if spec.slots < 1:
        raise InvalidRequest(f"slots must be >= 1, got {spec.slots}")
    check_mem_limit(spec.mem_limit)
    # so that whatever is accepted can be dispatched; the encoded size spares measuring fields
    # it proves are within their limits (xce/core/limits.py)
    too_big = spec_limit_reason(spec, len(spec_bytes(spec) if encoded is None else encoded))
    if too_big is not None:
        raise InvalidRequest(too_big)
    for name in ("run_limit", "run_estimate"):
        t = getattr(spec, name)
        if t is not None and not 0 < t < float("inf"):
            raise InvalidRequest(f"{name} must be a positive number of seconds, got {t}")
    check_warning(spec)


WARN_TO = ("", "batch", "steps")  # JobSpec.warn_to: all the job's processes, its command, its launched tasks


def check_warning(spec: JobSpec) -> None:
    """The warning signal and cpus_per_task: each a value a worker can act on."""
    if spec.warn_signal and not 0 < spec.warn_signal < 65:
        raise InvalidRequest(f"warn_signal must be a signal number from 1 to 64, got {spec.warn_signal}")
    if spec.warn_signal and not 0 <= spec.warn_time < float("inf"):
        raise InvalidRequest(f"warn_time must be 0 or more seconds, got {spec.warn_time}")
    if spec.warn_to not in WARN_TO:
        raise InvalidRequest(f"warn_to must be one of {', '.join(repr(w) for w in WARN_TO)}, got {spec.warn_to!r}")
    if not spec.warn_signal and (spec.warn_time or spec.warn_to):
        raise InvalidRequest("warn_time and warn_to need warn_signal (the signal to send)")
    if spec.cpus_per_task < 1 or spec.slots % spec.cpus_per_task:
        raise InvalidRequest(f"cpus_per_task ({spec.cpus_per_task}) must be 1 or more and divide the slots "
                             f"({spec.slots}): slots are tasks x cpus per task")


class Alloc(msgspec.Struct, frozen=True, gc=False):
    """A job's share of one host, fixed at placement."""

    host: str
    slots: int
    mem: int = 0  # reservation at start (bytes); decay is applied by accounting
    virtual: dict[str, int] = {}


class HostUsage(msgspec.Struct, kw_only=True, gc=False):
    """Final usage record of a job on one host: hard state once the job ends."""

    host: str
    reserved: int = 0
    actual: int = 0
    peak: int = 0
    charged_peak: int = 0
    cpu_time: float = 0.0
    slack_integral: float = 0.0  # byte-seconds reserved but unused


class Resized(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """The last move of a running job's reservation in force (xce/core/shrink.py): when, on which
    host, to how much, whether ``shrunk`` or ``restored``, and why.  Shown by `xce jobs -l`."""

    time: float
    host: str
    mem: int
    event: str
    detail: str = ""


class PastRun(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """An earlier run of a requeued job, as fairshare charges it (fairshare.job_rates when it
    was requeued): its slots and charged bytes over [start, end), in the queue it ran in."""

    start: float
    end: float
    slots: float
    mem: float
    queue: str


class Job(msgspec.Struct, kw_only=True, gc=False):
    id: int
    spec: JobSpec
    req: ResReq
    state: JobState = JobState.PEND
    submit_time: float = 0.0
    start_time: float | None = None
    end_time: float | None = None
    allocs: list[Alloc] = []
    attempt: int = 0  # placement number: the idempotency key of dispatch
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    usage: list[HostUsage] = []
    finished_hosts: list[str] = []
    kill_requested: bool = False
    requeues: int = 0
    requeue_requested: bool = False  # brequeue of a running job: back to PEND once its processes end
    prior: JobState | None = None    # the state UNKWN returns to when the host comes back
    held: bool = False               # pending on a dependency not yet satisfied: the scheduler skips it
    mem_tries: int = 0               # retries with more memory so far (xce/core/memretry.py)
    suspend_reason: str = ""         # why the system suspended it (SSUSP); "" once it runs again
    runs: list[PastRun] = []         # its runs before a requeue: every run's usage is charged (fairshare)
    evictions: int = 0               # times preempted or RECLAIMED (a queue's max_preempt counts them)
    preexec_fails: int = 0           # -E failures, against its queue's max_preexec_retry (0 again on resume)
    # Shrinking (docs/accounting.md): host -> its share's reservation in force, once the leader moved it
    # (state.Reserve); a host not here keeps its placement's (Alloc.mem, decayed by duration=).  The last
    # move, for `xce jobs -l`.  Both are this run's: a requeue forgets them.
    mem_in_force: dict[str, int] = {}
    resized: Resized | None = None

    @property
    def hosts(self) -> list[str]:
        return [a.host for a in self.allocs]


class ArrayJob(msgspec.Struct, kw_only=True, gc=False):
    """A job array: ONE entity for all its elements (xce/core/arrays.py).

    Elements at positions >= ``cursor`` (``ArraySpec.index_at``), but for ``ahead``, are
    pending and have no object; the others are Jobs (id ``element_id(id, index)``) while the
    state keeps them.  ``counts`` is the materialised elements by state, kept as they change
    and after cleanup forgets them, so the array's summary never needs the elements.
    """

    id: int
    spec: JobSpec  # spec.array: the indices and %limit
    req: ResReq
    submit_time: float = 0.0
    cursor: int = 0
    ahead: list[int] = []           # indices materialised out of order, past the cursor
    counts: dict[str, int] = {}     # JobState value -> materialised elements in it
    held: bool = False              # stopped as a whole: no element is materialised to pend
    by: str = ""


class Host(msgspec.Struct, kw_only=True, gc=False):
    name: str
    slots_total: int
    mem_total: int
    ncpus: int = 1
    closed: bool = False
    unavail: bool = False
    registered_time: float = 0.0
    version: str = ""
    attrs: dict[str, str | int | float] = {}  # type, model, site attributes (numeric ones as numbers)
    virtual: dict[str, int] = {}  # host-level virtual resource totals (besides slots)


class Queue(msgspec.Struct, kw_only=True, frozen=True, gc=False):
    name: str
    priority: int = 30
    rerunnable: bool = False
    description: str = ""
    run_limit_default: float | None = None  # seconds given to a job without -W (LSF RUNLIMIT's first figure)
    run_limit_max: float | None = None      # seconds; a job's -W above it is refused at submit
    dep_never: str = "keep"                 # a job whose dependency can never be met: "keep" or "kill"
    reclaimable: bool = False               # its jobs run on reclaimable memory (docs/accounting.md)
    reclaim_policy: str = "requeue"         # what an owner's growth does to them: requeue, suspend or kill
    mem_retries: int = 0                    # tries more a job killed for its memory gets (xce/core/memretry.py)
    mem_retry_factor: float = 2.0           # each try's reservation and -M: the last one's times this
    mem_retry_max: int = 0                  # bytes a try's reservation or -M may reach (0: no cap)
    # Right-sizing at submit (xce/core/autosize.py).  Appended with defaults.
    mem_default: int = 0                    # bytes reserved for a job that names no mem (0: none)
    mem_default_auto: bool = False          # a job that names no mem is sized from its history
    mem_auto_fallback: int = 0              # what auto gives with no history (the queue's, else the cluster's)
    mem_auto_margin: float = 0.1            # auto = p95 of past peaks x (1 + margin)
    mem_auto_min_runs: int = 3              # finished runs auto needs before history sizes a job
    # The hosts its jobs may use (LSF HOSTS, groups resolved at config load: xce/core/hostgroups.py):
    # hosts given, just these; else every host but hosts_not.
    hosts: tuple[str, ...] = ()
    hosts_not: tuple[str, ...] = ()
    # LSF MEMLIMIT (bytes; xce/core/model.apply_queue_limits), appended with defaults.
    mem_limit_default: int | None = None    # -M given to a job without one
    mem_limit_max: int | None = None        # a larger -M is refused at submit, bswitch and bmod
    # -E failures (LSF MAX_PREEXEC_RETRY, LOCAL_MAX_PREEXEC_RETRY_ACTION), appended with defaults: after
    # this many a job is held (PSUSP, "suspend") or ended EXIT with the pre-exec's code ("exit").
    max_preexec_retry: int = 5
    preexec_retry_action: str = "suspend"
    # Seconds an -E may run (LSF JOB_PREPROC_TIMEOUT); past it the worker kills it, and the run counts
    # as a failure of it with exit code PREEXEC_TIMEOUT_CODE.  None: no limit (LSF's default).
    preexec_timeout: float | None = None


RECLAIM_POLICIES = ("requeue", "suspend", "kill")
PREEXEC_ACTIONS = ("suspend", "exit")
# The reason a worker reports for a run whose -E command failed (exit code: the pre-exec's):
# the job's command never ran, and the state machine sends it back to PEND (xce/core/state.py).
PREEXEC_FAILED = "PREEXEC_FAILED"
# ... and for one whose -E ran past its queue's preexec_timeout: the worker killed its process group.
PREEXEC_TIMEOUT = "PREEXEC_TIMEOUT"
PREEXEC_TIMEOUT_CODE = 98  # LSF's "pre-defined exit value" of a job whose pre-exec timed out
PREEXEC_ENDS = frozenset({PREEXEC_FAILED, PREEXEC_TIMEOUT})  # a run that ended in its -E: the command never ran


RECLAIMED = "RECLAIMED"  # the reason of a job sent away, or suspended, for its lenders (reactors/reclaim.py)


def reclaim_suspended(job: Job) -> bool:
    """An SSUSP job the controller's reclaim suspended: its to resume, not preemption's."""
    return job.state == JobState.SSUSP and job.suspend_reason.startswith(RECLAIMED)


def reclaim_queues(queues: Iterable[Queue]) -> frozenset[str]:
    """The names of the queues marked reclaimable."""
    return frozenset(q.name for q in queues if q.reclaimable)


def reclaiming(spec: JobSpec, reclaimable_queues: Container[str]) -> bool:
    """Whether a job runs on reclaimable memory: it asked to, or its queue is marked reclaimable."""
    return spec.reclaim or spec.queue in reclaimable_queues


class HistEvent(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One event of a job's history (xce hist): when, what, who caused it, and a detail."""

    time: float
    event: str   # submitted, dispatched, suspended, resumed, requeued, modified, switched, ended, ...
    by: str = ""  # the user, or "scheduler", a host name, "controller"
    detail: str = ""
