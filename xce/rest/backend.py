"""What the handlers use: the controller (through xce.client) and the app's services.

``ControllerBackend`` runs the synchronous ``xce.client.Client`` in a small
thread pool, one Client (one DEALER socket per controller) per thread, so the
client's leader-following and retry logic is reused as is and the asyncio loop
never blocks.  Every call carries the caller's own token in the ZMQ envelope,
so the controller can enforce the same policy on the same principal.
``Services`` bundles what a handler may touch; tests build it with a fake backend.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from xce.client import Client
from xce.core.errors import InvalidRequest
from xce.proto import schema as S
from xce.proto import writes
from xce.proto.idempotency import key_problem
from xce.proto.opcodes import Op
from xce.rest.auditlog import AuditLog
from xce.rest.config import RestConf
from xce.rest.users import Authenticator
from xce.security.auth import TokenService
from xce.security.policy import Policy


class Backend(Protocol):
    async def call(self, token: str, op: Op, body: Any = None, timeout: float | None = None) -> Any: ...

    def close(self) -> None: ...


class ControllerBackend:
    def __init__(self, state_dir: str | Path | None = None, endpoints: Sequence[str] | None = None,
                 workers: int = 4, timeout: float = 10.0) -> None:
        self.state_dir, self.endpoints, self.timeout = state_dir, endpoints, timeout
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="xce-rest-zmq")
        self.local = threading.local()
        self.clients: list[Client] = []
        self.lock = threading.Lock()

    def _client(self) -> Client:
        c = getattr(self.local, "client", None)
        if c is None:
            c = Client(self.endpoints, state_dir=self.state_dir, token="", timeout=self.timeout)
            self.local.client = c
            with self.lock:
                self.clients.append(c)
        return c

    def _call(self, token: str, op: Op, body: Any, timeout: float | None) -> Any:
        c = self._client()
        c.conn.token = token
        return c.request(op, body if body is not None else S.Empty(), timeout)

    async def call(self, token: str, op: Op, body: Any = None, timeout: float | None = None) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, self._call, token, op, body, timeout)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        with self.lock:
            for c in self.clients:
                c.close()
            self.clients.clear()


@dataclass
class Services:
    conf: RestConf
    backend: Backend
    policy: Policy
    tokens: TokenService
    authn: Authenticator | None
    audit: AuditLog
    anonymous_token: str = ""
    endpoints: list[Any] = field(default_factory=list)

    async def call(self, req: Any, op: Op, body: Any = None, timeout: float | None = None) -> Any:
        """A controller request on behalf of the request's principal (its own token)."""
        token = getattr(req.context, "token", "") or self.anonymous_token
        return await self.backend.call(token, op, body, timeout)


def idempotency_key(req: Any) -> str:
    """The caller's ``Idempotency-Key`` (keys are scoped by principal at the controller), or a new one."""
    key = req.get_header("Idempotency-Key")
    if key is None:
        return writes.new_key()
    problem = key_problem(key)
    if problem is not None:
        raise InvalidRequest(f"header Idempotency-Key: {problem}")
    return key
