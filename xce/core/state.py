"""The controller's replicated state machine: a deterministic fold over commands.

``ClusterState.apply(cmd)`` does no I/O, reads no clock (times travel inside the
commands) and draws no random numbers, so every controller that applies the
same Raft log holds the same state.  Business rules live here and are tested
without Raft; xce/daemons/raft.py only carries batches of encoded commands.

Job transitions: ``TRANSITIONS`` below is the whole table; anything else raises
IllegalTransition naming the job, the event and its state::

    PEND  --place--> RUN --done/exit--> DONE/EXIT --requeue--> PEND (brequeue, new attempt)
    PEND  --stop--> PSUSP (held) --resume--> PEND;  PEND/PSUSP --kill--> EXIT
    RUN   --stop--> USUSP --resume--> RUN            (bstop/bresume of a running job)
    RUN   --sys_suspend--> SSUSP --sys_resume--> RUN; SSUSP --stop--> USUSP
    RUN/USUSP/SSUSP --unknown--> UNKWN (host silent, not yet decided) --back--> RUN (then its
          prior suspension again); host lost decides: --requeue--> PEND or --exit--> EXIT
    RUN/USUSP/SSUSP/UNKWN --done/exit--> DONE/EXIT; --requeue--> PEND (rerunnable host loss,
          or brequeue once the old processes have ended, or its -E pre-exec failed or ran past
          its queue's preexec_timeout)
    RUN/USUSP/SSUSP/UNKWN --preexec_hold--> PSUSP (its -E failed the queue's max_preexec_retry
          times, LSF's LOCAL_MAX_PREEXEC_RETRY_ACTION=SUSPEND; "exit" ends it --exit--> EXIT)

A suspended or UNKWN job is ACTIVE (xce/core/model.py): its reservation and actual
memory stay charged.  A pending job whose ``-w`` dependency is not satisfied is PEND
with ``held`` set (the scheduler skips it) and its reason naming the condition; only
its dependents are re-evaluated when a job changes (xce/core/deps.py).

Every change of a job is also an event in its history (``history``: time, event, who
caused it, detail; bounded per job), for ``xce hist``.

A running job's reservation in force on a host moves only by ``Reserve`` (the leader's shrink or
restore, xce/core/shrink.py): never above what the share was placed with; a requeue forgets it.

Hosts: ``register`` adds or refreshes one (its admin state survives), ``host_lost``
marks it unavail, ``remove_hosts`` forgets it (refused while a job runs or is
suspended there: its processes would go unaccounted).  A removed host whose
worker registers again is a new host.

What a command changed (jobs touched, hosts touched and removed, jobs forgotten) is not kept in the
state: ``apply(cmd, changes)`` records it in the caller's ``Changes`` and ``apply_batch``
returns a batch's ``Changes`` beside its results, for the shell to publish and dispatch.

A client's write (``Keyed``: submit, kill, modify, host admin and removal) carries the client's
idempotency key and the principal who sent it (``by``, set by the leader from the
verified token).  Its first answer is kept under (by, key): a retry with the same key
gets that answer again and changes nothing; the same key from someone else is a
different request.  Kept answers are replicated state, bounded by ANSWERS_KEPT.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from xce.core import arrays as A
from xce.core.deps import DepIndex, lookup_for, name_matches
from xce.core.errors import Conflict, IllegalTransition, InvalidRequest, NotFound, XceError
from xce.core.jobspec.depend import Expr, JobRef, NameRef, refs
from xce.core.jobspec.depeval import Counts, evaluate
from xce.core.model import (
    ACTIVE,
    TERMINAL,
    Alloc,
    ArrayJob,
    HistEvent,
    Host,
    HostUsage,
    PREEXEC_ENDS,
    PREEXEC_FAILED,
    Job,
    JobSpec,
    JobState,
    Queue,
    Resized,
    apply_queue_limits,
    check_spec,
    into_queue,
)
from xce.core.memretry import grown
from xce.core.resreq import ResReq
from xce.core.units import fmt_bytes
from xce.core.result import Err, Ok, Result
from xce.core.sched.fairshare import UsageBook, past_run

S = JobState
ANSWERS_KEPT = 100_000  # keyed answers kept: retries arrive within seconds; this is hours of writes
SUBMITTED_HELD = "held by its user (submitted held)"  # until resumed: xce resume, scontrol release, bresume
HIST_KEPT = 64  # events kept per job: the first (submitted) and the latest; a requeue loop cannot grow it
PENDING = frozenset({S.PEND, S.PSUSP})
TRANSITIONS: dict[tuple[JobState, str], JobState] = {
    (S.PEND, "place"): S.RUN,
    (S.PEND, "kill"): S.EXIT,
    (S.PEND, "stop"): S.PSUSP,
    (S.PSUSP, "resume"): S.PEND,
    (S.PSUSP, "kill"): S.EXIT,
    (S.RUN, "done"): S.DONE,
    (S.RUN, "exit"): S.EXIT,
    (S.RUN, "requeue"): S.PEND,
    (S.RUN, "stop"): S.USUSP,
    (S.RUN, "sys_suspend"): S.SSUSP,
    (S.RUN, "unknown"): S.UNKWN,
    (S.USUSP, "resume"): S.RUN,
    (S.USUSP, "done"): S.DONE,
    (S.USUSP, "exit"): S.EXIT,
    (S.USUSP, "requeue"): S.PEND,
    (S.USUSP, "unknown"): S.UNKWN,
    (S.SSUSP, "sys_resume"): S.RUN,
    (S.SSUSP, "stop"): S.USUSP,
    (S.SSUSP, "done"): S.DONE,
    (S.SSUSP, "exit"): S.EXIT,
    (S.SSUSP, "requeue"): S.PEND,
    (S.SSUSP, "unknown"): S.UNKWN,
    (S.UNKWN, "back"): S.RUN,
    (S.UNKWN, "done"): S.DONE,
    (S.UNKWN, "exit"): S.EXIT,
    (S.UNKWN, "requeue"): S.PEND,
    (S.RUN, "preexec_hold"): S.PSUSP,
    (S.USUSP, "preexec_hold"): S.PSUSP,
    (S.SSUSP, "preexec_hold"): S.PSUSP,
    (S.UNKWN, "preexec_hold"): S.PSUSP,
    (S.DONE, "requeue"): S.PEND,
    (S.EXIT, "requeue"): S.PEND,
}


def transition(job: Job, event: str) -> JobState:
    new = TRANSITIONS.get((job.state, event))
    if new is None:
        raise IllegalTransition(f"job {job.id}: cannot {event} a job in state {job.state.value}")
    return new


# ---- commands ------------------------------------------------------------------------------

class Cmd(msgspec.Struct, tag=True, kw_only=True):
    time: float


class Keyed(Cmd, kw_only=True):
    """A client's write: answered once per (by, key); a retry gets the first answer."""

    key: str = ""  # the client's idempotency key ("": not deduplicated; internal commands)
    by: str = ""   # who sent it (the token's user; "" with access control off): keys are theirs


