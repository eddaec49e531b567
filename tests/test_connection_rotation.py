"""The client's connection among several controllers: a controller that knows no leader is
left for the next one, not asked again until the deadline.  Stand-in controllers here are
bare ROUTER sockets that answer with fixed error replies: this tests the connection's
choice of endpoint alone (the real election is tests/test_e2e_ha.py's)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import zmq

from xce.core.errors import NotFound, NotLeader, XceError
from xce.proto.codec import decode_envelope, error_reply
from xce.proto.schema import JobsRequest, Op
from xce.transport.connection import Connection


@contextmanager
def stand_in(answer: XceError | Callable[[int], bytes]) -> Iterator[tuple[str, list[int]]]:
    """A ROUTER on a free port that answers every request with ``answer`` (an error, or the
    reply a function makes of the request's id); yields its endpoint and the ids it got."""
    reply = answer if callable(answer) and not isinstance(answer, XceError) else \
        (lambda rid: error_reply(rid, answer))  # type: ignore[arg-type]
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    asked: list[int] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            if sock.poll(50):
                peer, data = sock.recv_multipart()
                env = decode_envelope(data)
                asked.append(env.rid)
                sock.send_multipart([peer, reply(env.rid)])

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield f"tcp://127.0.0.1:{port}", asked
    finally:
        stop.set()
        t.join(5)
        sock.close(0)
        ctx.term()


def test_a_controller_without_a_leader_is_left_for_the_next() -> None:
    # Fails on the old connection: it asked the leaderless one again until the deadline and
    # raised its NotLeader, never trying the controller that could answer.
    with stand_in(NotLeader(None)) as (lost, lost_asked), stand_in(NotFound("no such job: 7")) as (other, other_asked):
        conn = Connection([lost, other], token="", timeout=5)
        try:
            with pytest.raises(NotFound, match="no such job: 7"):
                conn.request(Op.JOBS, JobsRequest(ids=[7]))
        finally:
            conn.close()
        assert len(lost_asked) == 1 and len(other_asked) == 1


def test_every_controller_without_a_leader_gives_not_leader_at_the_deadline() -> None:
    with stand_in(NotLeader(None)) as (a, a_asked), stand_in(NotLeader(None)) as (b, b_asked):
        conn = Connection([a, b], token="", timeout=1.5)
        try:
            with pytest.raises(NotLeader, match="no leader yet"):
                conn.request(Op.JOBS, JobsRequest(ids=[7]))
        finally:
            conn.close()
        assert a_asked and b_asked  # both were asked, in turn, with a backoff between rounds


def test_a_reply_larger_than_a_request_may_be_is_read() -> None:
    """A snapshot of a big cluster (100,000 jobs: ~68 MB) is over the 64 MiB a peer may send;
    the client reading its controller's reply takes it.  Fails on the old connection, which
    applied the peers' limit to replies: the scheduler could never follow such a cluster."""
    from xce.core import limits
    from xce.proto.codec import encode

    def huge(rid: int) -> bytes:
        return encode(Op.ERROR, rid, {"code": "not_found", "message": "x" * (limits.MAX_FRAME + 1)})

    with stand_in(huge) as (endpoint, _):
        conn = Connection([endpoint], token="", timeout=20)
        try:
            with pytest.raises(NotFound) as got:
                conn.request(Op.JOBS, JobsRequest(ids=[7]))
            assert len(str(got.value)) > limits.MAX_FRAME
        finally:
            conn.close()
