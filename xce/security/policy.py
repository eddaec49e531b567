"""The one access policy of XCE: roles, permissions, ownership; default deny.

Owns: the permission vocabulary, the role table (config/rbac.toml), the check
every door makes (REST routes, the controller's ZeroMQ handlers), and the map
from each wire opcode to the permission it needs.  It knows nothing of tokens
(xce/security/auth.py proves *who* a principal is; this module says *what* it may do)
and does no I/O but reading the policy file.

A grant is ``PERM`` (any object), ``PERM:own`` (only jobs whose ``user`` is the
caller; only for OWNABLE permissions) or ``*`` (everything).  Invariants: an
unknown permission never passes; a principal with no known role holds nothing;
``check`` raises PermissionDenied naming the missing permission.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

import msgspec

from xce.core.errors import ConfigError, PermissionDenied
from xce.proto.opcodes import Op
from xce.site.config import read_toml

Scope = Literal["any", "own"]

PERMISSIONS: dict[str, str] = {
    "jobs.submit": "submit jobs (as oneself)",
    "jobs.submit_as": "submit jobs on behalf of another user",
    "jobs.list": "list jobs",
    "jobs.read": "read one job's details",
    "jobs.kill": "kill jobs",
    "jobs.modify": "change a job's memory limit",
    "hosts.read": "list and read hosts",
    "hosts.admin": "close, open and remove hosts",
    "queues.read": "list queues",
    "queues.admin": "change queue configuration",
    "cluster.read": "cluster status and metrics",
    "cluster.snapshot": "the whole cluster state (the console's feed)",
    "cluster.audit": "run the accounting invariant audit",
    "accounting.read": "finished-job accounting records",
    "audit.read": "the request audit log",
    "daemon.worker": "act as a worker daemon",
    "daemon.scheduler": "act as the scheduler daemon",
}
OWNABLE = frozenset({"jobs.list", "jobs.read", "jobs.kill", "jobs.modify", "accounting.read"})

# Every request opcode the controller serves, and the permission it needs (None: public).
OP_PERMISSIONS: dict[Op, str | None] = {
    Op.PING: None, Op.SUBMIT: "jobs.submit", Op.JOBS: "jobs.list", Op.HOSTS: "hosts.read",
    Op.QUEUES: "queues.read", Op.KILL: "jobs.kill", Op.STATUS: "cluster.read",
    Op.SNAPSHOT: "cluster.snapshot", Op.MODIFY: "jobs.modify", Op.HOST_ADMIN: "hosts.admin",
    Op.AUDIT: "cluster.audit", Op.REQUEST_LOG: "audit.read", Op.PLACE: "daemon.scheduler", Op.REGISTER: "daemon.worker",
    Op.HEARTBEAT: "daemon.worker", Op.JOB_STARTED: "daemon.worker", Op.JOB_FINISHED: "daemon.worker",
    Op.JOB_SIGNALLED: "daemon.worker", Op.JOB_OUTPUT: "daemon.worker", Op.PEEK: "jobs.read",
    Op.STOP: "jobs.modify", Op.RESUME: "jobs.modify", Op.REQUEUE: "jobs.modify", Op.SWITCH: "jobs.modify",
    Op.MOVE: "jobs.modify", Op.MODIFY_SPEC: "jobs.modify", Op.HIST: "jobs.read",
    # Everyone who may list queues sees the share trees and limits, as bqueues -l and blimits show them.
    Op.FAIRSHARE: "queues.read", Op.LIMITS: "queues.read",
    # blaunch needs no user token: its launch token (XCE_LAUNCH_TOKEN, xce/security/launch.py) proves
    # it runs inside the job, and the reactor checks that, as LSF lets any task of a job blaunch.
    Op.LAUNCH: None, Op.LAUNCH_POLL: None, Op.TASK_STATE: "daemon.worker",
}
_BY_IDS = frozenset({Op.KILL, Op.JOBS, Op.STOP, Op.RESUME, Op.REQUEUE, Op.SWITCH})  # bodies naming jobs in ``ids``
_BY_ID = frozenset({Op.MODIFY, Op.PEEK, Op.MOVE, Op.MODIFY_SPEC, Op.HIST})                  # and in ``id``

DEFAULT_FILE = Path(__file__).resolve().parents[2] / "config" / "rbac.toml"


class Principal(msgspec.Struct, frozen=True):
    """Who is asking: a user name and the roles its token (or backend) vouches for."""

    user: str
    roles: tuple[str, ...] = ()


ANONYMOUS = Principal("anonymous", ("anonymous",))


class Policy:
    """Role -> {permission: scope}; answers 'may this principal do that?'."""

    def __init__(self, roles: dict[str, dict[str, Scope]], source: str = "<policy>") -> None:
        self.roles = roles
        self.source = source
        self._memo: dict[tuple[tuple[str, ...], str], Scope | None] = {}

    def scope(self, principal: Principal, permission: str) -> Scope | None:
        """The widest scope in which ``principal`` holds ``permission`` (None: not at all)."""
        key = (principal.roles, permission)
        try:
            return self._memo[key]
        except KeyError:
            pass
        best: Scope | None = None
        for role in principal.roles:
            s = self.roles.get(role, {}).get(permission)
            if s == "any":
                best = "any"
                break
            best = best or s
        if len(self._memo) < 65536:  # roles tuples come from tokens: bound the memo
            self._memo[key] = best
        return best

    def allows(self, principal: Principal, permission: str, owner: str | None = None) -> bool:
        s = self.scope(principal, permission)
        return s == "any" or (s == "own" and owner is not None and owner == principal.user)

    def check(self, principal: Principal, permission: str, owner: str | None = None) -> None:
        """Raise PermissionDenied naming ``permission`` unless the principal holds it.

        With ``owner`` None, an ``own`` grant suffices (the caller then filters or
        checks each object); with an owner, an ``own`` grant must match it.
        """
        if permission not in PERMISSIONS:
            raise denied(principal, permission, "is not a known permission")
        s = self.scope(principal, permission)
        if s == "any" or (s == "own" and (owner is None or owner == principal.user)):
            return
        if s == "own":
            raise denied(principal, permission, f"is granted only for own jobs; this job is {owner}'s")
        raise denied(principal, permission, "is required")

    def permissions_of(self, principal: Principal) -> dict[str, Scope]:
        return {p: s for p in PERMISSIONS if (s := self.scope(principal, p)) is not None}


def authorize(policy: Policy, principal: Principal, op: Op, body: Any,
              owner_of: Callable[[int], str | None]) -> Any:
    """The controller's check of one decoded request; returns the body to serve.

    ``owner_of(job_id)`` gives a job's user (None if unknown: the handler then says
    "not found").  With only an ``own`` grant, JOBS is narrowed to the caller's
    jobs, and the requests naming jobs (KILL, MODIFY, STOP, ..., JOBS and HIST by id) refuse
    another user's job.  SUBMIT fills an
    empty ``user`` with the caller's and needs jobs.submit_as for anyone else's.
    """
    if op not in OP_PERMISSIONS:
        raise PermissionDenied(f"opcode {op.name} is not a request the controller serves")
    perm = OP_PERMISSIONS[op]
    if perm is None:
        return body
    policy.check(principal, perm)
    if op == Op.SUBMIT:
        specs = []
        for spec in body.jobs:
            if spec.user and spec.user != principal.user:
                policy.check(principal, "jobs.submit_as")
            specs.append(spec if spec.user else msgspec.structs.replace(spec, user=principal.user))
        return msgspec.structs.replace(body, jobs=specs)
    ids = list(body.ids) if op in _BY_IDS else [body.id] if op in _BY_ID else []
    if policy.scope(principal, perm) == "own":
        for jid in ids:
            policy.check(principal, perm, owner_of(jid) or principal.user)
        if op == Op.JOBS:
            if body.user not in (None, principal.user):
                raise denied(principal, perm, f"is granted only for own jobs, not {body.user}'s")
            return msgspec.structs.replace(body, user=principal.user)
    return body


def denied(principal: Principal, permission: str, why: str) -> PermissionDenied:
    roles = ", ".join(principal.roles) or "no role"
    return PermissionDenied(f"permission {permission} {why} ({principal.user} has {roles})", permission)


def parse_grants(role: str, grants: Iterable[str], source: str) -> dict[str, Scope]:
    out: dict[str, Scope] = {}
    for g in grants:
        if g == "*":
            out.update(dict.fromkeys(PERMISSIONS, "any"))
            continue
        perm, _, scope = g.partition(":")
        if perm not in PERMISSIONS:
            raise ConfigError(f"{source}: key roles.{role}.grants: unknown permission {perm!r}")
        if scope not in ("", "own") or (scope == "own" and perm not in OWNABLE):
            raise ConfigError(f"{source}: key roles.{role}.grants: {g!r}: only "
                              f"{', '.join(sorted(OWNABLE))} take ':own'")
        if out.get(perm) != "any":
            out[perm] = "own" if scope else "any"
    return out


def load_policy(path: str | Path | None = None) -> Policy:
    """Read a policy file; None means ``$XCE_RBAC`` or the shipped config/rbac.toml."""
    p = Path(path or os.environ.get("XCE_RBAC") or DEFAULT_FILE)
    if path is None and not p.exists():
        return Policy({r: parse_grants(r, g, "<builtin>") for r, g in BUILTIN.items()}, "<builtin>")

    data = read_toml(p)
    roles = data.get("roles")
    if not isinstance(roles, dict) or set(data) - {"roles"}:
        raise ConfigError(f"{p}: needs exactly one table, [roles.NAME] with grants = [...]")
    out: dict[str, dict[str, Scope]] = {}
    for name, spec in roles.items():
        if not isinstance(spec, dict) or set(spec) != {"grants"} or not isinstance(spec["grants"], list):
            raise ConfigError(f"{p}: key roles.{name}: needs exactly grants = [\"perm\", ...]")
        out[name] = parse_grants(name, spec["grants"], str(p))
    return Policy(out, str(p))


# The shipped policy, used when config/rbac.toml is not installed (tests keep them equal).
BUILTIN: dict[str, list[str]] = {
    "admin": ["*"],
    "operator": ["jobs.submit", "jobs.list", "jobs.read", "jobs.kill", "jobs.modify", "hosts.read",
                 "hosts.admin", "queues.read", "queues.admin", "cluster.read", "cluster.snapshot",
                 "cluster.audit", "accounting.read"],
    "user": ["jobs.submit", "jobs.list:own", "jobs.read:own", "jobs.kill:own", "jobs.modify:own",
             "accounting.read:own", "hosts.read", "queues.read", "cluster.read"],
    "viewer": ["jobs.list", "jobs.read", "hosts.read", "queues.read", "cluster.read",
               "cluster.snapshot", "accounting.read"],
    "daemon": ["daemon.worker", "daemon.scheduler", "cluster.snapshot", "cluster.read"],
    "anonymous": [],
}
