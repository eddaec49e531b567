"""xce.client's batch submit: a bad spec is refused before anything is sent, whatever repeats
around it (each distinct spec is checked once, not once a job).

The controller is a bare ROUTER that answers every SUBMIT and records what reached it: a
DEALER keeps its order, so if a refused batch had gone out it would be the first thing seen.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from xce.client import Client, make_spec
from xce.core.errors import InvalidRequest
from xce.core.model import JobSpec
from xce.proto import codec
from xce.proto import schema as S
from xce.proto.opcodes import Op

GOOD = {"command": ["true"], "resreq": "rusage[mem=10]"}
BAD = {"command": ["true"], "mem_limit": 1024}  # under the floor
TOO_LONG = {"command": ["true"], "name": "n" * 2000}  # over a name's size limit


class StandIn:
    """A controller's socket that answers each SUBMIT with ids 1..n and keeps (op, n)."""

    def __init__(self) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.endpoint = f"tcp://127.0.0.1:{port}"
        self.seen: list[tuple[Op, int]] = []
        self.jobs: list[list[JobSpec]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            if not self.sock.poll(50):
                continue
            peer, data = self.sock.recv_multipart()
            env = codec.decode_envelope(data)
            op, body = codec.decode_request(env)
            n = len(body.jobs)
            self.seen.append((op, n))
            self.jobs.append(body.jobs)
            reply = S.SubmitReply(ids=list(range(1, n + 1)), queues=["normal"] * n)
            self.sock.send_multipart([peer, codec.encode(Op.OK, env.rid, reply)])

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close(0)
        self.ctx.term()


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    s = StandIn()
    yield s
    s.close()


def refusal(fields: dict) -> str:
    """What make_spec says of one spec alone: the batch must say exactly this."""
    with pytest.raises(InvalidRequest) as e:
        make_spec(**fields)
    return str(e.value)


@pytest.mark.parametrize("bad", [BAD, TOO_LONG], ids=["mem_limit", "size"])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_a_bad_spec_among_many_identical_good_ones_is_refused_before_anything_is_sent(
        tmp_path: Path, stand_in: StandIn, bad: dict, where: str) -> None:
    said = refusal(bad)
    assert ("mem_limit must be at least" in said) if bad is BAD else ("name" in said)
    at = {"first": 0, "middle": 2500, "last": 5000}[where]
    batch = [GOOD] * 5000
    batch.insert(at, dict(bad))
    with Client(endpoint=stand_in.endpoint, state_dir=tmp_path, token="t", timeout=10) as c:
        with pytest.raises(InvalidRequest) as e:
            c.submit_many(batch)
        assert str(e.value) == said
        # equal good dicts given as distinct objects, the bad one among them: refused too
        with pytest.raises(InvalidRequest) as e:
            c.submit_many([dict(GOOD) for _ in range(100)] + [dict(bad)] + [dict(GOOD)])
        assert str(e.value) == said
        assert c.submit_many([GOOD] * 3) == [1, 2, 3]
    assert stand_in.seen == [(Op.SUBMIT, 3)]  # the refused batches never went out


def test_a_batch_sends_every_job_of_each_distinct_spec(tmp_path: Path, stand_in: StandIn) -> None:
    other = {"command": ["false"], "name": "o"}
    with Client(endpoint=stand_in.endpoint, state_dir=tmp_path, token="t", timeout=10) as c:
        assert len(c.submit_many([GOOD] * 4 + [other] + [dict(GOOD)] * 2 + [other])) == 8
    assert stand_in.seen == [(Op.SUBMIT, 8)]
    sent = stand_in.jobs[0]
    assert [s.command for s in sent] == [["true"]] * 4 + [["false"]] + [["true"]] * 2 + [["false"]]
    assert sent[0] == make_spec(**GOOD) and sent[4] == make_spec(**other)  # as make_spec builds them
