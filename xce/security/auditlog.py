"""An append-only audit log: one JSON record per line, plus the in-memory tail that queries read.

Both doors keep one: xce-rest records every state-changing HTTP request
(``<state>/auth/audit.jsonl``, xce/rest/auditlog.py), and the controller every
state-changing ZeroMQ request (``<controller state>/requests.jsonl``, queried with
`xce admin requests`).  The file is 0600 and rotated to ``.1`` past ``max_bytes``.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from pathlib import Path
from typing import Any

import msgspec


class AuditLog:
    def __init__(self, path: Path | None, keep: int = 10000, max_bytes: int = 64 << 20,
                 *, record_type: type[Any]) -> None:
        self.path, self.max_bytes = path, max_bytes
        self.type: type[Any] = record_type
        self.tail: collections.deque[Any] = collections.deque(maxlen=keep)
        self.seq = 0
        self.lock = threading.Lock()
        self._enc = msgspec.json.Encoder()
        if path is not None and path.exists():
            dec = msgspec.json.Decoder(self.type)
            with path.open("rb") as f:
                for line in collections.deque(f, maxlen=keep):
                    try:
                        self.tail.append(dec.decode(line))
                    except msgspec.DecodeError:
                        continue  # a torn last line after a crash
            self.seq = self.tail[-1].seq if self.tail else 0

    def record(self, **fields: Any) -> Any:
        with self.lock:
            self.seq += 1
            rec = self.type(seq=self.seq, time=time.time(), **fields)
            self.tail.append(rec)
            if self.path is not None:
                self._append(self._enc.encode(rec) + b"\n")
        return rec

    def _append(self, line: bytes) -> None:
        assert self.path is not None
        try:
            if self.path.stat().st_size > self.max_bytes:
                self.path.replace(self.path.with_name(self.path.name + ".1"))
        except FileNotFoundError:
            pass
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except FileNotFoundError:  # its directory is missing (not made yet, or removed): made then, not per record
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def query(self, user: str | None = None, since: float = 0.0, after: int = 0,
              limit: int = 1000) -> list[Any]:
        with self.lock:
            recs = list(self.tail)
        out = [r for r in recs if r.seq > after and r.time >= since and (user is None or r.user == user)]
        return out[:limit]
