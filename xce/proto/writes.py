"""The one builder of each client write: submit, kill, modify, host admin.

Every door (xce.client, the CLI, REST, the console) builds its write requests here and
nowhere else (tests/test_writes.py checks the tree), and each builder takes the
idempotency key as a required argument: the caller makes one with ``new_key()`` per
thing its user asked for and keeps it for every retry.  The wire refuses a write
without a key too (``schema.Write``).  The stdlib fast path (xce/cli/quick.py) writes
the bytes ``submit`` would, which tests/test_lite.py checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xce.core.errors import InvalidRequest
from xce.core.model import JobSpec
from xce.proto import schema as S
from xce.proto.idempotency import key_problem, new_key

__all__ = ["control", "host_admin", "kill", "modify", "modify_spec", "move", "new_key", "submit", "switch"]


def submit(jobs: Sequence[JobSpec], *, key: str, dry_run: bool = False) -> S.SubmitRequest:
    return S.SubmitRequest(jobs=list(jobs), dry_run=dry_run, key=_checked(key))


def kill(ids: Sequence[int], *, key: str, reason: str = "", signal: int | None = None,
         to: str = "") -> S.KillRequest:
    return S.KillRequest(ids=list(ids), reason=reason, signal=signal, to=to, key=_checked(key))


def modify(job_id: int, mem_limit: int | None, *, key: str) -> S.ModifyRequest:
    return S.ModifyRequest(id=job_id, mem_limit=mem_limit, key=_checked(key))


def control(ids: Sequence[int], *, key: str, reason: str = "") -> S.ControlRequest:
    """The body of STOP, RESUME and REQUEUE."""
    return S.ControlRequest(ids=list(ids), reason=reason, key=_checked(key))


def switch(ids: Sequence[int], queue: str, *, key: str) -> S.SwitchRequest:
    return S.SwitchRequest(ids=list(ids), queue=queue, key=_checked(key))


def move(job_id: int, to: str, *, key: str) -> S.MoveRequest:
    if to not in ("top", "bottom"):
        raise InvalidRequest(f"move: 'to' must be 'top' or 'bottom', got {to!r}")
    return S.MoveRequest(id=job_id, to=to, key=_checked(key))


def modify_spec(job_id: int, *, key: str, **changes: Any) -> S.ModifySpecRequest:
    """bmod of a pending job: ``resreq``, ``slots``, ``queue``, ``name``, ``run_limit``, ``priority``,
    ``depend`` (-w text)."""
    unknown = set(changes) - set(S.ModifySpecRequest.__struct_fields__) - {"id", "key"}
    if unknown:
        raise InvalidRequest(f"modify: cannot change {', '.join(sorted(unknown))}")
    return S.ModifySpecRequest(id=job_id, key=_checked(key), **changes)


def host_admin(names: Sequence[str], action: str, *, key: str) -> S.HostAdminRequest:
    return S.HostAdminRequest(names=list(names), action=action, key=_checked(key))


def _checked(key: str) -> str:
    """A caller's bad key is its input error (the Struct would say ValueError)."""
    problem = key_problem(key)
    if problem is not None:
        raise InvalidRequest(problem)
    return key
