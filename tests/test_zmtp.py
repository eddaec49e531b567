"""xce/proto/zmtp.py against real libzmq ROUTERs, and against peers that misbehave.

Every misbehaving peer must end in ProtocolError or Unavailable within the
deadline given, never a hang.  The local door (xce/zmqutil.bind_local_door) is
checked here too: NULL on ipc while the same ROUTER's TCP endpoint keeps CURVE.
"""

from __future__ import annotations

import os
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zmq

from xce.core.errors import ProtocolError, Unavailable
from xce.proto import lite
from xce.proto.zmtp import GREETING, Dealer, command, frame, properties
from xce.site.local import door_path
from xce.transport.sockets import bind_local_door


@pytest.fixture
def ctx() -> Iterator[zmq.Context]:
    c = zmq.Context()
    yield c
    c.destroy(linger=0)


def echo(router: zmq.Socket, n: int) -> threading.Thread:
    """Answer n messages with the same frames, prefixed by b"re:"."""
    def run() -> None:
        for _ in range(n):
            if not router.poll(5000):
                return
            ident, *frames = router.recv_multipart()
            router.send_multipart([ident, *[b"re:" + f for f in frames]])
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def endpoints(ctx: zmq.Context, tmp_path: Path) -> list[tuple[zmq.Socket, str]]:
    tcp = ctx.socket(zmq.ROUTER)
    port = tcp.bind_to_random_port("tcp://127.0.0.1")
    ipc = ctx.socket(zmq.ROUTER)
    ipc.bind(f"ipc://{tmp_path}/r.sock")
    return [(tcp, f"tcp://127.0.0.1:{port}"), (ipc, f"ipc://{tmp_path}/r.sock")]


def test_dealer_exchanges_messages_with_a_pyzmq_router(ctx: zmq.Context, tmp_path: Path) -> None:
    big = os.urandom(70_000)  # a long frame (8-byte size) next to short ones
    for router, ep in endpoints(ctx, tmp_path):
        t = echo(router, 3)
        with Dealer.connect(ep, 5) as d:
            assert d.peer_type == b"ROUTER"
            d.send([lite.encode(3, 1, {})], 5)
            assert d.recv(5) == [b"re:" + lite.encode(3, 1, {})]
            d.send([b"a", b"", big], 5)
            assert d.recv(5) == [b"re:a", b"re:", b"re:" + big]
            d.send([b"x" * 255], 5)
            assert d.recv(5) == [b"re:" + b"x" * 255]
        t.join(5)


def test_a_pyzmq_dealer_and_the_lite_one_look_alike_to_a_router(ctx: zmq.Context, tmp_path: Path) -> None:
    router, ep = endpoints(ctx, tmp_path)[1]
    real = ctx.socket(zmq.DEALER)
    real.connect(ep)
    real.send(b"from pyzmq")
    with Dealer.connect(ep, 5) as d:
        d.send([b"from lite"], 5)
        got = sorted(router.recv_multipart()[1:] + router.recv_multipart()[1:])
    assert got == [b"from lite", b"from pyzmq"]
    real.close(0)


# ---- peers that misbehave ---------------------------------------------------------------------

