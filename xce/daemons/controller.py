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

import msgspec
import zmq

from xce import __version__
from xce.config import Config, load
from xce.curve import AllowList, KeyStore, keys_root, server_keys, start_authenticator
from xce.errors import (Conflict, InvalidRequest, NotFound, NotLeader, ProtocolError, Unauthenticated,
                        XceError)
from xce.auth import KEYS_FILE, TokenService, auth_dir
from xce.live import Live
from xce.policy import OP_PERMISSIONS, authorize, load_policy
from xce.model import ACTIVE, TERMINAL, Host, HostUsage, Job, JobState, Queue
from xce.placement import check_placement, demand_of, host_caps, never_fits
from xce.proto import schema as S
from xce.proto.codec import decode_envelope, decode_request, encode, error_reply
from xce.proto.opcodes import Op
from xce.raft import ReplicatedState, Result, fsync_journal, make_conf
from xce.resources import WIRE_NAMES, catalog
from xce.resreq import parse_resreq
from xce.state import (Cleanup, Cmd, Finish, HostLost, Kill, Modify, Place, RegisterHost,
                       SetHostAdmin, SetQueues, Submit, encode_batch)

log = logging.getLogger("xce.controller")

# What only a daemon (a key on the CURVE allow-list) may send: registering, reporting, placing.
DAEMON_OPS = frozenset({Op.REGISTER, Op.HEARTBEAT, Op.JOB_STARTED, Op.JOB_FINISHED, Op.PLACE})
TURN = 0.001  # seconds: the shortest loop turn while messages keep coming (see run)
SOFT_PERIOD = 0.05  # seconds between soft events (see publish_soft)
DAEMON_GRANT_TTL = 5.0  # seconds a verified daemon grant is reused: bounds how late a key-ring revocation bites
# The usage column that carries `mem`: named through the one wire-name table.
MEM_WIRE = next(w for w, r in WIRE_NAMES.items() if r == "mem")
assert MEM_WIRE in S.UsageColumns.__struct_fields__, "UsageColumns lacks the worker's mem column"
Reply = Callable[[Result], None]


def public(job: Job) -> Job:
    """A job as the event stream and snapshots show it: without its environment (secrets)."""
    if not job.spec.env:
        return job
    return msgspec.structs.replace(job, spec=msgspec.structs.replace(job.spec, env={}))


