"""Tests for xce.proto: envelope encoding and defensive decoding, error replies."""

from __future__ import annotations

import msgspec
import pytest
from builders import spec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xce.core.errors import (
    ERROR_CLASSES,
    Conflict,
    IllegalTransition,
    InvalidRequest,
    NotFound,
    NotLeader,
    ProtocolError,
    XceError,
)
from xce.proto import codec
from xce.proto.opcodes import Op
from xce.proto.schema import (
    DEFAULT_MAX_BODY,
    MAX_BODY,
    PROTOCOL_VERSION,
    REPLIES,
    REQUESTS,
    Ack,
    Envelope,
    JobsRequest,
    KillRequest,
    SubmitReply,
    SubmitRequest,
)

enc = msgspec.msgpack.encode


def frame(op: int, body: object, v: int = PROTOCOL_VERSION, rid: int = 7) -> bytes:
    """A frame built by hand, as a foreign (or hostile) peer would."""
    return enc([v, op, rid, msgspec.Raw(enc(body))])


def decode(data: bytes):
    return codec.decode_request(codec.decode_envelope(data))


# ---- round trips ---------------------------------------------------------------------------

def test_request_round_trip() -> None:
    body = SubmitRequest(jobs=[spec(mem="2G", slots=2, resreq="span[hosts=1]", env={"A": "1"})], dry_run=True, key="k1")
    data = codec.encode(Op.SUBMIT, 42, body, token="tok", term=3)
    env = codec.decode_envelope(data)
    assert (env.v, env.op, env.rid, env.token, env.term) == (PROTOCOL_VERSION, Op.SUBMIT, 42, "tok", 3)
    assert codec.decode_request(env) == (Op.SUBMIT, body)


def test_reply_round_trip() -> None:
    env = codec.decode_envelope(codec.encode(Op.OK, 5, SubmitReply(ids=[1, 2], queues=["normal", "short"])))
    assert codec.decode_reply(env, Op.SUBMIT) == SubmitReply(ids=[1, 2], queues=["normal", "short"])


def test_every_request_op_has_a_body_type_and_every_op_is_unique() -> None:
    assert len({int(o) for o in Op}) == len(Op)
    assert Op.OK not in REQUESTS and Op.ERROR not in REQUESTS
    assert set(REPLIES) <= set(REQUESTS)


# ---- refusals that name the problem --------------------------------------------------------

REFUSED = [
    ("not msgpack", b"\xc1\xc1", "malformed envelope"),
    ("not an array", enc({"v": 1}), "malformed envelope"),
    ("too short", enc([1, 3]), "malformed envelope"),
    ("wrong version", frame(Op.PING, {}, v=2), "unsupported protocol version 2 (this peer speaks 1)"),
    ("unknown opcode", frame(999, {}), "unknown opcode 999"),
    ("reply opcode", frame(Op.OK, {}), "opcode OK is not a request"),
    ("wrong field type", frame(Op.SUBMIT, {"jobs": [{"command": ["x"], "slots": "2"}]}),
     "bad SUBMIT body: Expected `int`, got `str` - at `$.jobs[0].slots`"),
    ("missing field", frame(Op.SUBMIT, {"jobs": [{"slots": 2}]}), "`$.jobs[0]`"),
    ("unknown enum", frame(Op.EVENT, {"seq": 1, "epoch": "e", "time": 0.0,
                                       "jobs": [{"id": 1, "spec": {"command": []}, "req": {}, "state": "NOPE"}]}),
     "`$.jobs[0].state`"),
    ("body not a map", frame(Op.KILL, [1, 2]), "bad KILL body: Expected `object`, got `array`"),
    ("nested too deeply", enc([1, Op.PING, 1, msgspec.Raw(b"\x91" * 50_000 + b"\x01")]), "nested too deeply"),
]


@pytest.mark.parametrize("name,data,message", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_with_a_message_naming_the_problem(name: str, data: bytes, message: str) -> None:
    with pytest.raises(ProtocolError) as ei:
        decode(data)
    assert message in str(ei.value)
    assert ei.value.code == "protocol"


def test_default_body_limit() -> None:
    body = enc({"pad": "x" * DEFAULT_MAX_BODY})
    data = enc([1, int(Op.JOBS), 1, msgspec.Raw(body)])
    with pytest.raises(ProtocolError, match=f"JOBS body of {len(body)} bytes exceeds the "
                                            f"{DEFAULT_MAX_BODY}-byte limit"):
        decode(data)


@pytest.mark.parametrize("op", [Op.SUBMIT, Op.PLACE])
def test_oversized_body_is_refused_naming_the_limit(op: Op, monkeypatch: pytest.MonkeyPatch) -> None:
    assert MAX_BODY[op] > DEFAULT_MAX_BODY  # bulk requests get a larger allowance ...
    monkeypatch.setitem(MAX_BODY, op, 1000)  # ... shrunk here to keep the test fast
    limit = 1000
    data = enc([1, int(op), 1, msgspec.Raw(enc({"pad": "x" * limit}))])
    with pytest.raises(ProtocolError, match=rf"{op.name} body of \d+ bytes exceeds the {limit}-byte limit"):
        decode(data)


def test_oversized_frame_is_refused_naming_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec, "MAX_FRAME", 100)
    with pytest.raises(ProtocolError, match="message of 200 bytes exceeds the 100-byte limit"):
        codec.decode_envelope(b"\x00" * 200)


def test_unknown_fields_are_ignored_for_forward_compatibility() -> None:
    assert decode(frame(Op.KILL, {"ids": [1], "reason": "r", "key": "k2", "later": True})) == (
        Op.KILL, KillRequest(ids=[1], reason="r", key="k2"))


