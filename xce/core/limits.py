"""Every size limit XCE enforces, in one table: what a message may weigh, and each job-spec field.

Owns the numbers and the checks that apply them; ``model.check_spec`` (every door's job
check), the codec (message bodies, frames), the controller's kill (reasons), registration
(host names) and dispatch (orders) read them here and nowhere else.  docs/protocol.md §7 is
this table in prose.  Part of the pure core: it imports nothing of XCE, so the model and the
wire both can (message limits are keyed by opcode name; xce/proto/schema.py maps them to Op).

Invariant (asserted below, and tested with the biggest spec that passes): a spec that passes
``check_spec``, with its allocation and a host list of up to ``RUN_JOB_HOSTS`` hosts, encodes
into a RUN_JOB body within that order's limit.  So whatever submit accepts, a worker accepts
as an order; a job that spans still more hosts is ended at dispatch with the reason (the
controller measures the encoded order before it sends it).

Sizes are bytes of UTF-8, counted as the kernel counts them where it has a limit of its own:
an argv or environment block holds each string plus a NUL.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from typing import Any, NamedTuple

KiB = 1024
MiB = 1024 * KiB


class FieldLimit(NamedTuple):
    field: str              # the JobSpec field (or, for the others, what it names)
    max_bytes: int
    max_items: int | None   # entries of a list or map; None for a string
    what: str               # what it holds and how it is counted, for messages and the docs


# A job's spec: what one job may carry.  Sized for real jobs (a module-heavy HPC environment
# is tens of KiB), and so that the controller's memory per job stays bounded (docs/protocol.md §7).
SPEC_LIMITS: tuple[FieldLimit, ...] = (
    FieldLimit("command", 128 * KiB, 4096, "a job's argv: each argument + NUL"),
    FieldLimit("env", 128 * KiB, 4096, "a job's environment: each KEY=VALUE + NUL"),
    FieldLimit("name", 1 * KiB, None, "a job name"),
    FieldLimit("user", 256, None, "a user name"),
    FieldLimit("queue", 256, None, "a queue name"),
    FieldLimit("resreq", 8 * KiB, None, "a resource requirement string"),
    FieldLimit("cwd", 4 * KiB, None, "a path (PATH_MAX)"),
    FieldLimit("stdout", 4 * KiB, None, "a path (PATH_MAX)"),
    FieldLimit("stderr", 4 * KiB, None, "a path (PATH_MAX)"),
    FieldLimit("submit_host", 255, None, "the submitting host's name (DNS: 253)"),
    FieldLimit("script", 512 * KiB, None, "a job script as submitted (Slurm's default cap is 4 MB)"),
    FieldLimit("pre_exec", 4 * KiB, None, "a pre-execution command (-E; LSF takes 4094 characters)"),
)
SPEC_FIELD: Mapping[str, FieldLimit] = {f.field: f for f in SPEC_LIMITS}

# Other strings a request stores in hard state.
HOST_NAME = FieldLimit("host name", 255, None, "a registering host's name (DNS: 253)")
KILL_REASON = FieldLimit("kill reason", 1 * KiB, None, "the reason a KILL gives")

# Messages.  Each request's encoded body; ZMQ_MAXMSGSIZE (MAX_FRAME) is the backstop that
# drops a peer sending more, without a reply.
MAX_FRAME = 64 * MiB
# A reply a client reads from the controller it connected to (CURVE-authenticated): what the
# cluster holds, not what a peer may send.  A snapshot of 100,000 jobs is ~68 MB, over
# MAX_FRAME, and a scheduler or console refused it could never follow the cluster again.
MAX_REPLY = 1024 * MiB
DEFAULT_MAX_BODY = 4 * MiB
MAX_BODY: Mapping[str, int] = {"SUBMIT": 48 * MiB, "PLACE": 48 * MiB}  # by opcode name

# msgpack's bound on what a spec encodes to: each string's header is at most 5 bytes (str32),
# each map entry has two; the fixed part (field names, scalars, container headers) is small.
_STR_HEADER = 5
_SPEC_FIXED = 512
SPEC_BOUND = _SPEC_FIXED + sum(f.max_bytes + 2 * _STR_HEADER * (f.max_items or 1) for f in SPEC_LIMITS)
# An allocation: its host, and one virtual entry per resource its request names (each at
# least 4 characters of the resreq, "r=1:"); a name, its header and an int64 each.
_ALLOC_BOUND = 64 + HOST_NAME.max_bytes + _STR_HEADER + 4 * SPEC_FIELD["resreq"].max_bytes
_RUN_JOB_FIXED = 512  # ids, attempt, term, decay fields, the array element, the envelope
_SLOTS_BOUND = 9      # a host's slot count in RUN_JOB's ``slots`` (an int64 in msgpack)


def body_limit(op: str) -> int:
    """The largest encoded body of request (or order) ``op``, by its opcode name."""
    return MAX_BODY.get(op, DEFAULT_MAX_BODY)


# How many hosts of the longest name a RUN_JOB may list with the biggest spec (12,154).
RUN_JOB_HOSTS = (body_limit("RUN_JOB") - SPEC_BOUND - _ALLOC_BOUND - _RUN_JOB_FIXED) \
    // (HOST_NAME.max_bytes + _STR_HEADER + _SLOTS_BOUND)
assert RUN_JOB_HOSTS >= 10_000, "the RUN_JOB limit no longer holds the biggest spec and a large job"
assert body_limit("SUBMIT") >= SPEC_BOUND and MAX_FRAME > max(MAX_BODY.values()) + 4 * KiB


def measure(value: Any) -> tuple[int, int]:
    """(bytes, items) of a spec field as the table counts it."""
    if value is None:
        return 0, 0
    if isinstance(value, str):
        return len(value.encode()), 1
    if isinstance(value, dict):
        return sum(len(k.encode()) + len(v.encode()) + 2 for k, v in value.items()), len(value)
    return sum(len(a.encode()) + 1 for a in value), len(value)


def _smallest_limit(f: FieldLimit) -> int:
    return f.max_bytes if f.max_items is None else min(f.max_bytes, f.max_items)


# The fields a spec of encoded size n must have measured: those whose smallest limit is below n,
# in the table's order (so the field named first is the one the full check names first).
_THRESHOLDS = sorted({_smallest_limit(f) for f in SPEC_LIMITS})
_MEASURED = [tuple(f for f in SPEC_LIMITS if _smallest_limit(f) in _THRESHOLDS[:i])
             for i in range(len(_THRESHOLDS) + 1)]


def spec_limit_reason(spec: Any, encoded_size: int | None = None) -> str | None:
    """Why ``spec`` is over a limit ("env: 4,299,166 bytes is over the limit of ..."), or None.

    ``encoded_size``, the spec's MessagePack size where the caller has it, bounds every
    field's measure: MessagePack writes each string's UTF-8 bytes plus a header of at least
    one byte (so an argument's "+ NUL" and a map entry's "=" and NUL are covered), and each
    entry of a list or map takes at least one byte (so items <= bytes).  A field whose
    limits are all at or above that size cannot be over them and is not measured: a typical
    spec of ~400 bytes measures only user and submit_host (the batch submit measured every
    field of every job, ~5-15 us a job; see docs/benchmarks.md).
    """
    fields = SPEC_LIMITS if encoded_size is None else _MEASURED[bisect_left(_THRESHOLDS, encoded_size)]
    for f in fields:
        size, items = measure(getattr(spec, f.field))
        if f.max_items is not None and items > f.max_items:
            return f"{f.field}: {items:,} entries is over the limit of {f.max_items:,} ({f.what})"
        if size > f.max_bytes:
            return f"{f.field}: {size:,} bytes is over the limit of {f.max_bytes:,} bytes ({f.what})"
    return None


def check_text(f: FieldLimit, value: str) -> str | None:
    size = len(value.encode())
    return None if size <= f.max_bytes else f"{f.field}: {size:,} bytes is over the limit of {f.max_bytes:,} bytes"