class Submit(Keyed):
    specs: list[JobSpec]
    reqs: list[ResReq]


class Place(Cmd):
    job_id: int
    attempt: int  # the attempt the scheduler saw; a stale one is refused
    allocs: list[Alloc]


class Finish(Cmd):
    job_id: int
    attempt: int
    host: str
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    usage: HostUsage | None = None
    started: float | None = None  # when the host started its share: the first host's is hist's "started"


class Kill(Keyed):
    job_ids: list[int]
    reason: str = "killed by user"
    evict: bool = False  # preemption or reclamation sends it away: a running job's evictions count it


class RegisterHost(Cmd):
    host: Host


class HostLost(Cmd):
    name: str


class SetHostAdmin(Keyed):
    names: list[str]
    closed: bool


class RemoveHosts(Keyed):
    names: list[str]


class SetQueues(Cmd):
    queues: list[Queue]
    default_queue: str


class Modify(Keyed):
    job_id: int
    mem_limit: int | None


class Cleanup(Cmd):
    keep_finished: int  # keep at most this many finished jobs (oldest dropped)
    half_life: float = 18_000.0  # the site's fairshare half-life: the dropped jobs' usage is folded with it


class Stop(Keyed):
    """bstop: a pending job is held (PSUSP), a running one suspended by its user (USUSP)."""

    job_ids: list[int]


class Resume(Keyed):
    """bresume: PSUSP -> PEND, USUSP -> RUN."""

    job_ids: list[int]


class Requeue(Keyed):
    """brequeue: an ended job is pending again at once; a running one once its processes end."""

    job_ids: list[int]
    reason: str = ""
    evict: bool = False  # preemption or reclamation sends it away: a running job's evictions count it


class Switch(Keyed):
    """bswitch: move pending or running jobs to another queue."""

    job_ids: list[int]
    queue: str


class Move(Keyed):
    """btop / bbot: first or last among the pending jobs of its queue (through its priority)."""

    job_id: int
    to: Literal["top", "bottom"]


UNSET: Any = msgspec.UNSET


