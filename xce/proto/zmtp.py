"""A ZMTP 3.0 DEALER over one stream socket, NULL mechanism only (ZeroMQ RFC 23), stdlib only.

The short-lived CLI uses it to reach a controller's ROUTER without loading pyzmq
(xce/cli/quick.py).  It does what a DEALER with one connection does: a greeting,
a READY with ``Socket-Type: DEALER``, then multipart messages both ways.  It does
not reconnect, queue, or speak CURVE/PLAIN: a peer that wants another mechanism
is refused with a clear error, and the caller falls back to pyzmq.

Invariants: the handshake completes before any message is sent, so nothing is
written to a peer that is not a ZMTP ROUTER/DEALER/REP; every read has a
deadline; garbage raises ProtocolError, a silent or vanished peer Unavailable.
"""

from __future__ import annotations

import _socket  # socket.py would add ~7 ms of imports (selectors, enum) to `xce submit`
import time

from xce.core.errors import ProtocolError, Unavailable
from xce.proto.lite import MAX_FRAME

TYPE_CHECKING = False  # typing costs the fast CLI path ~6 ms
if TYPE_CHECKING:
    from typing import Any

MORE, LONG, COMMAND = 0x01, 0x02, 0x04
# libzmq writes 0x01 as the last padding byte (a ZMTP 1.0 length); RFC 23 says it is not significant.
GREETING = (b"\xff" + b"\x00" * 7 + b"\x01\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\x00")
            + b"\x00" + b"\x00" * 31)
PEERS = {b"ROUTER", b"DEALER", b"REP"}  # what RFC 28 lets a DEALER talk to


def frame(payload: bytes, flags: int = 0) -> bytes:
    if len(payload) < 256:
        return bytes((flags, len(payload))) + payload
    return bytes((flags | LONG,)) + len(payload).to_bytes(8, "big") + payload


def command(name: bytes, body: bytes = b"") -> bytes:
    return frame(bytes((len(name),)) + name + body, COMMAND)


def properties(props: dict[bytes, bytes]) -> bytes:
    return b"".join(bytes((len(k),)) + k + len(v).to_bytes(4, "big") + v for k, v in props.items())


def parse_properties(data: bytes) -> dict[bytes, bytes]:
    out, pos = {}, 0
    while pos < len(data):
        n = data[pos]
        name = data[pos + 1:pos + 1 + n]
        pos += 1 + n
        if pos + 4 > len(data):
            raise ProtocolError("ZMTP: truncated READY property")
        size = int.from_bytes(data[pos:pos + 4], "big")
        pos += 4
        if pos + size > len(data):
            raise ProtocolError("ZMTP: truncated READY property value")
        out[bytes(name)] = bytes(data[pos:pos + size])
        pos += size
    return out


READY = command(b"READY", properties({b"Socket-Type": b"DEALER"}))


