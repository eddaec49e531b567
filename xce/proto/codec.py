"""Envelope encoding and defensive decoding.

A frame is a MessagePack array ``[v, op, rid, body, token, term]`` (Envelope).
Decoding never raises anything but ProtocolError, whose message names the
problem (bad bytes, wrong version, unknown opcode, oversized body, the field
that has the wrong type), so every daemon can answer bad input with an error
reply and carry on.
"""

from __future__ import annotations

from typing import Any

import msgspec

from xce.core import limits
from xce.core.errors import ProtocolError, XceError
from xce.proto.opcodes import Op
from xce.proto.schema import (
    DEFAULT_MAX_BODY,
    MAX_BODY,
    PROTOCOL_VERSION,
    REPLIES,
    REQUESTS,
    Envelope,
    ErrorReply,
    Event,
    OrderKey,
)

MAX_FRAME = limits.MAX_FRAME  # ZMQ_MAXMSGSIZE on every socket that takes input from others
MAX_REPLY = limits.MAX_REPLY
# The PUB socket's first message to each new subscriber (ZMQ_XPUB_WELCOME_MSG), one frame: once
# it has come, the subscription is live, and a state read afterwards cannot change unheard.  It
# does not start with b"ev", so a subscriber to the event topic alone never sees it.
STREAM_WELCOME = b"xce-welcome"

_enc = msgspec.msgpack.Encoder()
_env_dec = msgspec.msgpack.Decoder(Envelope)
_body_decoders: dict[type, msgspec.msgpack.Decoder] = {}


def _decoder(t: type) -> msgspec.msgpack.Decoder:
    d = _body_decoders.get(t)
    if d is None:
        d = _body_decoders[t] = msgspec.msgpack.Decoder(t)
    return d


def encode(op: int, rid: int, body: Any, token: str = "", term: int = 0) -> bytes:
    raw = msgspec.Raw(_enc.encode(body))
    return _enc.encode(Envelope(PROTOCOL_VERSION, int(op), rid, raw, token, term))


def encode_body(body: Any) -> bytes:
    """A body alone, as recordings keep it (without its envelope)."""
    return _enc.encode(body)


def decode_envelope(data: bytes, limit: int | None = None) -> Envelope:
    """``limit``: MAX_FRAME for what a peer sends; a client reading its controller's replies passes MAX_REPLY."""
    limit = MAX_FRAME if limit is None else limit
    if len(data) > limit:
        raise ProtocolError(f"message of {len(data)} bytes exceeds the {limit}-byte limit")
    try:
        env = _env_dec.decode(data)
    except msgspec.DecodeError as e:
        raise ProtocolError(f"malformed envelope: {e}") from None
    except RecursionError:
        raise ProtocolError("malformed envelope: nested too deeply") from None
    if env.v != PROTOCOL_VERSION:
        raise ProtocolError(f"unsupported protocol version {env.v} (this peer speaks {PROTOCOL_VERSION})")
    return env


_OPS: dict[int, Op] = {int(o): o for o in Op}  # Op(n) costs ~1 µs; this lookup a tenth


def request_op(env: Envelope) -> Op:
    op = _OPS.get(env.op)
    if op is None:
        raise ProtocolError(f"unknown opcode {env.op}")
    if op not in REQUESTS:
        raise ProtocolError(f"opcode {op.name} is not a request")
    return op


def decode_request(env: Envelope) -> tuple[Op, Any]:
    op = request_op(env)
    limit = MAX_BODY.get(op, DEFAULT_MAX_BODY)
    if len(env.body) > limit:
        raise ProtocolError(f"{op.name} body of {len(env.body)} bytes exceeds the {limit}-byte limit")
    try:
        return op, _decoder(REQUESTS[op]).decode(env.body)
    except msgspec.DecodeError as e:
        raise ProtocolError(f"bad {op.name} body: {e}") from None
    except RecursionError:
        raise ProtocolError(f"bad {op.name} body: nested too deeply") from None


def decode_event(data: bytes) -> tuple[Envelope, Event]:
    """One frame of the PUB stream: its envelope (for the term) and its Event."""
    env = decode_envelope(data)
    if env.op != Op.EVENT:
        raise ProtocolError(f"expected an EVENT on the event stream, got opcode {env.op}")
    return env, decode_event_body(env.body)


def decode_event_body(body: bytes) -> Event:
    """An Event's body alone (a recording keeps bodies without envelopes)."""
    try:
        return _decoder(Event).decode(body)
    except msgspec.DecodeError as e:
        raise ProtocolError(f"bad EVENT body: {e}") from None
    except RecursionError:
        raise ProtocolError("bad EVENT body: nested too deeply") from None


def order_key(env: Envelope) -> tuple[int, int] | None:
    """The (job, attempt) an order names, read past its size limit and any other bad field;
    None when even those cannot be read."""
    try:
        key = _decoder(OrderKey).decode(env.body)
    except (msgspec.DecodeError, RecursionError):
        return None
    return key.job_id, key.attempt


def decode_reply(env: Envelope, request: Op) -> Any:
    """Decode a reply body; an ERROR reply is raised as its XceError class."""
    is_error = env.op == Op.ERROR
    if not is_error and request not in REPLIES:
        raise ProtocolError(f"{request.name} has no reply")
    try:
        body = _decoder(ErrorReply if is_error else REPLIES[request]).decode(env.body)
    except msgspec.DecodeError as e:
        raise ProtocolError(f"bad {'ERROR' if is_error else request.name} reply: {e}") from None
    except RecursionError:
        raise ProtocolError(f"bad {'ERROR' if is_error else request.name} reply: nested too deeply") from None
    if is_error:
        raise error_from_reply(body)
    return body


def decode_error(env: Envelope) -> XceError:
    """The error an ERROR reply carries, as its class; a malformed one as ProtocolError."""
    try:
        return error_from_reply(_decoder(ErrorReply).decode(env.body))
    except msgspec.DecodeError as e:
        return ProtocolError(f"bad ERROR reply: {e}")
    except RecursionError:
        return ProtocolError("bad ERROR reply: nested too deeply")


def error_body(exc: XceError) -> ErrorReply:
    code, message, fields = exc.to_wire()
    return ErrorReply(code=code, message=message, **fields)


def error_reply(rid: int, exc: XceError, term: int = 0) -> bytes:
    return encode(Op.ERROR, rid, error_body(exc), term=term)


def error_from_reply(err: ErrorReply) -> XceError:
    return XceError.from_wire(err.code, err.message, msgspec.structs.asdict(err))
