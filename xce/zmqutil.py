"""Socket helpers shared by daemons and clients: limits and options set once."""

from __future__ import annotations

import zmq

from xce.proto.codec import MAX_FRAME


def router(ctx: zmq.Context, endpoint: str) -> zmq.Socket:
    s = ctx.socket(zmq.ROUTER)
    s.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME)
    s.setsockopt(zmq.ROUTER_HANDOVER, 1)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.SNDHWM, 100_000)
    s.setsockopt(zmq.RCVHWM, 100_000)
    s.bind(endpoint)
    return s


def dealer(ctx: zmq.Context, endpoint: str, limit_input: bool = False) -> zmq.Socket:
    s = ctx.socket(zmq.DEALER)
    if limit_input:
        s.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.SNDHWM, 100_000)
    s.setsockopt(zmq.RCVHWM, 100_000)
    s.setsockopt(zmq.RECONNECT_IVL, 100)
    s.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
    s.connect(endpoint)
    return s


def subscriber(ctx: zmq.Context, endpoint: str) -> zmq.Socket:
    s = ctx.socket(zmq.SUB)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.RCVHWM, 0)  # never drop events silently; gaps still resnapshot
    s.setsockopt(zmq.SUBSCRIBE, b"")
    s.setsockopt(zmq.RECONNECT_IVL, 100)
    s.connect(endpoint)
    return s
