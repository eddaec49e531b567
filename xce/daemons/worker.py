"""xce-worker: one per compute host; runs jobs as real processes and measures them.

The shell: a DEALER to the leader controller, a SIGCHLD wake-up pipe so a job's
end is noticed at once, and timers for sampling and heartbeats.  Running and
measuring processes belong to xce/worker/runner.py.

Guarantees:
- RUN_JOB is idempotent per (job, attempt): a repeated order is acknowledged,
  never started twice; orders stamped with an older Raft term than one already
  seen are refused (a deposed leader cannot start anything).
- A job's end is kept (runner task record) and re-sent until the controller
  acknowledges the commit, across worker and controller restarts.
- A restarted worker re-attaches to its tasks and lists them when it registers;
  the controller answers with the ones it no longer knows, which are killed.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import zmq

from xce import __version__
from xce.core.errors import NoShare, NotFound, NotLeader, ProtocolError, XceError
from xce.core.model import HostUsage
from xce.core.units import parse_mem
from xce.proto import schema as S
from xce.proto.codec import (
    decode_envelope,
    decode_error,
    decode_reply,
    decode_request,
    encode,
    error_reply,
    order_key,
)
from xce.proto.hostside import ACK_EVERY, Reported, ack_wanted, add_report, register_delay, usage_moved
from xce.proto.opcodes import Op
from xce.security.auth import daemon_token
from xce.security.curve import daemon_keys
from xce.site.config import Config, endpoints_of, load
from xce.transport.sockets import dealer
from xce.worker import jobenv, measure, tasks
from xce.worker.runner import EnvOf, Runner, Task, set_in_force, share_outcome

log = logging.getLogger("xce.worker")
# How long the loop waits for work before it starts a spare job wrapper (xce/worker/spare.py):
# long enough that a job just started has exited and been reported first (a `true` takes
# 1-3 ms), short enough that the next job, 0.2 s later, finds the spare waiting.
SPARE_IDLE = 0.005
SPARE_AFTER = 0.05  # nor sooner after a job started: its end is reported before the spare blocks the loop
# How long JOB_STARTED waits: a job that ends meanwhile (most short jobs) is reported by its
# JOB_FINISHED alone, which confirms the start as well (the controller commits nothing for a
# start; it re-sends an order unconfirmed for orders.RESEND_AFTER, 2 s).  One message and its
# answer less a job, both here and in the controller.
STARTED_HOLD = 0.1
REAP_EVERY = 0.5  # the longest the tasks go unlooked-at without a SIGCHLD (a lost one, say)


PEEK_MAX = 1 << 20  # the most a peek returns per file: a reply must stay far below the body limits


def tail(path: str, max_bytes: int) -> str:
    """The last ``max_bytes`` (at most PEEK_MAX) of the file at ``path``, as text; "" if unreadable."""
    n = max(0, min(max_bytes, PEEK_MAX))
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - n))
            return f.read(n).decode(errors="replace")
    except OSError:
        return ""


class Worker:
    def __init__(self, cfg: Config, state_dir: Path) -> None:

        w = cfg.worker
        self.cfg = cfg
        self.name = w.name or socket.gethostname()
        self.mem_cap = parse_mem(w.mem) if w.mem else None
        self.mem_total = self.mem_cap or measure.mem_total()
        self.slots = w.slots or os.cpu_count() or 1
        self.floor = parse_mem(w.mem_floor) if w.mem_floor else None
        self.endpoints = endpoints_of(cfg)

        self.token = daemon_token(cfg.state_dir)

        self.keys = daemon_keys(cfg, self.name)  # its key on the controller's CURVE allow-list
        self.refused = ""
        self.endpoint_idx = 0
        self.ctx = zmq.Context()
        self.sock: zmq.Socket | None = None
        self.runner = Runner(self.name, state_dir / f"worker-{self.name}", kill_grace=w.kill_grace)
        self.registered = False
        self.register_rid = 0
        self.next_register = 0.0  # monotonic time of the next attempt while unregistered
        self.register_failures = 0
        self.rid = 0
        self.term = 0
        # Ends not yet acknowledged by a commit: rid -> (task or None, message, sent at).
        self.unacked: dict[int, tuple[Task | None, S.JobFinished, float]] = {}
        self.pending_exits: list[tuple[Task | None, S.JobFinished]] = []
        self.unsent_starts: list[tuple[Task, S.JobStarted, float]] = []  # (task, message, send at) in order
        self.next_hb = 0.0
        self.next_sample = 0.0
        self.next_reap = 0.0  # monotonic time of the next look at the tasks even without a SIGCHLD
        self.next_spare = 0.0  # monotonic time before which no spare is tried (after a failure)
        self.last_start = 0.0  # monotonic time of the last job start
        self.last_reply = time.monotonic()
        self.stopping = False
        self.reported: dict[tuple[int, int], Reported] = {}  # last usage sent per task
        self.hb_count = 0
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)

    # ---- socket ----

    def connect(self) -> None:

        if self.sock is not None:
            self.sock.disable_monitor()
            self.monitor.close(0)
            self.sock.close(0)
        self.sock = dealer(self.ctx, self.endpoints[self.endpoint_idx], limit_input=True, curve=self.keys)
        # A controller that dies drops the TCP connection: hearing that at once makes a
        # failover take one registration, not several missed heartbeats.
        self.monitor = self.sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        self.poller = zmq.Poller()
        for s in (self.sock, self.wake_r, self.monitor):
            self.poller.register(s, zmq.POLLIN)
        self.registered = False

    def send(self, op: Op, body: Any, rid: int | None = None) -> int:
        if rid is None:
            self.rid += 1
            rid = self.rid
        assert self.sock is not None
        try:
            self.sock.send(encode(op, rid, body, token=self.token), zmq.NOBLOCK)
        except zmq.Again:
            log.warning("controller queue full; dropping %s", op.name)
        return rid

    # ---- loop ----

    def run(self) -> None:
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        adopted = self.runner.adopt()
        if adopted:
            log.info("re-attached to %d running task(s)", len(adopted))
        self.connect()
        while not self.stopping:
            now = time.time()
            if not self.registered and time.monotonic() >= self.next_register:
                self.register()
            timeout = max(0.0, min(self.next_hb, self.next_sample) - now)
            if self.unsent_starts:
                timeout = min(timeout, max(0.0, self.unsent_starts[0][2] - time.monotonic()))
            spare_at = self.spare_at()
            if spare_at is not None:  # wake for it: a timeout past it would leave the next job without one
                timeout = min(timeout, max(0.0, spare_at - time.monotonic()) + SPARE_IDLE)
            ready = dict(self.poller.poll(int(timeout * 1000) + 1))
            if not ready and spare_at is not None and time.monotonic() >= spare_at:
                self.prepare_spare()
            woke = self.wake_r in ready
            if woke:
                try:
                    os.read(self.wake_r, 4096)
                except BlockingIOError:
                    pass
            if self.monitor in ready:
                self.monitor.recv_multipart()
                if len(self.endpoints) > 1:
                    log.info("lost the controller at %s; trying the next", self.endpoints[self.endpoint_idx])
                    self.endpoint_idx = (self.endpoint_idx + 1) % len(self.endpoints)
                    self.last_reply = time.monotonic()
                    self.connect()
                    continue
            if self.sock in ready:
                self.receive()
            mono = time.monotonic()
            # A child's end wakes the loop (SIGCHLD); an order or an answer does not need the
            # waitid of every task (~0.04 ms a turn, 3-4 turns a job).  What no SIGCHLD tells
            # (adopted tasks, kill deadlines, cgroups still closing) is looked at every turn.
            children = woke or mono >= self.next_reap or self.runner.watching()
            if children:
                self.next_reap = mono + REAP_EVERY
            self.reap(time.time(), children)
            self.send_starts()
            now = time.time()
            if now >= self.next_sample:
                self.sample(now)
            if now >= self.next_hb and self.registered:
                self.heartbeat(now)
            self.resend(now)
            silent = time.monotonic() - self.last_reply
            if silent > (ACK_EVERY + 1) * self.cfg.worker.heartbeat + 0.5 and len(self.endpoints) > 1:
                # The controller went quiet: try the next one (it redirects us to the leader).
                self.endpoint_idx = (self.endpoint_idx + 1) % len(self.endpoints)
                self.last_reply = time.monotonic()
                self.connect()
        self.close()

    def spare_at(self) -> float | None:
        """The monotonic time from which a spare may be started (after SPARE_IDLE of quiet); None: not wanted."""
        if not self.runner.wants_spare():
            return None
        return max(self.next_spare, self.last_start + SPARE_AFTER)

    def prepare_spare(self) -> None:
        try:
            self.runner.prepare_spare()
        except OSError as e:  # e.g. out of processes: jobs start the slow way meanwhile
            log.warning("cannot start a spare job wrapper (trying again in 5 s): %s", e)
            self.next_spare = time.monotonic() + 5.0

    def close(self) -> None:
        self.runner.close()
        if self.sock is not None:
            self.sock.disable_monitor()
            self.monitor.close(0)
            self.sock.close(0)
        self.ctx.destroy(linger=0)

    def register(self) -> None:
        running = [S.RunningTask(t.job_id, t.attempt, t.pid, t.suspended_at is not None)
                   for t in self.runner.tasks()]
        ended = [m for _, m in self.pending_exits] + [m for _, m, _ in self.unacked.values()]
        running += [S.RunningTask(m.job_id, m.attempt, 0) for m in ended]
        self.register_rid = self.send(Op.REGISTER, S.RegisterRequest(
            host=self.name, slots=self.slots, ncpus=os.cpu_count() or 1, mem_total=self.mem_total,
            os_available=self.os_available(), version=__version__, attrs=self.cfg.host_attrs(self.name),
            running=running, virtual=self.cfg.host_virtual(),
            measure=(measure.detect_cgroup() or ("proc",))[0]))
        self.next_register = time.monotonic() + register_delay(self.register_failures, random.random())
        self.register_failures += 1

    def os_available(self) -> int:
        real = measure.os_available()
        if self.mem_cap is None:
            return real
        used = sum(t.last.rss for t in self.runner.tasks() if t.last is not None)
        return max(0, min(real, self.mem_cap - used))

    def receive(self) -> None:
        assert self.sock is not None
        while True:
            try:
                data = self.sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            self.last_reply = time.monotonic()
            try:
                env = decode_envelope(data)
            except ProtocolError as e:
                log.warning("bad message from controller: %s", e.message)
                self.sock.send(error_reply(0, e))
                continue
            if env.op in (Op.OK, Op.ERROR):
                self.on_reply(env)
                continue
            try:
                if env.term < self.term:
                    raise ProtocolError(f"order from term {env.term}, but term {self.term} was seen: "
                                        "refusing a deposed leader")
                self.term = max(self.term, env.term)
                try:
                    op, body = decode_request(env)
                except ProtocolError as e:
                    if env.op == Op.RUN_JOB and self.refuse_run(env, e):
                        continue
                    raise
                if op == Op.RUN_JOB:
                    self.run_job(body)
                elif op == Op.KILL_JOB:
                    self.kill_job(body)
                elif op == Op.SIGNAL_JOB:
                    self.signal_job(body)
                elif op == Op.PEEK_JOB:
                    self.peek_job(body)
                elif op == Op.LAUNCH_TASK:
                    self.launch_task(body)
                elif op == Op.POLL_TASK:
                    self.poll_task(body)
                else:
                    raise ProtocolError(f"{op.name} is not served by a worker")
            except XceError as e:
                self.sock.send(error_reply(env.rid, e))

    def on_reply(self, env: S.Envelope) -> None:
        if env.term < self.term:
            return
        self.term = max(self.term, env.term)
        if env.rid in self.unacked:
            task, msg, _ = self.unacked.pop(env.rid)
            if env.op == Op.OK:
                if task is not None:
                    self.runner.forget(task)
            else:
                self.pending_exits.append((task, msg))  # e.g. not leader yet: send again
            return
        if env.op == Op.ERROR:
            err = decode_error(env)
            if err.code in ("unauthenticated", "forbidden"):
                # Not (or no longer) let in: keep asking about once a second (answered: no
                # doubling), so adding the key (`xce keys add`) lets this worker in without a
                # restart; say it once.
                self.register_failures = 0
                if err.message != self.refused:
                    log.error("the controller refuses this worker: %s", err.message)
                    self.refused = err.message
                self.registered = False
                return
            log.info("controller says: %s", err.message)
            if env.rid == self.register_rid or err.code == "not_leader":
                self.registered = False
                self.register_failures = 0  # answered (an election, say): the controller keeps up

                if isinstance(err, NotLeader) and err.leader:
                    if err.leader not in self.endpoints:
                        self.endpoints.append(err.leader)
                    self.endpoint_idx = self.endpoints.index(err.leader)
                    self.connect()
                    self.next_register = 0.0  # sent to the leader: go there now, not on the retry clock
            return
        if env.rid == self.register_rid:
            try:
                reply = decode_reply(env, Op.REGISTER)
            except XceError as e:
                log.warning("bad registration reply: %s", e.message)
                return
            self.registered = True
            self.register_failures = 0
            self.refused = ""
            self.cfg.worker.heartbeat = reply.heartbeat_interval  # the controller's pace wins
            for t in reply.kill:
                task = self.runner.find(t.job_id, t.attempt)
                if task is not None:
                    self.runner.kill(task, "the controller no longer knows this job")
                for rid, (tk, m, _) in list(self.unacked.items()):
                    if (m.job_id, m.attempt) == (t.job_id, t.attempt):
                        del self.unacked[rid]
                        if tk is not None:
                            self.runner.forget(tk)
                self.pending_exits = [(tk, m) for tk, m in self.pending_exits
                                      if (m.job_id, m.attempt) != (t.job_id, t.attempt)]
            log.info("registered as %s (%d slots, %d MB)", self.name, self.slots, self.mem_total >> 20)
            self.reported.clear()  # a new leader knows no usage yet: report everything
            self.next_hb = 0.0
            return
        try:  # a heartbeat reply
            hb = decode_reply(env, Op.HEARTBEAT)
        except XceError:
            return
        if not hb.known:
            self.registered = False
            self.next_register = 0.0

    def ending(self, key: tuple[int, int]) -> bool:
        """Whether the end of task ``key`` is reported but not yet committed."""
        return any((m.job_id, m.attempt) == key for _, m in self.pending_exits) \
            or any((m.job_id, m.attempt) == key for _, m, _ in self.unacked.values())

    def refuse_run(self, env: S.Envelope, e: ProtocolError) -> bool:
        """End the job of a RUN_JOB this worker cannot accept (over its limit, a bad field):
        the leader would send the same order again for ever and the job stay RUN with no task.
        False when the order does not even name its job."""
        key = order_key(env)
        if key is None:
            return False
        log.error("refusing the order for job %d: %s", key[0], e.message)
        if self.runner.find(*key) is None and not self.ending(key):
            self.finish_now(*key, time.time(), None, None, f"dispatch refused by {self.name}: {e.message}",
                            HostUsage(host=self.name))
        return True

    def run_job(self, body: S.RunJob) -> None:
        assert self.sock is not None
        key = (body.job_id, body.attempt)
        task = self.runner.find(*key)
        if task is not None and task.ended is None:
            task.mem_limit = body.spec.mem_limit  # a repeated order carries `xce modify -M`
            if set_in_force(task, body.mem_in_force):  # ... and a shrink or restore (the leader's Reserve)
                self.runner.persist(task)
            if not any(t is task for t, _, _ in self.unsent_starts):
                # Confirmed, or the leader re-sends it until the job ends: it marks every order
                # it sends unconfirmed, and may never have read the first JOB_STARTED (sent to
                # the controller before it).  The start as it was, not now.
                self.send(Op.JOB_STARTED, S.JobStarted(host=self.name, job_id=task.job_id, attempt=task.attempt,
                                                       pid=task.pid, time=task.start_time))
        if task is not None or self.ending(key):
            return  # a retried dispatch: already started once
        now = time.time()
        self.last_start = time.monotonic()
        first = not body.hosts or body.hosts[0] == self.name
        try:
            task = self.runner.start(body.job_id, body.attempt, body.spec, body.alloc.mem,
                                     body.mem_duration_s, body.mem_decay, self.env_of(body),
                                     index=body.element.index if body.element else body.spec.index,
                                     holder=not first, reclaiming=body.reclaiming,
                                     preexec_timeout=body.preexec_timeout)
            set_in_force(task, body.mem_in_force)  # dispatched again after a shrink (a worker that was away)
        except XceError as e:
            usage = HostUsage(host=self.name, reserved=body.alloc.mem)
            self.finish_now(body.job_id, body.attempt, now, None, None, f"start failed: {e.message}", usage)
            return
        self.unsent_starts.append((task, S.JobStarted(host=self.name, job_id=task.job_id, attempt=task.attempt,
                                                      pid=task.pid, time=now), self.last_start + STARTED_HOLD))

    def send_starts(self) -> None:
        """Send the JOB_STARTED that waited STARTED_HOLD, but for jobs that ended meanwhile."""
        mono = time.monotonic()
        while self.unsent_starts and self.unsent_starts[0][2] <= mono:
            task, msg, _ = self.unsent_starts.pop(0)
            if task.ended is None:
                self.send(Op.JOB_STARTED, msg)

    def env_of(self, body: S.RunJob) -> EnvOf:
        """The job's environment (xce/worker/jobenv.py), once the runner has resolved its paths;
        writes LSB_DJOB_HOSTFILE (``Runner.hostfile``)."""
        hosts = body.hosts or [self.name]
        slots = body.slots if len(body.slots) == len(hosts) else \
            [body.alloc.slots if h == self.name else 1 for h in hosts]
        e = body.element
        element = jobenv.ArrayElement(e.array_id, e.index, e.step, e.end) if e is not None else \
            jobenv.ArrayElement(body.job_id, body.spec.index) if body.spec.index else None  # no array id yet
        hostfile = self.runner.hostfile(body.job_id, body.attempt, jobenv.hostfile_text(hosts, slots),
                                        len(hosts) == 1)

        def env(cwd: str, stdout: str | None) -> dict[str, str]:
            return jobenv.job_env(jobenv.JobFacts(
                job_id=body.job_id, spec=body.spec, hosts=hosts, slots=slots, host=self.name, cwd=cwd,
                hostfile=hostfile, stdout=stdout, element=element, launch_token=body.launch_token))
        return env

    def finish_now(self, job_id: int, attempt: int, now: float, code: int | None, sig: int | None,
                   reason: str, usage: HostUsage) -> None:
        msg = S.JobFinished(host=self.name, job_id=job_id, attempt=attempt, time=now,
                            exit_code=code, signal=sig, reason=reason, usage=usage)
        self.pending_exits.append((None, msg))

    def kill_job(self, body: S.KillJob) -> None:
        task = self.runner.find(body.job_id, body.attempt)
        if task is not None:
            self.runner.kill(task, body.reason)
        elif not self.ending((body.job_id, body.attempt)):
            # Orders arrive in the order sent, so any RUN_JOB for it came first: it never started
            # here, and never will (the leader sends no RUN_JOB for a killed job).
            self.finish_now(body.job_id, body.attempt, time.time(), None, None,
                            f"{body.reason} (it never started on {self.name})", HostUsage(host=self.name))

    def signal_job(self, body: S.SignalJob) -> None:
        """Send the signal to the job's processes here; answer what it did (JOB_SIGNALLED)."""
        task = self.runner.find(body.job_id, body.attempt)
        if task is None or task.ended is not None:
            suspended, detail = False, f"job {body.job_id} runs no process on {self.name}"
        else:
            suspended, detail = self.runner.send_signal(task, body.signal, body.to), ""
        self.send(Op.JOB_SIGNALLED, S.JobSignalled(host=self.name, job_id=body.job_id, attempt=body.attempt,
                                                   signal=body.signal, suspended=suspended, time=time.time(),
                                                   detail=detail))

    def peek_job(self, body: S.PeekJob) -> None:
        """The tail of the job's output files here (bpeek), answered as JOB_OUTPUT."""
        task = self.runner.find(body.job_id, body.attempt)
        if task is None:
            self.send(Op.JOB_OUTPUT, S.JobOutput(host=self.name, ticket=body.ticket, job_id=body.job_id,
                                                 error=f"job {body.job_id} has no task on {self.name}"))
            return
        err = task.stderr if task.stderr != task.stdout else ""
        self.send(Op.JOB_OUTPUT, S.JobOutput(
            host=self.name, ticket=body.ticket, job_id=body.job_id, stdout_path=task.stdout, stderr_path=err,
            stdout=tail(task.stdout, body.max_bytes), stderr=tail(err, body.max_bytes) if err else ""))

    def launch_task(self, body: S.LaunchTask) -> None:
        """Start a task of the job inside its share here (xce launch), answered as TASK_STATE."""
        share = self.runner.find(body.job_id, body.attempt)
        try:
            if share is None or share.ended is not None:
                raise NoShare(f"job {body.job_id} has no running share on {self.name}")
            env = {**self.env_of(body.run)(body.cwd or body.run.spec.cwd, None), **body.env}
            task = tasks.start_task(self.runner, share, body.key, body.command, body.cwd or body.run.spec.cwd,
                                    env, body.run.spec.user)
        except XceError as e:
            self.send(Op.TASK_STATE, S.TaskState(host=self.name, ticket=body.ticket, job_id=body.job_id,
                                                 error=e.message, code=e.code))
            return
        self.send(Op.TASK_STATE, S.TaskState(host=self.name, ticket=body.ticket, job_id=body.job_id, task=task.n))

    def poll_task(self, body: S.PollTask) -> None:
        """A launched task's output past the caller's offsets, and its exit once it ended (TASK_STATE)."""
        share = self.runner.find(body.job_id, body.attempt)
        task = tasks.find(share, body.task) if share is not None else \
            tasks.kept_task(self.runner, body.job_id, body.attempt, body.task)  # its share ended: output kept
        if task is None:
            why = f"job {body.job_id} has no task {body.task} on {self.name}" if share is not None else \
                f"job {body.job_id} has no share on {self.name} any more"
            self.send(Op.TASK_STATE, S.TaskState(host=self.name, ticket=body.ticket, job_id=body.job_id,
                                                 task=body.task, error=why, code=NotFound.code))
            return
        if body.signal and share is not None:
            tasks.signal_task(task, body.signal)
        tasks.reap([task])
        out, err, done = tasks.read_output(task, body.stdout_offset, body.stderr_offset, body.max_bytes)
        self.send(Op.TASK_STATE, S.TaskState(
            host=self.name, ticket=body.ticket, job_id=body.job_id, task=task.n, stdout=out, stderr=err,
            ended=done, exit_code=task.exit_code if done else None, signal=task.signal if done else None))

    def reap(self, now: float, children: bool = True) -> None:
        for ex in self.runner.poll() if children else ():
            t = ex.task
            actual = t.last.rss if t.last else 0
            usage = HostUsage(host=self.name, reserved=t.reserved, actual=actual, peak=t.peak,
                              charged_peak=max(t.reserved, t.peak),
                              cpu_time=t.last.cpu_time if t.last else 0.0,
                              slack_integral=t.slack_integral)
            code, sig, reason = share_outcome(ex)
            msg = S.JobFinished(host=self.name, job_id=t.job_id, attempt=t.attempt, time=now,
                                exit_code=code, signal=sig, reason=reason, usage=usage, started=t.start_time)
            self.pending_exits.append((t, msg))
            self.reported.pop((t.job_id, t.attempt), None)
        if self.registered:
            for tk, msg in self.pending_exits:
                rid = self.send(Op.JOB_FINISHED, msg)
                self.unacked[rid] = (tk, msg, time.monotonic())
            self.pending_exits = []

    def resend(self, now: float) -> None:
        mono = time.monotonic()
        for rid, (tk, msg, sent) in list(self.unacked.items()):
            if mono - sent > 2.0:
                del self.unacked[rid]
                self.pending_exits.append((tk, msg))

    def sample(self, now: float) -> None:
        self.runner.sample_all(now)
        self.next_sample = now + min(0.5, self.cfg.worker.heartbeat)
        if self.floor is not None and self.os_available() < self.floor:
            victim = self.runner.largest_overage()
            if victim is not None and victim.kill_reason is None:
                why = "RECLAIMED" if victim.reclaiming else "MEMPRESSURE"
                log.warning("memory pressure: killing job %d (%s)", victim.job_id,
                            "reclaiming" if victim.reclaiming else "largest overage")
                self.runner.kill(victim, why)

    def heartbeat(self, now: float) -> None:
        """Report usage that moved: by 1 MiB or 1 %, a new peak, or 10 heartbeats of silence.

        A steady job costs the controller nothing; a changing one is seen within a
        heartbeat.  Every ACK_EVERY-th heartbeat asks for a reply, which is how a worker
        notices a controller that went away.
        """
        usage = S.UsageColumns()
        for t in self.runner.tasks():
            if t.last is None:
                continue
            key = (t.job_id, t.attempt)
            if not usage_moved(self.reported.get(key), t.last.rss, t.peak, now, self.cfg.worker.heartbeat):
                continue
            self.reported[key] = (t.last.rss, t.peak, now)
            add_report(usage, t.job_id, t.attempt, t.last.rss, t.peak, t.last.cpu_time)
        self.hb_count += 1
        self.send(Op.HEARTBEAT, S.Heartbeat(host=self.name, time=now, os_available=self.os_available(),
                                            usage=usage, ack=ack_wanted(self.hb_count)))
        self.next_hb = now + self.cfg.worker.heartbeat


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="xce-worker", description="XCE worker daemon")
    p.add_argument("--config")
    p.add_argument("--state-dir")
    p.add_argument("--name", help="host name to register as (default: this machine's)")
    p.add_argument("--mem", help="memory capacity override, e.g. 4G")
    p.add_argument("--slots", type=int, help="slot capacity override")
    p.add_argument("--log-level", default="INFO")
    a = p.parse_args(argv)
    logging.basicConfig(level=a.log_level, format=f"%(asctime)s worker {a.name or ''} %(levelname)s %(message)s")
    try:
        cfg = load(a.config)
        if a.name:
            cfg.worker.name = a.name
        if a.mem:
            parse_mem(a.mem)
            cfg.worker.mem = a.mem
        if a.slots:
            cfg.worker.slots = a.slots
    except XceError as e:
        print(f"xce-worker: {e.message}", file=sys.stderr)
        return 2
    try:
        w = Worker(cfg, Path(a.state_dir or cfg.state_dir or ".").resolve())
    except XceError as e:  # e.g. its CURVE key is missing
        print(f"xce-worker: {e.message}", file=sys.stderr)
        return 2

    def stop(*_: Any) -> None:
        w.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    w.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
