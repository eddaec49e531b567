"""xce-controller: the ZeroMQ shell around the replicated state machine and the reactors.

One thread runs this loop; pysyncobj runs its own tick thread that applies
committed batches under ``ReplicatedState.lock`` when the loop does not hold it (else
they wait in its backlog, which the loop applies first: the Raft thread never waits
for the loop, xce/daemons/raft.py) and wakes the loop through an inproc socket.
Per loop turn:

    after apply       -> the backlog applied; ``on_applied``: the touched entities synced into the ledger,
                         published on PUB with the next sequence number, dispatched to
                         workers; then the continuations answer ("yes" only after commit)
    requests (ROUTER) -> decoded, then ``serve`` (xce/reactors/table.py) runs the reactor
    end of turn       -> all commands the reactors queued become ONE Raft entry (async)
    timers            -> ``on_tick`` (host loss, re-dispatch, cleanup), soft news

Every decision is a reactor's (xce/reactors/): this class keeps the sockets, the loop,
the timers' scheduling, Raft and the request log file.  It builds the reactors' ``Context``
once, and carries out what they record in its one ``Outbox``.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import queue
import signal
import sys
import time
import uuid
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import zmq

from xce.core.errors import NotLeader, ProtocolError, XceError
from xce.core.resources import catalog
from xce.core.resreq import parse_resreq
from xce.core.result import Err
from xce.core.state import Changes, ClusterState, encode_batch
from xce.daemons.heap import HeapUpkeep
from xce.daemons.raft import Pending, ReplicatedState, make_conf, make_durable
from xce.proto import schema as S
from xce.proto.codec import STREAM_WELCOME, decode_envelope, decode_request, encode, error_reply
from xce.proto.opcodes import Op
from xce.reactors.access import DAEMON_OPS
from xce.reactors.after_apply import on_applied, publish_soft
from xce.reactors.context import Book, Context, Stream
from xce.reactors.outbox import Outbox, Request, Then
from xce.reactors.table import AUDITED_OPS, serve
from xce.reactors.timers import on_keys_changed, on_tick
from xce.replica.live import Live
from xce.security.auditlog import AuditLog
from xce.security.auth import KEYS_FILE, TokenService, auth_dir
from xce.security.launch import derive_key
from xce.security.curve import (
    AllowList,
    KeyStore,
    keys_root,
    server_keys,
    start_authenticator,
)
from xce.security.policy import load_policy
from xce.site.config import Config, load
from xce.transport.sockets import bind_local_door, close_local_door, router, serve_curve

log = logging.getLogger("xce.controller")
REQUEST_LOG_FILE = "requests.jsonl"  # in the controller's state directory (see AuditLog)
SWITCH_INTERVAL = 0.001  # seconds: how long the loop may keep the GIL from the Raft thread (see main)
TURN_MESSAGES = 5000  # messages read in one loop turn before the timers and the batch flush run
# pyzmq's flags as plain ints: an enum's ``|`` and ``&`` are Python calls, a few per message.
NOBLOCK, MORE_NOBLOCK = int(zmq.NOBLOCK), int(zmq.SNDMORE | zmq.NOBLOCK)
EVENTS, POLLIN = int(zmq.EVENTS), int(zmq.POLLIN)


def new_epoch() -> str:
    return uuid.uuid4().hex[:12]


class RaftPort:
    """The reactors' view of Raft (``xce.reactors.context.RaftView``) over pysyncobj."""

    def __init__(self, raft: ReplicatedState, router_by_raft: dict[str, str]) -> None:
        self.raft = raft
        self.router_by_raft = router_by_raft
        self.caught_up_term = -1

    @property
    def state(self) -> ClusterState:  # pysyncobj may swap the object on snapshot load
        return self.raft.state

    def is_leader(self) -> bool:
        return self.raft.is_leader()

    def term(self) -> int:
        return self.raft.term()

    def leader(self) -> str | None:
        lead = self.raft.leader()
        return None if lead is None else self.router_by_raft.get(lead, lead)

    def status(self) -> dict[str, Any]:
        return self.raft.status()

    def caught_up(self) -> bool:
        """Leader, and the log it was elected with applied (kept for the term once true)."""
        term = self.raft.term()
        if self.caught_up_term == term:
            return self.raft.is_leader()
        if self.raft.is_leader() and self.raft.inherited_applied():
            self.caught_up_term = term
            return True
        return False

    def take_changes(self) -> Changes:
        return self.raft.take_changes()

    def pending_changes(self) -> bool:
        return bool(self.raft.changes)


