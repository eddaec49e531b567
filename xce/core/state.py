"""The controller's replicated state machine: a deterministic fold over commands.

``ClusterState.apply(cmd)`` does no I/O, reads no clock (times travel inside the
commands) and draws no random numbers, so every controller that applies the
same Raft log holds the same state.  Business rules live here and are tested
without Raft; xce/daemons/raft.py only carries batches of encoded commands.

Job transitions (anything else raises IllegalTransition)::

    PEND  --place-->    RUN     --finish(0)-->  DONE
      |                  |  |---finish(!=0)--> EXIT
      +--kill--> EXIT    |  +---host_lost----> EXIT   (not rerunnable)
                         +--requeue/host_lost--> PEND (rerunnable)
    RUN  --suspend--> USUSP --resume--> RUN;  USUSP --finish--> DONE/EXIT

What a command changed (jobs touched, hosts touched, jobs forgotten) is not kept in the
state: ``apply(cmd, changes)`` records it in the caller's ``Changes`` and ``apply_batch``
returns a batch's ``Changes`` beside its results, for the shell to publish and dispatch.

A client's write (``Keyed``: submit, kill, modify, host admin) carries the client's
idempotency key and the principal who sent it (``by``, set by the leader from the
verified token).  Its first answer is kept under (by, key): a retry with the same key
gets that answer again and changes nothing; the same key from someone else is a
different request.  Kept answers are replicated state, bounded by ANSWERS_KEPT.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from xce.core.errors import Conflict, IllegalTransition, InvalidRequest, NotFound, XceError
from xce.core.model import (
    TERMINAL,
    Alloc,
    Host,
    HostUsage,
    Job,
    JobSpec,
    JobState,
    Queue,
)
from xce.core.resreq import ResReq
from xce.core.result import Err, Ok, Result

S = JobState
ANSWERS_KEPT = 100_000  # keyed answers kept: retries arrive within seconds; this is hours of writes
TRANSITIONS: dict[tuple[JobState, str], JobState] = {
    (S.PEND, "place"): S.RUN,
    (S.PEND, "kill"): S.EXIT,
    (S.RUN, "done"): S.DONE,
    (S.RUN, "exit"): S.EXIT,
    (S.RUN, "requeue"): S.PEND,
    (S.RUN, "suspend"): S.USUSP,
    (S.USUSP, "resume"): S.RUN,
    (S.USUSP, "done"): S.DONE,
    (S.USUSP, "exit"): S.EXIT,
    (S.USUSP, "requeue"): S.PEND,
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


class Kill(Keyed):
    job_ids: list[int]
    reason: str = "killed by user"


class RegisterHost(Cmd):
    host: Host


class HostLost(Cmd):
    name: str


class SetHostAdmin(Keyed):
    names: list[str]
    closed: bool


class SetQueues(Cmd):
    queues: list[Queue]
    default_queue: str


class Modify(Keyed):
    job_id: int
    mem_limit: int | None


class Cleanup(Cmd):
    keep_finished: int  # keep at most this many finished jobs (oldest dropped)


Command = Submit | Place | Finish | Kill | RegisterHost | HostLost | SetHostAdmin | SetQueues | Modify | Cleanup
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

    def __bool__(self) -> bool:
        return bool(self.jobs or self.hosts or self.forgotten)

    def merge(self, other: Changes) -> None:
        self.jobs |= other.jobs
        self.hosts |= other.hosts
        self.forgotten += other.forgotten


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

    # Every field is replicated (what a command changed travels in ``Changes``, not here).
    _REPLICATED = ("jobs", "hosts", "queues", "default_queue", "next_job_id", "applied",
                   "finished_order", "answers", "last_time")

    def __getstate__(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self._REPLICATED}

    def __setstate__(self, st: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]
        for k, v in st.items():
            setattr(self, k, v)

    def job(self, job_id: int) -> Job:
        job = self.jobs.get(job_id)
        if job is None:
            raise NotFound(f"job {job_id} is not known")
        return job

    def apply(self, cmd: Cmd, changes: Changes | None = None) -> Any:
        """The command's answer; what it changed is added to ``changes`` (if given)."""
        self.applied += 1
        self.last_time = max(self.last_time, cmd.time)  # "as of" for reads served by followers
        handler = _HANDLERS.get(type(cmd))
        if handler is None:
            raise InvalidRequest(f"unknown command {type(cmd).__name__}")
        ch = Changes() if changes is None else changes
        if isinstance(cmd, Keyed) and cmd.key:
            return self._once(cmd, handler, ch)
        return handler(self, cmd, ch)

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

    def _set(self, job: Job, event: str, ch: Changes) -> None:
        job.state = transition(job, event)
        ch.jobs.add(job.id)

    def _end(self, job: Job, event: str, time: float, ch: Changes) -> None:
        self._set(job, event, ch)
        job.end_time = time
        self.finished_order.append(job.id)

    # ---- handlers ----

    def submit(self, cmd: Submit, ch: Changes) -> list[int]:
        if len(cmd.specs) != len(cmd.reqs):
            raise InvalidRequest(f"submit: {len(cmd.specs)} specs but {len(cmd.reqs)} resource requirements")
        for spec in cmd.specs:  # all or nothing: check every job before creating any
            if (spec.queue or self.default_queue) not in self.queues:
                raise InvalidRequest(f"queue {spec.queue or self.default_queue!r} does not exist")
        ids = []
        for spec, req in zip(cmd.specs, cmd.reqs, strict=True):
            queue = spec.queue or self.default_queue
            if queue != spec.queue:
                spec = msgspec.structs.replace(spec, queue=queue)
            job = Job(id=self.next_job_id, spec=spec, req=req, submit_time=cmd.time)
            self.next_job_id += 1
            self.jobs[job.id] = job
            ch.jobs.add(job.id)
            ids.append(job.id)
        return ids

    def place(self, cmd: Place, ch: Changes) -> int:
        job = self.job(cmd.job_id)
        if job.attempt != cmd.attempt:
            raise Conflict(f"job {job.id}: placement for attempt {cmd.attempt}, job is at {job.attempt}")
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
        self._set(job, "place", ch)
        job.attempt += 1
        job.allocs = list(cmd.allocs)
        job.start_time = cmd.time
        job.finished_hosts = []
        job.usage = []
        job.reason = ""
        return job.attempt

    def finish(self, cmd: Finish, ch: Changes) -> str:
        job = self.job(cmd.job_id)
        if job.attempt != cmd.attempt or job.state in TERMINAL or job.state == S.PEND:
            return "stale"  # a report from an older placement: acknowledged, ignored
        if cmd.host not in job.hosts or cmd.host in job.finished_hosts:
            return "stale"
        job.finished_hosts.append(cmd.host)
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
            ok = job.exit_code == 0 and job.signal is None and not job.reason
            self._end(job, "done" if ok else "exit", cmd.time, ch)
        return "ok"

    def kill(self, cmd: Kill, ch: Changes) -> dict[int, str]:
        out: dict[int, str] = {}
        for jid in cmd.job_ids:
            job = self.jobs.get(jid)
            if job is None:
                out[jid] = "not found"
            elif job.state == S.PEND:
                job.reason = cmd.reason
                self._end(job, "kill", cmd.time, ch)
                out[jid] = "killed"
            elif job.state in TERMINAL:
                out[jid] = f"already {job.state.value}"
            else:
                job.kill_requested = True
                job.reason = job.reason or cmd.reason
                ch.jobs.add(jid)
                out[jid] = "kill requested"
        return out

    def register_host(self, cmd: RegisterHost, ch: Changes) -> str:
        old = self.hosts.get(cmd.host.name)
        host = cmd.host
        if old is not None:
            host.closed = old.closed  # admin state survives re-registration
        host.unavail = False
        self.hosts[host.name] = host
        ch.hosts.add(host.name)
        return "ok"

    def host_lost(self, cmd: HostLost, ch: Changes) -> list[int]:
        host = self.hosts.get(cmd.name)
        if host is None:
            raise NotFound(f"host {cmd.name} is not known")
        host.unavail = True
        ch.hosts.add(host.name)
        affected = []
        for job in self.jobs.values():
            if job.state in (S.RUN, S.USUSP) and cmd.name in job.hosts:
                affected.append(job.id)
                self._requeue_or_exit(job, f"host {cmd.name} lost", cmd.time, ch)
        return affected

    def _requeue_or_exit(self, job: Job, why: str, time: float, ch: Changes) -> None:
        queue = self.queues.get(job.spec.queue)
        rerun = job.spec.rerunnable if job.spec.rerunnable is not None else bool(queue and queue.rerunnable)
        if rerun and not job.kill_requested:
            self._set(job, "requeue", ch)
            job.allocs, job.finished_hosts, job.usage = [], [], []
            job.start_time, job.exit_code, job.signal = None, None, None
            job.requeues += 1
            job.reason = f"requeued: {why}"
        else:
            job.reason = why
            self._end(job, "exit", time, ch)

    def set_host_admin(self, cmd: SetHostAdmin, ch: Changes) -> str:
        for name in cmd.names:
            if name not in self.hosts:
                raise NotFound(f"host {name} is not known")
        for name in cmd.names:
            self.hosts[name].closed = cmd.closed
            ch.hosts.add(name)
        return "ok"

    def set_queues(self, cmd: SetQueues, ch: Changes) -> str:
        self.queues = {q.name: q for q in cmd.queues}
        self.default_queue = cmd.default_queue
        return "ok"

    def modify(self, cmd: Modify, ch: Changes) -> str:
        job = self.job(cmd.job_id)
        if job.state in TERMINAL:
            raise Conflict(f"job {job.id} has already ended ({job.state.value})")
        job.spec = msgspec.structs.replace(job.spec, mem_limit=cmd.mem_limit)
        ch.jobs.add(job.id)
        return "ok"

    def cleanup(self, cmd: Cleanup, ch: Changes) -> int:
        drop = len(self.finished_order) - cmd.keep_finished
        if drop <= 0:
            return 0
        for jid in self.finished_order[:drop]:
            self.jobs.pop(jid, None)
            ch.forgotten.append(jid)
        del self.finished_order[:drop]
        return drop


_HANDLERS = {
    Submit: ClusterState.submit, Place: ClusterState.place, Finish: ClusterState.finish,
    Kill: ClusterState.kill, RegisterHost: ClusterState.register_host,
    HostLost: ClusterState.host_lost, SetHostAdmin: ClusterState.set_host_admin,
    SetQueues: ClusterState.set_queues, Modify: ClusterState.modify, Cleanup: ClusterState.cleanup,
}
