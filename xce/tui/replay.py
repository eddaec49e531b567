"""Replay of a recording through the same path live data takes (Sync -> model).

``Player`` keeps a position on the recording's own clock (receive times).  The
App advances it by wall time x ``speed`` each frame; ``pause``, ``step`` (apply
exactly the next message) and ``to_end`` serve the keys and the tests.  The
position is the model's "now" in replay, so ages and run times are those of the
moment recorded, and a replay is deterministic.
"""

from __future__ import annotations

import msgspec

from xce.client.follow import Sync
from xce.proto.codec import decode_event_body
from xce.proto.schema import Snapshot
from xce.tui.model import ConsoleModel
from xce.tui.record import Hello, Link, Record

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 64.0)
_snap = msgspec.msgpack.Decoder(Snapshot)
_hello = msgspec.msgpack.Decoder(Hello)
_link = msgspec.msgpack.Decoder(Link)


class Player:
    def __init__(self, records: list[Record], model: ConsoleModel) -> None:
        self.records = records
        self.model = model
        self.sync = Sync(model, model.lock)
        self.i = 0
        self.start = records[0].t if records else 0.0
        self.end = records[-1].t if records else 0.0
        self.pos = self.start
        self.speed = 1.0
        self.paused = False
        model.mode = "replay"
        while self.i < len(records) and records[self.i].kind == "hello":
            self._feed(records[self.i])
            self.i += 1

    @property
    def ended(self) -> bool:
        return self.i >= len(self.records)

    @property
    def progress(self) -> float:
        span = self.end - self.start
        return 1.0 if span <= 0 else min(1.0, (self.pos - self.start) / span)

    def now(self) -> float:
        return self.pos

    def advance(self, dt: float) -> int:
        """Play ``dt`` seconds of wall time; returns how many messages were applied."""
        if self.paused or self.ended:
            return 0
        return self.seek(self.pos + dt * self.speed)

    def seek(self, t: float) -> int:
        n = 0
        while self.i < len(self.records) and self.records[self.i].t <= t:
            self._feed(self.records[self.i])
            self.i += 1
            n += 1
        self.pos = max(self.pos, min(t, self.end))
        return n

    def step(self) -> bool:
        if self.ended:
            return False
        rec = self.records[self.i]
        self._feed(rec)
        self.i += 1
        self.pos = max(self.pos, rec.t)
        return True

    def to_end(self) -> None:
        self.seek(self.end)

    def faster(self, up: bool) -> float:
        i = min(range(len(SPEEDS)), key=lambda k: abs(SPEEDS[k] - self.speed))
        self.speed = SPEEDS[max(0, min(len(SPEEDS) - 1, i + (1 if up else -1)))]
        return self.speed

    def _feed(self, rec: Record) -> None:
        m = self.model
        if rec.kind == "event":
            self.sync.on_event(decode_event_body(rec.body), rec.t, rec.term)
        elif rec.kind == "snapshot":
            self.sync.requested()
            self.sync.on_snapshot(_snap.decode(rec.body), rec.t)
        elif rec.kind == "hello":
            h = _hello.decode(rec.body)
            m.cluster, m.heartbeat = h.cluster, h.heartbeat
        elif rec.kind == "link":
            lk = _link.decode(rec.body)
            with m.lock:
                m.link, m.problem = lk.state, lk.problem
