"""Every client write carries an idempotency key, built by one builder per operation
(issue 12 item 3, issue 13 item 4): the builders require it, the wire refuses a write
without one, and no other module constructs a write request."""

from __future__ import annotations

import ast
from pathlib import Path

import msgspec
import pytest
from builders import spec

from xce.core.errors import InvalidRequest, ProtocolError
from xce.proto import codec, writes
from xce.proto import schema as S
from xce.proto.opcodes import Op

ROOT = Path(__file__).resolve().parent.parent
WRITES = {"SubmitRequest": Op.SUBMIT, "KillRequest": Op.KILL, "ModifyRequest": Op.MODIFY,
          "HostAdminRequest": Op.HOST_ADMIN, "ControlRequest": Op.STOP, "SwitchRequest": Op.SWITCH,
          "MoveRequest": Op.MOVE, "ModifySpecRequest": Op.MODIFY_SPEC}
BUILT = [writes.submit([spec()], key="k"), writes.kill([1], key="k"), writes.modify(1, None, key="k"),
         writes.host_admin(["n1"], "close", key="k"), writes.control([1], key="k"),
         writes.switch([1], "q", key="k"), writes.move(1, "top", key="k"),
         writes.modify_spec(1, key="k", slots=2)]


def test_every_write_request_is_a_keyed_write_and_has_a_builder() -> None:
    writes_on_the_wire = {t.__name__ for op, t in S.REQUESTS.items() if issubclass(t, S.Write)}
    assert writes_on_the_wire == set(WRITES)
    assert {type(b).__name__ for b in BUILT} == set(WRITES)


@pytest.mark.parametrize("build,args", [
    (writes.submit, ([spec()],)), (writes.kill, ([1],)), (writes.modify, (1, None)),
    (writes.host_admin, (["n1"], "open")), (writes.control, ([1],)), (writes.switch, ([1], "q")),
    (writes.move, (1, "top"))], ids=lambda x: getattr(x, "__name__", ""))
def test_the_builders_require_a_key(build, args) -> None:
    with pytest.raises(TypeError, match="key"):
        build(*args)
    for bad in ("", "x" * 129):
        with pytest.raises(InvalidRequest, match="idempotency key"):
            build(*args, key=bad)
    assert build(*args, key="k" * 128).key == "k" * 128
    for name in S.Write.__struct_fields__:  # and the Struct itself has no default for it
        with pytest.raises(TypeError):
            type(build(*args, key="k"))(**{k: v for k, v in msgspec.structs.asdict(build(*args, key="k")).items()
                                             if k != name})


@pytest.mark.parametrize("body", BUILT, ids=lambda b: type(b).__name__)
def test_the_wire_refuses_a_write_without_a_key(body) -> None:
    op = WRITES[type(body).__name__]
    fields = {k: v for k, v in msgspec.structs.asdict(body).items() if v is not msgspec.UNSET}  # absent on the wire
    for without in ({k: v for k, v in fields.items() if k != "key"}, {**fields, "key": ""}):
        raw = msgspec.msgpack.encode([1, int(op), 3, msgspec.Raw(msgspec.msgpack.encode(without))])
        with pytest.raises(ProtocolError, match=f"bad {op.name} body: .*key"):
            codec.decode_request(codec.decode_envelope(raw))
    assert codec.decode_request(codec.decode_envelope(codec.encode(op, 3, body))) == (op, body)


def test_no_module_but_the_builders_constructs_a_write_request() -> None:
    found = []
    for path in (ROOT / "xce").rglob("*.py"):
        if path == ROOT / "xce" / "proto" / "writes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
                if name in WRITES:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    assert found == []


def test_the_fast_path_sends_the_builders_bytes() -> None:
    from test_lite import as_dict

    from xce.cli import quick
    from xce.proto import lite

    s = spec(env={"A": "1"})
    full = codec.encode(Op.SUBMIT, 9, writes.submit([s], key="abc"), token="t")
    assert lite.encode(quick.SUBMIT, 9, quick.submit_body(quick.wire_spec(as_dict(s)), "abc"), "t") == full
