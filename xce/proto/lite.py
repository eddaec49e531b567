"""A stdlib-only speaker of XCE's wire: MessagePack and a ZMTP 3.0 DEALER (NULL mechanism).

`xce submit` must start and finish in well under 100 ms; pyzmq and msgspec cost
~90 ms of imports on their own.  This module lets a short-lived client talk to
a controller's ROUTER with nothing but ``socket`` (and ``struct`` for a float).  It owns no
schema: callers build bodies as plain dicts whose keys follow the msgspec
Struct's field order, so the bytes equal what xce/proto/codec.py writes
(tests/test_lite.py checks that against msgspec for every supported type).

Invariants: every read has a deadline (a silent or half-open peer raises
``Unavailable``, never hangs); anything that is not ZMTP or MessagePack raises
``ProtocolError`` naming what was wrong.  Long-lived daemons keep using pyzmq.
"""

from __future__ import annotations

from xce.core.errors import ProtocolError

PROTOCOL_VERSION = 1   # xce/proto/schema.py PROTOCOL_VERSION; test_lite checks they agree
MAX_FRAME = 64 * 2**20  # xce/proto/codec.py MAX_FRAME: the controller refuses more anyway
MAX_DEPTH = 64          # a reply nested deeper than this is garbage, not a recursion bomb

TYPE_CHECKING = False  # typing costs the fast CLI path ~6 ms
if TYPE_CHECKING:
    from typing import Any

# ---- MessagePack ---------------------------------------------------------------------------

def _double() -> Any:
    """struct's ``>d`` (its C module costs the commands ~0.2 ms to load): only floats need it."""
    import struct  # lazy: a submission and its reply are ints and text

    return struct.Struct(">d")


def _head(n: int, fix: int, fixmax: int, c8: int | None, c16: int, c32: int) -> bytes:
    if n < fixmax:
        return bytes((fix | n,))
    if c8 is not None and n < 0x100:
        return bytes((c8, n))
    if n < 0x10000:
        return bytes((c16,)) + n.to_bytes(2, "big")
    return bytes((c32,)) + n.to_bytes(4, "big")


class Wide(dict):  # type: ignore[type-arg]
    """A map written with a 16-bit count whatever its size, as msgspec writes a Struct with
    ``omit_defaults`` (it reserves the count before it knows how many fields it writes)."""


def packb(obj: Any) -> bytes:
    """MessagePack in msgspec's choices: smallest int and length forms, float64, str not bin."""
    out: list[bytes] = []
    _pack(obj, out)
    return b"".join(out)


def _pack(o: Any, out: list[bytes]) -> None:  # noqa: C901 - one branch per MessagePack type
    if o is None:
        out.append(b"\xc0")
    elif o is True:
        out.append(b"\xc3")
    elif o is False:
        out.append(b"\xc2")
    elif isinstance(o, int):
        out.append(_pack_int(o))
    elif isinstance(o, float):
        out.append(b"\xcb" + _double().pack(o))
    elif isinstance(o, str):
        data = o.encode()
        out.append(_head(len(data), 0xA0, 32, 0xD9, 0xDA, 0xDB) + data)
    elif isinstance(o, (bytes, bytearray, memoryview)):
        data = bytes(o)
        out.append(_head(len(data), 0, 0, 0xC4, 0xC5, 0xC6) + data)
    elif isinstance(o, (list, tuple)):
        out.append(_head(len(o), 0x90, 16, None, 0xDC, 0xDD))
        for x in o:
            _pack(x, out)
    elif isinstance(o, dict):
        out.append(b"\xde" + len(o).to_bytes(2, "big") if type(o) is Wide else _head(len(o), 0x80, 16, None, 0xDE, 0xDF))
        for k, v in o.items():
            _pack(k, out)
            _pack(v, out)
    else:
        raise TypeError(f"cannot encode {type(o).__name__} as MessagePack")


def _pack_int(n: int) -> bytes:
    if 0 <= n < 0x80:
        return bytes((n,))
    if n >= 0:
        for code, size in ((0xCC, 1), (0xCD, 2), (0xCE, 4), (0xCF, 8)):
            if n < 1 << 8 * size:
                return bytes((code,)) + n.to_bytes(size, "big")
    elif n >= -32:
        return bytes((n & 0xFF,))
    else:
        for code, size in ((0xD0, 1), (0xD1, 2), (0xD2, 4), (0xD3, 8)):
            if n >= -(1 << 8 * size - 1):
                return bytes((code,)) + n.to_bytes(size, "big", signed=True)
    raise OverflowError(f"integer {n} does not fit in 64 bits")


# Fixed-size codes: (bytes, signed) of an int, or the bytes of a float.  Length-prefixed codes:
# (kind, bytes of the length).
_CONSTANTS = {0xC0: None, 0xC2: False, 0xC3: True}
_INTS = {0xCC: (1, False), 0xCD: (2, False), 0xCE: (4, False), 0xCF: (8, False),
         0xD0: (1, True), 0xD1: (2, True), 0xD2: (4, True), 0xD3: (8, True)}
_FLOATS = {0xCA: (4, ">f"), 0xCB: (8, ">d")}
_SIZED = {0xD9: ("str", 1), 0xDA: ("str", 2), 0xDB: ("str", 4), 0xC4: ("bin", 1), 0xC5: ("bin", 2),
          0xC6: ("bin", 4), 0xDC: ("array", 2), 0xDD: ("array", 4), 0xDE: ("map", 2), 0xDF: ("map", 4)}


