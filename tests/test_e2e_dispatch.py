"""Dispatch that cannot wedge a slot, and placements only the scheduler may make (issue 12, items 1-2).

Real daemons on 127.0.0.1.  Where a test needs a peer that misbehaves -- a worker that never
starts what it is sent, a worker key that places jobs -- the test itself is that peer, with a
key the cluster allows, as an attacker with a stolen key would be.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import zmq
from conftest import local_cluster, sigstop, wait_for

from xce.core import limits
from xce.core.errors import InvalidRequest
from xce.core.model import Alloc, JobSpec
from xce.proto import schema as S
from xce.proto.codec import decode_envelope, encode
from xce.proto.opcodes import Op
from xce.security.auth import ensure_daemon_token
from xce.security.curve import ClientKeys, KeyStore
from xce.transport.sockets import use_curve

G = 2**30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with local_cluster(tmp_path_factory.mktemp("dispatch"), "--hosts", "2", "--slots-per-host", "1",
                       "--mem-per-host", "2G", "--heartbeat", "0.5") as c:
        yield c


def daemon_socket(cluster, name: str) -> zmq.Socket:
    """A DEALER to the leader speaking with the allowed daemon key ``name`` (made if missing)."""
    store = KeyStore(cluster.state_dir / "keys")
    store.ensure_daemon(name)
    public, secret = store.daemon(name)
    s = zmq.Context.instance().socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    use_curve(s, ClientKeys(store.server_public(), public, secret))
    s.connect(cluster.client.cfg.controller.address)
    return s


def ask(s: zmq.Socket, op: Op, body: object, token: str, rid: int = 1) -> S.Envelope:
    s.send(encode(op, rid, body, token=token))
    while True:
        assert s.poll(5000), f"no answer to {op.name}"
        env = decode_envelope(s.recv())
        if env.rid == rid and env.op in (Op.OK, Op.ERROR):
            return env


@contextlib.contextmanager
def scheduler_paused(cluster) -> Iterator[None]:
    """Stop the cluster's own scheduler, so a pending job stays pending for the test to place."""
    pid = cluster.daemon_pid("scheduler")
    sigstop(pid)  # every thread, before the test goes on
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


# ---- item 1: what submit accepts can be dispatched -----------------------------------------

def test_a_job_too_big_to_dispatch_is_refused_at_submit_naming_the_limit(cluster) -> None:
    env = {"BIG": "x" * int(4.1 * 2**20)}  # the reported attack: accepted, RUN, never started
    size = len("BIG=") + int(4.1 * 2**20) + 1
    # A ready-made JobSpec goes to the controller unchecked: the leader refuses it itself.
    with pytest.raises(InvalidRequest) as e:
        cluster.client.submit_many([JobSpec(command=["true"], env=env, user=getpass.getuser(), cwd="/tmp")])
    assert f"env: {size:,} bytes" in e.value.message
    assert f"limit of {limits.SPEC_FIELD['env'].max_bytes:,} bytes" in e.value.message
    with pytest.raises(InvalidRequest, match=f"env: {size:,} bytes"):  # and xce.client's own check, first
        cluster.client.submit(["true"], env=env)
    assert not [j for j in cluster.client.jobs(all=True) if j.state == "RUN"]
    # at the limit, it runs
    f = limits.SPEC_FIELD["env"]
    jid = cluster.client.submit(["true"], env={"BIG": "x" * (f.max_bytes - len("BIG=") - 1)})
    assert cluster.wait_job(jid).state == "DONE"


