"""Socket helpers shared by daemons and clients: limits, options and CURVE set once."""

from __future__ import annotations

from typing import TYPE_CHECKING

import zmq

from xce.proto.codec import MAX_FRAME

if TYPE_CHECKING:
    from xce.curve import ClientKeys, ServerKeys

# ZAP domain of the controller's sockets; the handler (xce.curve_auth) serves every domain.
ZAP_DOMAIN = b"xce"


def serve_curve(s: zmq.Socket, keys: ServerKeys | None) -> None:
    """Make ``s`` a CURVE server before it binds (libzmq takes the options at bind time)."""
    if keys is None:
        return
    s.setsockopt(zmq.CURVE_SERVER, 1)
    s.setsockopt(zmq.CURVE_PUBLICKEY, keys.public)
    s.setsockopt(zmq.CURVE_SECRETKEY, keys.secret)
    s.setsockopt(zmq.ZAP_DOMAIN, ZAP_DOMAIN)


def use_curve(s: zmq.Socket, keys: ClientKeys | None) -> None:
    """Make ``s`` a CURVE client of the controllers' key before it connects."""
    if keys is None:
        return
    s.setsockopt(zmq.CURVE_SERVERKEY, keys.server_public)
    s.setsockopt(zmq.CURVE_PUBLICKEY, keys.public)
    s.setsockopt(zmq.CURVE_SECRETKEY, keys.secret)


def router(ctx: zmq.Context, endpoint: str, curve: ServerKeys | None = None) -> zmq.Socket:
    s = ctx.socket(zmq.ROUTER)
    s.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME)
    s.setsockopt(zmq.ROUTER_HANDOVER, 1)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.SNDHWM, 100_000)
    s.setsockopt(zmq.RCVHWM, 100_000)
    serve_curve(s, curve)
    s.bind(endpoint)
    return s


def dealer(ctx: zmq.Context, endpoint: str, limit_input: bool = False,
           curve: ClientKeys | None = None) -> zmq.Socket:
    s = ctx.socket(zmq.DEALER)
    if limit_input:
        s.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.SNDHWM, 100_000)
    s.setsockopt(zmq.RCVHWM, 100_000)
    s.setsockopt(zmq.RECONNECT_IVL, 100)
    s.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
    use_curve(s, curve)
    s.connect(endpoint)
    return s


def subscriber(ctx: zmq.Context, endpoint: str, curve: ClientKeys | None = None) -> zmq.Socket:
    s = ctx.socket(zmq.SUB)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.RCVHWM, 0)  # never drop events silently; gaps still resnapshot
    s.setsockopt(zmq.SUBSCRIBE, b"")
    s.setsockopt(zmq.RECONNECT_IVL, 100)
    use_curve(s, curve)
    s.connect(endpoint)
    return s