class Dealer:
    """One connected DEALER; ``connect`` returns it after the peer's READY."""

    def __init__(self, sock: _socket.socket, endpoint: str) -> None:
        self.sock = sock
        self.endpoint = endpoint
        self.peer_type = b""
        # What the peer sent beyond the bytes asked for so far: the greeting, its READY and a
        # reply arrive in one or two reads, not one recv (and one poll) per field.
        self.buf = bytearray()

    @classmethod
    def connect(cls, endpoint: str, timeout: float) -> Dealer:
        deadline = time.monotonic() + timeout
        sock = _open(endpoint, timeout)
        d = cls(sock, endpoint)
        try:
            d._sendall(GREETING + READY, deadline)
            d._handshake(deadline)
        except BaseException:
            d.close()
            raise
        return d

    def _handshake(self, deadline: float) -> None:
        g = self._read(64, deadline, "greeting")
        if g[0] != 0xFF or g[9] != 0x7F:
            raise ProtocolError(f"{self.endpoint} is not a ZeroMQ peer (bad ZMTP signature)")
        if g[10] < 3:
            raise ProtocolError(f"{self.endpoint} speaks ZMTP {g[10]}.x; this client needs 3.x")
        mech = g[12:32].rstrip(b"\x00")
        if mech != b"NULL":
            raise ProtocolError(f"{self.endpoint} wants the {mech.decode('ascii', 'replace')} security "
                                "mechanism; this client speaks only NULL")
        flags, body = self._frame(deadline)
        name, rest = _command(flags, body)
        if name == b"ERROR":
            raise Unavailable(f"{self.endpoint} refused the connection: {_reason(rest)}")
        if name != b"READY":
            raise ProtocolError(f"ZMTP: expected READY from {self.endpoint}, got {name!r}")
        self.peer_type = parse_properties(rest).get(b"Socket-Type", b"")
        if self.peer_type not in PEERS:
            raise ProtocolError(f"ZMTP: a DEALER cannot talk to a {self.peer_type.decode('ascii', 'replace')!r} socket")

    def send(self, frames: list[bytes], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = len(frames) - 1
        self._sendall(b"".join(frame(f, MORE if i < last else 0) for i, f in enumerate(frames)), deadline)

    def recv(self, timeout: float) -> list[bytes]:
        """The next whole message; commands between messages are read and dropped."""
        deadline = time.monotonic() + timeout
        parts: list[bytes] = []
        while True:
            flags, body = self._frame(deadline)
            if flags & COMMAND:
                name, rest = _command(flags, body)
                if name == b"ERROR":
                    raise Unavailable(f"{self.endpoint} closed the session: {_reason(rest)}")
                continue  # PING and anything newer: a one-request client has no use for them
            parts.append(body)
            if not flags & MORE:
                return parts

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Dealer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- bytes with deadlines -------------------------------------------------------------

    def _frame(self, deadline: float) -> tuple[int, bytes]:
        flags = self._read(1, deadline, "frame")[0]
        if flags & ~(MORE | LONG | COMMAND):
            raise ProtocolError(f"ZMTP: bad frame flags 0x{flags:02x} from {self.endpoint}")
        size = int.from_bytes(self._read(8, deadline, "frame"), "big") if flags & LONG else self._read(1, deadline, "frame")[0]
        if size > MAX_FRAME:
            raise ProtocolError(f"ZMTP: a frame of {size} bytes exceeds the {MAX_FRAME}-byte limit")
        return flags, self._read(size, deadline, "frame")

    def _read(self, n: int, deadline: float, what: str) -> bytes:
        buf = self.buf
        while len(buf) < n:
            self._arm(deadline, what)
            try:
                chunk = self.sock.recv(max(65536, n - len(buf)))
            except TimeoutError:
                raise Unavailable(f"{self.endpoint} did not answer in time ({what})") from None
            except ConnectionError:
                chunk = b""
            except OSError as e:
                raise Unavailable(f"{self.endpoint}: {e.strerror or e} ({what})") from None
            if not chunk:
                raise Unavailable(f"{self.endpoint} closed the connection ({what})")
            buf += chunk
        out = bytes(buf[:n])
        del buf[:n]
        return out

    def _sendall(self, data: bytes, deadline: float) -> None:
        self._arm(deadline, "send")
        try:
            self.sock.sendall(data)
        except TimeoutError:
            raise Unavailable(f"{self.endpoint} did not take the request in time") from None
        except ConnectionError:
            raise Unavailable(f"{self.endpoint} closed the connection (send)") from None
        except OSError as e:
            raise Unavailable(f"{self.endpoint}: {e.strerror or e}") from None

    def _arm(self, deadline: float, what: str) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Unavailable(f"{self.endpoint} did not answer in time ({what})")
        self.sock.settimeout(left)


def _open(endpoint: str, timeout: float) -> _socket.socket:
    scheme, _, where = endpoint.partition("://")
    if scheme not in ("ipc", "tcp"):
        raise Unavailable(f"cannot connect to {endpoint}: only ipc:// and tcp:// are spoken here")
    addr: str | tuple[Any, ...] = where
    try:
        if scheme == "ipc":
            family, kind, proto = _socket.AF_UNIX, _socket.SOCK_STREAM, 0
        else:
            host, _, port = where.rpartition(":")
            family, kind, proto, _name, addr = _socket.getaddrinfo(host.strip("[]"), int(port), 0,
                                                                  _socket.SOCK_STREAM)[0]
        s = _socket.socket(family, kind, proto)
    except (OSError, ValueError) as e:
        raise Unavailable(f"cannot connect to {endpoint}: {getattr(e, 'strerror', None) or e}") from None
    try:
        s.settimeout(timeout)
        s.connect(addr)
        if scheme == "tcp":
            s.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
    except OSError as e:
        s.close()
        raise Unavailable(f"cannot connect to {endpoint}: {e.strerror or e}") from None
    return s


def _command(flags: int, body: bytes) -> tuple[bytes, bytes]:
    if not flags & COMMAND:
        raise ProtocolError("ZMTP: expected a command frame during the handshake")
    if not body or body[0] + 1 > len(body):
        raise ProtocolError("ZMTP: malformed command frame")
    return body[1:1 + body[0]], body[1 + body[0]:]


def _reason(body: bytes) -> str:
    return body[1:1 + body[0]].decode("utf-8", "replace") if body else "no reason given"
