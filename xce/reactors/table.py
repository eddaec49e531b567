"""The one table of what the controller serves (opcode -> reactor) and ``serve``, which runs one request.

``serve`` checks, in order: the daemon key (with CURVE), the token against the policy, that
this controller leads (or the read may be served stale), that the opcode is served; then it
opens the request-log entry of a state-changing request and calls the reactor.  Any
XceError on the way becomes the request's error reply (logged if the request is audited).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from xce.core.errors import NotLeader, ProtocolError, Unavailable, XceError
from xce.proto.opcodes import Op
from xce.reactors import clients, control, jobrun, launch, signals, workers
from xce.reactors.access import DAEMON_OPS, audit_entry, authorize, check_daemon_key
from xce.reactors.context import Context
from xce.reactors.outbox import Outbox, Request

Reactor = Callable[[Context, Request, Any, Outbox], None]


class Route(NamedTuple):
    reactor: Reactor
    audited: bool = False   # state-changing: the request log records it and its answer
    any_role: bool = False  # served by a follower too (PING, STATUS)


ROUTES: dict[Op, Route] = {
    Op.PING: Route(clients.on_ping, any_role=True),
    Op.STATUS: Route(clients.on_status, any_role=True),
    Op.SUBMIT: Route(clients.on_submit, audited=True),
    Op.JOBS: Route(clients.on_jobs),
    Op.HOSTS: Route(clients.on_hosts),
    Op.QUEUES: Route(clients.on_queues),
    Op.KILL: Route(clients.on_kill, audited=True),
    Op.MODIFY: Route(clients.on_modify, audited=True),
    Op.HOST_ADMIN: Route(clients.on_host_admin, audited=True),
    Op.SNAPSHOT: Route(clients.on_snapshot),
    Op.AUDIT: Route(clients.on_audit),
    Op.REQUEST_LOG: Route(clients.on_request_log),
    Op.PLACE: Route(workers.on_place),
    Op.REGISTER: Route(workers.on_register),
    Op.HEARTBEAT: Route(workers.on_heartbeat),
    Op.JOB_STARTED: Route(workers.on_job_started),
    Op.JOB_FINISHED: Route(workers.on_job_finished),
    Op.PEEK: Route(jobrun.on_peek),
    Op.STOP: Route(control.on_stop, audited=True),
    Op.RESUME: Route(control.on_resume, audited=True),
    Op.REQUEUE: Route(control.on_requeue, audited=True),
    Op.SWITCH: Route(control.on_switch, audited=True),
    Op.MOVE: Route(control.on_move, audited=True),
    Op.MODIFY_SPEC: Route(control.on_modify_spec, audited=True),
    Op.HIST: Route(control.on_hist),
    Op.FAIRSHARE: Route(clients.on_fairshare),
    Op.LIMITS: Route(clients.on_limits),
    Op.JOB_SIGNALLED: Route(signals.on_job_signalled),
    Op.JOB_OUTPUT: Route(jobrun.on_job_output),
    Op.LAUNCH: Route(launch.on_launch), Op.LAUNCH_POLL: Route(launch.on_launch_poll),
    Op.TASK_STATE: Route(launch.on_task_state),
}
AUDITED_OPS = frozenset(op for op, r in ROUTES.items() if r.audited)
STALE_READS = frozenset({Op.JOBS, Op.HOSTS})  # a follower serves these when the request says stale_ok


def serve(ctx: Context, req: Request, body: Any, out: Outbox, mono: float = 0.0) -> None:
    """Run one decoded request; ``mono`` is a monotonic clock (daemon grants expire on it)."""
    op = req.op
    try:
        if ctx.curve and op in DAEMON_OPS:
            check_daemon_key(ctx, req, body)
        if ctx.tokens is not None:
            body = authorize(ctx, req, body, mono)
        route = ROUTES.get(op)
        if not route or not route.any_role:
            stale_ok = op in STALE_READS and body.stale_ok
            if not ctx.raft.is_leader() and not stale_ok:
                raise NotLeader(ctx.raft.leader())
            if not stale_ok and not ctx.raft.caught_up():
                # Raft sec. 8: until it has applied its own term's first entry, a new leader's
                # state may lack what the old leader acted on (a job placed and started, a
                # job ended): no answer, order or kill may come from it (clients retry).
                raise Unavailable(f"the new leader (term {ctx.raft.term()}) is still applying the log it was "
                                  "elected with; try again")
        if route is None:
            raise ProtocolError(f"{op.name} is not served by the controller")
        if route.audited:
            req.audit = audit_entry(req, body)
        route.reactor(ctx, req, body, out)
    except XceError as e:
        if op in AUDITED_OPS and req.audit is None:
            req.audit = audit_entry(req, body)
        out.error(req, e)
