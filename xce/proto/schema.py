"""Every message body on the wire, named by who sends it.

All are msgspec Structs encoded as MessagePack inside the envelope
(codec.py).  ``REQUESTS`` maps each opcode to the body type the receiver
decodes; ``REPLIES`` the body of its OK reply.  Entities (Job, Host, Queue) and
views (JobView, HostView) are the shared domain model, not wire-only copies.
"""

from __future__ import annotations

from typing import Any

import msgspec

from xce.core import limits
from xce.core.model import Alloc, HistEvent, Host, HostUsage, Job, JobSpec, Queue
from xce.core.sched.fairshare import ShareRow
from xce.core.sched.limits import LimitRow
from xce.core.views import ArrayView, HostView, JobView
from xce.proto.idempotency import key_problem
from xce.proto.opcodes import Op

PROTOCOL_VERSION = 1


class Envelope(msgspec.Struct, array_like=True):
    v: int
    op: int
    rid: int
    body: msgspec.Raw
    token: str = ""
    term: int = 0


class Empty(msgspec.Struct):
    pass


class ErrorReply(msgspec.Struct):
    """An XceError on the wire (xce/core/errors.py ``to_wire``): its code, message and fields.

    Each field below is an attribute of some error class, with that class's default.
    """

    code: str
    message: str
    leader: str | None = None      # NotLeader: the leader's client endpoint, if known
    permission: str | None = None  # PermissionDenied: the permission that was missing
    text: str = ""                 # ResReqError: the requirement string...
    pos: int | None = None         # ...and where in it the problem is


# ---- clients -------------------------------------------------------------------------------

class Write(msgspec.Struct, kw_only=True):
    """A client's state-changing request.  Its idempotency key is required (xce/proto/idempotency.py):
    re-sending the same request gets the first answer and never acts twice.  Built only in
    xce/proto/writes.py; a key-less write is refused by the decoder, naming the field."""

    key: str  # encoded last: kw_only fields follow the others

    def __post_init__(self) -> None:
        problem = key_problem(self.key)
        if problem is not None:
            raise ValueError(f"{problem} (`key`)")


class SubmitRequest(Write):
    jobs: list[JobSpec]
    dry_run: bool = False


class SubmitReply(msgspec.Struct):
    ids: list[int]
    queues: list[str]


class JobsRequest(msgspec.Struct, kw_only=True):
    ids: list[int] = []
    user: str | None = None
    queue: str | None = None
    states: list[str] = []
    all: bool = False          # include finished jobs
    after: int = 0             # cursor: ids greater than this
    limit: int = 0             # 0: no limit
    stale_ok: bool = False     # any controller may answer from its replicated state
    arrays: bool = False       # also each array's summary (xce jobs -A), under the same filters
    order: bool = False        # each pending job's place in the order of pending work (xce jobs -l)
    # JobView field names: the reply carries ``rows`` (these fields of each job, in this order)
    # instead of ``jobs``, so bjobs -o / squeue -o get only what their format prints.
    fields: list[str] = []
    # Only the arrays' summaries (with ``arrays``), no job: Client.arrays, `xce wait` on an array, REST's
    # /array; the controller then reads no element (a summary is the array's counts).
    arrays_only: bool = False


class Staleness(msgspec.Struct, kw_only=True):
    """How old a ``stale_ok`` read is: who served it, and what it had applied."""

    served_by: str
    role: str
    as_of: float        # time of the newest change the serving controller has applied
    lag_entries: int    # Raft entries the leader had committed that it had not applied


class JobsReply(msgspec.Struct):
    jobs: list[JobView]
    next_after: int | None = None
    stale: Staleness | None = None  # set when a follower served a stale_ok read
    arrays: list[ArrayView] = []    # with JobsRequest.arrays
    rows: list[list[Any]] = []      # with JobsRequest.fields: one per job, the fields in their order


class HostsRequest(msgspec.Struct):
    names: list[str] = []
    stale_ok: bool = False


class HostsReply(msgspec.Struct):
    hosts: list[HostView]
    stale: Staleness | None = None


class QueuesReply(msgspec.Struct):
    queues: list[Queue]
    default: str
    counts: dict[str, dict[str, int]] = {}  # queue -> state -> jobs (an array's pending elements too)
    slots: dict[str, dict[str, int]] = {}   # queue -> state -> slots those jobs ask for (bqueues counts slots)


