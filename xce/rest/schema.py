"""REST-only shapes: query strings, request bodies, and the few replies that are not views.

Entities in replies are the shared vocabulary (JobView, HostView, StatusReply,
QueuesReply, KillReply from xce/core/views.py and xce/proto/schema.py), encoded as the
CLI's ``--json`` encodes them.  The constraints here are the API's input
validation *and* appear in /v1/openapi.json (both come from these classes).
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

MAX_ID = 2**53 - 1
MAX_MEM = 2**62
NO_NUL = r"^[^\x00]*$"
STATES = "PEND|RUN|PSUSP|USUSP|SSUSP|DONE|EXIT|UNKWN"

Name = Annotated[str, Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.@-]*$")]
Filter = Annotated[str, Meta(max_length=64, pattern=r"^([A-Za-z0-9_][A-Za-z0-9_.@-]*)?$",
                             description="empty: no filter")]
Text = Annotated[str, Meta(max_length=4096, pattern=NO_NUL)]
Arg = Annotated[str, Meta(max_length=65536, pattern=NO_NUL)]
EnvKey = Annotated[str, Meta(min_length=1, max_length=256, pattern=r"^[^=\x00]+$")]
Mem = Annotated[int, Meta(ge=1, le=MAX_MEM)] | Annotated[
    str, Meta(max_length=32, pattern=r"^[0-9]+(\.[0-9]+)?[KMGTkmgt]?[Bb]?$",
              description="a size: bytes as an integer, or a string with K/M/G/T (bare number = MB)")]
Cursor = Annotated[int, Meta(ge=0, le=MAX_ID, description="return ids greater than this")]
Limit = Annotated[int, Meta(ge=1, le=10000)]


class JobsQuery(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    user: Filter = ""
    queue: Filter = ""
    state: Annotated[str, Meta(pattern=rf"^(({STATES})(,({STATES}))*)?$",
                               description="comma-separated job states")] = ""
    all: bool = False
    after: Cursor = 0
    limit: Limit = 1000


class JobQuery(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    order: bool = False  # a pending job's place in the order of pending work (JobView.order)


class AccountingQuery(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    user: Filter = ""
    queue: Filter = ""
    state: Annotated[str, Meta(pattern=r"^((DONE|EXIT)(,(DONE|EXIT))*)?$")] = ""
    after: Cursor = 0
    limit: Limit = 1000


class AuditQuery(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    user: Filter = ""
    since: Annotated[float, Meta(ge=0, le=1e11)] = 0.0
    after: Cursor = 0
    limit: Limit = 1000


class SubmitBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The CLI's submit fields; ``user`` other than the caller needs jobs.submit_as.  A ``script``
    (kept as submitted, run under its ``#!`` line or /bin/sh) needs no ``command``; its ``#BSUB``
    lines are not read here: the body's fields are the job's."""

    command: Annotated[list[Arg], Meta(max_length=4096)] = []
    name: Text = ""
    queue: Annotated[str, Meta(max_length=64, pattern=NO_NUL)] = ""
    slots: Annotated[int, Meta(ge=1, le=1_000_000)] = 1
    resreq: Text = ""
    mem_limit: Mem | None = None
    cwd: Text = ""
    env: Annotated[dict[EnvKey, Arg], Meta(max_length=1024)] = {}
    stdout: Text | None = None
    stderr: Text | None = None
    rerunnable: bool | None = None
    user: Name | None = None
    dry_run: bool = False
    script: Annotated[str, Meta(max_length=512 * 1024, pattern=NO_NUL)] = ""
    stdout_overwrite: bool = False
    stderr_overwrite: bool = False
    run_limit: Annotated[float, Meta(gt=0, le=1e9)] | None = None  # seconds (-W)
    run_estimate: Annotated[float, Meta(gt=0, le=1e9)] | None = None  # seconds (-We)
    project: Text = ""
    group: Text = ""
    priority: Annotated[int, Meta(ge=0, le=1_000_000)] = 0
    depend: Annotated[str, Meta(max_length=8192, pattern=NO_NUL,
                                description="a -w expression: done(12) && ended(\"prep*\")")] = ""
    array: Annotated[str, Meta(max_length=4096, pattern=NO_NUL,
                               description="array indices as -J has them in brackets, and %N: 1-100:2%10")] = ""
    reclaim: Annotated[bool, Meta(description="run on reclaimable memory, the first to go when its owners "
                                              "want it back (docs/accounting.md)")] = False
    exclusive: Annotated[bool, Meta(description="-x: only on hosts that run no job, and no job beside it "
                                                "(docs/scheduling.md)")] = False
    pre_exec: Annotated[str, Meta(max_length=4096, pattern=NO_NUL,
                                  description="-E: a /bin/sh command run on the first host before the job's; "
                                              "if it fails the job pends again (docs/jobs.md)")] = ""


class SignalBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    signal: Annotated[str, Meta(min_length=1, max_length=16, pattern="^[A-Za-z0-9]+$",
                                description="a name (USR1, SIGUSR1) or a number, as bkill -s takes it")]
    to: Annotated[str, Meta(pattern="^(|steps|batch)$",
                            description='to whom: "" every process of the job, "steps" the tasks srun, '
                                        'blaunch and xce launch started in it (scancel\'s default), '
                                        '"batch" its batch shell alone (scancel -b)')] = ""


class SwitchBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    queue: Annotated[str, Meta(min_length=1, max_length=64, pattern=NO_NUL)]


class MoveResult(msgspec.Struct):
    id: int
    to: str      # top | bottom
    detail: str  # the job's new priority, as the controller says it


class SubmitResult(msgspec.Struct):
    """As `xce submit --json`; ``id`` is null for a dry run."""

    id: int | None
    queue: str


class ModifyBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """bmod: ``mem_limit`` (-M; null removes it) of any job; the others (-R -n -q -J -W -sp -w -E) of a
    pending one.  An absent field stays as it is."""

    mem_limit: Mem | None | msgspec.UnsetType = msgspec.UNSET
    resreq: Annotated[str, Meta(min_length=1, max_length=4096, pattern=NO_NUL)] | msgspec.UnsetType = msgspec.UNSET
    slots: Annotated[int, Meta(ge=1, le=1_000_000)] | msgspec.UnsetType = msgspec.UNSET
    queue: Annotated[str, Meta(min_length=1, max_length=64, pattern=NO_NUL)] | msgspec.UnsetType = msgspec.UNSET
    name: Text | msgspec.UnsetType = msgspec.UNSET
    run_limit: Annotated[float, Meta(gt=0, le=1e9)] | None | msgspec.UnsetType = msgspec.UNSET  # seconds (-W)
    priority: Annotated[int, Meta(ge=0, le=1_000_000)] | msgspec.UnsetType = msgspec.UNSET
    depend: Annotated[str, Meta(max_length=8192, pattern=NO_NUL,
                                description='a -w expression; "" drops the dependency')] | msgspec.UnsetType = \
        msgspec.UNSET
    pre_exec: Annotated[str, Meta(max_length=4096, pattern=NO_NUL,
                                  description='-E: the pre-execution command; "" drops it (-En)')] | \
        msgspec.UnsetType = msgspec.UNSET


class TokenBody(msgspec.Struct, forbid_unknown_fields=True):
    username: Annotated[str, Meta(min_length=1, max_length=64)]
    password: Annotated[str, Meta(max_length=1024)]
    grant_type: Annotated[str, Meta(pattern="^password$")] = "password"


class TokenReply(msgspec.Struct):
    access_token: str
    token_type: str
    expires_in: int


class WhoAmI(msgspec.Struct):
    user: str
    roles: list[str]
    permissions: dict[str, str]


class Health(msgspec.Struct):
    status: str          # "ok" | "degraded"
    controller: str      # "reachable" | the reason it is not
    version: str


class AuditRecord(msgspec.Struct, kw_only=True):
    seq: int
    time: float
    request_id: str
    user: str | None
    roles: list[str]
    client: str
    method: str
    path: str
    status: int
    result: str
