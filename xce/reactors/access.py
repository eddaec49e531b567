"""Who may send what: CURVE daemon keys, the token policy, the leader check, the request log's entry.

Runs before every reactor (``serve``, xce/reactors/table.py).  The policy is
xce/security/policy.py's, the same one REST applies; this module only decides which
daemon may speak for what and remembers a verified daemon grant for a few seconds.
"""

from __future__ import annotations

from typing import Any

import msgspec

from xce.core.errors import PermissionDenied, Unauthenticated
from xce.proto.opcodes import Op
from xce.reactors.context import Context
from xce.reactors.outbox import Audit, Request
from xce.security.curve import SCHEDULER_KEY
from xce.security.policy import OP_PERMISSIONS, authorize as policy_authorize

# What only a daemon (a key on the CURVE allow-list) may send: registering, reporting, placing.
# Placing is the scheduler's alone, and reporting a host's its worker's alone.
SCHEDULER_OPS = frozenset({Op.PLACE})
WORKER_OPS = frozenset({Op.REGISTER, Op.HEARTBEAT, Op.JOB_STARTED, Op.JOB_FINISHED, Op.JOB_SIGNALLED,
                        Op.JOB_OUTPUT, Op.TASK_STATE})
DAEMON_OPS = SCHEDULER_OPS | WORKER_OPS
DAEMON_GRANT_TTL = 5.0  # seconds a verified daemon grant is reused: bounds how late a key-ring revocation bites


def check_daemon_key(ctx: Context, req: Request, body: Any) -> None:
    """Only a connection whose CURVE key is on the allow-list may act as a daemon."""
    op, name = req.op, req.key_name
    if name is None:
        raise Unauthenticated(f"{op.name} needs a daemon key: this connection's CURVE key "
                              f"{req.key or '(none)'} is not in the allow-list (xce keys add)")
    if op in SCHEDULER_OPS and name != SCHEDULER_KEY:
        raise PermissionDenied(f"{op.name} needs the scheduler's key {SCHEDULER_KEY!r}: this "
                               f"connection's key is {name!r}")
    if op in WORKER_OPS and name == SCHEDULER_KEY:
        raise PermissionDenied(f"{op.name}: the scheduler's key {SCHEDULER_KEY!r} does not speak for a host")
    if op in WORKER_OPS and ctx.cfg.security.bind_hosts and body.host != name:
        raise PermissionDenied(f"{op.name} for host {body.host!r}: this connection's key {name!r} "
                               f"speaks only for host {name!r} (security.bind_hosts)")
    if op == Op.REGISTER:
        ctx.book.worker_keys[body.host] = name


def authorize(ctx: Context, req: Request, body: Any, mono: float) -> Any:
    """The policy's verdict on the request; returns the body to serve (own jobs narrowed).

    Workers and the scheduler show a daemon-role token (and, with CURVE, an allowed key:
    ``check_daemon_key``); everyone else their user token.  ``mono`` is a monotonic clock.
    """
    op = req.op
    if OP_PERMISSIONS.get(op, "") is None:
        return body  # public: PING
    if not req.token:
        raise Unauthenticated(f"{op.name} needs a token (xce login, or XCE_TOKEN)")
    assert ctx.tokens is not None
    # Every heartbeat carries the same daemon token: remember the grant for a few seconds
    # (daemon ops own no jobs, so the answer depends on the token and the op only).
    grants = ctx.book.daemon_grants
    grant = (req.token, op)
    if op in DAEMON_OPS and grants.get(grant, 0.0) > mono:
        return body
    principal = req.principal = ctx.tokens.verify(req.token)
    st = ctx.state
    body = policy_authorize(ctx.policy, principal, op, body, lambda j: job_owner(st, j))
    if op in DAEMON_OPS:
        if len(grants) > 10_000:
            grants.clear()
        grants[grant] = mono + DAEMON_GRANT_TTL
    return body


def job_owner(state: Any, job_id: int) -> str | None:
    """The user of a job, array element or whole array; None if unknown (the reactor says so)."""
    job = state.jobs.get(job_id)
    if job is not None:
        return job.spec.user
    arr = state.arrays.get(job_id)
    return None if arr is None else arr.spec.user


def key_owner(req: Request) -> str:
    """Whose idempotency keys a write's key is among: the verified token's user.

    Without access control there are no principals, so there is one scope.
    """
    return req.principal.user if req.principal is not None else ""


def audit_entry(req: Request, body: Any) -> Audit:
    """Who (the token's user), what and from where: its answer may come only when its command commits."""
    p = req.principal
    return Audit(user=p.user if p else None, roles=list(p.roles) if p else [], client=req.client,
                 op=req.op.name, target=describe(req.op, body) if body is not None else "")


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