class Controller:
    def __init__(self, cfg: Config, state_dir: Path) -> None:
        self.cfg = cfg
        c = cfg.controller
        self.state_dir = state_dir
        state_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(state_dir, 0o700)  # the journal holds job environments
        self.ctx = zmq.Context()
        self._bind(cfg)
        self.done: queue.SimpleQueue[tuple[int, Any, int]] = queue.SimpleQueue()
        self.inflight: dict[int, list[Then]] = {}
        self.batch: list[tuple[Any, Then]] = []
        self.batch_no = 0
        self.heap = HeapUpkeep()
        self.requests = AuditLog(state_dir / REQUEST_LOG_FILE, record_type=S.RequestRecord)
        self.stopping = False
        router_by_raft = dict(zip(c.peers, c.peer_addresses, strict=True))
        router_by_raft[c.raft_address] = c.address
        journal = str(state_dir / "raft.journal")
        conf = make_conf(journal, str(state_dir / "raft.dump"), c.raft_password, c.append_period,
                         c.tick_period, c.election_timeout, cfg.leader_fallback(),
                         on_state=lambda old, new: self._wake(), bind=c.raft_address,
                         compact_entries=c.compact_entries, compact_seconds=c.compact_seconds)
        self.raft = ReplicatedState(c.raft_address, list(c.peers), conf, self._wake)
        if c.durability == "fsync":
            make_durable(self.raft, journal, str(state_dir / "raft.dump"))
        self.out = Outbox()
        self.rc = self._context(cfg, RaftPort(self.raft, router_by_raft))
        # What every controller shares and no one else holds: the launch tokens' key (xce launch).
        self.rc.launch_key = derive_key(self.curve.secret if self.curve else c.raft_password)

    def _bind(self, cfg: Config) -> None:

        c = cfg.controller
        # CURVE: the ZAP handler must be up before the first handshake, so before any bind.
        self.curve = server_keys(cfg)
        self.authenticator = start_authenticator(self.ctx) if self.curve else None
        self.allow = AllowList(KeyStore(keys_root(cfg))) if self.curve else None
        if self.allow is not None:
            self.allow.refresh(time.time())
        self.router = router(self.ctx, c.address, self.curve)
        self.door = bind_local_door(self.router, cfg.state_dir, c.address)  # after the TCP bind: see there
        # XPUB: the same stream as PUB, but it hears subscriptions, so a controller nobody
        # listens to (a follower, usually) does not spend its CPU encoding events.
        self.pub = self.ctx.socket(zmq.XPUB)
        # Bounded: a stalled subscriber loses events (and resnapshots on the gap) rather
        # than growing the controller's memory without limit.
        self.pub.setsockopt(zmq.SNDHWM, 200_000)
        self.pub.setsockopt(zmq.LINGER, 0)
        # A client that subscribes and then reads a job's state (Client.wait) lost every event
        # published before its subscription reached this socket: a job ending meanwhile was seen
        # only by the next re-read, a second later.  The welcome tells it when it can read.
        self.pub.setsockopt(zmq.XPUB_WELCOME_MSG, STREAM_WELCOME)
        serve_curve(self.pub, self.curve)
        self.pub.bind(c.pub_address)
        self.wake_pending = False  # a wake-up sent, not yet taken by the loop (see _wake)
        self.wake_addr = f"inproc://wake-{id(self)}"
        self.wake_pull = self.ctx.socket(zmq.PULL)
        self.wake_pull.bind(self.wake_addr)
        self.wake_push = self.ctx.socket(zmq.PUSH)  # used only from the raft thread
        self.wake_push.connect(self.wake_addr)

    def _context(self, cfg: Config, raft: RaftPort) -> Context:
        """The reactors' context: built once, its soft state kept for the controller's life."""
        resources = catalog(cfg.site_resources())
        # Access control is on when the cluster has a token key ring (`xce up` makes one).
        keys = auth_dir(cfg.state_dir) / KEYS_FILE if cfg.state_dir else None
        tokens = TokenService.from_state_dir(cfg.state_dir) if keys and keys.exists() else None
        return Context(
            cfg=cfg, raft=raft, live=Live(cfg.reclaim_rules()), book=Book(), stream=Stream(epoch=new_epoch()),
            policy=load_policy(),
            # Parsed requirements are immutable, and users repeat the same few strings.
            parse=functools.lru_cache(maxsize=4096)(lambda text: parse_resreq(text, resources)),
            new_epoch=new_epoch, tokens=tokens, curve=self.allow is not None, requests=self.requests,
            pid=os.getpid(), known_state=raft.state, cluster_totals=cfg.cluster_totals())

    # ---- plumbing -------------------------------------------------------------------------

    def _wake(self) -> None:
        """Wake the loop, unless a wake-up it has not taken yet is on its way.

        A commit woke it twice (the apply, then the commit's callback), each a send on the
        Raft thread.  The loop clears ``wake_pending`` before it reads what the Raft thread
        left (the backlog, the changes, the results), which that thread writes before it asks
        here: whatever a skipped wake-up was for, the pending one's turn reads it."""
        if self.wake_pending:
            return
        self.wake_pending = True
        try:
            self.wake_push.send(b"", NOBLOCK)
        except zmq.ZMQError:
            pass  # its queue is full: wake-ups are waiting

    def take_wakeups(self) -> None:
        """Take every wake-up waiting (this turn serves them all), then let the next one be sent.

        In this order a wake-up the Raft thread sends meanwhile is either still queued for the
        next poll, or was skipped and its news is read by this turn.  Cleared first, the flag
        could be set again by a wake-up that the drain then took: set with nothing queued, it
        made ``_wake`` skip every later one, and the loop woke only for requests or its 100 ms
        poll (a 1,000-job run fell from ~400 to 60-80 jobs/s)."""
        for _ in readable(self.wake_pull, 10_000):
            pass
        self.wake_pending = False  # before the turn reads what the wake-ups were for

    def send(self, ident: bytes, payload: bytes) -> None:
        try:
            # Two sends, not send_multipart: cheaper per reply (see run); ROUTER routes on
            # the first part and never splits a message.
            self.router.send(ident, MORE_NOBLOCK)
            self.router.send(payload, NOBLOCK)
        except zmq.ZMQError:
            log.warning("dropping a reply: peer is gone or its queue is full")

    def carry_out(self) -> None:
        """Do what the reactors recorded (call under the Raft lock): the outbox is then empty."""
        out = self.out
        if not out:
            return
        term = self.raft.term()
        # Orders first: an event wakes the scheduler and every waiting client, which then take
        # the CPUs a worker needs to start the job it was just sent (issue 19, idle latency).
        # Events still go before the replies: an answer never runs ahead of the stream.
        workers = self.rc.book.workers
        for o in out.orders:
            ident = workers.get(o.host)
            if ident is not None:
                self.send(ident, o.data if o.data is not None else encode(o.op, 0, o.body, term=term))
        for ev in out.events:
            self.pub.send_multipart([b"ev", encode(Op.EVENT, 0, ev, term=term)])
        for req, body in out.replies:
            self.send(req.peer, encode(Op.OK, req.rid, body, term=term))
        for req, e in out.errors:
            self.send(req.peer, error_reply(req.rid, e, term))
        for entry, result in out.log:
            self.requests.record(user=entry.user, roles=entry.roles, client=entry.client, op=entry.op,
                                 target=entry.target, result=result)
        self.batch += out.commits
        out.clear()

    def flush_batch(self) -> None:
        if not self.batch:
            return
        cmds = [c for c, _ in self.batch]
        thens = [t for _, t in self.batch]
        self.batch = []
        self.batch_no += 1
        token = self.batch_no
        self.inflight[token] = thens

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
                self.take_wakeups()
            if self.pub in ready:
                self.count_subscribers()
            self.after_apply()
            self.rc.behind = False
            if self.router in ready:
                recv = self.router.recv
                read = 0
                for ident in readable(self.router, TURN_MESSAGES):
                    read += 1
                    # Part by part rather than recv_multipart (its per-part checks cost more
                    # than the parts at thousands of heartbeats a second); the rest of a
                    # message is there once its first part is.  The body as a frame, not
                    # bytes: a daemon message's CURVE key is a property of its frame.
                    frame = recv(copy=False)
                    extra = 0
                    while frame.more:
                        frame = recv(copy=False)
                        extra += 1
                    self.handle(ident, frame, extra)
                self.rc.behind = read >= TURN_MESSAGES
            self.flush_batch()
            self.timers(time.time())
        self.close()

    def close(self) -> None:
        try:
            self.raft.destroy()
        except Exception:  # noqa: BLE001 - shutting down
            pass
        if self.authenticator is not None:
            self.authenticator.stop()
        self.ctx.destroy(linger=0)

        close_local_door(self.door)

    def count_subscribers(self) -> None:
        stream = self.rc.stream
        while True:
            try:
                msg = self.pub.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            if msg[:1] == b"\x01":
                stream.subscribers += 1
            elif msg[:1] == b"\x00":
                stream.subscribers = max(0, stream.subscribers - 1)

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
            req = Request(ident, rid, op, time.time(), env.token)
            if self.allow is not None and op in DAEMON_OPS:
                req.key = _prop(frame, "User-Id")
                req.key_name = self.allow.name_of(req.key)
            if op in AUDITED_OPS:
                req.client = _prop(frame, "Peer-Address") or "local"  # the ipc door has none
            with self.raft.lock:
                serve(self.rc, req, body, self.out, time.monotonic())
                self.carry_out()
        except XceError as e:  # the message itself is bad: nothing to serve
            self.send(ident, error_reply(rid, e, self.raft.term()))
        except Exception as e:  # noqa: BLE001 - a bug must not kill the controller
            log.exception("handler failed")
            self.out.clear()
            self.send(ident, error_reply(rid, XceError(f"internal error: {e}")))

    # ---- after apply, timers --------------------------------------------------------------

    def after_apply(self) -> None:
        now = time.time()
        with self.raft.lock:
            self.raft.apply_backlog()  # what committed while this thread held the lock
            on_applied(self.rc, now, self.out)
            self.carry_out()
            while not self.done.empty():  # this thread alone takes from it
                token, res, err = self.done.get_nowait()
                thens = self.inflight.pop(token, [])
                if isinstance(res, Pending):
                    if res.results is None:  # it joined the backlog after the apply above
                        self.raft.apply_backlog()
                        on_applied(self.rc, now, self.out)
                        self.carry_out()
                    res = res.results
                if err != 0 or res is None:
                    res = [Err(NotLeader(self.rc.raft.leader()) if not self.raft.is_leader() else
                               XceError(f"commit failed (pysyncobj reason {err}); retry"))] * len(thens)
                for then, result in zip(thens, res, strict=True):
                    then(result, self.out)
                self.carry_out()

    def timers(self, now: float) -> None:
        self.heap.tick(now)
        if self.allow is not None:
            before = self.allow.keys
            self.allow.refresh(now)
            if self.allow.keys is not before:
                on_keys_changed(self.rc, set(self.allow.keys.values()))
        with self.raft.lock:
            self.raft.apply_backlog()
            on_tick(self.rc, now, self.out)
            publish_soft(self.rc, time.time(), self.out)
            self.carry_out()


def readable(sock: zmq.Socket, most: int) -> Iterator[bytes]:
    """The first parts of up to ``most`` messages waiting on ``sock``, read without blocking.

    Asked of the socket's EVENTS, not found by a read that fails: pyzmq's ``Again`` is built
    with its message (an import and a strerror), several times a loop turn at ~5 us each."""
    get, recv = sock.get, sock.recv
    for _ in range(most):
        if not get(EVENTS) & POLLIN:
            return
        try:
            yield recv(NOBLOCK)
        except zmq.Again:  # not expected: EVENTS said a message was there
            return


def _prop(frame: zmq.Frame, name: str) -> str | None:
    try:
        return frame.get(name)
    except zmq.ZMQError:
        return None  # the local door (no CURVE) has no key and no peer address


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

    # The Raft thread needs the GIL back after every send, read and poll of a tick, and
    # while the loop runs it waits up to the switch interval each time (5 ms by default).
    # Under thousands of heartbeats a second ticks 0.3-0.7 s apart were seen with the lock
    # free, the followers' election timers starting at 0.3 s.  1 ms costs the loop little.
    sys.setswitchinterval(SWITCH_INTERVAL)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    ctl.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