# ---- property: any bytes give a ProtocolError or a valid request ---------------------------

def _valid_frames() -> st.SearchStrategy[bytes]:
    ops = st.sampled_from(sorted(int(o) for o in REQUESTS) + [0, 1, 2, 99])
    bodies = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.text(max_size=8)
                          | st.binary(max_size=8) | st.floats(),
                          lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
                          max_leaves=12)
    return st.builds(lambda v, op, rid, body: enc([v, op, rid, msgspec.Raw(enc(body))]),
                     st.sampled_from([1, 1, 1, 0, 2]), ops, st.integers(0, 2**32), bodies)


def _mutated(data: bytes, cut: int, flip: int, byte: int) -> bytes:
    data = data[: max(1, len(data) - cut)]
    i = flip % len(data)
    return data[:i] + bytes([byte]) + data[i + 1:]


ANY_BYTES = st.one_of(
    st.binary(max_size=64),
    _valid_frames(),
    st.builds(_mutated, _valid_frames(), st.integers(0, 4), st.integers(0, 1000), st.integers(0, 255)),
    st.builds(lambda op, body: frame(op, body), st.sampled_from(sorted(REQUESTS)),
              st.dictionaries(st.sampled_from(["jobs", "ids", "host", "seq", "names", "id", "placements"]),
                              st.integers(-2**63, 2**63) | st.lists(st.integers(0, 9), max_size=2) | st.text(max_size=3),
                              max_size=3)),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ANY_BYTES)
def test_any_bytes_decode_to_a_request_or_a_protocol_error(data: bytes) -> None:
    try:
        op, body = decode(data)
    except ProtocolError as e:
        assert e.message
        return
    assert op in REQUESTS and isinstance(body, REQUESTS[op])


def test_a_valid_request_is_found_by_the_property_strategy() -> None:
    # The property above must reach the success path too, not only refusals.
    assert decode(frame(Op.JOBS, {})) == (Op.JOBS, JobsRequest())


# ---- error replies -------------------------------------------------------------------------

@pytest.mark.parametrize("exc", [NotFound("job 9 is not known"), Conflict("busy"),
                                 IllegalTransition("cannot place a job in state RUN"),
                                 InvalidRequest("bad"), ProtocolError("bad frame"), XceError("boom")])
def test_error_reply_raises_the_same_class(exc: XceError) -> None:
    env = codec.decode_envelope(codec.error_reply(3, exc, term=2))
    assert (env.op, env.rid, env.term) == (Op.ERROR, 3, 2)
    with pytest.raises(type(exc)) as ei:
        codec.decode_reply(env, Op.PING)
    assert type(ei.value) is type(exc)
    assert ei.value.message == exc.message and ei.value.code == exc.code


@pytest.mark.parametrize("leader", ["10.0.0.2:7001", None])
def test_not_leader_keeps_the_leader(leader: str | None) -> None:
    env = codec.decode_envelope(codec.error_reply(1, NotLeader(leader)))
    with pytest.raises(NotLeader) as ei:
        codec.decode_reply(env, Op.SUBMIT)
    assert ei.value.leader == leader


def test_every_error_class_maps_back_to_itself() -> None:
    for code, cls in ERROR_CLASSES.items():
        exc = NotLeader("x") if cls is NotLeader else cls.__new__(cls)
        if cls is not NotLeader:
            XceError.__init__(exc, f"{code} happened")
        back = codec.error_from_reply(codec.error_body(exc))
        assert type(back) is cls and back.code == code


def test_unknown_error_code_becomes_the_base_class() -> None:
    env = codec.decode_envelope(frame(Op.ERROR, {"code": "from_the_future", "message": "later"}))
    with pytest.raises(XceError, match="later") as ei:
        codec.decode_reply(env, Op.PING)
    assert type(ei.value) is XceError


@pytest.mark.parametrize("op,body", [(Op.ERROR, {"code": 3}), (Op.ERROR, [1]), (Op.OK, {"ok": "yes"})])
def test_a_malformed_reply_is_a_protocol_error(op: Op, body: object) -> None:
    env = codec.decode_envelope(frame(op, body))
    with pytest.raises(ProtocolError):
        codec.decode_reply(env, Op.MODIFY)


def test_ack_reply() -> None:
    env = codec.decode_envelope(codec.encode(Op.OK, 1, Ack()))
    assert codec.decode_reply(env, Op.MODIFY) == Ack(ok=True, detail="")
    assert isinstance(codec.decode_envelope(codec.encode(Op.PING, 1, {})), Envelope)


def test_a_jobspec_is_written_without_its_defaults_and_read_back_from_either_form() -> None:
    """JobSpec omits fields at their defaults (docs/protocol.md); a sender that writes every field
    (an older peer, another language's client) is read the same."""
    from xce.core.model import JobSpec

    s = JobSpec(command=["true"], queue="q", slots=2)
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(s)) == {"command": ["true"], "queue": "q", "slots": 2}
    every_field = {f: getattr(s, f) for f in JobSpec.__struct_fields__}
    assert len(every_field) > 20
    body = codec.encode(Op.SUBMIT, 1, {"jobs": [every_field], "dry_run": False, "key": "k"})
    op, req = codec.decode_request(codec.decode_envelope(body))
    assert op == Op.SUBMIT and req.jobs == [s]
    assert codec.decode_request(codec.decode_envelope(codec.encode(Op.SUBMIT, 1, req)))[1].jobs == [s]