def unpackb(data: bytes) -> Any:
    """Decode one MessagePack object that fills ``data``; ProtocolError on anything else."""
    obj, end = _Reader(data).read(0, 0)
    if end != len(data):
        raise ProtocolError(f"malformed MessagePack: {len(data) - end} trailing bytes")
    return obj


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)

    def take(self, pos: int, n: int) -> tuple[memoryview, int]:
        if pos + n > len(self.data):
            raise ProtocolError("malformed MessagePack: input ends early")
        return self.data[pos:pos + n], pos + n

    def read(self, pos: int, depth: int) -> tuple[Any, int]:
        if depth > MAX_DEPTH:
            raise ProtocolError("malformed MessagePack: nested too deeply")
        raw, pos = self.take(pos, 1)
        c = raw[0]
        if c < 0x80:
            return c, pos
        if c >= 0xE0:
            return c - 0x100, pos
        if 0xA0 <= c <= 0xBF:
            return self.seq("str", c & 0x1F, pos, depth)
        if 0x90 <= c <= 0x9F:
            return self.seq("array", c & 0x0F, pos, depth)
        if 0x80 <= c <= 0x8F:
            return self.seq("map", c & 0x0F, pos, depth)
        if c in _CONSTANTS:
            return _CONSTANTS[c], pos
        if c in _INTS:
            size, signed = _INTS[c]
            raw, pos = self.take(pos, size)
            return int.from_bytes(raw, "big", signed=signed), pos
        if c in _FLOATS:
            size, fmt = _FLOATS[c]
            raw, pos = self.take(pos, size)
            import struct  # lazy: see _double

            return struct.unpack(fmt, raw)[0], pos
        if c in _SIZED:
            kind, size = _SIZED[c]
            raw, pos = self.take(pos, size)
            return self.seq(kind, int.from_bytes(raw, "big"), pos, depth)
        raise ProtocolError(f"malformed MessagePack: unsupported type code 0x{c:02x}")

    def seq(self, kind: str, n: int, pos: int, depth: int) -> tuple[Any, int]:
        if kind in ("str", "bin"):
            raw, pos = self.take(pos, n)
            if kind == "bin":
                return bytes(raw), pos
            try:
                return str(raw, "utf-8"), pos
            except UnicodeDecodeError:
                raise ProtocolError("malformed MessagePack: invalid UTF-8 in a str") from None
        if n > len(self.data) - pos:  # each element takes at least a byte: refuse before allocating
            raise ProtocolError("malformed MessagePack: input ends early")
        if kind == "array":
            return self.array(n, pos, depth)
        out: dict[Any, Any] = {}
        for _ in range(n):
            k, pos = self.read(pos, depth + 1)
            v, pos = self.read(pos, depth + 1)
            try:
                out[k] = v
            except TypeError:
                raise ProtocolError(f"malformed MessagePack: a map key of type {type(k).__name__}") from None
        return out, pos


    def array(self, n: int, pos: int, depth: int) -> tuple[list[Any], int]:
        """``n`` elements from ``pos``.  Small ints, short strings, nil, 16- and 32-bit ints,
        doubles and empty arrays are read here, not through ``read``: a JOBS reply of 10,000
        rows (bjobs, squeue) is mostly those, and the call per element was half its decoding."""
        data, end, items = self.data, len(self.data), []
        append = items.append
        double = None
        for _ in range(n):
            c = data[pos] if pos < end else -1
            if 0 <= c < 0x80:
                append(c)
                pos += 1
            elif 0xA0 <= c <= 0xBF and pos + 1 + (c & 0x1F) <= end:
                try:
                    append(str(data[pos + 1:pos + 1 + (c & 0x1F)], "utf-8"))
                except UnicodeDecodeError:
                    raise ProtocolError("malformed MessagePack: invalid UTF-8 in a str") from None
                pos += 1 + (c & 0x1F)
            elif c == 0xC0:
                append(None)
                pos += 1
            elif c == 0xCD and pos + 3 <= end:
                append(data[pos + 1] << 8 | data[pos + 2])
                pos += 3
            elif c == 0xCE and pos + 5 <= end:  # a job id past 65,535
                append(int.from_bytes(data[pos + 1:pos + 5], "big"))
                pos += 5
            elif c == 0xCB and pos + 9 <= end:  # a time
                double = double or _double().unpack_from
                append(double(data, pos + 1)[0])
                pos += 9
            elif c == 0x90:  # a job's hosts before it is placed
                append([])
                pos += 1
            else:
                x, pos = self.read(pos, depth + 1)
                append(x)
        return items, pos


# ---- the envelope ------------------------------------------------------------------------------

def encode(op: int, rid: int, body: dict[str, Any], token: str = "", term: int = 0) -> bytes:
    """The same bytes as codec.encode for a body given as a dict in its Struct's field order."""
    return packb([PROTOCOL_VERSION, op, rid, body, token, term])


def decode(data: bytes) -> tuple[int, int, Any, int]:
    """``(op, rid, body, term)`` of an envelope, checked as codec.decode_envelope checks it."""
    env = unpackb(data)
    if not isinstance(env, list) or len(env) < 4:
        raise ProtocolError("malformed envelope: expected an array of at least 4 elements")
    v, op, rid, body = env[:4]
    term = env[5] if len(env) > 5 else 0
    if not all(type(x) is int for x in (v, op, rid, term)):
        raise ProtocolError("malformed envelope: v, op, rid and term must be integers")
    if v != PROTOCOL_VERSION:
        raise ProtocolError(f"unsupported protocol version {v} (this peer speaks {PROTOCOL_VERSION})")
    return op, rid, body, term