class FakeController:
    """A ROUTER that a real xce-worker registers with: the test plays the leader."""

    def __init__(self, tmp_path: Path) -> None:
        self.router = zmq.Context.instance().socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        port = self.router.bind_to_random_port("tcp://127.0.0.1")
        cfg = tmp_path / "w.toml"
        cfg.write_text(f'[controller]\naddress = "tcp://127.0.0.1:{port}"\n[worker]\nheartbeat = 0.2\n')
        self.proc = subprocess.Popen([sys.executable, "-m", "xce.daemons.worker", "--config", str(cfg),
                                      "--state-dir", str(tmp_path), "--name", "fake1", "--slots", "1"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        env = self.next(Op.REGISTER, 15)
        self.router.send_multipart([self.ident, encode(Op.OK, env.rid, S.RegisterReply(
            heartbeat_interval=0.2, term=1), term=1)])

    def next(self, op: Op, timeout: float = 10) -> S.Envelope:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.router.poll(100):
                self.ident, data = self.router.recv_multipart()
                env = decode_envelope(data)
                if env.op == op:
                    return env
        raise AssertionError(f"the worker sent no {op.name} within {timeout} s")

    def order(self, op: Op, body: object) -> None:
        self.router.send_multipart([self.ident, encode(op, 0, body, term=1)])

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self.router.close(0)


@pytest.fixture
def fake_controller(tmp_path: Path) -> Iterator[FakeController]:
    fc = FakeController(tmp_path)
    try:
        yield fc
    finally:
        fc.close()


def test_a_worker_ends_the_job_of_an_order_it_refuses(fake_controller: FakeController) -> None:
    """Today it answered an ERROR nobody reads, and the job stayed RUN with no task for good."""
    spec = JobSpec(command=["true"], env={"BIG": "x" * int(4.1 * 2**20)})
    fake_controller.order(Op.RUN_JOB, S.RunJob(job_id=5, attempt=1, spec=spec, alloc=Alloc("fake1", 1),
                                               hosts=["fake1"]))
    env = fake_controller.next(Op.JOB_FINISHED)
    done = msgspec.msgpack.decode(env.body, type=S.JobFinished)
    assert (done.job_id, done.attempt, done.host) == (5, 1, "fake1")
    assert done.reason.startswith("dispatch refused by fake1: RUN_JOB body of ")
    assert f"exceeds the {limits.body_limit('RUN_JOB')}-byte limit" in done.reason
    assert fake_controller.proc.poll() is None


def test_a_worker_reports_a_killed_job_it_never_started_as_ended(fake_controller: FakeController) -> None:
    fake_controller.order(Op.KILL_JOB, S.KillJob(job_id=6, attempt=2, reason="killed by user"))
    env = fake_controller.next(Op.JOB_FINISHED)
    done = msgspec.msgpack.decode(env.body, type=S.JobFinished)
    assert (done.job_id, done.attempt) == (6, 2)
    assert done.reason == "killed by user (it never started on fake1)"


class GhostWorker:
    """An allowed worker key that registers and heartbeats but never starts what it is sent."""

    def __init__(self, cluster, name: str = "ghost") -> None:
        self.cluster, self.name = cluster, name
        self.token = ensure_daemon_token(cluster.state_dir)
        self.orders: list[tuple[Op, int]] = []
        self.stop = threading.Event()
        self.registered = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        s = daemon_socket(self.cluster, self.name)
        reg = S.RegisterRequest(host=self.name, slots=1, ncpus=1, mem_total=G, os_available=G, version="x")
        next_hb = next_reg = 0.0
        try:
            while not self.stop.is_set():
                now = time.monotonic()
                if not self.registered.is_set() and now >= next_reg:
                    s.send(encode(Op.REGISTER, 1, reg, token=self.token))
                    next_reg = now + 1.0
                if self.registered.is_set() and now >= next_hb:
                    s.send(encode(Op.HEARTBEAT, 2, S.Heartbeat(host=self.name, time=time.time(), os_available=G),
                                  token=self.token))
                    next_hb = now + 0.25
                if s.poll(50):
                    env = decode_envelope(s.recv())
                    if env.op == Op.OK and env.rid == 1:
                        self.registered.set()
                    elif env.op in (Op.RUN_JOB, Op.KILL_JOB):
                        self.orders.append((Op(env.op), msgspec.msgpack.decode(env.body)["job_id"]))
        finally:
            s.close(0)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        KeyStore(self.cluster.state_dir / "keys").revoke(self.name)


def test_a_job_run_where_no_task_starts_is_audited_and_its_kill_ends_it(cluster) -> None:
    """RUN without a task: the audit names it past one heartbeat, and `xce kill` ends it."""
    ghost = GhostWorker(cluster)
    try:
        wait_for(lambda: any(h.name == "ghost" and h.state == "ok" for h in cluster.client.hosts()),
                 20, "the ghost host to register")
        jid = cluster.client.submit(["sleep", "60"], resreq="select[hname==ghost] rusage[mem=100M]")
        wait_for(lambda: (Op.RUN_JOB, jid) in ghost.orders, 20, "the job to be dispatched to the ghost")
        assert cluster.client.job(jid).state == "RUN"

        def named() -> list[str]:
            return [p for p in cluster.client.audit().problems if p.startswith(f"job {jid} is RUN on ghost")]

        (problem,) = wait_for(named, 10, "the audit to name the job that runs nowhere")
        assert "no task runs there" in problem
        assert cluster.client.kill([jid]) == {jid: "kill requested"}
        view = cluster.wait_job(jid, ("EXIT",), timeout=20)
        assert view.reason == "killed by user"
        assert (Op.KILL_JOB, jid) in ghost.orders
        assert not named()
    finally:
        ghost.close()


# ---- item 2: only the scheduler places, with the sizes the request gives -------------------

def test_a_worker_key_cannot_place(cluster) -> None:
    """With node1's key a 1G job was placed on node2 with a 1-byte reservation."""
    token = ensure_daemon_token(cluster.state_dir)
    with scheduler_paused(cluster):
        jid = cluster.client.submit(["sleep", "1"], resreq="rusage[mem=1G]")
        forged = S.PlaceRequest(placements=[S.Placement(jid, 0, [Alloc("node2", 1, mem=1, virtual={"slots": 1})])])
        s = daemon_socket(cluster, "node1")
        try:
            env = ask(s, Op.PLACE, forged, token)
        finally:
            s.close(0)
        assert env.op == Op.ERROR, msgspec.msgpack.decode(env.body)
        err = msgspec.msgpack.decode(env.body, type=S.ErrorReply)
        assert err.code == "forbidden" and "PLACE needs the scheduler's key" in err.message
        assert "'node1'" in err.message
        assert cluster.client.job(jid).state == "PEND"
    assert cluster.wait_job(jid).state == "DONE"


def test_the_leader_refuses_a_placement_whose_sizes_differ_from_the_request(cluster) -> None:
    token = ensure_daemon_token(cluster.state_dir)
    with scheduler_paused(cluster):
        jid = cluster.client.submit(["sleep", "1"], resreq="rusage[mem=1G]")
        s = daemon_socket(cluster, "scheduler")
        try:
            tiny = S.Placement(jid, 0, [Alloc("node2", 1, mem=1, virtual={"slots": 1})])
            env = ask(s, Op.PLACE, S.PlaceRequest(placements=[tiny]), token, rid=1)
            reply = msgspec.msgpack.decode(env.body, type=S.PlaceReply)
            assert reply.accepted == [] and reply.rejected == {
                jid: "allocation on node2: mem 1B, the job's request gives 1.0G"}
            assert cluster.client.job(jid).state == "PEND"
            right = S.Placement(jid, 0, [Alloc("node2", 1, mem=G, virtual={"slots": 1})])
            env = ask(s, Op.PLACE, S.PlaceRequest(placements=[right]), token, rid=2)
            assert msgspec.msgpack.decode(env.body, type=S.PlaceReply).accepted == [jid]
        finally:
            s.close(0)
    view = cluster.wait_job(jid)
    assert view.state == "DONE" and view.mem_reserved == G
    assert cluster.client.audit().problems == []
