"""Simulated hosts: what one worker says and answers, without processes (`xce sim-fleet`).

A ``SimHost`` is a worker's conversation with the controller, held in memory: it
registers (with ``xce.proto.hostside``'s back-off), heartbeats its usage (the same
columns and the same "only what moved" rule as xce/daemons/worker.py), confirms each
RUN_JOB once per (job, attempt), and reports the job's end when its simulated run time
is up, re-sending until the controller has committed it.  A job's memory follows the
simulator's stated model (``xce.sim.model.UsageModel``: a ramp to ``use_ratio`` of its
reservation).  It never touches a socket: it is handed decoded envelopes and returns
the frames to send (``Frame``); xce/sim/fleet_loop.py owns the sockets and the clock.

How long a job "runs": the N of a ``sleep N`` command (``sleep N`` alone, or inside
``sh -c``), else the fleet's fixed ``run_time``; a job may also end early by KILL_JOB,
or by its ``-M`` limit (MEMLIMIT) as a real worker would end it.
"""

from __future__ import annotations

import re
import signal as sig
from dataclasses import dataclass, field

from xce import __version__
from xce.core.errors import NotLeader, ProtocolError, XceError
from xce.core.model import HostUsage, JobSpec
from xce.proto import schema as S
from xce.proto.codec import decode_error, decode_reply, decode_request, encode, error_reply
from xce.proto.hostside import Reported, ack_wanted, add_report, register_delay, usage_moved
from xce.proto.opcodes import Op
from xce.sim.model import SimJob, UsageModel

_SLEEP = re.compile(r"^\s*sleep\s+(\d+(?:\.\d*)?)\s*$")
STOPS = (sig.SIGSTOP, sig.SIGTSTP)
Frame = bytes


def run_time(spec: JobSpec, default: float) -> float:
    """Seconds a job runs in the fleet: its ``sleep N``, else ``default``."""
    cmd = spec.command
    text = cmd[2] if len(cmd) == 3 and cmd[0].endswith("sh") and cmd[1] == "-c" else " ".join(cmd)
    m = _SLEEP.match(text)
    return float(m.group(1)) if m else default


@dataclass(frozen=True)
class FleetModel:
    """The fleet's stated model: each host's size, a job's run time and memory curve."""

    slots: int = 20
    mem: int = 64 << 30
    run_time: float = 30.0     # seconds, for a job that is not a `sleep N`
    use_ratio: float = 0.8     # a job's memory level as a share of its reservation
    usage: UsageModel = UsageModel()


@dataclass
class SimTask:
    job_id: int
    attempt: int
    reserved: int
    mem_limit: int | None
    started: float
    run: float
    curve: list[tuple[float, int]]   # (seconds after start, bytes) along the ramp
    rss: int = 0
    peak: int = 0
    slack: float = 0.0               # byte-seconds reserved but unused, so far
    seen: float = 0.0                # when rss and slack were last brought up to date
    stopped_at: float | None = None  # SIGSTOP'd: the run clock pauses
    paused: float = 0.0

    def ends(self) -> float:
        return self.started + self.run + self.paused

    def advance(self, now: float) -> None:
        """Bring rss, peak and the slack integral to ``now`` (the curve is piecewise constant)."""
        self.slack += max(0, self.reserved - self.rss) * max(0.0, now - self.seen)
        self.seen = now
        if self.stopped_at is not None:
            return
        at = now - self.started - self.paused
        self.rss = next((b for t, b in reversed(self.curve) if t <= at), 0)
        self.peak = max(self.peak, self.rss)