def fake_peer(tmp_path: Path, behave: Callable[[socket.socket], None]) -> str:
    """A Unix socket server that accepts one connection and does ``behave`` with it."""
    path = str(tmp_path / "fake.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)

    def run() -> None:
        conn, _ = srv.accept()
        try:
            behave(conn)
            time.sleep(0.3)  # let the client read what was sent before the close
        except OSError:
            pass
        finally:
            conn.close()
            srv.close()
    threading.Thread(target=run, daemon=True).start()
    return f"ipc://{path}"


def router_greeting(mechanism: bytes = b"NULL") -> bytes:
    return GREETING[:12] + mechanism.ljust(20, b"\x00") + GREETING[32:]


def after_greeting(reply: bytes) -> Callable[[socket.socket], None]:
    def behave(c: socket.socket) -> None:
        c.recv(1000)
        c.sendall(reply)
    return behave


GARBAGE = [
    ("closes at once", lambda c: c.close(), Unavailable, "closed the connection"),
    ("answers HTTP", after_greeting(b"HTTP/1.1 400 Bad Request\r\n\r\n" + b"x" * 64), ProtocolError,
     "not a ZeroMQ peer"),
    ("speaks ZMTP 2", after_greeting(GREETING[:10] + b"\x01" + b"\x00" * 53), ProtocolError, "ZMTP 1.x"),
    ("wants CURVE", after_greeting(router_greeting(b"CURVE")), ProtocolError, "CURVE security mechanism"),
    ("sends ERROR", after_greeting(router_greeting() + command(b"ERROR", b"\x06denied")), Unavailable,
     "refused the connection: denied"),
    ("is a PUB", after_greeting(router_greeting() + command(b"READY", properties({b"Socket-Type": b"PUB"}))),
     ProtocolError, "cannot talk to a 'PUB'"),
    ("bad flags", after_greeting(router_greeting() + b"\xf0\x00"), ProtocolError, "bad frame flags"),
    ("message before READY", after_greeting(router_greeting() + frame(b"hi")), ProtocolError,
     "expected a command frame"),
    ("greets, then stalls", lambda c: (c.sendall(router_greeting()), time.sleep(2)), Unavailable, "did not answer"),
    ("never answers", lambda c: time.sleep(2), Unavailable, "did not answer"),
]


@pytest.mark.parametrize("what, behave, exc, why", GARBAGE, ids=[g[0] for g in GARBAGE])
def test_a_misbehaving_peer_gives_a_clear_error_within_the_deadline(
        tmp_path: Path, what: str, behave: Callable[[socket.socket], None], exc: type, why: str) -> None:
    ep = fake_peer(tmp_path, behave)
    t0 = time.monotonic()
    with pytest.raises(exc, match=why):
        Dealer.connect(ep, 0.5)
    assert time.monotonic() - t0 < 1.5


def test_garbage_after_the_handshake(tmp_path: Path) -> None:
    ok = router_greeting() + command(b"READY", properties({b"Socket-Type": b"ROUTER"}))
    for tail, exc, why in [(b"\x02" + (2**40).to_bytes(8, "big"), ProtocolError, "exceeds the"),
                           (frame(b"\x00partial")[:5], Unavailable, "closed the connection"),
                           (b"", Unavailable, "did not answer")]:
        def behave(c: socket.socket, tail: bytes = tail) -> None:
            c.recv(1000)
            c.sendall(ok)
            c.recv(1000)
            c.sendall(tail)
            if not tail:
                time.sleep(2)
        ep = fake_peer(tmp_path, behave)
        with Dealer.connect(ep, 2) as d:
            d.send([b"req"], 1)
            t0 = time.monotonic()
            with pytest.raises(exc, match=why):
                d.recv(0.5)
            assert time.monotonic() - t0 < 1.5
        os.unlink(tmp_path / "fake.sock") if (tmp_path / "fake.sock").exists() else None


def test_commands_between_messages_are_skipped(tmp_path: Path) -> None:
    ok = router_greeting() + command(b"READY", properties({b"Socket-Type": b"ROUTER"}))

    def behave(c: socket.socket) -> None:
        c.recv(1000)
        c.sendall(ok)
        c.recv(1000)
        c.sendall(command(b"PING", b"\x00\x00") + frame(b"one", 1) + frame(b"two"))
        time.sleep(0.5)
    with Dealer.connect(fake_peer(tmp_path, behave), 2) as d:
        d.send([b"req"], 1)
        assert d.recv(2) == [b"one", b"two"]


def test_nobody_listening_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(Unavailable, match="cannot connect"):
        Dealer.connect(f"ipc://{tmp_path}/none.sock", 1)
    with pytest.raises(Unavailable, match="only ipc:// and tcp://"):
        Dealer.connect("udp://127.0.0.1:9", 1)


# ---- the local door on a ROUTER whose TCP side uses CURVE ------------------------------------

def test_the_door_stays_null_while_tcp_keeps_curve(ctx: zmq.Context, tmp_path: Path) -> None:
    if not zmq.has("curve"):
        pytest.skip("libzmq without CURVE")
    server_pub, server_sec = zmq.curve_keypair()
    router = ctx.socket(zmq.ROUTER)
    router.curve_secretkey = server_sec
    router.curve_publickey = server_pub
    router.curve_server = True
    port = router.bind_to_random_port("tcp://127.0.0.1")
    door = bind_local_door(router, str(tmp_path), f"tcp://127.0.0.1:{port}")
    assert door == f"ipc://{door_path(tmp_path, f'tcp://127.0.0.1:{port}')}"
    assert router.getsockopt(zmq.MECHANISM) == zmq.CURVE  # put back for any later bind
    sock = door.removeprefix("ipc://")
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(sock)).st_mode) == 0o700

    t = echo(router, 2)
    with Dealer.connect(door, 5) as d:  # NULL on the door
        d.send([b"door"], 5)
        assert d.recv(5) == [b"re:door"]
    # TCP still wants CURVE: libzmq hangs up on a NULL greeting, or its own greeting says CURVE.
    with pytest.raises((ProtocolError, Unavailable), match="CURVE|closed the connection"):
        Dealer.connect(f"tcp://127.0.0.1:{port}", 2)
    client = ctx.socket(zmq.DEALER)  # and a CURVE client still gets in over TCP
    client.curve_serverkey = server_pub
    client.curve_publickey, client.curve_secretkey = zmq.curve_keypair()
    client.connect(f"tcp://127.0.0.1:{port}")
    client.send(b"curve")
    assert client.poll(5000) and client.recv() == b"re:curve"
    client.close(0)
    t.join(5)


def test_no_door_when_the_path_cannot_be_a_unix_socket(ctx: zmq.Context, tmp_path: Path) -> None:
    router = ctx.socket(zmq.ROUTER)
    deep = tmp_path / ("d" * 120)
    assert bind_local_door(router, str(deep), "tcp://127.0.0.1:7700") is None
    assert bind_local_door(router, "", "tcp://127.0.0.1:7700") is None
