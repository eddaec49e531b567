"""The worker has its spare wrapper (xce/worker/spare.py) ready soon after each job, not at its
next sampling tick; a short job's end confirms its start (no JOB_STARTED): a real xce-worker,
the test playing its controller."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import zmq

from xce.core.model import Alloc, JobSpec
from xce.proto import schema as S
from xce.proto.codec import decode_envelope, encode
from xce.proto.opcodes import Op

HEARTBEAT = 2.0  # the worker then samples every 0.5 s (min(0.5, heartbeat)): its idle wake-ups are rare
SPARE_WITHIN = 0.25  # seconds after a job's end report; the worker's own rule says ~0.06 (SPARE_AFTER + SPARE_IDLE)


class Controller:
    """A ROUTER a real worker registers with."""

    def __init__(self, tmp_path: Path) -> None:
        self.router = zmq.Context.instance().socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        port = self.router.bind_to_random_port("tcp://127.0.0.1")
        cfg = tmp_path / "w.toml"
        cfg.write_text(f'[controller]\naddress = "tcp://127.0.0.1:{port}"\n[worker]\nheartbeat = {HEARTBEAT}\n')
        self.proc = subprocess.Popen([sys.executable, "-m", "xce.daemons.worker", "--config", str(cfg),
                                      "--state-dir", str(tmp_path), "--name", "w1", "--slots", "1"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.ident = b""
        env = self.next(Op.REGISTER, 15)
        self.answer(env.rid, S.RegisterReply(heartbeat_interval=HEARTBEAT, term=1))

    def next(self, op: Op, timeout: float = 10) -> S.Envelope:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.router.poll(20):
                self.ident, data = self.router.recv_multipart()
                env = decode_envelope(data)
                if env.op == op:
                    return env
        raise AssertionError(f"the worker sent no {op.name} within {timeout} s")

    def ops_until(self, op: Op, timeout: float = 10) -> tuple[list[Op], S.Envelope]:
        """The ops of the messages the worker sends up to and including the first ``op``."""
        seen: list[Op] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.router.poll(20):
                self.ident, data = self.router.recv_multipart()
                env = decode_envelope(data)
                seen.append(Op(env.op))
                if env.op == op:
                    return seen, env
        raise AssertionError(f"the worker sent no {op.name} within {timeout} s (sent: {seen})")

    def answer(self, rid: int, body: object) -> None:
        self.router.send_multipart([self.ident, encode(Op.OK, rid, body, term=1)])

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self.router.close(0)


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[Controller]:
    c = Controller(tmp_path)
    try:
        yield c
    finally:
        c.close()


def test_a_spare_waits_soon_after_every_job(controller: Controller, tmp_path: Path) -> None:
    """Failed before: the loop computed its poll timeout while the last start was under SPARE_AFTER
    old, and slept to the next sample (up to 0.5 s), so a job 0.2 s after another often found no
    spare and paid the fresh wrapper's 5-20 ms.  Eight jobs: the old code made it in time for each
    with a chance of about 1 in 2."""
    tasks = tmp_path / "worker-w1" / "tasks"
    for job_id in range(1, 9):
        spec = JobSpec(command=["true"], cwd=str(tmp_path))
        controller.router.send_multipart([controller.ident, encode(Op.RUN_JOB, 0, S.RunJob(
            job_id=job_id, attempt=1, spec=spec, alloc=Alloc("w1", 1), hosts=["w1"]), term=1)])
        env = controller.next(Op.JOB_FINISHED)
        ended = time.monotonic()
        controller.answer(env.rid, S.Ack(True))
        while not list(tasks.glob("spare-*.rec")):
            assert time.monotonic() - ended < SPARE_WITHIN, f"no spare {SPARE_WITHIN} s after job {job_id} ended"
            time.sleep(0.005)


def test_a_job_that_ends_at_once_is_reported_by_its_end_alone(controller: Controller, tmp_path: Path) -> None:
    """Failed before: every job cost a JOB_STARTED and its answer, though the controller commits
    nothing for it and a JOB_FINISHED confirms the start as well.  A longer job still sends one."""
    def run(job_id: int, command: list[str]) -> list[Op]:
        controller.router.send_multipart([controller.ident, encode(Op.RUN_JOB, 0, S.RunJob(
            job_id=job_id, attempt=1, spec=JobSpec(command=command, cwd=str(tmp_path)), alloc=Alloc("w1", 1),
            hosts=["w1"]), term=1)])
        seen, env = controller.ops_until(Op.JOB_FINISHED)
        controller.answer(env.rid, S.Ack(True))
        return seen

    assert Op.JOB_STARTED not in run(1, ["true"])
    assert Op.JOB_STARTED in run(2, ["sleep", "0.3"])


def test_a_repeated_order_for_a_running_task_is_answered_with_its_start(controller: Controller,
                                                                          tmp_path: Path) -> None:
    """A RUN_JOB for a task the worker already runs (`xce modify -M` sends the new limit so, and
    a leader re-sends an order whose JOB_STARTED it never read, e.g. one sent to the controller
    before it) is confirmed with the task's JOB_STARTED and its own start time.  Before, the
    worker stayed silent, and the leader, finding the order unconfirmed, re-sent it every 2 s for
    the rest of the job's run."""
    def order(mem_limit: int | None) -> None:
        spec = JobSpec(command=["sleep", "30"], cwd=str(tmp_path), mem_limit=mem_limit)
        controller.router.send_multipart([controller.ident, encode(Op.RUN_JOB, 0, S.RunJob(
            job_id=7, attempt=1, spec=spec, alloc=Alloc("w1", 1), hosts=["w1"]), term=1)])

    order(None)
    first = msgspec.msgpack.decode(controller.next(Op.JOB_STARTED).body, type=S.JobStarted)
    order(512 << 20)  # the same task, a new -M
    again = msgspec.msgpack.decode(controller.next(Op.JOB_STARTED, 5).body, type=S.JobStarted)
    assert (again.job_id, again.attempt, again.pid) == (first.job_id, first.attempt, first.pid)
    assert abs(again.time - first.time) < 0.2  # when it started, not when the order came again