class KillRequest(Write):
    ids: list[int]
    reason: str = ""
    signal: int | None = None  # `xce kill -s`: send this signal to the running jobs, commit nothing
    # With a signal, to whom (JobSpec.warn_to's words): "" every process of the job, "steps" the tasks
    # srun/blaunch/xce launch started in it (scancel's default), "batch" its batch shell alone (scancel -b).
    to: str = ""


class KillReply(msgspec.Struct):
    results: dict[int, str]


class ModifyRequest(Write):
    id: int
    mem_limit: int | None


class ControlRequest(Write):
    """STOP, RESUME, REQUEUE of jobs: all or nothing (one job in a state the action does not
    apply to refuses the request, naming it)."""

    ids: list[int]
    reason: str = ""


class ControlReply(msgspec.Struct):
    results: dict[int, str]  # job id -> its new state, or "requeue requested"


class SwitchRequest(Write):
    ids: list[int]
    queue: str


class MoveRequest(Write):
    id: int
    to: str  # "top" | "bottom"


class ModifySpecRequest(Write, omit_defaults=True):
    """bmod of a pending job; an absent field stays as it is.  ``depend`` is -w's text ("": drop
    the dependency); ``run_limit`` None drops the limit."""

    id: int
    resreq: str | msgspec.UnsetType = msgspec.UNSET
    slots: int | msgspec.UnsetType = msgspec.UNSET
    queue: str | msgspec.UnsetType = msgspec.UNSET
    name: str | msgspec.UnsetType = msgspec.UNSET
    run_limit: float | None | msgspec.UnsetType = msgspec.UNSET
    priority: int | msgspec.UnsetType = msgspec.UNSET
    depend: str | msgspec.UnsetType = msgspec.UNSET
    pre_exec: str | msgspec.UnsetType = msgspec.UNSET  # -E; "" (-En) drops it


class HistRequest(msgspec.Struct):
    id: int


class HistReply(msgspec.Struct):
    id: int
    events: list[HistEvent]


class HostAdminRequest(Write):
    names: list[str]
    action: str  # "open" | "close" | "remove" (forget the host; refused while jobs run there)


class ControllerInfo(msgspec.Struct, kw_only=True):
    address: str
    role: str
    term: int
    commit_index: int
    applied_index: int = 0
    leader: str | None = None
    pid: int | None = None


class StatusReply(msgspec.Struct, kw_only=True):
    cluster: str
    controllers: list[ControllerInfo]
    leader: str | None
    term: int
    hosts_by_state: dict[str, int]
    jobs_by_state: dict[str, int]
    endpoints: dict[str, str]
    rest_url: str | None = None
    mem: dict[str, int] = {}
    last_round_ms: float | None = None


class AuditReply(msgspec.Struct):
    problems: list[str]
    checked: dict[str, int]


class RequestLogQuery(msgspec.Struct, kw_only=True):
    user: str | None = None
    since: float = 0.0   # Unix seconds
    after: int = 0       # seq cursor: records after this one
    limit: int = 1000


class RequestRecord(msgspec.Struct, kw_only=True):
    """One state-changing request at the ZeroMQ door: who, what, from where, and the answer."""

    seq: int
    time: float
    user: str | None     # None: no valid token
    roles: list[str]
    client: str          # the peer's address ("local" for the ipc door)
    op: str              # SUBMIT, KILL, MODIFY, HOST_ADMIN
    target: str          # what it named: "2 job(s) to normal", "jobs 4 5", "host node1 close"
    result: str          # "accepted", or "refused: <code>: <message>"


class RequestLogReply(msgspec.Struct):
    records: list[RequestRecord]


class HostMem(msgspec.Struct, array_like=True, gc=False):
    """A host's memory totals in the leader's ledger (xce.core.accounting.HostTotals' figures)."""

    mem_reserved: int
    mem_actual: int
    mem_slack: int
    mem_overage: int


class HostLive(msgspec.Struct, array_like=True):
    host: str
    os_available: int
    last_seen: float
    # Set on a heartbeat's entry: the host's totals right after its samples were applied, so
    # a console can show them without applying every sample itself (xce/tui/kept.py).
    mem: HostMem | None = None


