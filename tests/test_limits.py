"""The one table of limits: whatever submit accepts, a worker accepts as an order."""

from __future__ import annotations

import pytest

from xce.core import limits
from xce.core.errors import InvalidRequest, ProtocolError
from xce.core.model import Alloc, JobSpec, check_spec
from xce.proto.codec import decode_envelope, decode_request, encode
from xce.proto.opcodes import Op
from xce.proto.schema import ArrayElement, RunJob


def biggest_spec() -> JobSpec:
    """A spec at every field's limit at once, with as many (tiny) items as allowed: the most
    msgpack overhead a passing spec can carry."""
    lim = {f.field: f for f in limits.SPEC_LIMITS}

    def argv(f: limits.FieldLimit) -> list[str]:
        n = f.max_items or 1
        small = ["a"] * (n - 1)
        return small + ["b" * (f.max_bytes - 2 * (n - 1) - 1)]

    def environ(f: limits.FieldLimit) -> dict[str, str]:
        n = f.max_items or 1
        env = {f"K{i:05d}": "" for i in range(n - 1)}  # "K00000=" + NUL: 8 bytes each
        env["BIG"] = "v" * (f.max_bytes - 8 * (n - 1) - len("BIG=") - 1)
        return env

    def text(name: str) -> str:
        return "é" * (lim[name].max_bytes // 2)  # 2 UTF-8 bytes each: bytes count, not characters

    return JobSpec(command=argv(lim["command"]), env=environ(lim["env"]), name=text("name"),
                   user=text("user"), queue=text("queue"), resreq="x" * lim["resreq"].max_bytes,
                   cwd=text("cwd"), stdout=text("stdout"), stderr=text("stderr"), slots=10**9,
                   mem_limit=2**62)


def test_the_biggest_spec_submit_accepts_passes_the_check() -> None:
    assert limits.spec_limit_reason(biggest_spec()) is None
    check_spec(biggest_spec())  # every door's check applies the table


def test_what_submit_accepts_a_worker_accepts_as_an_order() -> None:
    """The biggest passing spec, with its allocation and a host list as long as the table
    promises, is a RUN_JOB the worker's decoder takes (the bug: 48 MiB in, 4 MiB out)."""
    spec = biggest_spec()
    name = "h" * limits.HOST_NAME.max_bytes
    virtual = {f"r{i}": 2**62 for i in range(limits.SPEC_FIELD["resreq"].max_bytes // 4)}
    hosts = [f"{i:08d}{name}"[: limits.HOST_NAME.max_bytes] for i in range(limits.RUN_JOB_HOSTS)]
    order = RunJob(job_id=2**62, attempt=2**62, spec=spec, alloc=Alloc(host=name, slots=2**62, mem=2**62,
                   virtual=virtual), hosts=hosts, mem_duration_s=2**62, mem_decay=True,
                   slots=[2**62] * len(hosts), element=ArrayElement(2**62, 2**62, 2**62, 2**62))
    data = encode(Op.RUN_JOB, 0, order, term=2**62)
    op, back = decode_request(decode_envelope(data))
    assert op == Op.RUN_JOB and back.spec == spec
    assert len(data) <= limits.MAX_FRAME
    assert limits.body_limit("SUBMIT") >= limits.SPEC_BOUND  # one such job fits in a submit


@pytest.mark.parametrize("field,value,size", [
    ("env", {"BIG": "x" * (4 * 2**20 + 100_000)}, 4 * 2**20 + 100_000 + len("BIG=") + 1),
    ("env", {f"V{i}": "" for i in range(5000)}, None),
    ("command", ["echo", "y" * 200_000], len("echo") + 1 + 200_001),
    ("command", ["true"] * 5000, None),
    ("name", "n" * 5000, 5000),
    ("cwd", "/" + "d" * 5000, 5001),
    ("stdout", "o" * 5000, 5000),
    ("resreq", "r" * 10_000, 10_000),
])
def test_a_field_over_its_limit_is_refused_naming_the_limit_and_the_size(field: str, value, size) -> None:
    spec = JobSpec(**{"command": ["true"], field: value})
    why = limits.spec_limit_reason(spec)
    with pytest.raises(InvalidRequest, match=f"^{field}: "):
        check_spec(spec)
    assert why is not None and why.startswith(f"{field}: ")
    f = limits.SPEC_FIELD[field]
    if size is None:  # too many items
        assert f"{len(value):,} " in why and f"limit of {f.max_items:,}" in why
    else:
        assert f"{size:,} bytes" in why and f"limit of {f.max_bytes:,} bytes" in why


def test_the_message_limits_come_from_the_table() -> None:
    from xce.proto import codec, schema

    assert codec.MAX_FRAME == limits.MAX_FRAME
    assert {op.name: n for op, n in schema.MAX_BODY.items()} == limits.MAX_BODY
    assert schema.DEFAULT_MAX_BODY == limits.DEFAULT_MAX_BODY
    body = b"\x80" + b"\x00" * limits.body_limit("RUN_JOB")
    with pytest.raises(ProtocolError, match="RUN_JOB body of"):
        decode_request(_envelope(Op.RUN_JOB, body))


def _envelope(op: Op, body: bytes):
    import msgspec

    from xce.proto.schema import PROTOCOL_VERSION, Envelope

    return Envelope(PROTOCOL_VERSION, int(op), 0, msgspec.Raw(body))


def test_text_limits_name_the_field() -> None:
    assert limits.check_text(limits.KILL_REASON, "k" * 2000) == (
        f"kill reason: 2,000 bytes is over the limit of {limits.KILL_REASON.max_bytes:,} bytes")
    assert limits.check_text(limits.HOST_NAME, "node1") is None


def _at(f: limits.FieldLimit, extra_bytes: int = 0, extra_items: int = 0) -> object:
    """A value of field ``f`` measuring its byte limit (+ extra_bytes), or its item limit (+ extra_items)."""
    if f.max_items is None:
        return "é" * (f.max_bytes // 2) + "x" * (f.max_bytes % 2 + extra_bytes)
    if extra_items:
        return (["a"] * (f.max_items + extra_items) if f.field == "command"
                else {f"K{i}": "" for i in range(f.max_items + extra_items)})
    if f.field == "command":
        return ["b" * (f.max_bytes - 1 + extra_bytes)]
    return {"K": "v" * (f.max_bytes - len("K=") - 1 + extra_bytes)}


@pytest.mark.parametrize("f", limits.SPEC_LIMITS, ids=lambda f: f.field)
@pytest.mark.parametrize("extra", [(0, 0), (1, 0), (0, 1)], ids=["at", "byte over", "item over"])
def test_the_encoded_size_bound_gives_the_full_checks_verdict(f: limits.FieldLimit, extra) -> None:
    """The batch submit's short cut (only fields whose limit is below the spec's encoded size are
    measured) refuses exactly what measuring every field refuses, at every field's edge."""
    import msgspec

    if extra[1] and f.max_items is None:
        pytest.skip("a string has no item limit")
    spec = JobSpec(command=["true"], **{f.field: _at(f, *extra)}) if f.field != "command" else \
        JobSpec(command=_at(f, *extra))
    full = limits.spec_limit_reason(spec)
    assert (full is None) == (extra == (0, 0))
    assert limits.spec_limit_reason(spec, len(msgspec.msgpack.encode(spec))) == full
    if full is not None:
        with pytest.raises(InvalidRequest, match=f"^{f.field}: "):
            check_spec(spec)


def test_a_small_spec_measures_only_the_fields_with_limits_below_its_size() -> None:
    import msgspec

    spec = JobSpec(command=["true"], user="u" * 300)  # user's 256 bytes is below this spec's size
    size = len(msgspec.msgpack.encode(spec))
    assert 300 < size < 1024
    assert limits.spec_limit_reason(spec, size) == limits.spec_limit_reason(spec) is not None
