"""One request through a controller's local door, stdlib only: the fast paths of the shell commands.

`xce submit` (xce/cli/quick.py) and `bsub`/`sbatch` (xce/compat/fast.py) send their SUBMIT
here without pyzmq or msgspec: xce/proto/lite.py encodes the envelope, xce/proto/zmtp.py
speaks ZMTP over the ``ipc://`` door of xce/site/local.py.  ``ask`` follows one "not
leader" redirect and returns either the answer (OK, or an error other than not_leader) or,
as a string, why the caller's full path must serve instead (nothing was decided then: the
caller retries with the same idempotency key).

Lazy imports: the stdlib-only local door; the codec's error classes load only when an answer is an error.
"""

from __future__ import annotations

import os
import time

SUBMIT, JOBS, OK, ERROR = 10, 11, 1, 2  # xce/proto/opcodes.py; tests/test_lite.py checks them


def ask(home: str, address: str, op: int, body: dict[str, object], token: str,
        timeout: float) -> tuple[int, object] | str:
    """``op`` through the door of ``address``, then of the leader it names."""
    from xce.core.errors import XceError
    from xce.site.local import door_path

    deadline = time.monotonic() + timeout
    for _ in range(2):
        try:
            rop, rbody = exchange(f"ipc://{door_path(home, address)}", op, body, token, deadline)
        except XceError as e:
            return f"door: {e.message}"
        except ValueError as e:  # text that is not UTF-8 (a surrogate-escaped environment): not sent
            return f"cannot encode the request: {e}"
        if rop == OK:
            return rop, rbody
        if rop != ERROR or not isinstance(rbody, dict) or not isinstance(rbody.get("code"), str) \
                or not isinstance(rbody.get("message"), str):
            return f"a reply of opcode {rop} that is not an ErrorReply"
        if rbody["code"] != "not_leader":
            return rop, rbody
        leader = rbody.get("leader")
        if not isinstance(leader, str) or leader == address:
            return "not leader, and no other leader named"
        address = leader
    return "redirected twice"


def exchange(endpoint: str, op: int, body: dict[str, object], token: str, deadline: float) -> tuple[int, object]:
    """One request over a fresh DEALER: the reply's opcode and body (XceError if none came)."""
    from xce.core.errors import ProtocolError
    from xce.proto import lite
    from xce.proto.zmtp import Dealer

    def left() -> float:
        return max(0.001, deadline - time.monotonic())

    rid = int.from_bytes(os.urandom(4), "big") >> 2
    request = lite.encode(op, rid, body, token)
    with Dealer.connect(endpoint, left()) as dealer:
        dealer.send([request], left())
        while True:
            frames = dealer.recv(left())
            if len(frames) != 1:
                raise ProtocolError(f"a reply of {len(frames)} frames")
            rop, got, rbody, _term = lite.decode(frames[0])
            if got == rid or (rop == ERROR and got == 0):  # rid 0: the envelope itself was refused
                return rop, rbody
