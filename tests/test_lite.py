"""xce/proto/lite.py against msgspec: the same bytes out, the same values back, garbage refused."""

from __future__ import annotations

import math

import msgspec
import pytest
from builders import spec
from hypothesis import given, settings
from hypothesis import strategies as st

from xce.cli import quick
from xce.compat import fast
from xce.core.errors import ProtocolError
from xce.core.model import JobSpec
from xce.proto import codec, lite
from xce.proto.opcodes import Op
from xce.proto.schema import PROTOCOL_VERSION, JobsRequest, SubmitRequest
from xce.security import auth
from xce.site import local
from xce.transport import door

enc, dec = msgspec.msgpack.encode, msgspec.msgpack.decode

ints = st.integers(min_value=-(2**63), max_value=2**64 - 1)
floats = st.floats(allow_nan=False)
scalars = st.none() | st.booleans() | ints | floats | st.text() | st.binary()
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5)
                      | st.dictionaries(st.text() | ints, inner, max_size=5), max_leaves=30)


@settings(max_examples=400)
@given(values)
def test_lite_writes_the_bytes_msgspec_writes(x: object) -> None:
    assert lite.packb(x) == enc(x)


@settings(max_examples=400)
@given(values)
def test_each_reads_what_the_other_wrote(x: object) -> None:
    assert dec(lite.packb(x)) == x
    assert lite.unpackb(enc(x)) == x


@pytest.mark.parametrize("n", [0, 15, 16, 31, 32, 255, 256, 65535, 65536])  # fix / 8 / 16 / 32-bit forms
def test_size_boundaries_of_str_bin_array_map(n: int) -> None:
    for x in ("a" * n, b"b" * n, [0] * n, {i: None for i in range(n)}):
        assert lite.packb(x) == enc(x)
        assert lite.unpackb(enc(x)) == x


def test_int_boundaries_and_floats() -> None:
    for n in (0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 1, -1, -32, -33, -128,
              -129, -32768, -32769, -(2**31), -(2**31) - 1, -(2**63)):
        assert lite.packb(n) == enc(n) and lite.unpackb(enc(n)) == n
    for f in (0.0, -0.0, 1.5, math.inf, -math.inf):
        assert lite.packb(f) == enc(f)
    assert math.isnan(lite.unpackb(enc(math.nan)))
    assert lite.unpackb(b"\xca\x3f\xc0\x00\x00") == 1.5  # float32, which msgspec never writes
    with pytest.raises(OverflowError):
        lite.packb(2**64)


@settings(max_examples=500)
@given(st.binary(max_size=64))
def test_any_bytes_decode_or_raise_protocol_error(data: bytes) -> None:
    try:
        lite.unpackb(data)
    except ProtocolError:
        pass


@pytest.mark.parametrize("data, why", [
    (b"\xc1", "unsupported type code 0xc1"),
    (b"\xd4\x01\x02", "unsupported type code 0xd4"),   # ext: not part of XCE's wire
    (b"\xa3ab", "input ends early"),
    (b"\xdd\xff\xff\xff\xff", "input ends early"),     # a 4-billion-element array in 5 bytes
    (b"\xa1\xff", "invalid UTF-8"),
    (b"\x81\x90\x01", "map key of type list"),
    (b"\x91" * 100 + b"\xc0", "nested too deeply"),
    (b"\x01\x02", "1 trailing bytes"),
])
def test_garbage_is_refused_with_its_reason(data: bytes, why: str) -> None:
    with pytest.raises(ProtocolError, match=why):
        lite.unpackb(data)


# ---- the envelope and the submit body --------------------------------------------------------

def as_dict(s: JobSpec) -> dict[str, object]:
    return {f: getattr(s, f) for f in s.__struct_fields__}


job_specs = st.builds(
    lambda cmd, name, slots, resreq, limit, env, out, rerun: spec(
        command=cmd, name=name, slots=slots, resreq=resreq, mem_limit=limit, env=env, stdout=out,
        rerunnable=rerun),
    st.lists(st.text(), min_size=1, max_size=4), st.text(max_size=40), st.integers(-5, 2**40),
    st.text(max_size=80), st.none() | st.integers(1, 2**50), st.dictionaries(st.text(), st.text(), max_size=8),
    st.none() | st.text(max_size=20), st.none() | st.booleans())