class HostSamples(msgspec.Struct, array_like=True, gc=False):
    """One host's job samples as columns (index i of every list is the same job).

    What the controller publishes per heartbeat: far cheaper to build, encode, decode
    and apply at hosts x jobs samples a second than one JobSample per job.
    """

    host: str
    job_id: list[int]
    actual: list[int]
    peak: list[int]
    cpu_time: list[float]


class JobSample(msgspec.Struct, array_like=True):
    """One job's latest figures on one host, under scheduler resource names."""

    job_id: int
    host: str
    actual: int
    peak: int
    cpu_time: float


class PastUsage(msgspec.Struct, array_like=True):
    """Fairshare usage of forgotten jobs under one key (ClusterState.usage_past), decayed to its as-of."""

    user: str
    group: str
    project: str
    queue: str
    slot_seconds: float
    mem_seconds: float


def past_usage(usage: dict[tuple[str, str, str, str], list[float]]) -> list[PastUsage]:
    return [PastUsage(*k, *v) for k, v in usage.items()]


def past_usage_book(rows: list[PastUsage]) -> dict[tuple[str, str, str, str], list[float]]:
    return {(r.user, r.group, r.project, r.queue): [r.slot_seconds, r.mem_seconds] for r in rows}


class Snapshot(msgspec.Struct, kw_only=True):
    seq: int
    epoch: str
    time: float
    jobs: list[Job]
    hosts: list[Host]
    queues: list[Queue]
    default_queue: str
    live: list[HostLive]
    samples: list[JobSample]
    reasons: dict[int, str]
    leader: str | None = None
    term: int = 0
    usage_past: list[PastUsage] = []  # fairshare usage of the jobs the cluster forgot
    usage_as_of: float = 0.0
    arrays: list[ArrayView] = []  # the summaries of the arrays not ended or with an element kept


