"""The Outbox: everything a reactor decided, recorded for the shell to carry out.

A reactor never touches a socket, the Raft object or a file.  It answers a ``Request``
(``reply``/``error``), hands commands to Raft with a continuation (``commit``), sends
orders to workers (``order``), publishes events (``event``) and writes request-log lines
(recorded by ``reply``/``error`` when the request is an audited one).  The shell
(xce/daemons/controller.py) drains the outbox after each reactor call, in this order:
events, orders, replies and errors, log lines; commits go into the loop turn's batch.
Tests read the lists directly: the outbox is its own recording fake.

One outbox lives as long as the shell; ``clear`` empties it after each drain, so the hot
path (thousands of heartbeats a second) allocates no outbox per request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from xce.core.errors import XceError
from xce.core.result import Result
from xce.core.state import Cmd
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.security.policy import Principal


class Audit(NamedTuple):
    """A request-log entry: who (the token's user), what and from where."""

    user: str | None
    roles: list[str]
    client: str
    op: str
    target: str


@dataclass(slots=True)
class Request:
    """One request as the shell received it: where its answer goes, who sent it, when.

    ``peer`` is the ROUTER identity (opaque here).  ``key``/``key_name`` are the sender's
    CURVE key and its allow-list name (None: no key, or CURVE off); ``client`` is the
    peer address (read only for audited requests).  ``principal`` and ``audit`` are set
    by ``serve`` once the token is verified.
    """

    peer: bytes
    rid: int
    op: Op
    now: float
    token: str = ""
    key: str | None = None
    key_name: str | None = None
    client: str = "local"
    principal: Principal | None = None
    audit: Audit | None = None


# What a continuation is: it gets the command's result and writes only to an outbox.
Then = Callable[[Result, "Outbox"], None]


def ignore(result: Result, out: Outbox) -> None:
    """The continuation of a command nobody waits for (internal commands)."""


class Order(NamedTuple):
    host: str
    op: Op
    body: Any
    data: bytes | None = None  # already encoded (a RUN_JOB is encoded once to check its size)


@dataclass(slots=True)
class Outbox:
    replies: list[tuple[Request, Any]] = field(default_factory=list)
    errors: list[tuple[Request, XceError]] = field(default_factory=list)
    commits: list[tuple[Cmd, Then]] = field(default_factory=list)
    orders: list[Order] = field(default_factory=list)
    events: list[S.Event] = field(default_factory=list)
    log: list[tuple[Audit, str]] = field(default_factory=list)

    def reply(self, req: Request, body: Any) -> None:
        self.replies.append((req, body))
        if req.audit is not None:
            self.log.append((req.audit, answer(body)))

    def error(self, req: Request, e: XceError) -> None:
        self.errors.append((req, e))
        if req.audit is not None:
            self.log.append((req.audit, refusal(e)))

    def commit(self, cmd: Cmd, then: Then = ignore) -> None:
        self.commits.append((cmd, then))

    def order(self, host: str, op: Op, body: Any, data: bytes | None = None) -> None:
        self.orders.append(Order(host, op, body, data))

    def event(self, ev: S.Event) -> None:
        self.events.append(ev)

    def __bool__(self) -> bool:
        return bool(self.replies or self.errors or self.commits or self.orders or self.events or self.log)

    def clear(self) -> None:
        for part in (self.replies, self.errors, self.commits, self.orders, self.events, self.log):
            part.clear()


KILL_ACCEPTED = frozenset({"killed", "kill requested"})
ANSWERS_LOGGED = 20  # per-job answers written out; a kill of thousands is summarised after these


def answer(body: Any) -> str:
    """The log's word for an OK reply: "accepted", unless a kill said otherwise for some job.

    A kill is answered per job, and "already DONE" or "not found" is no acceptance.
    """
    if not isinstance(body, S.KillReply) or set(body.results.values()) <= KILL_ACCEPTED:
        return "accepted"
    items = list(body.results.items())
    words = ", ".join(f"job {jid}: {what}" for jid, what in items[:ANSWERS_LOGGED])
    more = len(items) - ANSWERS_LOGGED
    return words + (f", and {more} more" if more > 0 else "")


def refusal(e: XceError) -> str:
    return f"refused: {e.code}: {e.message}"
