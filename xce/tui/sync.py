"""Subscribe first, then snapshot, then the events after it; resnapshot on any gap.

``Sync`` is the protocol as a small state machine over a ConsoleModel, fed the
same way by the live receiver and by a replay, and testable with neither:

    WANT ──(snapshot requested)──> WAIT ──(snapshot)──> LIVE
     ^  events are buffered in WANT/WAIT                  │
     └──────────────── gap or epoch change ───────────────┘

While a snapshot is wanted or awaited, events are buffered; when it arrives,
the buffered events with ``seq > snapshot.seq`` of the same epoch are applied
in order (other epochs' are dropped).  An event that does not follow (a gap, a new leader's epoch) sends
the machine back to WANT.  The owner asks ``wants_snapshot`` and fetches one.
"""

from __future__ import annotations

from collections.abc import Iterable

from xce.proto.schema import Event, Snapshot
from xce.tui.model import ConsoleModel

MAX_BUFFER = 200_000  # events kept while waiting for a snapshot; beyond, the oldest go


class Sync:
    def __init__(self, model: ConsoleModel) -> None:
        self.model = model
        self.state = "WANT"
        self.buffer: list[tuple[Event, float, int]] = []
        self.requests = 0

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
        """Something may have been missed (e.g. the controller was unreachable)."""
        if self.state == "LIVE":
            self.state = "WANT"

    def on_event(self, ev: Event, received: float, term: int = 0) -> None:
        self.on_events(((ev, received, term),))

    def on_events(self, events: Iterable[tuple[Event, float, int]]) -> None:
        """(event, received, term) in order, under one hold of the model's lock.

        The receiver hands over what it drained in chunks: at 1,000 events a second the
        lock taken per event cost ~1 ms a second, and a chunk stays short for the frames.
        """
        model = self.model
        with model.lock:
            for ev, received, term in events:
                if self.state != "LIVE":
                    self.buffer.append((ev, received, term))
                    if len(self.buffer) > MAX_BUFFER:
                        del self.buffer[: len(self.buffer) - MAX_BUFFER]
                elif not model.apply_event(ev, received, term):
                    self._gap(ev, received, term)

    def on_snapshot(self, snap: Snapshot, received: float) -> None:
        with self.model.lock:
            self.model.apply_snapshot(snap, received)
            # Other epochs' events are dropped: an older leader's are stale, and a newer
            # leader's next event (within a heartbeat) fails to follow and resnapshots.
            pending = sorted((b for b in self.buffer if b[0].epoch == snap.epoch and b[0].seq > snap.seq),
                             key=lambda b: b[0].seq)
            self.buffer = []
            self.state = "LIVE"
            for i, (ev, t, term) in enumerate(pending):
                if not self.model.apply_event(ev, t, term):
                    self._gap(ev, t, term)
                    self.buffer.extend(pending[i + 1:])
                    return

    def _gap(self, ev: Event, received: float, term: int) -> None:
        self.model.gaps += 1
        self.state = "WANT"
        self.buffer = [(ev, received, term)]