class SpecPatch(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What bmod changes in a pending job; an unset field stays as it is."""

    resreq: str | msgspec.UnsetType = UNSET
    slots: int | msgspec.UnsetType = UNSET
    queue: str | msgspec.UnsetType = UNSET
    name: str | msgspec.UnsetType = UNSET
    run_limit: float | None | msgspec.UnsetType = UNSET  # None: no limit
    priority: int | msgspec.UnsetType = UNSET
    depend: Expr | None | msgspec.UnsetType = UNSET       # None: drop the dependency
    pre_exec: str | msgspec.UnsetType = UNSET             # "": drop the -E

    def fields(self) -> list[str]:
        return [f for f in self.__struct_fields__ if getattr(self, f) is not msgspec.UNSET]


class ModifySpec(Keyed):
    """bmod of a pending job; ``req`` is the re-parsed requirement when ``patch.resreq`` is set."""

    job_id: int
    patch: SpecPatch
    req: ResReq | None = None


class SysSuspend(Cmd):
    """The system suspends running jobs (SSUSP), e.g. for preemption."""

    job_ids: list[int]
    reason: str = "suspended by the system"


class SysResume(Cmd):
    job_ids: list[int]


class Reserve(Cmd):
    """The leader moves a running job's reservation in force on one host: ``shrunk`` once its peak
    held still, ``restored`` once its use passed it (xce/core/shrink.py decides; docs/accounting.md).
    Never above what the share was placed with; one of another attempt, or of a share no longer
    running, is refused (the decision was made on an older state)."""

    job_id: int
    attempt: int
    host: str
    mem: int
    event: Literal["shrunk", "restored"]
    detail: str = ""


class HostUnknown(Cmd):
    """A host stopped answering, not yet declared lost: its jobs are UNKWN until it is decided."""

    name: str


Command = (Submit | Place | Finish | Kill | RegisterHost | HostLost | SetHostAdmin | RemoveHosts | SetQueues | Modify
           | Cleanup | Stop | Resume | Requeue | Switch | Move | ModifySpec | SysSuspend | SysResume | HostUnknown
           | Reserve)
_batch_encoder = msgspec.msgpack.Encoder()
_batch_decoder = msgspec.msgpack.Decoder(list[Command])


def encode_batch(cmds: list[Cmd]) -> bytes:
    return _batch_encoder.encode(cmds)


def decode_batch(blob: bytes) -> list[Cmd]:
    return _batch_decoder.decode(blob)


# ---- what a command changed ---------------------------------------------------------------

@dataclass(slots=True)
class Changes:
    """The entities a command (or a batch of them) changed: the shell publishes these.

    Not replicated state: every replica computes the same Changes from the same log, and
    a snapshot install makes the shell rebuild everything instead.
    """

    jobs: set[int] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    forgotten: list[int] = field(default_factory=list)
    # Jobs changed by the command being applied whose dependents are to be re-evaluated (a
    # negative id: the job itself); apply drains it before it returns: empty between commands.
    settle: list[int] = field(default_factory=list)
    removed_hosts: list[str] = field(default_factory=list)
    arrays: set[int] = field(default_factory=set)  # arrays whose summary (counts, cursor, held) moved

    def __bool__(self) -> bool:
        return bool(self.jobs or self.hosts or self.forgotten or self.removed_hosts or self.arrays)

    def merge(self, other: Changes) -> None:
        self.jobs |= other.jobs
        self.arrays |= other.arrays
        self.hosts |= other.hosts
        self.forgotten += other.forgotten
        self.removed_hosts += other.removed_hosts


# ---- the state -----------------------------------------------------------------------------

class ClusterState:
    def __init__(self) -> None:
        self.jobs: dict[int, Job] = {}
        self.hosts: dict[str, Host] = {}
        self.queues: dict[str, Queue] = {}
        self.default_queue = "normal"
        self.next_job_id = 1
        self.applied = 0
        self.finished_order: list[int] = []
        self.answers: dict[tuple[str, str], tuple[str, Any]] = {}  # (by, key) -> (command, answer)
        self.last_time = 0.0
        self.history: dict[int, list[HistEvent]] = {}
        self.dep_facts: dict[int, Counts] = {}  # forgotten jobs some dependent still names
        self.arrays: dict[int, ArrayJob] = {}  # job arrays, one entity each (xce/core/arrays.py)
        # Fairshare usage of the finished jobs Cleanup dropped, decayed to usage_as_of
        # (xce/core/sched/fairshare.py UsageBook): the kept records plus this are all usage.
        self.usage_past: dict[tuple[str, str, str, str], list[float]] = {}
        self.usage_as_of = 0.0
        self.deps = DepIndex()  # derived from the pending jobs' specs: rebuilt on restore, not replicated
        self.on_host: dict[str, list[Job]] | None = None  # derived, not replicated: see jobs_on

    # Every field is replicated but the derived index (what a command changed travels in ``Changes``).
    _REPLICATED = ("jobs", "hosts", "queues", "default_queue", "next_job_id", "applied",
                   "finished_order", "answers", "last_time", "history", "dep_facts", "arrays", "usage_past",
                   "usage_as_of")

    def __getstate__(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self._REPLICATED}

    def __setstate__(self, st: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]
        for k, v in st.items():
            setattr(self, k, v)
        self.deps = DepIndex.build(self.jobs.values())

    def job(self, job_id: int) -> Job:
        job = self.jobs.get(job_id)
        if job is None:
            raise NotFound(f"job {job_id} is not known")
        return job

    def apply(self, cmd: Cmd, changes: Changes | None = None) -> Any:
        """The command's answer; what it changed is added to ``changes`` (if given)."""
        self.applied += 1
        if type(cmd) not in _KEEP_ON_HOST:
            self.on_host = None  # it may place, move or drop jobs
        self.last_time = max(self.last_time, cmd.time)  # "as of" for reads served by followers
        handler = _HANDLERS.get(type(cmd))
        if handler is None:
            raise InvalidRequest(f"unknown command {type(cmd).__name__}")
        ch = Changes() if changes is None else changes
        try:
            if isinstance(cmd, Keyed) and cmd.key:
                return self._once(cmd, handler, ch)
            return handler(self, cmd, ch)
        finally:
            self._settle(ch, cmd.time)

    def apply_batch(self, cmds: list[Cmd]) -> tuple[list[Result], Changes]:
        """One Raft entry: each command's result (a refusal is its ``Err``) and what they changed."""
        ch = Changes()
        results: list[Result] = []
        for cmd in cmds:
            try:
                results.append(Ok(self.apply(cmd, ch)))
            except XceError as e:
                results.append(Err(e))
        return results, ch

    def _once(self, cmd: Keyed, handler: Any, ch: Changes) -> Any:
        """The first answer to (by, key), computed once; a refusal is not kept (nothing changed)."""
        scope, kind = (cmd.by, cmd.key), type(cmd).__name__
        seen = self.answers.get(scope)
        if seen is not None:
            if seen[0] != kind:
                raise Conflict(f"idempotency key {cmd.key!r} was already used for a {seen[0]}")
            return seen[1]
        answer = handler(self, cmd, ch)
        self.answers[scope] = (kind, answer)
        while len(self.answers) > ANSWERS_KEPT:  # oldest first: dicts keep order
            del self.answers[next(iter(self.answers))]
        return answer

    # ---- changing a job: every change goes through _set, so history and dependents follow ----

    def _set(self, ch: Changes, job: Job, event: str, time: float = 0.0, by: str = "", detail: str = "") -> None:
        old = job.state
        job.state = transition(job, event)
        ch.jobs.add(job.id)
        ch.settle.append(job.id)
        if job.spec.depend is not None and (old in PENDING) != (job.state in PENDING):
            self._undepend(job) if old in PENDING else self._depend(ch, job)  # requeued: decided anew
        self._hist(job.id, time, _HIST_NAMES.get(event, event), by, detail)
        arr = self.arrays.get(job.id >> A.SHIFT) if job.id >> A.SHIFT else None
        if arr is not None:
            A.counted(arr, old, job.state)
            self._materialise(ch, arr)  # a pending one left, or the %limit has room again (marks it changed)

    def _materialise(self, ch: Changes, arr: ArrayJob) -> None:
        """Top the array's pending Jobs up to its window and %limit."""
        ch.arrays.add(arr.id)
        for index in A.next_indices(arr, A.room(arr)):
            job = A.element(arr, index)
            self.jobs[job.id] = job
            self._hist(job.id, arr.submit_time, "submitted", arr.by, f"element of array {arr.id}")
            A.counted(arr, None, S.PEND)
            ch.jobs.add(job.id)
            if job.spec.depend is not None:
                self._depend(ch, job)

    def _end(self, ch: Changes, job: Job, event: str, time: float, by: str = "", detail: str = "") -> None:
        self._set(ch, job, event, time, by, detail or job.reason)
        job.end_time = time
        self.finished_order.append(job.id)

    def _hist(self, job_id: int, time: float, event: str, by: str, detail: str = "") -> None:
        self._log(job_id, HistEvent(time, event, by, detail))

    def _log(self, job_id: int, event: HistEvent) -> None:
        events = self.history.setdefault(job_id, [])
        events.append(event)
        if len(events) > HIST_KEPT:
            del events[1]  # keep "submitted"

    def _hist_at(self, job_id: int, ev: HistEvent) -> None:
        """An event that happened before some already kept (the start, reported at the end)."""
        events = self.history.setdefault(job_id, [])
        events[:] = with_event(events, ev)
        if len(events) > HIST_KEPT:
            del events[1]

    def _back_to_pending(self, ch: Changes, job: Job, why: str, time: float, by: str,
                         event: str = "requeue") -> None:
        if job.state in TERMINAL:
            self.finished_order.remove(job.id)  # O(n): brequeue of an ended job is rare
        self._set(ch, job, event, time, by, why)
        if job.start_time is not None:  # the run's usage stays charged (fairshare), in the job's hard state
            job.runs = [*job.runs, past_run(job, time)]
        job.allocs, job.finished_hosts, job.usage = [], [], []
        job.start_time, job.end_time, job.exit_code, job.signal = None, None, None, None
        job.requeues += 1
        job.kill_requested = job.requeue_requested = False
        job.prior = None
        job.suspend_reason = ""
        job.mem_in_force, job.resized = {}, None  # the next run is placed, and shrunk, anew
        job.reason = f"requeued: {why}"

    def _after_preexec(self, ch: Changes, job: Job, time: float, by: str) -> bool:
        """A run whose -E failed (the command never ran): PEND again for a new attempt, and after
        the queue's max_preexec_retry failures held (PSUSP) or, for "exit", left to end EXIT."""
        if job.reason not in PREEXEC_ENDS or job.kill_requested:
            return False
        queue, fails = self._queue(job), job.preexec_fails + 1
        what = f"pre-execution command {_quoted(job.spec.pre_exec)} " + (
            f"exited {job.exit_code}" if job.reason == PREEXEC_FAILED else
            f"ran past the queue's preexec_timeout ({queue.preexec_timeout or 0:g} s): killed, exit {job.exit_code}")
        if fails < queue.max_preexec_retry:
            self._back_to_pending(ch, job, f"{what} (failure {fails} of {queue.max_preexec_retry})", time, by)
        elif queue.preexec_retry_action == "exit":
            job.reason = f"{what}: failed {fails} times, the queue's max_preexec_retry"
            job.preexec_fails = fails
            return False
        else:
            self._back_to_pending(ch, job, f"{what}: failed {fails} times", time, by, "preexec_hold")
            job.reason = f"held: {what}, {fails} failures (the queue's max_preexec_retry); xce resume to retry"
        job.preexec_fails = fails
        return True

    def _retry_with_more_memory(self, ch: Changes, job: Job, time: float, by: str) -> bool:
        """A run killed for its memory, in a queue that allows it: PEND again, larger (memretry.py)."""
        nxt = grown(job, self._queue(job))
        if nxt is None:
            return False
        peak = max((u.peak for u in job.usage), default=0)
        job.req, job.spec, detail = nxt
        self._back_to_pending(ch, job, f"{detail} (peak {fmt_bytes(peak)})", time, by)
        job.mem_tries += 1
        return True

    # ---- dependencies ----

    def _depend(self, ch: Changes, job: Job) -> None:
        """A job with a dependency enters the index, held until its first evaluation says otherwise."""
        job.held = True
        self.deps.add(job)
        ch.settle.append(-job.id)  # negative: evaluate this job itself

    def _undepend(self, job: Job) -> None:
        job.held = False
        for freed in self.deps.remove(job):
            self.dep_facts.pop(freed, None)

    def _settle(self, ch: Changes, time: float) -> None:
        """Re-evaluate the dependents of every job this command changed (and theirs, in turn)."""
        while ch.settle:
            changed, ch.settle = ch.settle, []
            todo: set[int] = set()
            if self.deps.empty():  # nobody waits: only a job that itself waits (negative) is evaluated
                changed = [jid for jid in changed if jid < 0]
            for jid in changed:
                if jid < 0:
                    todo.add(-jid)
                elif (job := self.jobs.get(jid)) is not None:
                    todo |= self.deps.dependents(job)
                    if jid >> A.SHIFT:  # an element: who waits on its array
                        todo |= self.deps.by_id.get(jid >> A.SHIFT, set())
            for jid in sorted(todo):
                job = self.jobs.get(jid)
                if job is not None and job.state in PENDING and job.spec.depend is not None:
                    self._evaluate(ch, job, time)

    def _evaluate(self, ch: Changes, job: Job, time: float) -> None:
        assert job.spec.depend is not None
        verdict = evaluate(job.spec.depend, self._lookup(job.spec.user))
        was = (job.held, job.reason)
        if verdict.status == "SATISFIED":
            job.held, job.reason = False, ""
        elif verdict.status == "NEVER" and (job.spec.dep_never_kill or self._queue(job).dep_never == "kill"):
            job.reason = verdict.reason
            self._end(ch, job, "kill", time, "controller", verdict.reason)
            return
        else:
            job.held, job.reason = True, verdict.reason
        if (job.held, job.reason) != was:
            ch.jobs.add(job.id)
            if was[0] != job.held:
                self._hist(job.id, time, "released" if not job.held else "held", "controller", verdict.reason)

    def _lookup(self, user: str) -> Any:
        return lookup_for(self.jobs, self.dep_facts, self._jobs_named, self._array_counts, user)

    def _array_counts(self, array_id: int, selected: Any) -> Counts | None:
        arr = self.arrays.get(array_id)
        return None if arr is None else A.counts(arr, self.jobs, selected)

    def _jobs_named(self, user: str, pattern: str) -> list[Job]:
        return [j for j in self.jobs.values() if j.spec.user == user and name_matches(pattern, j.spec.name)]

    def _check_refs(self, spec: JobSpec, before: list[JobSpec]) -> None:
        """LSF refuses a dependency on a job it cannot find; ``before``: the earlier jobs of the batch."""
        assert spec.depend is not None
        for ref in refs(spec.depend):
            if isinstance(ref, JobRef) and ref.id not in self.jobs and ref.id not in self.dep_facts \
                    and ref.id not in self.arrays \
                    and not self.next_job_id <= ref.id < self.next_job_id + len(before):
                raise NotFound(f"dependency {_fmt_ref(ref)}: job {ref.id} is not known")
            if isinstance(ref, NameRef) and not self._jobs_named(spec.user, ref.pattern) and not any(
                    b.user == spec.user and name_matches(ref.pattern, b.name) for b in before):
                raise NotFound(f'dependency "{ref.pattern}": no job of {spec.user or "yours"} has that name')

    def _queue(self, job: Job) -> Queue:
        return self.queues.get(job.spec.queue) or Queue(name=job.spec.queue)

    # ---- handlers ----

    def _admit(self, spec: JobSpec, before: list[JobSpec] | None = None) -> JobSpec:
        """A submitted or modified spec as the queue takes it; InvalidRequest naming what is wrong."""
        queue = spec.queue or self.default_queue
        if queue not in self.queues:
            raise InvalidRequest(f"queue {queue!r} does not exist")
        if queue != spec.queue:
            spec = msgspec.structs.replace(spec, queue=queue)
        spec = apply_queue_limits(spec, self.queues[queue])
        if spec.depend is not None:
            self._check_refs(spec, before or [])
        return spec

    def submit(self, cmd: Submit, ch: Changes) -> list[int]:
        if len(cmd.specs) != len(cmd.reqs):
            raise InvalidRequest(f"submit: {len(cmd.specs)} specs but {len(cmd.reqs)} resource requirements")
        specs: list[JobSpec] = []
        last: JobSpec | None = None
        admitted = None
        for spec in cmd.specs:  # all or nothing: check every job first
            # a batch repeats one spec: a run of equal ones without a dependency (the one
            # check that reads ``specs``) is admitted once and shares the admitted spec
            if spec != last or spec.depend is not None:
                last, admitted = spec, self._admit(spec, specs)
            specs.append(admitted)  # type: ignore[arg-type]  # set at the first spec
        ids = []
        submitted: tuple[JobSpec, HistEvent] | None = None  # one entry for a run of one admitted spec
        for spec, req in zip(specs, cmd.reqs, strict=True):
            if spec.array is not None:  # one entity, whatever its size
                arr = ArrayJob(id=self.next_job_id, spec=spec, req=req, submit_time=cmd.time, by=cmd.by,
                               held=spec.hold)  # held: no element materialises until released
                self.next_job_id += 1
                self.arrays[arr.id] = arr
                self._hist(arr.id, cmd.time, "submitted", cmd.by, f"queue {spec.queue}, {spec.array.count} elements"
                           + (", held" if spec.hold else ""))
                self._materialise(ch, arr)
                ids.append(arr.id)
                continue
            job = Job(id=self.next_job_id, spec=spec, req=req, submit_time=cmd.time)
            self.next_job_id += 1
            self.jobs[job.id] = job
            ch.jobs.add(job.id)
            ch.settle.append(job.id)
            if submitted is None or submitted[0] is not spec:
                submitted = spec, HistEvent(cmd.time, "submitted", cmd.by, f"queue {spec.queue}")
            self._log(job.id, submitted[1])
            if spec.hold:  # sbatch -H, bsub -H: pending but held, as a stop would leave it
                self._set(ch, job, "stop", cmd.time, cmd.by, SUBMITTED_HELD)
                job.reason = SUBMITTED_HELD
            if spec.depend is not None:
                self._depend(ch, job)
            ids.append(job.id)
        return ids

    def place(self, cmd: Place, ch: Changes) -> int:
        job = self.job(cmd.job_id)
        if job.attempt != cmd.attempt:
            raise Conflict(f"job {job.id}: placement for attempt {cmd.attempt}, job is at {job.attempt}")
        if job.held:
            raise Conflict(f"job {job.id}: held by its dependency ({job.reason})")
        arr = self.arrays.get(job.id >> A.SHIFT) if job.id >> A.SHIFT else None
        if arr is not None and arr.spec.array is not None and arr.spec.array.limit is not None \
                and A.active(arr) >= arr.spec.array.limit:
            raise Conflict(f"job {A.element_text(job.id)}: array {arr.id} already runs its limit of "
                           f"{arr.spec.array.limit} elements")
        hosts = [a.host for a in cmd.allocs]
        if not hosts or len(set(hosts)) != len(hosts):
            raise InvalidRequest(f"job {job.id}: a placement names each host once, got {hosts}")
        if sum(a.slots for a in cmd.allocs) != job.spec.slots or any(a.slots < 1 for a in cmd.allocs):
            raise InvalidRequest(f"job {job.id}: placement gives {[a.slots for a in cmd.allocs]} slots, "
                                 f"the job needs {job.spec.slots}")
        for a in cmd.allocs:
            host = self.hosts.get(a.host)
            if host is None or host.unavail or host.closed:
                raise Conflict(f"job {job.id}: host {a.host} cannot take jobs")
        self._set(ch, job, "place", cmd.time, "scheduler", " ".join(hosts))
        job.attempt += 1
        job.allocs = list(cmd.allocs)
        job.start_time = cmd.time
        job.finished_hosts = []
        job.usage = []
        job.reason = ""
        return job.attempt

    def finish(self, cmd: Finish, ch: Changes) -> str:
        job = self.job(cmd.job_id)
        if job.attempt != cmd.attempt or job.state not in ACTIVE:
            return "stale"  # a report from an older placement: acknowledged, ignored
        if cmd.host not in job.hosts or cmd.host in job.finished_hosts:
            return "stale"
        job.finished_hosts.append(cmd.host)
        if cmd.started is not None and cmd.host == job.hosts[0] and cmd.reason not in PREEXEC_ENDS:
            self._hist_at(job.id, HistEvent(cmd.started, "started", cmd.host))  # its command ran from then
        if cmd.usage is not None:
            job.usage.append(cmd.usage)
        failed = (cmd.exit_code or 0) != 0 or cmd.signal is not None or bool(cmd.reason)
        if failed and job.exit_code in (None, 0):
            job.exit_code, job.signal = cmd.exit_code, cmd.signal
            job.reason = job.reason or cmd.reason
        elif job.exit_code is None:
            job.exit_code = cmd.exit_code
        ch.jobs.add(job.id)
        if set(job.finished_hosts) >= set(job.hosts):
            if job.requeue_requested:  # brequeue: the old processes have ended
                self._back_to_pending(ch, job, job.reason.removeprefix("requeue requested: "), cmd.time, cmd.host)
                return "ok"
            ok = job.exit_code == 0 and job.signal is None and not job.reason
            if not ok and self._after_preexec(ch, job, cmd.time, cmd.host):
                return "ok"
            if not ok and self._retry_with_more_memory(ch, job, cmd.time, cmd.host):
                return "ok"
            detail = f"exit code {job.exit_code}" if ok else job.reason or f"exit code {job.exit_code}"
            self._end(ch, job, "done" if ok else "exit", cmd.time, cmd.host, detail)
        return "ok"

    def _elements(self, arr: ArrayJob) -> list[Job]:
        """The array's materialised elements (a scan: control of a whole array is rare)."""
        return [j for jid, j in self.jobs.items() if jid >> A.SHIFT == arr.id]

    def _kill_array(self, ch: Changes, arr: ArrayJob, cmd: Kill) -> str:
        """Every element: the unmaterialised tail ends EXIT at once, without objects; then the rest."""
        tail = A.unmaterialised(arr)
        arr.cursor, arr.ahead = A.indices(arr).count, []
        arr.counts[S.EXIT.value] = arr.counts.get(S.EXIT.value, 0) + tail
        ch.arrays.add(arr.id)
        self._hist(arr.id, cmd.time, "killed", cmd.by, f"{tail} pending elements without a record")
        answers = [self.kill(Kill(time=cmd.time, job_ids=[j.id], reason=cmd.reason, by=cmd.by), ch)[j.id]
                   for j in self._elements(arr)]
        running = answers.count("kill requested")
        return f"killed {tail + answers.count('killed')}" + (f", kill requested for {running}" if running else "")

    def kill(self, cmd: Kill, ch: Changes) -> dict[int, str]:
        out: dict[int, str] = {}
        for jid in cmd.job_ids:
            lazy = self._lazy_element(jid)
            job = self._materialise_one(ch, *lazy) if lazy is not None else self.jobs.get(jid)
            if job is None and jid in self.arrays:
                out[jid] = self._kill_array(ch, self.arrays[jid], cmd)
            elif job is None:
                out[jid] = "not found"
            elif job.state in PENDING:
                job.reason = cmd.reason
                self._end(ch, job, "kill", cmd.time, cmd.by)
                out[jid] = "killed"
            elif job.state in TERMINAL:
                out[jid] = f"already {job.state.value}"
            else:
                job.evictions += cmd.evict
                job.kill_requested = True
                job.requeue_requested = False  # a kill wins over a requeue in flight
                job.reason = cmd.reason if job.reason.startswith("requeue requested") else job.reason or cmd.reason
                ch.jobs.add(jid)
                self._hist(jid, cmd.time, "kill requested", cmd.by, cmd.reason)
                out[jid] = "kill requested"
        return out

    def _targets(self, ch: Changes, job_ids: list[int], event: str, legal: frozenset[JobState]) -> list[Job]:
        """All or nothing: every named job must exist and be in a state ``event`` applies to.
        An array's id names its materialised elements in those states (the others are skipped);
        an element not materialised yet is PEND, and is materialised once all are checked."""
        jobs: list[Job] = []
        to_make: list[tuple[ArrayJob, int]] = []
        for jid in job_ids:
            if jid in self.arrays and jid not in self.jobs:
                jobs += [j for j in self._elements(self.arrays[jid]) if j.state in legal]
                continue
            lazy = self._lazy_element(jid)
            state = S.PEND if lazy is not None else self.job(jid).state
            if state not in legal:
                raise IllegalTransition(f"job {A.element_text(jid)}: cannot {event} a job in state {state.value}")
            if lazy is not None:
                to_make.append(lazy)
            else:
                jobs.append(self.jobs[jid])
        return jobs + [self._materialise_one(ch, arr, index) for arr, index in to_make]

    def _lazy_element(self, job_id: int) -> tuple[ArrayJob, int] | None:
        """(array, index) of an element that is pending without a Job."""
        array_id, index = A.split_id(job_id)
        arr = self.arrays.get(array_id) if index is not None else None
        return (arr, index) if arr is not None and index is not None and A.is_unmaterialised(arr, index) else None

    def _materialise_one(self, ch: Changes, arr: ArrayJob, index: int) -> Job:
        """Element ``index`` as a Job ahead of the cursor, because a command names it."""
        job = A.element(arr, index)
        self.jobs[job.id] = job
        self._hist(job.id, arr.submit_time, "submitted", arr.by, f"element of array {arr.id}")
        arr.ahead.append(index)
        A.counted(arr, None, S.PEND)
        ch.arrays.add(arr.id)
        ch.jobs.add(job.id)
        if job.spec.depend is not None:
            self._depend(ch, job)
        return job

    def _hold_arrays(self, ch: Changes, job_ids: list[int], held: bool) -> None:
        """Stop/resume of a whole array also stops/restarts materialising its pending elements."""
        for jid in job_ids:
            arr = self.arrays.get(jid)
            if arr is not None and jid not in self.jobs:
                arr.held = held
                ch.arrays.add(arr.id)
                if not held:
                    self._materialise(ch, arr)

    def stop(self, cmd: Stop, ch: Changes) -> dict[int, str]:
        out = {}
        targets = self._targets(ch, cmd.job_ids, "stop", frozenset({S.PEND, S.RUN, S.SSUSP}))
        self._hold_arrays(ch, cmd.job_ids, True)
        for job in targets:
            held = job.state == S.PEND
            self._set(ch, job, "stop", cmd.time, cmd.by)
            if held:  # a running job's reason stays its own: it is what decides DONE or EXIT
                job.reason = "held by its user (xce stop)"
            out[job.id] = job.state.value
        return out

    def resume(self, cmd: Resume, ch: Changes) -> dict[int, str]:
        out = {}
        targets = self._targets(ch, cmd.job_ids, "resume", frozenset({S.PSUSP, S.USUSP}))
        for job in targets:
            if job.state == S.PSUSP:
                job.reason, job.preexec_fails = "", 0  # held for its -E: a whole new set of tries
            self._set(ch, job, "resume", cmd.time, cmd.by)
            if job.state == S.PEND and job.spec.depend is not None:
                ch.settle.append(-job.id)  # its dependency decides again
            out[job.id] = job.state.value
        self._hold_arrays(ch, cmd.job_ids, False)  # after: resumed elements count in its window
        return out

    def requeue(self, cmd: Requeue, ch: Changes) -> dict[int, str]:
        why = cmd.reason or f"by {cmd.by or 'a user'} (xce requeue)"
        out = {}
        for job in self._targets(ch, cmd.job_ids, "requeue", ACTIVE | TERMINAL):
            if job.state in TERMINAL:
                self._back_to_pending(ch, job, why, cmd.time, cmd.by)
                out[job.id] = "requeued"
            else:  # its processes are killed first; Finish of the last one makes it PEND
                job.evictions += cmd.evict
                job.kill_requested = job.requeue_requested = True
                job.reason = f"requeue requested: {why}"
                ch.jobs.add(job.id)
                self._hist(job.id, cmd.time, "requeue requested", cmd.by, why)
                out[job.id] = "requeue requested"
        return out

    def switch(self, cmd: Switch, ch: Changes) -> dict[int, str]:
        queue = self.queues.get(cmd.queue)
        if queue is None:
            raise InvalidRequest(f"queue {cmd.queue!r} does not exist (queues: {', '.join(sorted(self.queues))})")
        jobs = self._targets(ch, cmd.job_ids, "switch", PENDING | ACTIVE)
        specs = [into_queue(j.spec, self.queues.get(j.spec.queue), queue) for j in jobs]
        arrays = [a for jid in cmd.job_ids if jid not in self.jobs and (a := self.arrays.get(jid)) is not None]
        for arr, new in [(a, into_queue(a.spec, self.queues.get(a.spec.queue), queue)) for a in arrays]:
            old = arr.spec.queue  # the elements to come pend there too (all checked before any changes)
            arr.spec = new
            ch.arrays.add(arr.id)
            self._hist(arr.id, cmd.time, "switched", cmd.by, f"queue {old} -> {cmd.queue}")
        out = {}
        for job, new in zip(jobs, specs, strict=True):
            old, job.spec = job.spec.queue, new
            ch.jobs.add(job.id)
            self._hist(job.id, cmd.time, "switched", cmd.by, f"queue {old} -> {cmd.queue}")
            out[job.id] = cmd.queue
        return out

    def move(self, cmd: Move, ch: Changes) -> int:
        """The job's new priority: one above (top) or below (bottom) every other pending job of its
        queue; a job already above (below) them all keeps its own, so a move never goes the wrong way.
        An array's id moves the array: its pending elements and those to come."""
        arr = self.arrays.get(cmd.job_id) if cmd.job_id not in self.jobs else None
        if arr is None:
            jobs = self._targets(ch, [cmd.job_id], f"move to the {cmd.to}", PENDING)
            spec = jobs[0].spec
        else:
            jobs, spec = [j for j in self._elements(arr) if j.state in PENDING], arr.spec
        moved = {j.id for j in jobs}
        others = [j.spec.priority for j in self.jobs.values()
                  if j.state in PENDING and j.spec.queue == spec.queue and j.id not in moved]
        own = spec.priority
        prio = (max(max(others, default=own) + 1, own) if others and cmd.to == "top"
                else min(min(others, default=own) - 1, own) if others
                else own + 1 if cmd.to == "top" else own - 1)
        if arr is not None:
            arr.spec = msgspec.structs.replace(arr.spec, priority=prio)
            ch.arrays.add(arr.id)
            self._hist(arr.id, cmd.time, f"moved to {cmd.to}", cmd.by, f"priority {prio}")
        for job in jobs:
            job.spec = msgspec.structs.replace(job.spec, priority=prio)
            ch.jobs.add(job.id)
            self._hist(job.id, cmd.time, f"moved to {cmd.to}", cmd.by, f"priority {prio}")
        return prio

    def modify_spec(self, cmd: ModifySpec, ch: Changes) -> str:
        """bmod of a pending job or element; of an array's id, of the array: every pending element,
        those not materialised yet too (they take the array's spec when they are)."""
        arr = self.arrays.get(cmd.job_id) if cmd.job_id not in self.jobs else None
        changes = {f: getattr(cmd.patch, f) for f in cmd.patch.fields()}
        if not changes:
            raise InvalidRequest(f"job {A.element_text(cmd.job_id)}: modify names nothing to change")
        if "resreq" in changes and cmd.req is None:
            raise InvalidRequest(f"job {A.element_text(cmd.job_id)}: a new resource requirement comes with its "
                                 "parsed form")
        if arr is None:
            job = self._targets(ch, [cmd.job_id], "modify", PENDING)[0]
            self._respec(ch, job, self._modified(job.spec, changes), cmd)
            return "ok"
        arr.spec = self._modified(arr.spec, changes)
        if cmd.req is not None:
            arr.req = cmd.req
        ch.arrays.add(arr.id)
        self._hist(arr.id, cmd.time, "modified", cmd.by, ", ".join(sorted(changes)))
        for job in [j for j in self._elements(arr) if j.state in PENDING]:
            self._respec(ch, job, self._modified(job.spec, changes), cmd)
        return "ok"

    def _modified(self, spec: JobSpec, changes: dict[str, Any]) -> JobSpec:
        """``spec`` with ``changes``, checked and admitted as a submit is."""
        new = msgspec.structs.replace(spec, **changes)
        check_spec(new)
        if "queue" in changes and new.queue in self.queues:  # limits the old queue gave: the new one's apply
            moved = into_queue(msgspec.structs.replace(spec, **{k: v for k, v in changes.items() if k != "queue"}),
                               self.queues.get(spec.queue), self.queues[new.queue])
            new = msgspec.structs.replace(moved, **{k: v for k, v in changes.items() if k in ("run_limit",)})
        return self._admit(new)

    def _respec(self, ch: Changes, job: Job, spec: JobSpec, cmd: ModifySpec) -> None:
        if job.spec.depend is not None:
            self._undepend(job)
        job.spec = spec
        if cmd.req is not None:
            job.req = cmd.req
        if spec.depend is not None:
            self._depend(ch, job)
        elif job.reason.startswith(("waiting for", "never satisfied")):
            job.reason = ""
        ch.jobs.add(job.id)
        ch.settle.append(job.id)  # its name may be what another job waits on
        self._hist(job.id, cmd.time, "modified", cmd.by, ", ".join(sorted(cmd.patch.fields())))

    def sys_suspend(self, cmd: SysSuspend, ch: Changes) -> dict[int, str]:
        for job in self._targets(ch, cmd.job_ids, "sys_suspend", frozenset({S.RUN})):
            self._set(ch, job, "sys_suspend", cmd.time, "controller", cmd.reason)
            job.suspend_reason = cmd.reason  # why it is SSUSP (bjobs' suspending reason): not its outcome
            job.evictions += 1  # the system suspends a job only to preempt or reclaim
        return {jid: S.SSUSP.value for jid in cmd.job_ids}

    def sys_resume(self, cmd: SysResume, ch: Changes) -> dict[int, str]:
        for job in self._targets(ch, cmd.job_ids, "sys_resume", frozenset({S.SSUSP})):
            self._set(ch, job, "sys_resume", cmd.time, "controller")
            job.suspend_reason = ""
        return {jid: S.RUN.value for jid in cmd.job_ids}

    def host_unknown(self, cmd: HostUnknown, ch: Changes) -> list[int]:
        host = self.hosts.get(cmd.name)
        if host is None:
            raise NotFound(f"host {cmd.name} is not known")
        host.unavail = True  # no new work while it is undecided
        ch.hosts.add(host.name)
        affected = []
        for job in self.jobs_on(cmd.name):
            if job.state in (S.RUN, S.USUSP, S.SSUSP):
                job.prior = job.state
                self._set(ch, job, "unknown", cmd.time, "controller", f"host {cmd.name} not answering")
                affected.append(job.id)
        return affected

    def register_host(self, cmd: RegisterHost, ch: Changes) -> str:
        old = self.hosts.get(cmd.host.name)
        host = cmd.host
        if old is not None:
            host.closed = old.closed  # admin state survives re-registration
        host.unavail = False
        self.hosts[host.name] = host
        ch.hosts.add(host.name)
        if old is None or not old.unavail:
            # Only a host gone unknown (unavail) has UNKWN jobs: a failover's registrations
            # of live hosts skip the walk of every job, which at hosts x jobs held the lock.
            return "ok"
        for job in self.jobs_on(host.name):  # its UNKWN jobs are known again, in the state they had
            if job.state == S.UNKWN and self._all_answer(job):
                prior, job.prior = job.prior, None
                self._set(ch, job, "back", cmd.time, host.name)
                if prior in _SUSPEND_AGAIN:  # back where it was, through the table
                    self._set(ch, job, _SUSPEND_AGAIN[prior], cmd.time, host.name)
        return "ok"

    def jobs_on(self, name: str) -> list[Job]:
        """The jobs with a share on host ``name`` (any state), in job order.

        From an index built by one walk of every job and kept while only HostUnknown,
        RegisterHost and HostLost apply: the first two change jobs' states, never where jobs
        run, and HostLost takes the jobs it requeues out of it.  When a leader
        stalls, thousands of hosts go silent in one check and thousands of HostUnknown follow
        (and their registrations after): each walked every job, hosts x jobs steps in the
        Raft thread of every controller (20 s and more at 2,000 hosts x 20 jobs).
        """
        if self.on_host is None:
            index: dict[str, list[Job]] = {}
            for job in self.jobs.values():
                for host in dict.fromkeys(a.host for a in job.allocs):
                    index.setdefault(host, []).append(job)
            self.on_host = index
        return self.on_host.get(name, [])

    def _all_answer(self, job: Job) -> bool:
        """Every host of the job answers again: a job over two silent hosts stays UNKWN until both do."""
        return not any((h := self.hosts.get(name)) is not None and h.unavail for name in job.hosts)

    def host_lost(self, cmd: HostLost, ch: Changes) -> list[int]:
        host = self.hosts.get(cmd.name)
        if host is None:
            raise NotFound(f"host {cmd.name} is not known")
        host.unavail = True
        ch.hosts.add(host.name)
        affected = []
        # The index, not a walk of every job: a stalled leader's hosts are lost together, and a
        # walk each was hosts x jobs steps in every controller's Raft thread (40 s without a
        # tick at 5,000 hosts x 20 jobs).  A job requeued here runs nowhere any more, so it
        # leaves the index; one that ends keeps its hosts, as the index lists jobs in any state.
        for job in list(self.jobs_on(cmd.name)):
            if job.state in ACTIVE:
                affected.append(job.id)
                was = job.hosts
                self._requeue_or_exit(ch, job, f"host {cmd.name} lost", cmd.time)
                if not job.allocs and self.on_host is not None:
                    for name in dict.fromkeys(was):
                        self.on_host[name].remove(job)
        return affected

    def _requeue_or_exit(self, ch: Changes, job: Job, why: str, time: float) -> None:
        queue = self.queues.get(job.spec.queue)
        rerun = job.spec.rerunnable if job.spec.rerunnable is not None else bool(queue and queue.rerunnable)
        if job.requeue_requested or (rerun and not job.kill_requested):
            self._back_to_pending(ch, job, why, time, "controller")
        else:
            job.reason, job.prior = why, None
            self._end(ch, job, "exit", time, "controller")

    def set_host_admin(self, cmd: SetHostAdmin, ch: Changes) -> str:
        for name in cmd.names:
            if name not in self.hosts:
                raise NotFound(f"host {name} is not known")
        for name in cmd.names:
            self.hosts[name].closed = cmd.closed
            ch.hosts.add(name)
        return "ok"

    def remove_hosts(self, cmd: RemoveHosts, ch: Changes) -> str:
        for name in cmd.names:  # all or nothing: check every host before removing any
            if name not in self.hosts:
                raise NotFound(f"host {name} is not known")
            busy = sorted(j.id for j in self.jobs.values() if j.state in ACTIVE and name in j.hosts)
            if busy:
                one = len(busy) == 1
                raise Conflict(f"host {name} runs job{'' if one else 's'} {' '.join(map(str, busy))}: kill "
                               f"{'it' if one else 'them'} or wait for {'its' if one else 'their'} end "
                               "before removing it")
        for name in cmd.names:
            del self.hosts[name]
            ch.hosts.discard(name)
            ch.removed_hosts.append(name)
        return "ok"

    def set_queues(self, cmd: SetQueues, ch: Changes) -> str:
        self.queues = {q.name: q for q in cmd.queues}
        self.default_queue = cmd.default_queue
        return "ok"

    def modify(self, cmd: Modify, ch: Changes) -> str:
        """bmod -M of a job not ended; of an array's id, of the array and each element not ended."""
        arr = self.arrays.get(cmd.job_id) if cmd.job_id not in self.jobs else None
        if arr is not None:
            arr.spec = msgspec.structs.replace(arr.spec, mem_limit=self._mem_limit(arr.spec, cmd.mem_limit))
            ch.arrays.add(arr.id)
            self._hist(arr.id, cmd.time, "modified", cmd.by, "mem_limit")
            for job in [j for j in self._elements(arr) if j.state not in TERMINAL]:
                self._set_mem_limit(ch, job, cmd)
            return "ok"
        lazy = self._lazy_element(cmd.job_id)
        job = self._materialise_one(ch, *lazy) if lazy is not None else self.job(cmd.job_id)
        if job.state in TERMINAL:
            raise Conflict(f"job {A.element_text(job.id)} has already ended ({job.state.value})")
        self._set_mem_limit(ch, job, cmd)
        return "ok"

    def _mem_limit(self, spec: JobSpec, mem_limit: int | None) -> int | None:
        """-M under the job's queue: its default for none, refused above its maximum."""
        queue = self.queues.get(spec.queue)
        new = msgspec.structs.replace(spec, mem_limit=mem_limit)
        return apply_queue_limits(new, queue).mem_limit if queue is not None else mem_limit

    def _set_mem_limit(self, ch: Changes, job: Job, cmd: Modify) -> None:
        job.spec = msgspec.structs.replace(job.spec, mem_limit=self._mem_limit(job.spec, cmd.mem_limit))  # -M only
        ch.jobs.add(job.id)
        self._hist(job.id, cmd.time, "modified", cmd.by, "mem_limit")

    def reserve(self, cmd: Reserve, ch: Changes) -> str:
        """A share's reservation in force moved (shrunk or restored): one charge change in every ledger."""
        job = self.jobs.get(cmd.job_id)
        alloc = next((a for a in job.allocs if a.host == cmd.host), None) if job is not None else None
        if job is None or job.attempt != cmd.attempt or job.state not in ACTIVE or alloc is None \
                or cmd.host in job.finished_hosts:
            raise Conflict(f"job {A.element_text(cmd.job_id)}: no running share on {cmd.host} at attempt "
                           f"{cmd.attempt} to reserve for")
        if not 0 <= cmd.mem <= alloc.mem:
            raise InvalidRequest(f"job {A.element_text(job.id)} on {cmd.host}: a reservation in force of "
                                 f"{fmt_bytes(cmd.mem)} is outside [0, the {fmt_bytes(alloc.mem)} it was placed with]")
        if job.mem_in_force.get(cmd.host) == cmd.mem:
            return "unchanged"  # a decision made twice (its first commit not yet seen when it was made again)
        job.mem_in_force = {**job.mem_in_force, cmd.host: cmd.mem}
        job.resized = Resized(cmd.time, cmd.host, cmd.mem, cmd.event, cmd.detail)
        ch.jobs.add(job.id)
        self._hist(job.id, cmd.time, f"reservation {cmd.event}", "controller",
                   f"{cmd.host}: {fmt_bytes(alloc.mem)} asked, {fmt_bytes(cmd.mem)} in force: {cmd.detail}")
        return "ok"

    def cleanup(self, cmd: Cleanup, ch: Changes) -> int:
        drop = len(self.finished_order) - cmd.keep_finished
        if drop <= 0:
            return 0
        book = UsageBook.seeded(cmd.half_life, self.usage_past, self.usage_as_of)
        book.add_ended((self.jobs[j] for j in self.finished_order[:drop] if j in self.jobs), cmd.time)
        self.usage_past, self.usage_as_of = book.usage, book.as_of
        for jid in self.finished_order[:drop]:
            job = self.jobs.pop(jid, None)
            self.history.pop(jid, None)
            if job is not None and self.deps.named(jid):  # a dependent still needs its outcome
                self.dep_facts[jid] = Counts.of(job.state.value, job.exit_code)
            ch.forgotten.append(jid)
        del self.finished_order[:drop]
        return drop


def with_event(events: list[HistEvent], ev: HistEvent) -> list[HistEvent]:
    """``events`` (in time order) with ``ev`` in its place: after every event not later than it."""
    at = len(events)
    while at > 0 and events[at - 1].time > ev.time:
        at -= 1
    return [*events[:at], ev, *events[at:]]


def _quoted(command: str, most: int = 60) -> str:
    """A command in a reason, double-quoted, cut to ``most`` characters."""
    return f'"{command}"' if len(command) <= most else f'"{command[:most - 3]}..."'


_HIST_NAMES = {"place": "dispatched", "done": "ended DONE", "exit": "ended EXIT", "kill": "killed",
               "stop": "suspended", "resume": "resumed", "requeue": "requeued", "sys_suspend": "suspended by system",
               "sys_resume": "resumed by system", "unknown": "host unknown", "back": "host back",
               "preexec_hold": "held (pre-exec)"}
# The history's name of each state event, read back by xce/core/jobtimes.py (time per state).
HIST_EVENTS = {name: event for event, name in _HIST_NAMES.items()}


_SUSPEND_AGAIN = {S.USUSP: "stop", S.SSUSP: "sys_suspend"}
# Commands after which ClusterState.on_host still holds: they never place, move or drop a job,
# or (HostLost) keep the index up to date themselves.
_KEEP_ON_HOST = frozenset({HostUnknown, RegisterHost, HostLost, Reserve})


def _fmt_ref(ref: JobRef) -> str:
    return f"{ref.id}[{ref.indices.text()}]" if ref.indices is not None else str(ref.id)


_HANDLERS = {
    Submit: ClusterState.submit, Place: ClusterState.place, Finish: ClusterState.finish,
    Kill: ClusterState.kill, RegisterHost: ClusterState.register_host,
    HostLost: ClusterState.host_lost, SetHostAdmin: ClusterState.set_host_admin,
    RemoveHosts: ClusterState.remove_hosts,
    SetQueues: ClusterState.set_queues, Modify: ClusterState.modify, Cleanup: ClusterState.cleanup,
    Stop: ClusterState.stop, Resume: ClusterState.resume, Requeue: ClusterState.requeue,
    Switch: ClusterState.switch, Move: ClusterState.move, ModifySpec: ClusterState.modify_spec,
    SysSuspend: ClusterState.sys_suspend, SysResume: ClusterState.sys_resume,
    HostUnknown: ClusterState.host_unknown, Reserve: ClusterState.reserve,
}
