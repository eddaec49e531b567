"""xce-controller: the ZeroMQ shell around the replicated state machine.

One thread runs this loop; pysyncobj runs its own tick thread that applies
committed batches under ``ReplicatedState.lock`` and wakes the loop through an
inproc socket.  Per loop turn:

    requests (ROUTER) -> reads answered at once under the lock
                      -> writes queued as commands with a continuation
    end of turn       -> all queued commands become ONE Raft entry (async)
    on apply          -> touched entities synced into the ledger, published on
                         PUB with the next sequence number, dispatched to workers,
                         then the continuations answer the clients ("yes" only
                         after commit).

The handlers live in mixins by door: ctl_clients (client requests), ctl_workers (the
scheduler, workers, and orders to workers), ctl_access (daemon keys and the token policy),
ctl_events (after-apply publishing and leadership).

Soft state (heartbeats, OS-available, usage, pending reasons) lives in
``self.live`` on the leader only and is rebuilt within a heartbeat after a
failover: workers re-register when told they are unknown.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import logging
import os
import queue
import signal
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zmq

from xce.core.errors import NotLeader, ProtocolError, XceError
from xce.core.model import ACTIVE, JobState
from xce.core.resources import catalog
from xce.core.resreq import parse_resreq
from xce.core.result import Err, Ok, Result
from xce.core.state import Cleanup, Cmd, HostLost, encode_batch
from xce.daemons.ctl_access import (
    AUDITED_OPS,
    DAEMON_OPS,
    Access,
    Audit,
    answer,
    refusal,
)
from xce.daemons.ctl_clients import ClientDoor
from xce.daemons.ctl_events import Publisher
from xce.daemons.ctl_jobrun import JobRunDoor, release_order
from xce.daemons.ctl_workers import WorkerDoor
from xce.daemons.heap import HeapUpkeep
from xce.daemons.raft import ReplicatedState, fsync_journal, make_conf
from xce.proto import schema as S
from xce.proto.codec import decode_envelope, decode_request, encode, error_reply
from xce.proto.opcodes import Op
from xce.replica.live import Live
from xce.security.auditlog import AuditLog
from xce.security.auth import KEYS_FILE, TokenService, auth_dir
from xce.security.curve import (
    AllowList,
    KeyStore,
    keys_root,
    server_keys,
    start_authenticator,
)
from xce.security.policy import Principal, load_policy
from xce.site.config import Config, load

log = logging.getLogger("xce.controller")
REQUEST_LOG_FILE = "requests.jsonl"  # in the controller's state directory (see AuditLog)

Reply = Callable[[Result], None]


class Controller(Access, Publisher, ClientDoor, WorkerDoor, JobRunDoor):
    def __init__(self, cfg: Config, state_dir: Path) -> None:
        self.cfg = cfg
        c = cfg.controller
        self.state_dir = state_dir
        state_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(state_dir, 0o700)  # the journal holds job environments
        self.ctx = zmq.Context()
        from xce.transport.sockets import bind_local_door, router, serve_curve

        # CURVE: the ZAP handler must be up before the first handshake, so before any bind.
        self.curve = server_keys(cfg)
        self.authenticator = start_authenticator(self.ctx) if self.curve else None
        self.allow = AllowList(KeyStore(keys_root(cfg))) if self.curve else None
        if self.allow is not None:
            self.allow.refresh(time.time())
        self.worker_keys: dict[str, str] = {}  # host -> the allowed key name it registered with
        self.daemon_grants: dict[tuple[str, Op], float] = {}  # (token, op) -> granted until (monotonic)
        self.router = router(self.ctx, c.address, self.curve)
        self.door = bind_local_door(self.router, cfg.state_dir, c.address)  # after the TCP bind: see there
        # XPUB: the same stream as PUB, but it hears subscriptions, so a controller nobody
        # listens to (a follower, usually) does not spend its CPU encoding events.
        self.pub = self.ctx.socket(zmq.XPUB)
        self.subscribers = 0
        # Bounded: a stalled subscriber loses events (and resnapshots on the gap) rather
        # than growing the controller's memory without limit.
        self.pub.setsockopt(zmq.SNDHWM, 200_000)
        self.pub.setsockopt(zmq.LINGER, 0)
        serve_curve(self.pub, self.curve)
        self.pub.bind(c.pub_address)
        self.wake_addr = f"inproc://wake-{id(self)}"
        self.wake_pull = self.ctx.socket(zmq.PULL)
        self.wake_pull.bind(self.wake_addr)
        self.wake_push = self.ctx.socket(zmq.PUSH)  # used only from the raft thread
        self.wake_push.connect(self.wake_addr)
        self.done: queue.SimpleQueue[tuple[int, Any, int]] = queue.SimpleQueue()
        self.inflight: dict[int, list[Reply]] = {}
        self.batch: list[tuple[Cmd, Reply]] = []
        self.batch_no = 0
        self.live = Live()
        self.heap = HeapUpkeep()
        self.resources = catalog(cfg.site_resources())
        # Access control is on when the cluster has a token key ring (`xce up` makes one).
        self.policy = load_policy()
        keys = auth_dir(cfg.state_dir) / KEYS_FILE if cfg.state_dir else None
        self.tokens = TokenService.from_state_dir(cfg.state_dir) if keys and keys.exists() else None
        # Who asked (set by ``authorize``) and the log of state-changing requests at this door.
        self.principal: Principal | None = None
        self.requests = AuditLog(state_dir / REQUEST_LOG_FILE, record_type=S.RequestRecord)
        # Parsed requirements are immutable, and users repeat the same few strings.
        self.parse = functools.lru_cache(maxsize=4096)(lambda text: parse_resreq(text, self.resources))
        self.cluster_totals = cfg.cluster_totals()
        self.workers: dict[str, bytes] = {}       # host -> ROUTER identity
        # Dispatch bookkeeping (soft): orders sent but not yet confirmed by the worker, and
        # confirmed ones.  Only the unconfirmed are rescanned for re-sending.
        self.unconfirmed: dict[tuple[int, str], tuple[int, float]] = {}  # (job, host) -> (attempt, sent)
        self.confirmed: dict[tuple[int, str], int] = {}                   # (job, host) -> attempt
        # Kills of shares no worker confirmed started: (job, host) -> (first sent, last sent).
        # After kill_wait (the time a silent host takes to go unavail) the share is ended.
        self.unstarted_kills: dict[tuple[int, str], tuple[float, float]] = {}
        self.suspended: dict[tuple[int, str], bool] = {}  # (job, host) -> its worker's last word on it
        self.peeks: dict[int, tuple[bytes, int, int, str, float]] = {}  # ticket -> client, rid, job, state, sent
        self.kill_wait = c.heartbeat_misses * cfg.worker.heartbeat
        # host -> when its worker registered with this leader, listing every task it runs: from
        # then on ``confirmed`` is complete for that host (the audit and chase_kills rely on it).
        self.registered_at: dict[str, float] = {}
        self.seq = 0
        self.epoch = uuid.uuid4().hex[:12]
        self.was_leader = False
        self.pending_soft: dict[str, Any] = {"live": [], "samples": [], "reasons": {}}
        self.last_round_ms: float | None = None
        self.next_soft = 0.0
        self.stopping = False
        self.router_by_raft = dict(zip(c.peers, c.peer_addresses, strict=True))
        self.router_by_raft[c.raft_address] = c.address
        self.next_check = 0.0
        self.next_prune = 0.0
        self._lost_sent: set[str] = set()
        journal = str(state_dir / "raft.journal")
        conf = make_conf(journal, str(state_dir / "raft.dump"), c.raft_password, c.append_period,
                         c.tick_period, c.election_timeout, c.leader_fallback,
                         on_state=lambda old, new: self._wake(), bind=c.raft_address,
                         compact_entries=c.compact_entries, compact_seconds=c.compact_seconds)
        self.raft = ReplicatedState(c.raft_address, list(c.peers), conf, self._wake)
        if c.durability == "fsync":
            fsync_journal(self.raft, journal)
        self.state_obj = self.raft.state

    # ---- plumbing -------------------------------------------------------------------------

    def _wake(self) -> None:
        try:
            self.wake_push.send(b"", zmq.NOBLOCK)
        except zmq.ZMQError:
            pass

    @property
    def state(self):  # noqa: ANN201 - pysyncobj may swap the object on snapshot load
        return self.raft.state

    def leader_router(self) -> str | None:
        lead = self.raft.leader()
        return None if lead is None else self.router_by_raft.get(lead, lead)

    def send(self, ident: bytes, payload: bytes) -> None:
        try:
            # Two sends, not send_multipart: cheaper per reply (see run); ROUTER routes on
            # the first part and never splits a message.
            self.router.send(ident, zmq.SNDMORE | zmq.NOBLOCK)
            self.router.send(payload, zmq.NOBLOCK)
        except zmq.ZMQError:
            log.warning("dropping a reply: peer is gone or its queue is full")

    def commit(self, cmd: Cmd, reply: Reply) -> None:
        self.batch.append((cmd, reply))

    def flush_batch(self) -> None:
        if not self.batch:
            return
        cmds = [c for c, _ in self.batch]
        replies = [r for _, r in self.batch]
        self.batch = []
        self.batch_no += 1
        token = self.batch_no
        self.inflight[token] = replies

        def done(res: Any, err: int) -> None:
            self.done.put((token, res, err))
            self._wake()

        try:
            self.raft.apply_batch(encode_batch(cmds), callback=done)
        except BlockingIOError:
            pass  # queued; pysyncobj's wake-up pipe is full, so a wake-up is already pending

    # ---- the loop -------------------------------------------------------------------------

    def run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.router, zmq.POLLIN)
        poller.register(self.wake_pull, zmq.POLLIN)
        poller.register(self.pub, zmq.POLLIN)
        while not self.stopping:
            ready = dict(poller.poll(100))
            if self.wake_pull in ready:
                while True:
                    try:
                        self.wake_pull.recv(zmq.NOBLOCK)
                    except zmq.Again:
                        break
            if self.pub in ready:
                self.count_subscribers()
            self.after_apply()
            if self.router in ready:
                recv = self.router.recv
                for _ in range(5000):
                    # Part by part rather than recv_multipart (its per-part checks cost more
                    # than the parts at thousands of heartbeats a second); the rest of a
                    # message is there once its first part is.  The body as a frame, not
                    # bytes: a daemon message's CURVE key is a property of its frame.
                    try:
                        ident = recv(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    frame = recv(copy=False)
                    extra = 0
                    while frame.more:
                        frame = recv(copy=False)
                        extra += 1
                    self.handle(ident, frame, extra)
            self.flush_batch()
            self.timers(time.time())
            self.publish_soft(time.time())
        self.close()

    def close(self) -> None:
        try:
            self.raft.destroy()
        except Exception:  # noqa: BLE001 - shutting down
            pass
        if self.authenticator is not None:
            self.authenticator.stop()
        self.ctx.destroy(linger=0)
        from xce.transport.sockets import close_local_door

        close_local_door(self.door)

    def handle(self, ident: bytes, frame: zmq.Frame, extra: int = 0) -> None:
        if extra:
            self.send(ident, error_reply(0, ProtocolError(f"expected one message frame, got {extra + 1}")))
            return
        rid = 0
        op: Op | None = None
        body: Any = None
        self.principal = None
        self.audit: Audit | None = None  # this request's log entry, until a reply claims it
        try:
            env = decode_envelope(frame.buffer)
            rid = env.rid
            if env.op in (Op.OK, Op.ERROR):
                # A worker's answer to an order (e.g. refusing a stale term): never answer an answer.
                if env.op == Op.ERROR:
                    log.info("peer reported an error: %s", bytes(env.body)[:200])
                return
            op, body = decode_request(env)
            if self.allow is not None and op in DAEMON_OPS:
                self.check_daemon_key(op, frame, body)
            if self.tokens is not None:
                body = self.authorize(env.token, op, body)
            if not self.raft.is_leader() and op not in (Op.PING, Op.STATUS) \
                    and not (op in (Op.JOBS, Op.HOSTS) and body.stale_ok):
                raise NotLeader(self.leader_router())
            handler = self.HANDLERS.get(op)
            if handler is None:
                raise ProtocolError(f"{op.name} is not served by the controller")
            if op in AUDITED_OPS:
                self.audit = self.audit_entry(op, body, frame)
            handler(self, ident, rid, body)
            if self.audit is not None:  # answered at once (a dry run), not when a command commits
                self.log_request(self.audit, "accepted")
        except XceError as e:
            if op in AUDITED_OPS:
                self.log_request(self.audit or self.audit_entry(op, body, frame), refusal(e))
            self.send(ident, error_reply(rid, e, self.raft.term()))
        except Exception as e:  # noqa: BLE001 - a bug must not kill the controller
            log.exception("handler failed")
            self.send(ident, error_reply(rid, XceError(f"internal error: {e}")))

    def ok(self, ident: bytes, rid: int, body: Any) -> None:
        self.send(ident, encode(Op.OK, rid, body, term=self.raft.term()))

    def replier(self, ident: bytes, rid: int, build: Callable[[Any], Any]) -> Reply:
        """The reply to send when the request's command has committed (or failed to).

        It takes the request's log entry, so the log records the answer the client got,
        not that the command was handed to Raft: a command the state machine refuses, or
        one lost with the leadership, is logged as refused.
        """
        audit, self.audit = self.audit, None

        def reply(result: Result) -> None:
            match result:
                case Ok(value):
                    try:
                        body = build(value)
                    except XceError as e:
                        refused(e)
                        return
                    self.ok(ident, rid, body)
                    if audit is not None:
                        self.log_request(audit, answer(body))
                case Err(error):
                    refused(error)

        def refused(e: XceError) -> None:
            self.send(ident, error_reply(rid, e, self.raft.term()))
            if audit is not None:
                self.log_request(audit, refusal(e))
        return reply

    # ---- timers ---------------------------------------------------------------------------

    def timers(self, now: float) -> None:
        self.heap.tick(now)
        if self.allow is not None:
            self.refresh_allow_list(now)
        if now < self.next_check or not self.raft.is_leader():
            return
        self.next_check = now + 0.25
        limit = self.cfg.controller.heartbeat_misses * self.cfg.worker.heartbeat
        with self.raft.lock:
            st = self.state
            for name, host in st.hosts.items():
                seen = self.live.last_seen.get(name, now)
                if not host.unavail and now - seen > limit + 0.1 and name not in self._lost_sent:
                    self._lost_sent.add(name)
                    self.commit(HostLost(time=now, name=name), lambda r, n=name: self._lost_sent.discard(n))
            self.live.refresh_decay(st.jobs, now)
            # Re-send orders nobody confirmed, a bounded number per pass so a burst of
            # silent workers cannot starve the request loop.
            redo = [k for k, (att, sent) in itertools.islice(self.unconfirmed.items(), 20_000)
                    if now - sent > 2.0][:2000]
            for jid, host in redo:
                job = st.jobs.get(jid)
                if job is not None and job.state == JobState.RUN and host not in job.finished_hosts \
                        and not job.kill_requested and not release_order(job):
                    self.dispatch(job, host, now)
                else:  # ended, or killed (chase_kills follows a kill up)
                    del self.unconfirmed[(jid, host)]
            self.chase_kills(st.jobs, now)
            if now >= self.next_prune:  # drop confirmations of jobs that ended another way
                self.next_prune = now + 60
                self.confirmed = {k: a for k, a in self.confirmed.items()
                                  if (j := st.jobs.get(k[0])) is not None and j.state in ACTIVE
                                  and j.attempt == a}
                self.suspended = {k: v for k, v in self.suspended.items() if k in self.confirmed}
            finished = len(st.finished_order)
        self.expire_peeks(now)
        if finished > self.cfg.controller.keep_finished + 1000:
            self.commit(Cleanup(time=now, keep_finished=self.cfg.controller.keep_finished), lambda r: None)

    HANDLERS: dict[Op, Callable[[Controller, bytes, int, Any], None]] = {
        Op.PING: ClientDoor.h_ping, Op.SUBMIT: ClientDoor.h_submit, Op.JOBS: ClientDoor.h_jobs,
        Op.HOSTS: ClientDoor.h_hosts, Op.QUEUES: ClientDoor.h_queues, Op.KILL: ClientDoor.h_kill,
        Op.MODIFY: ClientDoor.h_modify, Op.HOST_ADMIN: ClientDoor.h_host_admin, Op.STATUS: ClientDoor.h_status,
        Op.SNAPSHOT: ClientDoor.h_snapshot, Op.AUDIT: ClientDoor.h_audit, Op.REQUEST_LOG: ClientDoor.h_request_log,
        Op.PLACE: WorkerDoor.h_place, Op.REGISTER: WorkerDoor.h_register, Op.HEARTBEAT: WorkerDoor.h_heartbeat,
        Op.JOB_STARTED: WorkerDoor.h_job_started, Op.JOB_FINISHED: WorkerDoor.h_job_finished,
        Op.JOB_SIGNALLED: JobRunDoor.h_job_signalled, Op.JOB_OUTPUT: JobRunDoor.h_job_output,
        Op.PEEK: JobRunDoor.h_peek,
        Op.STOP: ClientDoor.h_stop, Op.RESUME: ClientDoor.h_resume, Op.REQUEUE: ClientDoor.h_requeue,
        Op.SWITCH: ClientDoor.h_switch, Op.MOVE: ClientDoor.h_move, Op.MODIFY_SPEC: ClientDoor.h_modify_spec,
        Op.HIST: ClientDoor.h_hist,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="xce-controller", description="XCE controller daemon")
    p.add_argument("--config", help="TOML config file")
    p.add_argument("--state-dir", help="where the Raft journal and snapshots live")
    p.add_argument("--log-level", default="INFO")
    a = p.parse_args(argv)
    logging.basicConfig(level=a.log_level, format="%(asctime)s controller %(levelname)s %(message)s")
    try:
        cfg = load(a.config)
    except XceError as e:
        print(f"xce-controller: {e.message}", file=sys.stderr)
        return 2
    state_dir = Path(a.state_dir or cfg.state_dir or ".") / "controller"
    try:
        ctl = Controller(cfg, state_dir)
    except XceError as e:  # e.g. CURVE is on and the server key is missing
        print(f"xce-controller: {e.message}", file=sys.stderr)
        return 2

    def stop(*_: Any) -> None:
        ctl.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    ctl.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
