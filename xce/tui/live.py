"""The live feed: a background thread that keeps the ConsoleModel in sync.

The following itself is the client layer's ``EventFollower`` (subscribe to the
leader's stream, then snapshot, then the events after it; re-snapshot on a gap or
an epoch change; ping when the stream is silent for ~3 heartbeats).  This shell
adds what only the console wants: a thread that never raises (every failure becomes
the model's link state: the header says so, the data greys out) and a Recorder that
keeps everything received.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from xce.client import Client, cluster_config
from xce.client.follow import EventFollower, Sync
from xce.tui.model import ConsoleModel
from xce.tui.record import Hello, Link, Recorder


class LiveFeed:
    def __init__(self, model: ConsoleModel, state_dir: str | Path | None = None,
                 endpoint: str | list[str] | None = None, recorder: Recorder | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        cfg = cluster_config(state_dir)
        self.model, self.recorder, self.clock = model, recorder, clock
        model.cluster, model.heartbeat = cfg.cluster.name, cfg.worker.heartbeat
        self.client = Client(endpoint, state_dir=state_dir, timeout=5.0)
        self.follower = EventFollower(
            self.client.conn, self.client.events_endpoint, model, lock=model.lock,
            silence=max(1.5, 3 * cfg.worker.heartbeat), snapshot_timeout=5.0,
            on_message=self._record if recorder else None, on_link=self._set_link, clock=clock)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="xce-top-receiver", daemon=True)
        if recorder:
            recorder.write(clock(), "hello", Hello(cluster=model.cluster, heartbeat=model.heartbeat,
                                                   source=self.client.conn.endpoints[0]))

    @property
    def sync(self) -> Sync:
        assert self.follower.sync is not None
        return self.follower.sync

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self.thread.is_alive():
            self.thread.join(10)
        self.follower.close()
        self.client.close()
        if self.recorder:
            self.recorder.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.follower.step(100)
            except Exception as e:  # noqa: BLE001 - the receiver must outlive any one failure
                self._set_link("unreachable", str(e))
                self.follower.resync()
                self._stop.wait(0.25)
        self.follower.close()

    def _record(self, kind: str, t: float, body: bytes, term: int) -> None:
        assert self.recorder is not None
        self.recorder.write(t, kind, body, term)

    def _set_link(self, state: str, problem: str) -> None:
        m = self.model
        with m.lock:
            changed = m.link != state
            m.link, m.problem = state, problem
        if changed and self.recorder:
            self.recorder.write(self.clock(), "link", Link(state=state, problem=problem))
