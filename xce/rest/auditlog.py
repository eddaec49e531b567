"""The request audit log: who did what, from where, with what result.

Owns ``<state>/auth/audit.jsonl`` (one JSON AuditRecord per line, appended,
0600, rotated to ``.1`` past ``max_bytes``) and the in-memory tail that
GET /v1/audit queries.  The ``Audit`` middleware sits outside the chain (first
in Falcon's list, so its ``process_response`` runs last and sees the final
status) and records every state-changing request — including the ones the chain
refused.  Bodies are never logged (they may hold passwords); handlers leave a
one-line ``req.context.audit_result`` ("job 12 submitted to normal").
"""

from __future__ import annotations

import collections
import itertools
import os
import secrets
import threading
import time
from pathlib import Path
from typing import Any

import msgspec

from xce.policy import ANONYMOUS
from xce.rest.schema import AuditRecord

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class AuditLog:
    def __init__(self, path: Path | None, keep: int = 10000, max_bytes: int = 64 << 20) -> None:
        self.path, self.max_bytes = path, max_bytes
        self.tail: collections.deque[AuditRecord] = collections.deque(maxlen=keep)
        self.seq = 0
        self.lock = threading.Lock()
        self._enc = msgspec.json.Encoder()
        if path is not None and path.exists():
            dec = msgspec.json.Decoder(AuditRecord)
            with path.open("rb") as f:
                for line in collections.deque(f, maxlen=keep):
                    try:
                        self.tail.append(dec.decode(line))
                    except msgspec.DecodeError:
                        continue  # a torn last line after a crash
            self.seq = self.tail[-1].seq if self.tail else 0

    def record(self, **fields: Any) -> AuditRecord:
        with self.lock:
            self.seq += 1
            rec = AuditRecord(seq=self.seq, time=time.time(), **fields)
            self.tail.append(rec)
            if self.path is not None:
                self._append(self._enc.encode(rec) + b"\n")
        return rec

    def _append(self, line: bytes) -> None:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            if self.path.stat().st_size > self.max_bytes:
                self.path.replace(self.path.with_name(self.path.name + ".1"))
        except FileNotFoundError:
            pass
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def query(self, user: str | None = None, since: float = 0.0, after: int = 0,
              limit: int = 1000) -> list[AuditRecord]:
        with self.lock:
            recs = list(self.tail)
        out = [r for r in recs if r.seq > after and r.time >= since and (user is None or r.user == user)]
        return out[:limit]


class Audit:
    """Stamps X-Request-ID on every response and records state-changing requests."""

    def __init__(self, log: AuditLog) -> None:
        self.log = log
        self.prefix = secrets.token_hex(4)  # request ids: <per-process random>-<counter>
        self.count = itertools.count(1)

    async def process_request(self, req: Any, resp: Any) -> None:
        req.context.request_id = f"{self.prefix}-{next(self.count):x}"

    async def process_response(self, req: Any, resp: Any, resource: Any, ok: bool) -> None:
        rid = getattr(req.context, "request_id", "") or f"{self.prefix}-{next(self.count):x}"
        resp.set_header("X-Request-ID", rid)
        if req.method not in STATE_CHANGING:
            return
        p = getattr(req.context, "principal", None)
        user = p.user if p is not None and p != ANONYMOUS else getattr(req.context, "audit_user", None)
        status = resp.status_code
        result = getattr(req.context, "audit_result", None) or getattr(req.context, "problem", None) or ""
        path = req.path + (f"?{req.query_string}" if req.query_string else "")
        self.log.record(request_id=rid, user=user, roles=list(p.roles) if p is not None else [],
                        client=getattr(req.context, "client", None) or req.remote_addr or "",
                        method=req.method, path=path, status=status, result=result)
