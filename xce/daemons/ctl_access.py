"""The controller's access checks: CURVE daemon keys and the token policy, on every request."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec
import zmq

from xce.core.errors import PermissionDenied, Unauthenticated, XceError
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.security.curve import SCHEDULER_KEY
from xce.security.policy import OP_PERMISSIONS, authorize

if TYPE_CHECKING:
    from xce.daemons.controller import Controller


# What only a daemon (a key on the CURVE allow-list) may send: registering, reporting, placing.
# Placing is the scheduler's alone, and reporting a host's its worker's alone.
SCHEDULER_OPS = frozenset({Op.PLACE})
WORKER_OPS = frozenset({Op.REGISTER, Op.HEARTBEAT, Op.JOB_STARTED, Op.JOB_FINISHED, Op.JOB_SIGNALLED,
                        Op.JOB_OUTPUT})
DAEMON_OPS = SCHEDULER_OPS | WORKER_OPS
# What the request log records (the ZeroMQ door's audit trail): every state-changing request.
AUDITED_OPS = frozenset({Op.SUBMIT, Op.KILL, Op.MODIFY, Op.HOST_ADMIN, Op.STOP, Op.RESUME, Op.REQUEUE,
                         Op.SWITCH, Op.MOVE, Op.MODIFY_SPEC})
DAEMON_GRANT_TTL = 5.0  # seconds a verified daemon grant is reused: bounds how late a key-ring revocation bites


class Access:
    """Mixed into Controller: who may send what."""

    def check_daemon_key(self: Controller, op: Op, frame: zmq.Frame, body: Any) -> None:
        """Only a connection whose CURVE key is on the allow-list may act as a daemon."""
        assert self.allow is not None
        try:
            user_id = frame.get("User-Id")
        except zmq.ZMQError:
            user_id = None  # the local door (no CURVE) has no key, so it is no daemon
        name = self.allow.name_of(user_id)
        if name is None:
            raise Unauthenticated(f"{op.name} needs a daemon key: this connection's CURVE key "
                                  f"{user_id or '(none)'} is not in the allow-list (xce keys add)")
        if op in SCHEDULER_OPS and name != SCHEDULER_KEY:
            raise PermissionDenied(f"{op.name} needs the scheduler's key {SCHEDULER_KEY!r}: this "
                                   f"connection's key is {name!r}")
        if op in WORKER_OPS and name == SCHEDULER_KEY:
            raise PermissionDenied(f"{op.name}: the scheduler's key {SCHEDULER_KEY!r} does not speak for a host")
        if op in WORKER_OPS and self.cfg.security.bind_hosts and body.host != name:
            raise PermissionDenied(f"{op.name} for host {body.host!r}: this connection's key {name!r} "
                                   f"speaks only for host {name!r} (security.bind_hosts)")
        if op == Op.REGISTER:
            self.worker_keys[body.host] = name

    def authorize(self: Controller, token: str, op: Op, body: Any) -> Any:
        """The same policy as REST (xce/security/policy.py): who may do what, own jobs narrowed.

        Workers and the scheduler show a daemon-role token (and, with CURVE, an allowed
        key: ``check_daemon_key``); everyone else their user token.
        """
        if OP_PERMISSIONS.get(op, "") is None:
            return body  # public: PING
        if not token:
            raise Unauthenticated(f"{op.name} needs a token (xce login, or XCE_TOKEN)")
        assert self.tokens is not None
        # Every heartbeat carries the same daemon token: remember the grant for a few seconds
        # (daemon ops own no jobs, so the answer depends on the token and the op only).
        now = time.monotonic()
        grant = (token, op)
        if op in DAEMON_OPS and self.daemon_grants.get(grant, 0.0) > now:
            return body
        principal = self.principal = self.tokens.verify(token)
        with self.raft.lock:
            st = self.state
            body = authorize(self.policy, principal, op, body, lambda j: job_owner(st, j))
        if op in DAEMON_OPS:
            if len(self.daemon_grants) > 10_000:
                self.daemon_grants.clear()
            self.daemon_grants[grant] = now + DAEMON_GRANT_TTL
        return body

    def key_owner(self: Controller) -> str:
        """Whose idempotency keys a write's key is among: the verified token's user.

        Without access control there are no principals, so there is one scope.
        """
        return self.principal.user if self.principal is not None else ""

    def audit_entry(self: Controller, op: Op, body: Any, frame: zmq.Frame) -> Audit:
        """Who (the token's user), what and from where, read while the request is the current one:
        its answer may come only when its command commits."""
        try:
            client = frame.get("Peer-Address") or "local"
        except zmq.ZMQError:
            client = "local"  # the ipc door
        p = self.principal
        return Audit(user=p.user if p else None, roles=list(p.roles) if p else [], client=client,
                     op=op.name, target=describe(op, body) if body is not None else "")

    def log_request(self: Controller, entry: Audit, result: str) -> None:
        """One line in the request log: the entry and the answer the client got."""
        self.requests.record(user=entry.user, roles=entry.roles, client=entry.client, op=entry.op,
                             target=entry.target, result=result)


def job_owner(state: Any, job_id: int) -> str | None:
    """The user of a job, array element or whole array; None if unknown (the handler says so)."""
    job = state.jobs.get(job_id)
    if job is not None:
        return job.spec.user
    arr = state.arrays.get(job_id)
    return None if arr is None else arr.spec.user


class Audit(NamedTuple):
    user: str | None
    roles: list[str]
    client: str
    op: str
    target: str


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


def describe(op: Op, body: Any) -> str:
    """The request's target in a few words (never its environment or command line)."""
    if op == Op.SUBMIT:
        queues = ", ".join(sorted({j.queue or "(default)" for j in body.jobs}))
        return f"{len(body.jobs)} job(s) to {queues}" + (" (dry run)" if body.dry_run else "")
    if op == Op.KILL:
        return "jobs " + " ".join(map(str, body.ids))
    if op == Op.MODIFY:
        return f"job {body.id} mem_limit {body.mem_limit}"
    if op == Op.HOST_ADMIN:
        return f"hosts {' '.join(body.names)} {body.action}"
    if op in (Op.STOP, Op.RESUME, Op.REQUEUE):
        return "jobs " + " ".join(map(str, body.ids))
    if op == Op.SWITCH:
        return "jobs " + " ".join(map(str, body.ids)) + f" to queue {body.queue}"
    if op == Op.MOVE:
        return f"job {body.id} to the {body.to}"
    if op == Op.MODIFY_SPEC:
        fields = [f for f in body.__struct_fields__ if f not in ("id", "key") and getattr(body, f) is not msgspec.UNSET]
        return f"job {body.id} " + " ".join(fields)
    return ""
