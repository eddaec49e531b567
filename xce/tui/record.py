"""Recordings (``.xcerec``): every message the console received, with receive times.

File layout: the magic line ``XCEREC1\\n``, then frames of a 4-byte big-endian
length and a MessagePack ``Record`` ``[t, kind, body, term]``.  Kinds:

    hello     Hello: cluster name, heartbeat interval, where it was recorded
    snapshot  a Snapshot body as the controller sent it
    event     an Event body as published on the stream
    link      Link: the receiver's view of the controller (live / unreachable)

Bodies are kept as encoded MessagePack so a replay decodes them exactly as the
live receiver did.  The writer flushes on snapshots and at most every second.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import msgspec

MAGIC = b"XCEREC1\n"
_len = struct.Struct(">I")
_enc = msgspec.msgpack.Encoder()


class Record(msgspec.Struct, array_like=True):
    t: float
    kind: str
    body: msgspec.Raw
    term: int = 0


class Hello(msgspec.Struct, kw_only=True):
    cluster: str = ""
    heartbeat: float = 1.0
    source: str = ""


class Link(msgspec.Struct, kw_only=True):
    state: str
    problem: str = ""


_rec_dec = msgspec.msgpack.Decoder(Record)


class Recorder:
    def __init__(self, path: str | Path) -> None:
        self.f: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed by close()
        self.f.write(MAGIC)
        self.last_flush = 0.0
        self.count = 0

    def write(self, t: float, kind: str, body: bytes | msgspec.Struct, term: int = 0) -> None:
        raw = body if isinstance(body, bytes) else _enc.encode(body)
        data = _enc.encode(Record(t, kind, msgspec.Raw(raw), term))
        self.f.write(_len.pack(len(data)))
        self.f.write(data)
        self.count += 1
        if kind != "event" or t - self.last_flush >= 1.0:
            self.f.flush()
            self.last_flush = t

    def close(self) -> None:
        if not self.f.closed:
            self.f.close()


def read(path: str | Path) -> list[Record]:
    return list(iter_records(Path(path).read_bytes()))


def iter_records(data: bytes) -> Iterator[Record]:
    if not data.startswith(MAGIC):
        raise ValueError("not an xce-top recording (bad magic)")
    pos = len(MAGIC)
    while pos + 4 <= len(data):
        (n,) = _len.unpack_from(data, pos)
        pos += 4
        if pos + n > len(data):
            break  # a recording cut short by a crash: keep what is whole
        yield _rec_dec.decode(data[pos:pos + n])
        pos += n
