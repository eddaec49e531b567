"""The live feed: a background thread that keeps the ConsoleModel in sync.

Order matters and is kept: find the leader's event endpoint, SUBscribe, and
only then request a snapshot (so no event between the snapshot and the
subscription is lost); events that arrive meanwhile wait in Sync's buffer.
A gap or an epoch change (a controller restart, a new leader) makes Sync want
a new snapshot.  When the stream is silent for ~3 heartbeats the thread pings
the controller; if that fails the model is marked unreachable (the header says
so, the data greys out) and snapshots are retried with backoff until one
succeeds.  The thread never raises: every failure becomes model state.
Everything received can be written to a Recorder.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import zmq

from xce.client import Client, cluster_config
from xce.errors import XceError
from xce.proto.codec import decode_envelope
from xce.proto.opcodes import Op
from xce.proto.schema import Event
from xce.tui.model import ConsoleModel
from xce.tui.record import Hello, Link, Recorder
from xce.tui.sync import Sync
from xce.zmqutil import subscriber

_ev = msgspec.msgpack.Decoder(Event)
CHUNK = 64  # events applied per hold of the model's lock (~3 ms at most: frames wait no longer)
_enc = msgspec.msgpack.Encoder()


class LiveFeed:
    def __init__(self, model: ConsoleModel, state_dir: str | Path | None = None,
                 endpoint: str | list[str] | None = None, recorder: Recorder | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        cfg = cluster_config(state_dir)
        self.model, self.sync, self.recorder, self.clock = model, Sync(model), recorder, clock
        model.cluster, model.heartbeat = cfg.cluster.name, cfg.worker.heartbeat
        self.state_dir = state_dir
        self.client = Client(endpoint, state_dir=state_dir, timeout=5.0)
        self.default_events = self.client.events_endpoint
        self.silence = max(1.5, 3 * cfg.worker.heartbeat)
        self.ctx = zmq.Context()
        self.sub: zmq.Socket | None = None
        self.sub_endpoint = ""
        self.leader: str | None = None
        self.last_msg = 0.0
        self.next_try = 0.0
        self.next_ping = 0.0
        self.backoff = 0.25
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="xce-top-receiver", daemon=True)
        if recorder:
            recorder.write(clock(), "hello", Hello(cluster=model.cluster, heartbeat=model.heartbeat,
                                                   source=self.client.conn.endpoints[0]))

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self.thread.is_alive():
            self.thread.join(10)
        self.client.close()
        self.ctx.destroy(linger=0)
        if self.recorder:
            self.recorder.close()

    # ---- the loop ---------------------------------------------------------------------------

    def _run(self) -> None:
        self._subscribe(self._events_endpoint(None))
        while not self._stop.is_set():
            now = time.monotonic()
            if self.sync.wants_snapshot and now >= self.next_try:
                self._snapshot()
            assert self.sub is not None
            if self.sub.poll(100):
                self._drain()
            self._watch(time.monotonic())
        if self.sub is not None:
            self.sub.close(0)

    def _subscribe(self, endpoint: str) -> None:
        if self.sub is not None:
            self.sub.close(0)
        self.sub = subscriber(self.ctx, endpoint, self.client.curve)
        self.sub_endpoint = endpoint

    def _events_endpoint(self, leader: str | None) -> str:
        """The PUB endpoint of the leader (followers' streams carry other epochs)."""
        try:
            # The same cluster's keys and token, asked at the leader's endpoint.
            c = self.client if leader is None else Client(leader, state_dir=self.state_dir, timeout=2.0)
            try:
                st = c.request(Op.STATUS, timeout=2.0)
            finally:
                if c is not self.client:
                    c.close()
            return st.endpoints.get("events") or self.default_events
        except XceError:
            return self.sub_endpoint or self.default_events

    def _drain(self) -> None:
        assert self.sub is not None
        chunk: list[tuple[Event, float, int]] = []
        for _ in range(20_000):
            try:
                _, data = self.sub.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            t = self.clock()
            self.last_msg = time.monotonic()
            try:
                env = decode_envelope(data)
                ev = _ev.decode(env.body)
            except (XceError, msgspec.DecodeError):
                continue  # a bad frame is dropped; the next event's seq shows any gap
            if self.recorder:
                self.recorder.write(t, "event", bytes(env.body), env.term)
            chunk.append((ev, t, env.term))
            if len(chunk) >= CHUNK:
                self.sync.on_events(chunk)
                chunk = []
        if chunk:
            self.sync.on_events(chunk)

    def _snapshot(self) -> None:
        self.sync.requested()
        try:
            snap = self.client.request(Op.SNAPSHOT, timeout=5.0)
        except XceError as e:
            self.sync.failed()
            self._set_link("unreachable", e.message)
            self.next_try = time.monotonic() + self.backoff
            self.backoff = min(self.backoff * 2, 2.0)
            return
        self.backoff = 0.25
        t = self.clock()
        self.last_msg = time.monotonic()
        if snap.leader and snap.leader != self.leader:
            self.leader = snap.leader
            ep = self._events_endpoint(snap.leader)
            if ep != self.sub_endpoint:  # a new leader: subscribe there first, then snapshot again
                self._subscribe(ep)
                self.sync.failed()
                return
        if self.recorder:
            self.recorder.write(t, "snapshot", _enc.encode(snap), snap.term)
        self.sync.on_snapshot(snap, t)
        self._set_link("live", "")

    def _watch(self, now: float) -> None:
        """Silence beyond ~3 heartbeats: is the controller still there?"""
        if self.sync.state != "LIVE" or now - self.last_msg < self.silence or now < self.next_ping:
            return
        self.next_ping = now + self.model.heartbeat
        try:
            self.client.request(Op.PING, timeout=1.0)
        except XceError as e:
            self._set_link("unreachable", e.message)
            self.sync.resync()  # whatever we missed meanwhile: snapshot again

    def _set_link(self, state: str, problem: str) -> None:
        m = self.model
        with m.lock:
            changed = m.link != state
            m.link, m.problem = state, problem
        if changed and self.recorder:
            self.recorder.write(self.clock(), "link", Link(state=state, problem=problem))
