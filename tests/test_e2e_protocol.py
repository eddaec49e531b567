"""Bad input on the wire: every daemon answers with an error naming the problem and keeps serving."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
import zmq
from conftest import local_cluster, wait_for

from xce.proto import schema as S
from xce.proto.codec import decode_envelope, encode
from xce.proto.opcodes import Op
from xce.security.curve import client_keys
from xce.transport.sockets import use_curve

pk = msgspec.msgpack.encode


def frame(v: int, op: int, rid: int, body: object = None, raw: bytes | None = None) -> bytes:
    """An envelope as a foreign client would build it: the body nested inline."""
    inner = msgspec.Raw(raw if raw is not None else pk(body if body is not None else {}))
    return pk([v, op, rid, inner, "", 0])


def ask(sock: zmq.Socket, payload: bytes | list[bytes], timeout_ms: int = 5000) -> S.Envelope:
    if isinstance(payload, list):
        sock.send_multipart(payload)
    else:
        sock.send(payload)
    assert sock.poll(timeout_ms), "no reply"
    return decode_envelope(sock.recv())


def error_of(env: S.Envelope) -> S.ErrorReply:
    assert env.op == Op.ERROR, env
    return msgspec.msgpack.decode(env.body, type=S.ErrorReply)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with local_cluster(tmp_path_factory.mktemp("proto"), "--hosts", "1", "--slots-per-host", "1",
                       "--mem-per-host", "1G", "--heartbeat", "0.5") as c:
        yield c


def stranger(cluster) -> zmq.Socket:
    """A foreign client: a plain DEALER with a throw-away CURVE key (as every client has)."""
    s = zmq.Context.instance().socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    use_curve(s, client_keys(cluster.client.cfg))
    s.connect(cluster.client.cfg.controller.address)
    return s


@pytest.fixture
def sock(cluster):
    s = stranger(cluster)
    yield s
    s.close(0)


CASES = [
    (b"\xc1garbage", "malformed envelope"),
    (frame(99, Op.PING, 1), "unsupported protocol version 99"),
    (frame(1, 777, 1), "unknown opcode 777"),
    (frame(1, Op.PLACE + 1, 1), "unknown opcode 31"),
    (frame(1, Op.SUBMIT, 1, {"jobs": [{"command": ["true"], "slots": "two"}]}), "slots"),
    (frame(1, Op.SUBMIT, 1, {"jobs": "nope"}), "Expected `array`"),
    (pk([1, Op.KILL, 1, b"\x01\x02", "", 0]), "bad KILL body: Expected `object`, got `bytes`"),
    (frame(1, Op.HEARTBEAT, 1, {"host": "x" * (5 * 2**20)}), "exceeds the 4194304-byte limit"),
    (pk("just a string"), "malformed envelope"),
    (frame(1, Op.HEARTBEAT, 1, {"host": "h", "time": 1.0, "os_available": 1,
                                "usage": [[1, 2], [1], [5, 5], [5, 5], [0.0, 0.0]]}), "usage columns differ in length"),
]


@pytest.mark.parametrize("payload,needle", CASES, ids=[c[1][:30] for c in CASES])
def test_controller_answers_bad_input_with_named_error(sock: zmq.Socket, payload: bytes, needle: str) -> None:
    err = error_of(ask(sock, payload))
    assert needle in err.message
    assert ask(sock, encode(Op.PING, 7, S.Empty())).op == Op.OK  # still serving


def test_controller_rejects_extra_frames_and_survives_oversized_frame(cluster, sock: zmq.Socket) -> None:
    err = error_of(ask(sock, [b"a", b"b"]))
    assert "expected one message frame" in err.message
    big = stranger(cluster)
    big.send(b"\x00" * (65 * 2**20))  # above ZMQ_MAXMSGSIZE: the peer is dropped, nothing else
    big.close(0)
    assert ask(sock, encode(Op.PING, 8, S.Empty())).op == Op.OK
    assert cluster.client.hosts()[0].state == "ok"


def test_worker_answers_bad_orders_and_keeps_serving(tmp_path: Path) -> None:
    """A worker against a fake controller we control: garbage and mistyped orders get error replies."""
    ctx = zmq.Context.instance()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    cfg = tmp_path / "w.toml"
    cfg.write_text(f'[controller]\naddress = "tcp://127.0.0.1:{port}"\n[worker]\nheartbeat = 0.2\n')
    proc = subprocess.Popen([sys.executable, "-m", "xce.daemons.worker", "--config", str(cfg),
                             "--state-dir", str(tmp_path), "--name", "fake1", "--slots", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert router.poll(15000)
        ident, data = router.recv_multipart()
        env = decode_envelope(data)
        assert env.op == Op.REGISTER

        def order(payload: bytes) -> S.ErrorReply:
            router.send_multipart([ident, payload])
            deadline_polls = 50
            while deadline_polls:
                assert router.poll(5000)
                _, d = router.recv_multipart()
                e = decode_envelope(d)
                if e.op == Op.ERROR:
                    return msgspec.msgpack.decode(e.body, type=S.ErrorReply)
                deadline_polls -= 1  # heartbeats / re-registrations in between
            raise AssertionError("no error reply")

        assert "malformed envelope" in order(b"\xc1").message
        assert "unsupported protocol version" in order(frame(5, Op.RUN_JOB, 3)).message
        bad_run = frame(1, Op.RUN_JOB, 4, {"job_id": "x"})
        assert "job_id" in order(bad_run).message
        assert "not served by a worker" in order(encode(Op.SUBMIT, 5, S.SubmitRequest(jobs=[], key="k"))).message
        # Orders from an older term than one already seen are refused.
        router.send_multipart([ident, encode(Op.KILL_JOB, 6, S.KillJob(job_id=1, attempt=1, reason="x"), term=9)])
        assert "deposed leader" in order(encode(Op.KILL_JOB, 7, S.KillJob(job_id=1, attempt=1, reason="x"),
                                                term=3)).message
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(10)
        router.close(0)


def test_daemon_tier_refuses_workers_without_an_allowed_key_or_a_daemon_token(cluster, sock: zmq.Socket) -> None:
    from xce.security.auth import TokenService, ensure_daemon_token, ensure_keyring
    from xce.security.policy import Principal

    reg = S.RegisterRequest(host="intruder", slots=1, ncpus=1, mem_total=2**30, os_available=2**30,
                            version="x")
    # A throw-away CURVE key is no daemon, even with the daemon token in hand.
    daemon = ensure_daemon_token(cluster.state_dir)
    for rid, token in enumerate(["", daemon], 1):
        err = error_of(ask(sock, encode(Op.REGISTER, rid, reg, token=token)))
        assert err.code == "unauthenticated" and "not in the allow-list" in err.message
    place = S.PlaceRequest(placements=[])
    assert "not in the allow-list" in error_of(ask(sock, encode(Op.PLACE, 3, place, token=daemon))).message
    # Clients prove who they are with their token.
    assert "needs a token" in error_of(ask(sock, encode(Op.JOBS, 4, S.JobsRequest()))).message
    forged = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4Y2UtZGFlbW9uIn0.c2lnbmF0dXJl"
    assert error_of(ask(sock, encode(Op.JOBS, 5, S.JobsRequest(), token=forged))).code == "unauthenticated"
    viewer = TokenService(ensure_keyring(cluster.state_dir)).issue(Principal("eve", ("viewer",)))
    err = error_of(ask(sock, encode(Op.SUBMIT, 6, S.SubmitRequest(jobs=[S.JobSpec(command=["true"])], key="k"),
                                    token=viewer)))
    assert err.code == "forbidden" and "jobs.submit" in err.message
    assert "intruder" not in [h.name for h in cluster.client.hosts()]