class Controller:
    def __init__(self, cfg: Config, state_dir: Path) -> None:
        self.cfg = cfg
        c = cfg.controller
        self.state_dir = state_dir
        state_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(state_dir, 0o700)  # the journal holds job environments
        self.ctx = zmq.Context()
        from xce.zmqutil import bind_local_door, router, serve_curve

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
        self.resources = catalog(cfg.site_resources())
        # Access control is on when the cluster has a token key ring (`xce up` makes one).
        self.policy = load_policy()
        keys = auth_dir(cfg.state_dir) / KEYS_FILE if cfg.state_dir else None
        self.tokens = TokenService.from_state_dir(cfg.state_dir) if keys and keys.exists() else None
        # Parsed requirements are immutable, and users repeat the same few strings.
        self.parse = functools.lru_cache(maxsize=4096)(lambda text: parse_resreq(text, self.resources))
        self.cluster_totals = cfg.cluster_totals()
        self.workers: dict[str, bytes] = {}       # host -> ROUTER identity
        # Dispatch bookkeeping (soft): orders sent but not yet confirmed by the worker, and
        # confirmed ones.  Only the unconfirmed are rescanned for re-sending.
        self.unconfirmed: dict[tuple[int, str], tuple[int, float]] = {}  # (job, host) -> (attempt, sent)
        self.confirmed: dict[tuple[int, str], int] = {}                   # (job, host) -> attempt
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
                         on_state=lambda old, new: self._wake(), bind=c.raft_address)
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

        self.raft.apply_batch(encode_batch(cmds), callback=done)

    # ---- the loop -------------------------------------------------------------------------

    def run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.router, zmq.POLLIN)
        poller.register(self.wake_pull, zmq.POLLIN)
        poller.register(self.pub, zmq.POLLIN)
        busy_until = 0.0
        while not self.stopping:
            # Under load, let a turn's worth of messages gather (at most TURN seconds) rather
            # than paying a poll, a flush and the timers for every single heartbeat; an idle
            # controller still answers at once.
            wait = busy_until - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            ready = dict(poller.poll(100))
            busy_until = time.monotonic() + TURN if self.router in ready else 0.0
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
        from xce.zmqutil import close_local_door

        close_local_door(self.door)

    def handle(self, ident: bytes, frame: zmq.Frame, extra: int = 0) -> None:
        if extra:
            self.send(ident, error_reply(0, ProtocolError(f"expected one message frame, got {extra + 1}")))
            return
        rid = 0
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
            handler(self, ident, rid, body)
        except XceError as e:
            self.send(ident, error_reply(rid, e, self.raft.term()))
        except Exception as e:  # noqa: BLE001 - a bug must not kill the controller
            log.exception("handler failed")
            self.send(ident, error_reply(rid, XceError(f"internal error: {e}")))

    def check_daemon_key(self, op: Op, frame: zmq.Frame, body: Any) -> None:
        """Only a connection whose CURVE key is on the allow-list may act as a daemon."""
        assert self.allow is not None
        try:
            user_id = frame.get("User-Id")
        except zmq.ZMQError:
            user_id = None  # the local door (no CURVE) has no key, so it is no daemon
        name = self.allow.name_of(user_id)
        if name is None:
            raise Unauthenticated(f"{op.name} needs a daemon key: this connection's CURVE key "
                                  f"{user_id or '(none)'} is not in the allow-list (xce keys add)")
        if op == Op.REGISTER:
            self.worker_keys[body.host] = name

    def authorize(self, token: str, op: Op, body: Any) -> Any:
        """The same policy as REST (xce/policy.py): who may do what, own jobs narrowed.

        Workers and the scheduler show a daemon-role token (and, with CURVE, an allowed
        key: ``check_daemon_key``); everyone else their user token.
        """
        if OP_PERMISSIONS.get(op, "") is None:
            return body  # public: PING
        if not token:
            raise Unauthenticated(f"{op.name} needs a token (xce login, or XCE_TOKEN)")
        assert self.tokens is not None
        # Every heartbeat carries the same daemon token: remember the grant for a few seconds
        # (daemon ops own no jobs, so the answer depends on the token and the op only).
        now = time.monotonic()
        grant = (token, op)
        if op in DAEMON_OPS and self.daemon_grants.get(grant, 0.0) > now:
            return body
        principal = self.tokens.verify(token)
        with self.raft.lock:
            jobs = self.state.jobs
            body = authorize(self.policy, principal, op, body,
                             lambda j: jobs[j].spec.user if j in jobs else None)
        if op in DAEMON_OPS:
            if len(self.daemon_grants) > 10_000:
                self.daemon_grants.clear()
            self.daemon_grants[grant] = now + DAEMON_GRANT_TTL
        return body

    def ok(self, ident: bytes, rid: int, body: Any) -> None:
        self.send(ident, encode(Op.OK, rid, body, term=self.raft.term()))

    def replier(self, ident: bytes, rid: int, build: Callable[[Any], Any]) -> Reply:
        def reply(result: Result) -> None:
            kind, value = result
            if kind == "ok":
                try:
                    self.ok(ident, rid, build(value))
                except XceError as e:
                    self.send(ident, error_reply(rid, e))
            else:
                code, message = value
                from xce.errors import ERROR_CLASSES

                exc = ERROR_CLASSES.get(code, XceError)(message)
                self.send(ident, error_reply(rid, exc))
        return reply

    # ---- after Raft applied something -------------------------------------------------------

    def after_apply(self) -> None:
        now = time.time()
        self.leadership(now)
        events_jobs: list[Job] = []
        events_hosts: list[Host] = []
        with self.raft.lock:
            st = self.state
            if st is not self.state_obj:  # a snapshot was installed: rebuild everything
                self.state_obj = st
                self.live.rebuild(st.jobs.values(), now)
                self.epoch = uuid.uuid4().hex[:12]
                st.touched_jobs.clear()
                st.touched_hosts.clear()
            leading = self.raft.is_leader()
            for jid in st.touched_jobs:
                job = st.jobs.get(jid)
                if job is None:
                    continue
                if leading:  # a follower's ledger is rebuilt when it takes over
                    self.live.sync_job(job, now)
                events_jobs.append(job)
            for name in st.touched_hosts:
                if name in st.hosts:
                    events_hosts.append(st.hosts[name])
            forgotten = st.forgotten
            st.touched_jobs, st.touched_hosts, st.forgotten = set(), set(), []
            for jid in forgotten:
                self.live.forget_job(jid)
            if (events_jobs or events_hosts or forgotten) and self.subscribers:
                # Job environments stay in the journal; the event stream does not carry them.
                self.emit(S.Event(seq=0, epoch=self.epoch, time=now, jobs=[public(j) for j in events_jobs],
                                  hosts=events_hosts, forget=forgotten))
            elif events_jobs or events_hosts or forgotten:
                self.seq += 1  # nobody listens: skip the encoding, keep the sequence honest
            if leading:
                for job in events_jobs:
                    self.orders(job, now)  # the real job: its environment goes to the worker
        while True:
            try:
                token, res, err = self.done.get_nowait()
            except queue.Empty:
                break
            replies = self.inflight.pop(token, [])
            if err != 0 or res is None:
                exc = NotLeader(self.leader_router()) if not self.raft.is_leader() else \
                    XceError(f"commit failed (pysyncobj reason {err}); retry")
                for r in replies:
                    r(("err", (exc.code, exc.message)))
                continue
            for r, result in zip(replies, res, strict=True):
                r(result)

    def count_subscribers(self) -> None:
        while True:
            try:
                msg = self.pub.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            if msg[:1] == b"\x01":
                self.subscribers += 1
            elif msg[:1] == b"\x00":
                self.subscribers = max(0, self.subscribers - 1)

    def emit(self, ev: S.Event) -> None:
        self.seq += 1
        ev.seq = self.seq
        self.pub.send_multipart([b"ev", encode(Op.EVENT, 0, ev, term=self.raft.term())])

    def publish_soft(self, now: float, force: bool = False) -> None:
        """Soft news (heartbeats, samples, reasons) goes out at most every SOFT_PERIOD.

        A loop turn often handles one heartbeat; an event per turn would cost an encode
        and a send per heartbeat.  50 ms is far inside the console's 1 s budget.
        """
        if not force and now < self.next_soft:
            return
        self.next_soft = now + SOFT_PERIOD
        p = self.pending_soft
        if (p["live"] or p["samples"] or p["reasons"]) and not self.subscribers:
            self.seq += 1
            self.pending_soft = {"live": [], "samples": [], "reasons": {}}
        elif p["live"] or p["samples"] or p["reasons"]:
            self.emit(S.Event(seq=0, epoch=self.epoch, time=now, live=p["live"],
                              samples=p["samples"], reasons=p["reasons"]))
            self.pending_soft = {"live": [], "samples": [], "reasons": {}}

    def leadership(self, now: float) -> None:
        leader = self.raft.is_leader()
        if leader and not self.was_leader:
            log.info("became leader (term %d)", self.raft.term())
            self.epoch = uuid.uuid4().hex[:12]
            with self.raft.lock:
                self.live.rebuild(self.state.jobs.values(), now)
                # A grace period of one more timeout: workers find the new leader and re-register.
                grace = self.cfg.controller.heartbeat_misses * self.cfg.worker.heartbeat + 5.0
                for name in self.state.hosts:
                    self.live.last_seen[name] = now + grace
                queues = [Queue(name=n, priority=q.priority, rerunnable=q.rerunnable,
                                description=q.description) for n, q in self.cfg.queues.items()]
                changed = (sorted(self.state.queues.values(), key=lambda q: q.name)
                           != sorted(queues, key=lambda q: q.name)
                           or self.state.default_queue != self.cfg.default_queue())
            if changed:
                self.commit(SetQueues(time=now, queues=queues, default_queue=self.cfg.default_queue()),
                            lambda r: None)
            self.unconfirmed.clear()
            self.confirmed.clear()
        self.was_leader = leader

    # ---- orders to workers -------------------------------------------------------------------

    def orders(self, job: Job, now: float) -> None:
        if job.state == JobState.RUN and job.kill_requested:
            for host in job.hosts:
                if host not in job.finished_hosts:
                    self.send_worker(host, Op.KILL_JOB, S.KillJob(
                        job_id=job.id, attempt=job.attempt, reason=job.reason or "killed by user"))
        elif job.state == JobState.RUN:
            for a in job.allocs:
                key = (job.id, a.host)
                u = self.unconfirmed.get(key)
                if self.confirmed.get(key) != job.attempt and (u is None or u[0] != job.attempt):
                    self.dispatch(job, a.host, now)

    def dispatch(self, job: Job, host: str, now: float) -> None:
        alloc = next(a for a in job.allocs if a.host == host)
        from xce.live import mem_decay

        duration, decay = mem_decay(job)
        self.unconfirmed[(job.id, host)] = (job.attempt, now)
        self.send_worker(host, Op.RUN_JOB, S.RunJob(
            job_id=job.id, attempt=job.attempt, spec=job.spec, alloc=alloc, hosts=job.hosts,
            mem_duration_s=duration, mem_decay=decay))

    def send_worker(self, host: str, op: Op, body: Any) -> None:
        ident = self.workers.get(host)
        if ident is not None:
            self.send(ident, encode(op, 0, body, term=self.raft.term()))

    # ---- timers ---------------------------------------------------------------------------

    def timers(self, now: float) -> None:
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
                if job is not None and job.state == JobState.RUN and host not in job.finished_hosts:
                    self.dispatch(job, host, now)
                else:
                    del self.unconfirmed[(jid, host)]
            if now >= self.next_prune:  # drop confirmations of jobs that ended another way
                self.next_prune = now + 60
                self.confirmed = {k: a for k, a in self.confirmed.items()
                                  if (j := st.jobs.get(k[0])) is not None and j.state in ACTIVE}
            finished = len(st.finished_order)
        if finished > self.cfg.controller.keep_finished + 1000:
            self.commit(Cleanup(time=now, keep_finished=self.cfg.controller.keep_finished), lambda r: None)

    # ---- client requests ----------------------------------------------------------------------

    def h_ping(self, ident: bytes, rid: int, body: S.Empty) -> None:
        self.ok(ident, rid, S.Empty())

    def h_submit(self, ident: bytes, rid: int, body: S.SubmitRequest) -> None:
        if not body.jobs:
            raise InvalidRequest("submit: no jobs given")
        specs, reqs = [], []
        with self.raft.lock:
            queues = self.state.queues
            default = self.state.default_queue
            caps = host_caps(self.state.hosts.values(), self.live.ledger, {})
        verdicts: dict[tuple[int, str], tuple[Any, str | None]] = {}  # a batch repeats itself
        for i, spec in enumerate(body.jobs):
            where = f"job {i}: " if len(body.jobs) > 1 else ""
            if not spec.command:
                raise InvalidRequest(f"{where}no command given")
            if spec.slots < 1:
                raise InvalidRequest(f"{where}slots must be >= 1, got {spec.slots}")
            q = spec.queue or default
            if q not in queues:
                raise InvalidRequest(f"{where}queue {q!r} does not exist (queues: {', '.join(sorted(queues))})")
            key = (spec.slots, spec.resreq)
            if key not in verdicts:
                try:
                    req = self.parse(spec.resreq)
                except XceError as e:
                    raise type(e)(where + e.message) from None
                d = demand_of(spec.slots, req, self.cluster_totals)
                verdicts[key] = (req, never_fits(d, caps.values()) if caps else None)
            req, never = verdicts[key]
            if never:
                from xce.errors import Infeasible

                raise Infeasible(f"{where}{never}")
            specs.append(msgspec.structs.replace(spec, queue=q) if spec.queue != q else spec)
            reqs.append(req)
        if body.dry_run:
            self.ok(ident, rid, S.SubmitReply(ids=[], queues=[s.queue for s in specs]))
            return
        self.commit(Submit(time=time.time(), specs=specs, reqs=reqs, key=body.key[:128]),
                    self.replier(ident, rid, lambda ids: S.SubmitReply(ids=ids, queues=[s.queue for s in specs])))

    def h_jobs(self, ident: bytes, rid: int, body: S.JobsRequest) -> None:
        out = []
        states = set(body.states)
        with self.raft.lock:
            jobs = self.state.jobs
            if body.ids:
                missing = [i for i in body.ids if i not in jobs]
                if missing and len(body.ids) == 1:
                    raise NotFound(f"job {missing[0]} is not known")
                selected = [jobs[i] for i in body.ids if i in jobs]
            else:
                selected = (j for j in jobs.values() if j.id > body.after)
            for job in selected:
                if body.user and job.spec.user != body.user:
                    continue
                if body.queue and job.spec.queue != body.queue:
                    continue
                if states and job.state.value not in states:
                    continue
                if not body.ids and not body.all and not states and job.state in TERMINAL:
                    continue
                out.append(self.live.job_view(job))
                if body.limit and len(out) >= body.limit:
                    break
            reply = S.JobsReply(jobs=out, next_after=out[-1].id if body.limit and len(out) >= body.limit else None,
                                stale=self.staleness())
            data = encode(Op.OK, rid, reply, term=self.raft.term())
        self.send(ident, data)

    def h_hosts(self, ident: bytes, rid: int, body: S.HostsRequest) -> None:
        with self.raft.lock:
            hosts = self.state.hosts
            for n in body.names:
                if n not in hosts:
                    raise NotFound(f"host {n} is not known")
            names = body.names or sorted(hosts)
            views = [self.live.host_view(hosts[n]) for n in names]
        self.ok(ident, rid, S.HostsReply(hosts=views, stale=self.staleness()))

    def staleness(self) -> S.Staleness | None:
        """None on the leader (fresh); on a follower, how far behind its answer may be."""
        if self.raft.is_leader():
            return None
        st = self.raft.status()
        role = {0: "follower", 1: "candidate", 2: "leader"}.get(st.get("state", 0), "unknown")
        lag = max(0, int(st.get("leader_commit_idx") or 0) - int(st.get("last_applied", 0)))
        return S.Staleness(served_by=self.cfg.controller.address, role=role,
                           as_of=self.state.last_time, lag_entries=lag)

    def h_queues(self, ident: bytes, rid: int, body: S.Empty) -> None:
        with self.raft.lock:
            counts: dict[str, dict[str, int]] = {q: {} for q in self.state.queues}
            for job in self.state.jobs.values():
                c = counts.setdefault(job.spec.queue, {})
                c[job.state.value] = c.get(job.state.value, 0) + 1
            reply = S.QueuesReply(queues=sorted(self.state.queues.values(), key=lambda q: -q.priority),
                                  default=self.state.default_queue, counts=counts)
        self.ok(ident, rid, reply)

    def h_kill(self, ident: bytes, rid: int, body: S.KillRequest) -> None:
        if not body.ids:
            raise InvalidRequest("kill: no job ids given")
        self.commit(Kill(time=time.time(), job_ids=body.ids, reason=body.reason or "killed by user"),
                    self.replier(ident, rid, lambda res: S.KillReply(results=res)))

    def h_modify(self, ident: bytes, rid: int, body: S.ModifyRequest) -> None:
        if body.mem_limit is not None and body.mem_limit <= 0:
            raise InvalidRequest("mem_limit must be > 0")
        def modified(result: Result) -> None:
            if result[0] == "ok":  # running: the workers enforce the new limit from now on
                with self.raft.lock:
                    job = self.state.jobs.get(body.id)
                    if job is not None and job.state in ACTIVE:
                        for host in job.hosts:
                            if host not in job.finished_hosts:
                                self.dispatch(job, host, time.time())
            self.replier(ident, rid, lambda r: S.Ack(True, r))(result)

        self.commit(Modify(time=time.time(), job_id=body.id, mem_limit=body.mem_limit), modified)

    def h_host_admin(self, ident: bytes, rid: int, body: S.HostAdminRequest) -> None:
        if body.action not in ("open", "close"):
            raise InvalidRequest(f"host action must be 'open' or 'close', got {body.action!r}")
        self.commit(SetHostAdmin(time=time.time(), names=body.names, closed=body.action == "close"),
                    self.replier(ident, rid, lambda r: S.Ack(True, r)))

    def h_status(self, ident: bytes, rid: int, body: S.Empty) -> None:
        st = self.raft.status()
        role = {0: "follower", 1: "candidate", 2: "leader"}.get(st.get("state", 0), "unknown")
        me = S.ControllerInfo(address=self.cfg.controller.address, role=role, term=self.raft.term(),
                              commit_index=int(st.get("commit_idx", 0)),
                              applied_index=int(st.get("last_applied", 0)),
                              leader=self.leader_router(), pid=os.getpid())
        others = [S.ControllerInfo(address=self.router_by_raft.get(p, p), role="peer", term=0,
                                   commit_index=0) for p in self.cfg.controller.peers]
        with self.raft.lock:
            hosts: dict[str, int] = {}
            mem = {"capacity": 0, "reserved": 0, "actual": 0, "slack": 0, "overage": 0}
            for h in self.state.hosts.values():
                v = self.live.host_view(h)
                hosts[v.state] = hosts.get(v.state, 0) + 1
                mem["capacity"] += v.mem_total
                mem["reserved"] += v.mem_reserved
                mem["actual"] += v.mem_actual
                mem["slack"] += v.mem_slack
                mem["overage"] += v.mem_overage
            jobs: dict[str, int] = {}
            for j in self.state.jobs.values():
                jobs[j.state.value] = jobs.get(j.state.value, 0) + 1
        self.ok(ident, rid, S.StatusReply(
            cluster=self.cfg.cluster.name, controllers=[me, *others], leader=self.leader_router(),
            term=self.raft.term(), hosts_by_state=hosts, jobs_by_state=jobs,
            endpoints={"controller": self.cfg.controller.address, "events": self.cfg.controller.pub_address},
            rest_url=self.cfg.rest_url or None, mem=mem, last_round_ms=self.last_round_ms))

    def h_snapshot(self, ident: bytes, rid: int, body: S.Empty) -> None:
        self.publish_soft(time.time(), force=True)
        with self.raft.lock:
            self.after_apply_locked_guard()
            st = self.state
            snap = S.Snapshot(
                seq=self.seq, epoch=self.epoch, time=time.time(), jobs=[public(j) for j in st.jobs.values()],
                hosts=list(st.hosts.values()), queues=list(st.queues.values()),
                default_queue=st.default_queue, live=self.live.lives(), samples=self.live.samples(),
                reasons=dict(self.live.reasons), leader=self.leader_router(), term=self.raft.term())
            data = encode(Op.OK, rid, snap, term=self.raft.term())
        self.send(ident, data)

    def after_apply_locked_guard(self) -> None:
        # Applied-but-unpublished changes must go out before a snapshot claims their seq.
        if self.state.touched_jobs or self.state.touched_hosts or self.state.forgotten:
            self.after_apply()

    def h_audit(self, ident: bytes, rid: int, body: S.Empty) -> None:
        from xce.audit import audit

        with self.raft.lock:
            problems, checked = audit(self.state, self.live)
        self.ok(ident, rid, S.AuditReply(problems=problems, checked=checked))

    # ---- scheduler ------------------------------------------------------------------------------

    def h_place(self, ident: bytes, rid: int, body: S.PlaceRequest) -> None:
        rejected: dict[int, str] = {}
        cmds: list[Place] = []
        now = time.time()
        with self.raft.lock:
            st = self.state
            caps = host_caps(st.hosts.values(), self.live.ledger, self.live.os_available)
            for p in body.placements:
                job = st.jobs.get(p.job_id)
                if job is None or job.state != JobState.PEND or job.attempt != p.attempt:
                    rejected[p.job_id] = "job is no longer pending at that attempt"
                    continue
                d = demand_of(job.spec.slots, job.req, self.cluster_totals)
                why = check_placement(d, p.allocs, caps)
                if why is not None:
                    rejected[p.job_id] = why
                    continue
                for a in p.allocs:
                    caps[a.host].charge(a.slots, a.mem, a.virtual.items())
                cmds.append(Place(time=now, job_id=p.job_id, attempt=p.attempt, allocs=p.allocs))
            changed = {j: r for j, r in body.reasons.items() if self.live.reasons.get(j) != r}
            self.live.reasons.update(body.reasons)
        self.pending_soft["reasons"].update(changed)
        self.last_round_ms = body.round_ms
        if not cmds:
            self.ok(ident, rid, S.PlaceReply(accepted=[], rejected=rejected))
            return
        accepted: list[int] = []
        for i, cmd in enumerate(cmds):
            last = i == len(cmds) - 1

            def reply(result: Result, cmd: Place = cmd, last: bool = last) -> None:
                if result[0] == "ok":
                    accepted.append(cmd.job_id)
                else:
                    rejected[cmd.job_id] = result[1][1]
                if last:
                    self.ok(ident, rid, S.PlaceReply(accepted=accepted, rejected=rejected))
            self.commit(cmd, reply)

    # ---- workers --------------------------------------------------------------------------------

    def refresh_allow_list(self, now: float) -> None:
        before = self.allow.keys if self.allow is not None else {}
        assert self.allow is not None
        self.allow.refresh(now)
        if self.allow.keys is before:
            return
        names = set(self.allow.keys.values())
        for host, key in list(self.worker_keys.items()):
            if key not in names:
                # Revoked: no more orders to it; its next heartbeat is refused, so the host
                # goes unavail after the usual misses and its jobs follow queue policy.
                log.warning("key %r of host %s was revoked: the worker is cut off", key, host)
                del self.worker_keys[host]
                self.workers.pop(host, None)

    def h_register(self, ident: bytes, rid: int, body: S.RegisterRequest) -> None:
        now = time.time()
        self.workers[body.host] = ident
        self.live.os_available[body.host] = body.os_available
        self.live.last_seen[body.host] = now
        self._lost_sent.discard(body.host)
        host = Host(name=body.host, slots_total=body.slots, mem_total=body.mem_total, ncpus=body.ncpus,
                    registered_time=now, version=body.version,
                    attrs={**body.attrs, "measure": body.measure}, virtual=body.virtual)
        known = {(t.job_id, t.attempt) for t in body.running}

        def registered(result: Result) -> None:
            kill: list[S.RunningTask] = []
            with self.raft.lock:
                for t in body.running:
                    job = self.state.jobs.get(t.job_id)
                    if job is None or job.attempt != t.attempt or job.state in TERMINAL \
                            or job.state == JobState.PEND or body.host not in job.hosts:
                        kill.append(t)
                    else:
                        self.unconfirmed.pop((t.job_id, body.host), None)
                        self.confirmed[(t.job_id, body.host)] = t.attempt
                for job in self.state.jobs.values():
                    if job.state in ACTIVE and body.host in job.hosts \
                            and body.host not in job.finished_hosts and (job.id, job.attempt) not in known:
                        if self.confirmed.get((job.id, body.host)) == job.attempt:
                            # It was started there and the worker no longer has it.
                            self.commit(Finish(time=now, job_id=job.id, attempt=job.attempt, host=body.host,
                                               reason="lost: the worker no longer has the job"), lambda r: None)
                        else:
                            self.dispatch(job, body.host, now)
                    elif job.state in ACTIVE and job.kill_requested and body.host in job.hosts:
                        self.orders(job, now)
            self.ok(ident, rid, S.RegisterReply(heartbeat_interval=self.cfg.worker.heartbeat,
                                                term=self.raft.term(), kill=kill))
        self.commit(RegisterHost(time=now, host=host), registered)
        self.pending_soft["live"].append(S.HostLive(body.host, body.os_available, now))

    def h_heartbeat(self, ident: bytes, rid: int, body: S.Heartbeat) -> None:
        now = time.time()
        with self.raft.lock:
            host = self.state.hosts.get(body.host)
            if host is None or host.unavail or self.workers.get(body.host) is None:
                self.ok(ident, rid, S.HeartbeatReply(known=False))
                return
            self.workers[body.host] = ident
            self.live.os_available[body.host] = body.os_available
            self.live.last_seen[body.host] = now
            self.apply_usage(body.host, body.usage)
        self.pending_soft["live"].append(S.HostLive(body.host, body.os_available, now))
        if body.ack:  # workers ask now and then, to know the controller still listens
            self.ok(ident, rid, S.HeartbeatReply(known=True))

    def apply_usage(self, host: str, u: S.UsageColumns) -> None:
        """Reconcile one host's reports (``Ledger.observe_host``); publish those that moved."""
        if not u.job_id:
            return
        moved = self.live.ledger.observe_host(host, u.job_id, u.attempt, getattr(u, MEM_WIRE), u.memory_peak,
                                              u.cpu_time)
        sample = S.JobSample
        self.pending_soft["samples"].extend([sample(a.job_id, host, a.actual, a.peak, a.cpu_time) for a in moved])

    def h_job_started(self, ident: bytes, rid: int, body: S.JobStarted) -> None:
        key = (body.job_id, body.host)
        u = self.unconfirmed.get(key)
        if u is not None and u[0] == body.attempt:
            del self.unconfirmed[key]
            self.confirmed[key] = body.attempt
        self.ok(ident, rid, S.Ack())

    def h_job_finished(self, ident: bytes, rid: int, body: S.JobFinished) -> None:
        self.unconfirmed.pop((body.job_id, body.host), None)
        self.confirmed.pop((body.job_id, body.host), None)
        self.commit(Finish(time=body.time, job_id=body.job_id, attempt=body.attempt, host=body.host,
                           exit_code=body.exit_code, signal=body.signal, reason=body.reason,
                           usage=body.usage),
                    self.replier(ident, rid, lambda r: S.Ack(True, str(r))))

    HANDLERS: dict[Op, Callable[[Controller, bytes, int, Any], None]] = {
        Op.PING: h_ping, Op.SUBMIT: h_submit, Op.JOBS: h_jobs, Op.HOSTS: h_hosts,
        Op.QUEUES: h_queues, Op.KILL: h_kill, Op.MODIFY: h_modify, Op.HOST_ADMIN: h_host_admin,
        Op.STATUS: h_status, Op.SNAPSHOT: h_snapshot, Op.AUDIT: h_audit, Op.PLACE: h_place,
        Op.REGISTER: h_register, Op.HEARTBEAT: h_heartbeat, Op.JOB_STARTED: h_job_started,
        Op.JOB_FINISHED: h_job_finished,
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