@dataclass
class SimHost:
    """One simulated worker's conversation state (what xce/daemons/worker.py keeps per host)."""

    name: str
    token: str
    model: FleetModel
    heartbeat: float = 1.0
    registered: bool = False
    register_rid: int = 0
    next_register: float = 0.0
    failures: int = 0
    term: int = 0
    rid: int = 0
    beats: int = 0
    reports: int = 0           # usage reports sent (one per task a heartbeat lists)
    refused: str = ""
    leader: str | None = None       # where a "not leader" reply sent this host
    tasks: dict[tuple[int, int], SimTask] = field(default_factory=dict)
    unacked: dict[int, tuple[S.JobFinished, float]] = field(default_factory=dict)
    pending: list[S.JobFinished] = field(default_factory=list)
    reported: dict[tuple[int, int], Reported] = field(default_factory=dict)
    registrations: int = 0
    started: int = 0
    ended: int = 0

    # ---- what it sends ----

    def _frame(self, op: Op, body: object) -> tuple[int, Frame]:
        self.rid += 1
        return self.rid, encode(op, self.rid, body, token=self.token)

    def os_available(self) -> int:
        return max(0, self.model.mem - sum(t.rss for t in self.tasks.values()))

    def register(self, now_mono: float, draw: float) -> Frame:
        running = [S.RunningTask(t.job_id, t.attempt, 0, t.stopped_at is not None) for t in self.tasks.values()]
        running += [S.RunningTask(m.job_id, m.attempt, 0) for m in self.ending()]
        self.register_rid, frame = self._frame(Op.REGISTER, S.RegisterRequest(
            host=self.name, slots=self.model.slots, ncpus=self.model.slots, mem_total=self.model.mem,
            os_available=self.os_available(), version=__version__, attrs={"type": "sim"}, running=running,
            measure="sim"))
        self.next_register = now_mono + register_delay(self.failures, draw)
        self.failures += 1
        return frame

    def beat(self, now: float) -> Frame:
        """A heartbeat with the usage that moved (the worker's rule)."""
        usage = S.UsageColumns()
        for key, t in self.tasks.items():
            t.advance(now)
            if t.curve and usage_moved(self.reported.get(key), t.rss, t.peak, now, self.heartbeat):
                self.reported[key] = (t.rss, t.peak, now)
                add_report(usage, t.job_id, t.attempt, t.rss, t.peak, 0.0)
        self.beats += 1
        self.reports += len(usage.job_id)
        return self._frame(Op.HEARTBEAT, S.Heartbeat(host=self.name, time=now, os_available=self.os_available(),
                                                     usage=usage, ack=ack_wanted(self.beats)))[1]

    def end_due(self, now: float) -> None:
        """Move every task whose run is over, or that outgrew its -M limit, to the reports to send."""
        for key, t in list(self.tasks.items()):
            if t.stopped_at is not None:
                continue
            t.advance(min(now, t.ends()))
            if t.mem_limit is not None and t.rss > t.mem_limit:
                self._end(key, now, None, int(sig.SIGKILL), "MEMLIMIT")
            elif now >= t.ends():
                self._end(key, t.ends(), 0, None, "")

    def _end(self, key: tuple[int, int], now: float, code: int | None, signal: int | None, reason: str) -> None:
        t = self.tasks.pop(key)
        self.ended += 1
        self.reported.pop(key, None)
        usage = HostUsage(host=self.name, reserved=t.reserved, actual=t.rss, peak=t.peak,
                          charged_peak=max(t.reserved, t.peak), slack_integral=t.slack)
        self.pending.append(S.JobFinished(host=self.name, job_id=t.job_id, attempt=t.attempt, time=now,
                                          exit_code=code, signal=signal, reason=reason, usage=usage))

    def flush(self, now_mono: float) -> list[Frame]:
        """The ends to (re-)send: new ones, and any not committed within 2 s (the worker's pace)."""
        if not self.registered:
            return []
        for rid, (msg, sent) in list(self.unacked.items()):
            if now_mono - sent > 2.0:
                del self.unacked[rid]
                self.pending.append(msg)
        out = []
        for msg in self.pending:
            rid, frame = self._frame(Op.JOB_FINISHED, msg)
            self.unacked[rid] = (msg, now_mono)
            out.append(frame)
        self.pending = []
        return out

    def ending(self) -> list[S.JobFinished]:
        return self.pending + [m for m, _ in self.unacked.values()]

    # ---- what it answers ----

    def receive(self, env: S.Envelope, now: float) -> list[Frame]:
        """Frames to send in answer to one envelope from the controller."""
        if env.op in (Op.OK, Op.ERROR):
            self._reply(env)
            return []
        try:
            if env.term < self.term:
                raise ProtocolError(f"order from term {env.term}, but term {self.term} was seen: "
                                    "refusing a deposed leader")
            self.term = max(self.term, env.term)
            op, body = decode_request(env)
            if op == Op.RUN_JOB:
                return self._run(body, now)
            if op == Op.KILL_JOB:
                self._kill(body, now)
                return []
            if op == Op.SIGNAL_JOB:
                return [self._signal(body, now)]
            if op == Op.PEEK_JOB:
                return [self._frame(Op.JOB_OUTPUT, S.JobOutput(
                    host=self.name, ticket=body.ticket, job_id=body.job_id,
                    error=f"{self.name} is a simulated host: its jobs write no output"))[1]]
            raise ProtocolError(f"{op.name} is not served by a worker")
        except XceError as e:
            return [error_reply(env.rid, e)]

    def _run(self, body: S.RunJob, now: float) -> list[Frame]:
        key = (body.job_id, body.attempt)
        if key in self.tasks:  # a repeated order (a new -M, or a start the leader never read): confirmed, as the worker does
            t = self.tasks[key]
            t.mem_limit = body.spec.mem_limit
            return [self._frame(Op.JOB_STARTED, S.JobStarted(host=self.name, job_id=t.job_id, attempt=t.attempt,
                                                             pid=0, time=t.started))[1]]
        if any((m.job_id, m.attempt) == key for m in self.ending()):
            return []  # a retried dispatch of a task that ended: its end is on its way
        slots = max(1, body.alloc.slots)
        reserve = body.alloc.mem
        job = SimJob(trace_id=body.job_id, submit=now, run=run_time(body.spec, self.model.run_time), slots=slots,
                     reserve_slot=reserve // slots, use_slot=int(reserve * self.model.use_ratio) // slots,
                     user=body.spec.user, queue=body.spec.queue, wait=-1.0)
        curve = [(t, b * slots) for t, b in self.model.usage.reports(job)]
        self.tasks[key] = SimTask(body.job_id, body.attempt, reserve, body.spec.mem_limit, now, job.run, curve,
                                  seen=now)
        self.started += 1
        return [self._frame(Op.JOB_STARTED, S.JobStarted(host=self.name, job_id=body.job_id,
                                                         attempt=body.attempt, pid=0, time=now))[1]]

    def _kill(self, body: S.KillJob, now: float) -> None:
        key = (body.job_id, body.attempt)
        if key in self.tasks:
            self.tasks[key].advance(now)
            self._end(key, now, None, int(sig.SIGTERM), body.reason)
        elif not any((m.job_id, m.attempt) == key for m in self.ending()):
            self.pending.append(S.JobFinished(
                host=self.name, job_id=body.job_id, attempt=body.attempt, time=now, exit_code=None, signal=None,
                reason=f"{body.reason} (it never started on {self.name})", usage=HostUsage(host=self.name)))

    def _signal(self, body: S.SignalJob, now: float) -> Frame:
        t = self.tasks.get((body.job_id, body.attempt))
        detail = "" if t is not None else f"job {body.job_id} runs no process on {self.name}"
        if t is not None:
            t.advance(now)
            if body.signal in STOPS and t.stopped_at is None:
                t.stopped_at = now
            elif body.signal == sig.SIGCONT and t.stopped_at is not None:
                t.paused += now - t.stopped_at
                t.stopped_at = None
        return self._frame(Op.JOB_SIGNALLED, S.JobSignalled(
            host=self.name, job_id=body.job_id, attempt=body.attempt, signal=body.signal,
            suspended=t is not None and t.stopped_at is not None, time=now, detail=detail))[1]

    def _reply(self, env: S.Envelope) -> None:
        if env.term < self.term:
            return
        self.term = max(self.term, env.term)
        if env.rid in self.unacked:
            msg, _ = self.unacked.pop(env.rid)
            if env.op == Op.ERROR:
                self.pending.append(msg)  # e.g. not leader yet: send again
            return
        if env.op == Op.ERROR:
            self._refused(decode_error(env), env.rid)
        elif env.rid == self.register_rid:
            self._registered(env)
        else:  # a heartbeat's reply (a JOB_STARTED's Ack reads as known=True: nothing to do)
            try:
                if not decode_reply(env, Op.HEARTBEAT).known:
                    self.registered, self.next_register = False, 0.0
            except XceError:
                return

    def _refused(self, err: XceError, rid: int) -> None:
        if err.code in ("unauthenticated", "forbidden"):
            self.failures, self.registered = 0, False
            self.refused = err.message
            return
        if rid == self.register_rid or err.code == "not_leader":
            self.registered, self.failures = False, 0
            if isinstance(err, NotLeader) and err.leader:
                self.leader = err.leader  # the loop reconnects this host there
                self.next_register = 0.0

    def _registered(self, env: S.Envelope) -> None:
        try:
            reply = decode_reply(env, Op.REGISTER)
        except XceError:
            return
        self.registered, self.failures, self.refused = True, 0, ""
        self.registrations += 1
        self.heartbeat = reply.heartbeat_interval
        for t in reply.kill:
            key = (t.job_id, t.attempt)
            self.tasks.pop(key, None)
            self.unacked = {r: v for r, v in self.unacked.items() if (v[0].job_id, v[0].attempt) != key}
            self.pending = [m for m in self.pending if (m.job_id, m.attempt) != key]
        self.reported.clear()  # a new leader knows no usage yet: report everything
