"""One wire form for every error and result: each error class to the wire and back whole.

Regression tests for issue 12 item 11 / issue 13 item 3: an error rebuilt from its code
lost its fields (``NotLeader(message)`` made ``leader`` the whole message; a controller's
PermissionDenied reached REST without its ``permission``; ResReqError without its text).
"""

from __future__ import annotations

from typing import Any

import pytest

from xce.core.errors import (
    ERROR_CLASSES,
    ConfigError,
    Conflict,
    IllegalTransition,
    Infeasible,
    InvalidRequest,
    LaunchDenied,
    LimitReached,
    NoShare,
    NotFound,
    NotLeader,
    NotRunning,
    PermissionDenied,
    ProtocolError,
    ResReqError,
    Unauthenticated,
    Unavailable,
    XceError,
)
from xce.proto import codec
from xce.proto.opcodes import Op
from xce.proto.schema import ErrorReply

# One instance of every class, every field set to something other than its default.
SAMPLES: list[XceError] = [
    XceError("boom"), InvalidRequest("bad field"), ResReqError("unknown section", "rusage[mem=1] foo[x]", 14),
    ProtocolError("bad SUBMIT body"), NotFound("job 9 is not known"), Conflict("job 3 has already ended"),
    IllegalTransition("job 1: cannot place a job in state DONE"), Infeasible("slots: needs 9"),
    PermissionDenied("permission jobs.kill is required (bob has user)", permission="jobs.kill"),
    Unauthenticated("a token is needed"), NotLeader("tcp://127.0.0.1:7001"), NotLeader(None),
    Unavailable("no answer"), ConfigError("xce.toml: key x: bad"),
    LimitReached("limit user_pend: alice has 1 of 1 pending jobs"),
    LaunchDenied("the launch token is not valid for job 12"), NotRunning("job 12 is PEND"),
    NoShare("job 12 has no share on node3"),
]


def whole(e: XceError) -> tuple[type, tuple, dict[str, Any]]:
    return type(e), e.args, dict(vars(e))


def test_the_samples_cover_every_error_class_and_set_every_field() -> None:
    assert {type(e) for e in SAMPLES} == set(ERROR_CLASSES.values())
    for e in SAMPLES:
        assert set(type(e).fields) <= set(vars(e)), type(e)
        if e.fields and not isinstance(e, NotLeader):
            assert all(getattr(e, f) != getattr(type(e), f) for f in e.fields), e


@pytest.mark.parametrize("exc", SAMPLES, ids=lambda e: f"{type(e).__name__}")
def test_every_error_class_round_trips_the_wire_whole(exc: XceError) -> None:
    data = codec.error_reply(17, exc, term=3)
    env = codec.decode_envelope(data)
    with pytest.raises(XceError) as got:
        codec.decode_reply(env, Op.SUBMIT)
    assert whole(got.value) == whole(exc)
    assert got.value.message == exc.message and str(got.value) == str(exc)


def test_every_field_of_every_class_is_a_field_of_the_error_reply() -> None:
    wire = set(ErrorReply.__struct_fields__) - {"code", "message"}
    assert {f for cls in ERROR_CLASSES.values() for f in cls.fields} == wire


def test_not_leader_keeps_its_leader_as_an_endpoint() -> None:
    e = NotLeader("tcp://127.0.0.1:7001")
    back = XceError.from_wire(*e.to_wire())
    assert isinstance(back, NotLeader) and back.leader == "tcp://127.0.0.1:7001"


def test_a_refusal_by_the_policy_carries_its_permission() -> None:
    from xce.security.policy import Principal, denied

    e = denied(Principal("bob", ("user",)), "jobs.kill", "is required")
    assert e.permission == "jobs.kill"
    back = XceError.from_wire(*e.to_wire())
    assert isinstance(back, PermissionDenied) and back.permission == "jobs.kill"


def test_an_unknown_code_from_a_newer_peer_is_an_xce_error_with_its_message() -> None:
    back = codec.error_from_reply(ErrorReply(code="from_the_future", message="something new"))
    assert type(back) is XceError and back.message == "something new"


def test_a_lost_commit_answers_not_leader_with_the_leader_as_an_endpoint() -> None:
    """The replier records the error it was given, fields and all (it used to rebuild
    ``NotLeader(message)``, so the client read the whole message as the leader's endpoint),
    and the shell's encoding of it keeps them."""
    from xce.core.result import Err
    from xce.reactors.clients import replier
    from xce.reactors.outbox import Outbox, Request

    out = Outbox()
    lost = NotLeader("tcp://127.0.0.1:7002")
    replier(Request(b"id", 5, Op.KILL, 0.0), lambda v: v)(Err(lost), out)
    ((req, e),) = out.errors
    assert e is lost and not out.replies
    data = codec.error_reply(req.rid, e, 4)  # as the controller's carry_out sends it
    with pytest.raises(NotLeader) as got:
        codec.decode_reply(codec.decode_envelope(data), Op.KILL)
    assert got.value.leader == "tcp://127.0.0.1:7002"