class Event(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One change: entities are whole (a receiver replaces its copy)."""

    seq: int
    epoch: str
    time: float
    jobs: list[Job] = []
    hosts: list[Host] = []
    forget: list[int] = []
    live: list[HostLive] = []
    host_samples: list[HostSamples] = []
    samples: list[JobSample] = []   # older streams (and recordings): one JobSample per job
    reasons: dict[int, str] = {}
    queues: list[Queue] = []
    arrays: list[ArrayView] = []    # the summary of each array the change moved (its counts, window)


# ---- scheduler -----------------------------------------------------------------------------

class Placement(msgspec.Struct, array_like=True):
    job_id: int
    attempt: int
    allocs: list[Alloc]


class Preempt(msgspec.Struct, array_like=True):
    """Preempt a running job (at its attempt) to make room for ``for_job``: the scheduler's order."""

    job_id: int
    attempt: int
    action: str   # suspend (SSUSP) | requeue | kill
    for_job: int


class PlaceRequest(msgspec.Struct):
    placements: list[Placement]
    reasons: dict[int, str] = {}
    round_ms: float = 0.0
    preempt: list[Preempt] = []  # running jobs to preempt (xce/core/sched/preempt.py)
    resume: list[int] = []       # SSUSP jobs whose hosts have room again: resumed first


class PlaceReply(msgspec.Struct):
    accepted: list[int]
    rejected: dict[int, str]


# ---- worker --------------------------------------------------------------------------------

class UsageColumns(msgspec.Struct, array_like=True, gc=False):
    """One host's usage reports as columns: index i of every list is the same task.

    Columns, not a struct per task, because this is decoded hosts x jobs times a second:
    a list of ints decodes and iterates far cheaper than one object (and a dict of
    metrics) per report.  Metric columns carry the worker's wire names
    (``xce.core.resources.WIRE_NAMES`` maps ``memory_rss`` to the scheduler's ``mem``).
    """

    job_id: list[int] = []
    attempt: list[int] = []
    memory_rss: list[int] = []    # bytes: the job's process tree, or its cgroup's memory.current
    memory_peak: list[int] = []   # bytes: the highest seen (cgroup memory.peak where there is one)
    cpu_time: list[float] = []    # user + system seconds so far

    def __post_init__(self) -> None:
        n = len(self.job_id)
        if not (len(self.attempt) == len(self.memory_rss) == len(self.memory_peak)
                == len(self.cpu_time) == n):
            raise ValueError("usage columns differ in length")


class RunningTask(msgspec.Struct):
    job_id: int
    attempt: int
    pid: int
    suspended: bool = False  # stopped by SIGNAL_JOB (SIGSTOP/SIGTSTP) and not continued since


class RegisterRequest(msgspec.Struct, kw_only=True):
    host: str
    slots: int
    ncpus: int
    mem_total: int
    os_available: int
    version: str
    attrs: dict[str, str | int | float] = {}  # a numeric site attribute is a number (config.ResourceConf.type)
    virtual: dict[str, int] = {}
    running: list[RunningTask] = []
    measure: str = "proc"


class RegisterReply(msgspec.Struct):
    heartbeat_interval: float
    term: int
    kill: list[RunningTask] = []


class Heartbeat(msgspec.Struct, kw_only=True):
    """Usage lists only tasks whose figures moved (see the worker); ``ack`` asks for a reply."""

    host: str
    time: float
    os_available: int
    usage: UsageColumns = msgspec.field(default_factory=UsageColumns)
    ack: bool = True


class HeartbeatReply(msgspec.Struct):
    known: bool  # False: the controller does not know this host; register again


class JobStarted(msgspec.Struct, kw_only=True):
    host: str
    job_id: int
    attempt: int
    pid: int
    time: float


class JobFinished(msgspec.Struct, kw_only=True):
    host: str
    job_id: int
    attempt: int
    time: float
    exit_code: int | None
    signal: int | None
    reason: str
    usage: HostUsage
    started: float | None = None  # when the worker started this share (the first host's: hist's "started")


class ArrayElement(msgspec.Struct, array_like=True):
    """Where an array element sits: LSB_JOBINDEX, _STEP, _END and LSB_JOBID (the array's id)."""

    array_id: int
    index: int
    step: int = 1
    end: int = 0


class RunJob(msgspec.Struct, kw_only=True):
    """Run the job's share on this host.  ``hosts[0]`` runs the command; any other host holds
    its slots (and later runs what ``xce launch`` starts there)."""

    job_id: int
    attempt: int
    spec: JobSpec
    alloc: Alloc
    hosts: list[str]
    mem_duration_s: int | None = None
    mem_decay: bool = False
    slots: list[int] = []                # slots per host, as ``hosts``; [] from older leaders: 1 each
    element: ArrayElement | None = None  # set when the job is an element of an array
    reclaiming: bool = False             # it runs on reclaimable memory (the pressure kill takes it first)
    launch_token: str = ""               # XCE_LAUNCH_TOKEN: what `xce launch` shows (xce/security/launch.py)
    preexec_timeout: float | None = None  # seconds its -E may run (its queue's; LSF JOB_PREPROC_TIMEOUT)
    # The share's reservation in force once the leader shrank or restored it (state.Reserve); None: the
    # placement's (alloc.mem, decayed by duration=).  Sent again to a running share when it moves: the
    # worker's pressure kill and slack integral use it; its MEMLIMIT kill stays the job's -M.
    mem_in_force: int | None = None


class OrderKey(msgspec.Struct):
    """Just the (job, attempt) of an order: what a worker reads from one it refuses, to end that job."""

    job_id: int
    attempt: int


class KillJob(msgspec.Struct, kw_only=True):
    job_id: int
    attempt: int
    reason: str


class SignalJob(msgspec.Struct, kw_only=True):
    """Send ``signal`` to the job's processes on this host (its process group and cgroup).

    SIGSTOP/SIGTSTP suspend (the run-limit clock pauses), SIGCONT resumes; any other
    number is sent as it is (``xce kill -s``).  The worker answers with JOB_SIGNALLED."""

    job_id: int
    attempt: int
    signal: int
    to: str = ""  # KillRequest.to: "" every process here, "steps" the launched tasks, "batch" the batch shell


class JobSignalled(msgspec.Struct, kw_only=True):
    """What a SIGNAL_JOB did on ``host``: the signal sent and whether the job is now suspended."""

    host: str
    job_id: int
    attempt: int
    signal: int
    suspended: bool
    time: float
    detail: str = ""  # why nothing was sent (no such task here), "" when it was


class PeekRequest(msgspec.Struct, kw_only=True):
    """bpeek: the tail of a job's stdout and stderr."""

    id: int
    max_bytes: int = 10 * 1024


class PeekReply(msgspec.Struct, kw_only=True):
    job_id: int
    state: str
    host: str = ""
    stdout_path: str = ""
    stderr_path: str = ""   # "" when stderr goes to stdout's file
    stdout: str = ""        # the tail (UTF-8, undecodable bytes replaced)
    stderr: str = ""
    note: str = ""          # e.g. "job 4 is PEND: no output yet", or "ended: see the files"


class PeekJob(msgspec.Struct, kw_only=True):
    """Controller -> worker: read the tail of the job's output files; answered by JOB_OUTPUT."""

    job_id: int
    attempt: int
    ticket: int      # the controller's number for the waiting client
    max_bytes: int


class JobOutput(msgspec.Struct, kw_only=True):
    """Worker -> controller: the answer to PEEK_JOB ``ticket``."""

    host: str
    ticket: int
    job_id: int
    stdout_path: str = ""
    stderr_path: str = ""
    stdout: str = ""
    stderr: str = ""
    error: str = ""  # why there is nothing ("job 4 does not run on host a")


class LaunchRequest(msgspec.Struct, kw_only=True):
    """blaunch: start ``command`` as a task of the job that ``token`` (XCE_LAUNCH_TOKEN) names, on
    ``host``, inside the job's share there.  ``key`` makes a retry start nothing twice."""

    token: str
    host: str
    command: list[str]
    key: str
    cwd: str = ""                      # "" : the job's cwd
    env: dict[str, str] = {}           # over the share's own environment (SLURM_PROCID, ...)


class TaskAt(msgspec.Struct, array_like=True):
    """One more task of a LAUNCH_POLL: where it runs, its number there, the offsets the caller has."""

    host: str
    task: int
    stdout_offset: int = 0
    stderr_offset: int = 0


class LaunchPoll(msgspec.Struct, kw_only=True):
    """The output of task ``task`` on ``host`` past the given offsets (bytes), and its end once it
    ended; with ``signal``, that signal is sent to the task first.  ``more``: the job's other
    tasks the caller follows, read in the same request (one poll a round, not one a task), each
    answered in ``LaunchReply.more`` in this order; a poll of several tasks only reads."""

    token: str
    host: str
    task: int
    stdout_offset: int = 0
    stderr_offset: int = 0
    max_bytes: int = 256 * 1024        # per stream (of each task)
    signal: int = 0
    more: list[TaskAt] = []


class LaunchReply(msgspec.Struct, kw_only=True):
    """What LAUNCH and LAUNCH_POLL answer: the task, output past the offsets, and whether it ended."""

    job_id: int
    host: str
    task: int
    stdout: bytes = b""
    stderr: bytes = b""
    ended: bool = False                # it ended and the output above reaches the end of both files
    exit_code: int | None = None       # 128+n when killed by signal n; None: lost
    signal: int | None = None
    more: list[LaunchReply] = []       # LaunchPoll.more's tasks, in its order


class LaunchTask(msgspec.Struct, kw_only=True):
    """Controller -> worker: start a task inside the job's share here; answered by TASK_STATE."""

    job_id: int
    attempt: int
    ticket: int
    key: str
    command: list[str]
    run: RunJob                        # the share's own order: the job environment the task runs in
    cwd: str = ""
    env: dict[str, str] = {}


class PollTask(msgspec.Struct, kw_only=True):
    """Controller -> worker: a launched task's output past the offsets (and signal it first)."""

    job_id: int
    attempt: int
    ticket: int
    task: int
    stdout_offset: int = 0
    stderr_offset: int = 0
    max_bytes: int = 256 * 1024
    signal: int = 0


class TaskState(msgspec.Struct, kw_only=True):
    """Worker -> controller: the answer to LAUNCH_TASK or POLL_TASK ``ticket``; with ``error``
    (and its class's ``code``, xce/core/errors.py) the task did not start or is unknown."""

    host: str
    ticket: int
    job_id: int
    task: int = 0
    stdout: bytes = b""
    stderr: bytes = b""
    ended: bool = False
    exit_code: int | None = None
    signal: int | None = None
    error: str = ""
    code: str = ""


class Ack(msgspec.Struct):
    ok: bool = True
    detail: str = ""


class FairshareReply(msgspec.Struct, kw_only=True):
    """The share trees in force, computed as the scheduler's round computes them."""

    enabled: bool
    half_life: float                     # seconds
    slot_weight: float
    mem_weight: float
    time: float                          # the usage is decayed to this instant
    rows: list[ShareRow]


class LimitsReply(msgspec.Struct, kw_only=True):
    rows: list[LimitRow]


REQUESTS: dict[Op, type] = {
    Op.PING: Empty, Op.SUBMIT: SubmitRequest, Op.JOBS: JobsRequest, Op.HOSTS: HostsRequest,
    Op.QUEUES: Empty, Op.KILL: KillRequest, Op.STATUS: Empty, Op.SNAPSHOT: Empty,
    Op.MODIFY: ModifyRequest, Op.HOST_ADMIN: HostAdminRequest, Op.AUDIT: Empty,
    Op.REQUEST_LOG: RequestLogQuery, Op.PEEK: PeekRequest, Op.PLACE: PlaceRequest, Op.REGISTER: RegisterRequest, Op.HEARTBEAT: Heartbeat,
    Op.JOB_STARTED: JobStarted, Op.JOB_FINISHED: JobFinished, Op.JOB_SIGNALLED: JobSignalled,
    Op.JOB_OUTPUT: JobOutput,
    Op.RUN_JOB: RunJob, Op.KILL_JOB: KillJob, Op.SIGNAL_JOB: SignalJob, Op.PEEK_JOB: PeekJob, Op.EVENT: Event,
    Op.STOP: ControlRequest, Op.RESUME: ControlRequest, Op.REQUEUE: ControlRequest, Op.SWITCH: SwitchRequest,
    Op.MOVE: MoveRequest, Op.MODIFY_SPEC: ModifySpecRequest, Op.HIST: HistRequest,
    Op.FAIRSHARE: Empty, Op.LIMITS: Empty,
    Op.LAUNCH: LaunchRequest, Op.LAUNCH_POLL: LaunchPoll, Op.TASK_STATE: TaskState,
    Op.LAUNCH_TASK: LaunchTask, Op.POLL_TASK: PollTask,
}

REPLIES: dict[Op, type] = {
    Op.PING: Empty, Op.SUBMIT: SubmitReply, Op.JOBS: JobsReply, Op.HOSTS: HostsReply,
    Op.QUEUES: QueuesReply, Op.KILL: KillReply, Op.STATUS: StatusReply, Op.SNAPSHOT: Snapshot,
    Op.MODIFY: Ack, Op.HOST_ADMIN: Ack, Op.AUDIT: AuditReply, Op.REQUEST_LOG: RequestLogReply,
    Op.PEEK: PeekReply,
    Op.PLACE: PlaceReply,
    Op.REGISTER: RegisterReply, Op.HEARTBEAT: HeartbeatReply, Op.JOB_STARTED: Ack,
    Op.JOB_FINISHED: Ack, Op.JOB_SIGNALLED: Ack, Op.JOB_OUTPUT: Ack,
    Op.RUN_JOB: Ack, Op.KILL_JOB: Ack, Op.SIGNAL_JOB: Ack, Op.PEEK_JOB: Ack,
    Op.STOP: ControlReply, Op.RESUME: ControlReply, Op.REQUEUE: ControlReply, Op.SWITCH: ControlReply,
    Op.MOVE: Ack, Op.MODIFY_SPEC: Ack, Op.HIST: HistReply,
    Op.FAIRSHARE: FairshareReply, Op.LIMITS: LimitsReply,
    Op.LAUNCH: LaunchReply, Op.LAUNCH_POLL: LaunchReply, Op.TASK_STATE: Ack,
    Op.LAUNCH_TASK: Ack, Op.POLL_TASK: Ack,
}

# Largest body accepted per request: the one table of limits (xce/core/limits.py).
MAX_BODY: dict[Op, int] = {Op[name]: n for name, n in limits.MAX_BODY.items()}
DEFAULT_MAX_BODY = limits.DEFAULT_MAX_BODY
