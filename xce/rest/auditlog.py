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

import itertools
import secrets
from pathlib import Path
from typing import Any

from xce.rest.schema import AuditRecord
from xce.security import auditlog
from xce.security.policy import ANONYMOUS

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class AuditLog(auditlog.AuditLog):
    """The REST door's log: AuditRecords (the controller's holds RequestRecords)."""

    def __init__(self, path: Path | None, keep: int = 10000, max_bytes: int = 64 << 20) -> None:
        super().__init__(path, keep, max_bytes, record_type=AuditRecord)


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