@settings(max_examples=200)
@given(job_specs, st.text(min_size=1, max_size=30), ints, st.text(max_size=300))
def test_submit_envelope_is_byte_identical_to_codec(s: JobSpec, key: str, rid: int, token: str) -> None:
    full = codec.encode(Op.SUBMIT, rid, SubmitRequest(jobs=[s], key=key), token=token)
    mine = lite.encode(quick.SUBMIT, rid, quick.submit_body(quick.wire_spec(as_dict(s)), key), token)
    assert mine == full
    op, got_rid, body, term = lite.decode(full)
    assert (op, got_rid, term) == (Op.SUBMIT, rid, 0) and body["key"] == key


def test_the_fast_path_mirrors_the_schema() -> None:
    """Field order and defaults in quick.py are msgspec's; constants agree with their sources."""
    assert list(quick.SPEC_DEFAULTS) == list(JobSpec.__struct_fields__)
    assert SubmitRequest.__struct_fields__ == ("jobs", "dry_run", "key")
    for f in msgspec.structs.fields(JobSpec)[1:]:
        default = f.default_factory() if f.default is msgspec.NODEFAULT else f.default
        assert default == quick.SPEC_DEFAULTS[f.name], f.name
    assert (quick.SUBMIT, quick.OK, quick.ERROR) == (Op.SUBMIT, Op.OK, Op.ERROR)
    assert (door.SUBMIT, door.JOBS, door.OK, door.ERROR) == (Op.SUBMIT, Op.JOBS, Op.OK, Op.ERROR)


def test_the_read_door_sends_a_jobs_request_the_controller_decodes() -> None:
    body = fast.jobs_body([4], "alice", True, ["id", "state"])
    names = list(JobsRequest.__struct_fields__)
    assert sorted(body, key=names.index) == list(body)  # the Struct's order, as msgspec writes it
    op, got = codec.decode_request(codec.decode_envelope(lite.encode(Op.JOBS, 7, body, "t")))
    assert op == Op.JOBS and got == JobsRequest(ids=[4], user="alice", all=True, fields=["id", "state"])
    assert lite.PROTOCOL_VERSION == PROTOCOL_VERSION and lite.MAX_FRAME == codec.MAX_FRAME
    assert (local.AUTH_DIR, local.KEYS_FILE, local.ADMIN_TOKEN, local.LOGIN_TOKEN) == \
        (auth.AUTH_DIR, auth.KEYS_FILE, auth.ADMIN_TOKEN, auth.LOGIN_TOKEN)


def test_replies_decode_like_codec() -> None:
    ok = codec.encode(Op.OK, 9, msgspec.structs.replace(codec.error_body(ProtocolError("x")), code="c"), term=4)
    assert lite.decode(ok) == (Op.OK, 9, {"code": "c", "message": "x", "leader": None, "permission": None,
                                          "text": "", "pos": None}, 4)
    assert lite.decode(b"\x94\x01\x01\x05\x80") == (Op.OK, 5, {}, 0)  # token and term may be left out
    with pytest.raises(ProtocolError, match="unsupported protocol version 2"):
        lite.decode(enc([2, 1, 1, {}]))
    with pytest.raises(ProtocolError, match="malformed envelope"):
        lite.decode(enc([1, 1]))
    with pytest.raises(ProtocolError, match="must be integers"):
        lite.decode(enc([1, "1", 1, {}]))


def test_arrays_read_inline_decode_as_msgspec_and_refuse_every_truncation() -> None:
    """lite reads an array's common elements inline (32-bit ids, times, empty host lists of a
    10,000-row JOBS reply): the same values as msgspec, and a cut anywhere is refused."""
    import random

    rng = random.Random(15)
    values = [0, 127, 128, 65535, 65536, 2**32 - 1, 2**32, -1, -33, 1.5, float(2**60), None, True, False, "",
              "x" * 31, "y" * 40, [], [1, []], {}, {"a": 1.25}, b"b"]
    for _ in range(2000):
        obj = [rng.choice(values) for _ in range(rng.randrange(12))]
        data = msgspec.msgpack.encode(obj)
        assert lite.unpackb(data) == msgspec.msgpack.decode(data), obj
        for cut in range(len(data)):
            with pytest.raises(ProtocolError):
                lite.unpackb(data[:cut])
