"""Socket helpers shared by daemons and clients: limits, options and CURVE set once."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

import zmq

from xce.proto.codec import MAX_FRAME
from xce.site.local import UNIX_PATH_MAX, door_path

if TYPE_CHECKING:
    from xce.security.curve import ClientKeys, ServerKeys

log = logging.getLogger("xce.transport.sockets")

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


def bind_local_door(sock: zmq.Socket, state_dir: str, address: str) -> str | None:
    """Also bind ``sock`` on the owner-only ``ipc://`` door that `xce submit`'s fast path uses.

    libzmq copies the socket's options into each listener when it binds, so this runs
    after the TCP bind: whatever mechanism (CURVE) was set for TCP stays on TCP, and
    the door is bound with NULL; afterwards the mechanism is put back for any later
    bind.  The door needs no key: the file system guards it (0600 socket in a 0700
    directory) and the envelope's token is checked as on TCP.  libzmq cannot clear a
    ZAP domain once set; if one is, a ZAP handler sees the door's connections as
    mechanism NULL with an empty address and must let them in.
    Returns the endpoint, or None when there is no state directory or the path cannot
    be a Unix socket (too long, unwritable): clients then use TCP as before.
    """
    if not state_dir:
        return None
    path = door_path(state_dir, address)
    if len(path.encode()) > UNIX_PATH_MAX:
        log.warning("no local door: %s is longer than a Unix socket path may be", path)
        return None
    endpoint = f"ipc://{path}"
    mechanism = sock.getsockopt(zmq.MECHANISM)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        os.chmod(os.path.dirname(path), 0o700)
        sock.setsockopt(zmq.PLAIN_SERVER, 0)  # any *_SERVER = 0 puts the mechanism back to NULL
        sock.bind(endpoint)
        os.chmod(path, 0o600)
    except (OSError, zmq.ZMQError) as e:
        log.warning("no local door at %s: %s", path, e)
        return None
    finally:
        if mechanism == zmq.CURVE:
            sock.setsockopt(zmq.CURVE_SERVER, 1)
        elif mechanism == zmq.PLAIN:
            sock.setsockopt(zmq.PLAIN_SERVER, 1)
    log.info("local door at %s", endpoint)
    return endpoint


def close_local_door(endpoint: str | None) -> None:
    """Remove the door's socket file: libzmq 4.3 leaves it behind when the socket closes."""
    if endpoint:
        try:
            os.unlink(endpoint.removeprefix("ipc://"))
        except OSError:
            pass


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
