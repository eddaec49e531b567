"""The one way to follow the controller: subscribe, snapshot at a sequence number, apply
what follows, re-snapshot on a gap, follow the leader.

Every reader of the event stream goes through here: the scheduler (into its Mirror),
the console (into its ConsoleModel, from a thread), ``Client.wait`` and
``Client.events`` (events only, no snapshot).  Two parts:

``Sync`` is the protocol as a pure state machine over a *target* (anything with
``apply_snapshot(snap, received)`` and ``apply_event(ev, received, term) -> bool``),
fed the same way by the live follower and by the console's replay::

    WANT --(snapshot requested)--> WAIT --(snapshot)--> LIVE
     ^   events are buffered in WANT/WAIT                 |
     +-------------- gap or epoch change -----------------+

While a snapshot is wanted or awaited, events are buffered; when it arrives, the
buffered events with ``seq > snapshot.seq`` of the same epoch are applied in order
(other epochs' are dropped).

``EventFollower`` is the thin shell with the sockets: it subscribes to the *leader's*
stream first and only then asks for a snapshot (so nothing falls between the two),
moves to a new leader's stream when a snapshot names one, and pings the controller
when the stream is silent, reporting the link's state.  Without a target it only
decodes events and counts gaps (``wait`` re-reads the jobs on one).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

import zmq

from xce.core.errors import XceError
from xce.proto.codec import STREAM_WELCOME, decode_event, encode_body
from xce.proto.opcodes import Op
from xce.proto.schema import Empty, Event, Snapshot
from xce.transport.sockets import subscriber

if TYPE_CHECKING:
    from xce.transport.connection import Connection

MAX_BUFFER = 200_000  # events kept while waiting for a snapshot; beyond, the oldest go
DRAIN_MAX = 20_000    # events taken per step, so a flood cannot starve the owner's loop
CHUNK = 64            # events applied per hold of the target's lock (~3 ms at most)

Received = tuple[Event, float, int]  # (event, receive time, Raft term of its envelope)


class Target(Protocol):
    def apply_snapshot(self, snap: Snapshot, received: float) -> None: ...
    def apply_event(self, ev: Event, received: float, term: int = 0) -> bool: ...


class Sync:
    def __init__(self, target: Target, lock: Any = None) -> None:
        self.target = target
        self.lock = lock if lock is not None else contextlib.nullcontext()
        self.state = "WANT"
        self.buffer: list[Received] = []
        self.requests = 0
        self.snapshots = 0  # applied
        self.gaps = 0

    @property
    def wants_snapshot(self) -> bool:
        return self.state == "WANT"

    def requested(self) -> None:
        """The owner has asked the controller for a snapshot."""
        if self.state == "WANT":
            self.state = "WAIT"
            self.requests += 1

    def failed(self) -> None:
        """The snapshot request failed: want one again."""
        if self.state == "WAIT":
            self.state = "WANT"

    def resync(self) -> None:
        """Something may have been missed (the controller was unreachable, an event was bad)."""
        if self.state == "LIVE":
            self.state = "WANT"

    def on_event(self, ev: Event, received: float, term: int = 0) -> None:
        self.on_events(((ev, received, term),))

    def on_events(self, events: Iterable[Received]) -> None:
        """Events in order, under one hold of the lock (a lock per event cost ~1 ms a second)."""
        target = self.target
        with self.lock:
            for ev, received, term in events:
                if self.state != "LIVE":
                    self.buffer.append((ev, received, term))
                    if len(self.buffer) > MAX_BUFFER:
                        del self.buffer[: len(self.buffer) - MAX_BUFFER]
                elif not target.apply_event(ev, received, term):
                    self._gap(ev, received, term)

    def on_snapshot(self, snap: Snapshot, received: float) -> None:
        # A target that can build its new state apart (the console's model) does so before it
        # takes the lock: its readers keep drawing the old state meanwhile.
        prepare = getattr(self.target, "prepare_snapshot", None)
        ready = prepare(snap) if prepare is not None else None
        with self.lock:
            if ready is not None:
                self.target.install_snapshot(ready, snap, received)  # type: ignore[attr-defined]
            else:
                self.target.apply_snapshot(snap, received)
            self.snapshots += 1
            # Other epochs' events are dropped: an older leader's are stale, and a newer
            # leader's next event (within a heartbeat) fails to follow and resnapshots.
            pending = sorted((b for b in self.buffer if b[0].epoch == snap.epoch and b[0].seq > snap.seq),
                             key=lambda b: b[0].seq)
            self.buffer = []
            self.state = "LIVE"
            for i, (ev, t, term) in enumerate(pending):
                if not self.target.apply_event(ev, t, term):
                    self._gap(ev, t, term)
                    self.buffer.extend(pending[i + 1:])
                    return

    def _gap(self, ev: Event, received: float, term: int) -> None:
        self.gaps += 1
        self.state = "WANT"
        self.buffer = [(ev, received, term)]


class SeqCheck:
    """Events-only following: is each event the one after the last (same epoch, seq + 1)?"""

    def __init__(self) -> None:
        self.epoch = ""
        self.seq = -1
        self.gaps = 0

    def follows(self, ev: Event) -> bool:
        ok = self.seq < 0 or (ev.epoch == self.epoch and ev.seq == self.seq + 1)
        if not ok:
            self.gaps += 1
        self.epoch, self.seq = ev.epoch, ev.seq
        return ok


# (kind, receive time, raw body, term): what a recorder keeps of each message
OnMessage = Callable[[str, float, bytes, int], None]
OnLink = Callable[[str, str], None]  # (state: live | unreachable, problem)


class EventFollower:
    def __init__(self, conn: Connection, events: str, target: Target | None = None, *, lock: Any = None,
                 silence: float = 3.0, snapshot_timeout: float = 30.0, on_message: OnMessage | None = None,
                 on_link: OnLink | None = None, clock: Callable[[], float] = time.time) -> None:
        self.conn, self.default_events = conn, events  # ``events``: the configured PUB endpoint
        self.sync = Sync(target, lock) if target is not None else None
        self.seqs = SeqCheck()
        self.silence, self.snapshot_timeout = silence, snapshot_timeout
        self.on_message, self.on_link, self.clock = on_message, on_link, clock
        self.sub: zmq.Socket | None = None
        self.endpoint = ""
        self.leader: str | None = None
        self.last_msg = time.monotonic()
        self.next_try = self.next_ping = 0.0
        self.backoff = 0.25
        self.bad_frames = 0
        self.welcomed = False  # the controller's welcome came: the subscription is live (settle)
        self.early: list[Event] = []  # events read by settle, handed out by the next step

    @property
    def gaps(self) -> int:
        return self.sync.gaps if self.sync is not None else self.seqs.gaps

    def start(self) -> EventFollower:
        self._subscribe(self._events_endpoint(None))
        return self

    def close(self) -> None:
        if self.sub is not None:
            self.sub.close(0)
            self.sub = None

    def __enter__(self) -> EventFollower:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def resync(self) -> None:
        if self.sync is not None:
            self.sync.resync()

    def step(self, timeout_ms: int) -> list[Event]:
        """One turn: take a wanted snapshot, then wait up to ``timeout_ms`` for events.

        Returns the events received (applied, or buffered until a snapshot); raises nothing
        but what the owner's own requests would: a failed snapshot becomes link state and a
        retry with backoff.
        """
        if self.sub is None:
            self.start()
        if self.sync is not None and self.sync.wants_snapshot and time.monotonic() >= self.next_try:
            self._snapshot()
        assert self.sub is not None
        got = self._drain() if self.sub.poll(max(0, timeout_ms)) else []
        if self.early:
            got, self.early = self.early + got, []
        self._watch(time.monotonic())
        return got

    def settle(self, timeout_ms: int) -> bool:
        """Wait, at most ``timeout_ms``, for the controller's welcome on a new subscription: what
        is read from the controller after it cannot change without an event here (ZeroMQ drops
        what a PUB sends before a subscription reaches it).  False: no welcome (a controller
        that sends none), and the caller's re-reads must cover what was lost."""
        if self.sub is None:
            self.start()
        assert self.sub is not None
        end = time.monotonic() + timeout_ms / 1000
        while not self.welcomed:
            left = end - time.monotonic()
            if left <= 0 or not self.sub.poll(int(left * 1000) + 1):
                return False
            self.early += self._drain()
        return True

    # ---- the shell --------------------------------------------------------------------------

    def _subscribe(self, endpoint: str) -> None:

        self.close()
        self.sub = subscriber(self.conn.ctx, endpoint, self.conn.curve)
        self.endpoint = endpoint
        self.welcomed = False

    def _events_endpoint(self, leader: str | None) -> str:
        """The PUB endpoint of the leader (followers' streams carry other epochs)."""
        try:
            c = self.conn if leader is None else self.conn.at(leader)
            try:
                st = c.request(Op.STATUS, Empty(), timeout=2.0)
                if leader is None and st.leader and st.leader != st.controllers[0].address:
                    return self._events_endpoint(st.leader)
            finally:
                if c is not self.conn:
                    c.close()
            return st.endpoints.get("events") or self.default_events
        except XceError:
            return self.endpoint or self.default_events

    def _drain(self) -> list[Event]:
        assert self.sub is not None
        got: list[Event] = []
        chunk: list[Received] = []
        recv = self.sub.recv_multipart
        for _ in range(DRAIN_MAX):
            try:
                parts = recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            if len(parts) != 2:  # the welcome (again after a reconnect), or not an event
                if parts == [STREAM_WELCOME]:
                    self.welcomed = True
                else:
                    self.bad_frames += 1
                continue
            data = parts[1]
            t = self.clock()
            self.last_msg = time.monotonic()
            try:
                env, ev = decode_event(data)
            except XceError:
                self.bad_frames += 1  # dropped; the next event's seq shows what was lost
                continue
            if self.on_message is not None:
                self.on_message("event", t, bytes(env.body), env.term)
            got.append(ev)
            if self.sync is None:
                self.seqs.follows(ev)
                continue
            chunk.append((ev, t, env.term))
            if len(chunk) >= CHUNK:
                self.sync.on_events(chunk)
                chunk = []
        if chunk and self.sync is not None:
            self.sync.on_events(chunk)
        return got

    def _snapshot(self) -> None:
        assert self.sync is not None
        self.sync.requested()
        try:
            snap = self.conn.request(Op.SNAPSHOT, Empty(), timeout=self.snapshot_timeout)
        except XceError as e:
            self.sync.failed()
            self._link("unreachable", e.message)
            self.next_try = time.monotonic() + self.backoff
            self.backoff = min(self.backoff * 2, 2.0)
            return
        self.backoff = 0.25
        t = self.clock()
        self.last_msg = time.monotonic()
        if snap.leader and snap.leader != self.leader:
            self.leader = snap.leader
            ep = self._events_endpoint(snap.leader)
            if ep != self.endpoint:  # a new leader: subscribe there first, then snapshot again
                self._subscribe(ep)
                self.sync.failed()
                return
        if self.on_message is not None:

            self.on_message("snapshot", t, encode_body(snap), snap.term)
        self.sync.on_snapshot(snap, t)
        self._link("live", "")

    def _watch(self, now: float) -> None:
        """Silence beyond ``silence`` seconds: is the controller still there, still leading?"""
        if now - self.last_msg < self.silence or now < self.next_ping:
            return
        if self.sync is not None and self.sync.state != "LIVE":
            return
        self.next_ping = now + self.silence / 3
        try:
            self.conn.request(Op.PING, Empty(), timeout=1.0)
        except XceError as e:
            self._link("unreachable", e.message)
            self.resync()  # whatever was missed meanwhile: snapshot again
            return
        if self.sync is None:  # no snapshot names the leader here: ask where the stream is now
            ep = self._events_endpoint(None)
            if ep != self.endpoint:
                self._subscribe(ep)
                self.seqs.seq = -1

    def _link(self, state: str, problem: str) -> None:
        if self.on_link is not None:
            self.on_link(state, problem)
