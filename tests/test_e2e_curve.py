"""The daemon tier under ZeroMQ CURVE: strangers get no handshake, unknown daemon keys no orders."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w
import zmq
from conftest import local_cluster, wait_for
from zmq.utils.monitor import recv_monitor_message

from xce.proto import schema as S
from xce.proto.codec import decode_envelope, encode
from xce.proto.opcodes import Op
from xce.security.curve import ClientKeys, KeyStore, client_keys
from xce.transport.sockets import use_curve

FAILED = {zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL, zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
          zmq.EVENT_HANDSHAKE_FAILED_AUTH, zmq.EVENT_DISCONNECTED}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with local_cluster(tmp_path_factory.mktemp("curve"), "--hosts", "1", "--slots-per-host", "1",
                       "--mem-per-host", "1G", "--heartbeat", "0.5") as c:
        yield c


def handshake(kind: int, endpoint: str, keys: ClientKeys | None) -> set[int]:
    """Connect a socket and collect its handshake events until it succeeds or fails."""
    s = zmq.Context.instance().socket(kind)
    s.setsockopt(zmq.LINGER, 0)
    use_curve(s, keys)
    mon = s.get_monitor_socket()
    s.connect(endpoint)
    seen: set[int] = set()
    try:
        def settled() -> bool:
            while mon.poll(50):
                seen.add(recv_monitor_message(mon)["event"])
            return bool(seen & (FAILED | {zmq.EVENT_HANDSHAKE_SUCCEEDED}))

        wait_for(settled, 10, "the handshake to succeed or fail")
    finally:
        s.disable_monitor()
        mon.close(0)
        s.close(0)
    return seen


def test_cluster_runs_with_curve_on(cluster) -> None:
    assert cluster.client.cfg.security.curve
    jid = cluster.client.submit(["true"])
    assert cluster.wait_job(jid).state == "DONE"


@pytest.mark.parametrize("kind", [zmq.DEALER, zmq.SUB], ids=["router", "pub"])
def test_a_plain_socket_gets_no_handshake(cluster, kind: int) -> None:
    cfg = cluster.client.cfg
    endpoint = cfg.controller.address if kind == zmq.DEALER else cfg.controller.pub_address
    assert zmq.EVENT_HANDSHAKE_SUCCEEDED in handshake(kind, endpoint, client_keys(cfg))  # the control
    seen = handshake(kind, endpoint, None)
    assert zmq.EVENT_HANDSHAKE_SUCCEEDED not in seen and seen & FAILED


def test_a_client_with_the_wrong_server_key_gets_no_answer(cluster) -> None:
    cfg = cluster.client.cfg
    wrong = KeyStore(cluster.state_dir / "elsewhere")
    keys = client_keys(cfg)
    assert keys is not None
    bad = ClientKeys(wrong.init(), keys.public, keys.secret)
    seen = handshake(zmq.DEALER, cfg.controller.address, bad)
    assert zmq.EVENT_HANDSHAKE_SUCCEEDED not in seen
    s = zmq.Context.instance().socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    use_curve(s, bad)
    s.connect(cfg.controller.address)
    s.send(encode(Op.PING, 1, S.Empty()))
    assert not s.poll(1500), "a controller answered a client that holds the wrong server key"
    s.close(0)
    # while a right one is answered
    s = zmq.Context.instance().socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    use_curve(s, client_keys(cfg))
    s.connect(cfg.controller.address)
    s.send(encode(Op.PING, 2, S.Empty()))
    assert s.poll(5000) and decode_envelope(s.recv()).op == Op.OK
    s.close(0)


def test_a_worker_with_an_unknown_key_is_refused_until_allowed_and_cut_off_when_revoked(
        cluster, tmp_path: Path) -> None:
    cfg = cluster.client.cfg
    own = KeyStore(tmp_path / "rogue-keys")
    public = own.new_daemon("rogue")  # a pair of its own, on no allow-list of the cluster
    conf = tmp_path / "rogue.toml"
    conf.write_text(tomli_w.dumps({
        "state_dir": str(cluster.state_dir),  # where the daemon token is, as for local workers
        "controller": {"address": cfg.controller.address, "pub_address": cfg.controller.pub_address},
        "worker": {"heartbeat": 0.5, "mem": "256M", "slots": 1},
        "security": {"curve": True, "keys_dir": str(own.root), "key_name": "rogue",
                     "server_key": KeyStore(cluster.state_dir / "keys").server_public().decode()}}))
    log = tmp_path / "rogue.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "xce.daemons.worker", "--config", str(conf),
                                 "--state-dir", str(tmp_path), "--name", "rogue"],
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: "refuses this worker" in log.read_text(), 20, "the worker to be refused")
        assert "not in the allow-list" in log.read_text()
        assert "rogue" not in [h.name for h in cluster.client.hosts()]

        # "=": a Z85 key may start with "-", which argparse would take for an option
        cluster.xce("keys", "add", "rogue", f"--public-key={public.decode()}")
        wait_for(lambda: any(h.name == "rogue" and h.state == "ok" for h in cluster.client.hosts()),
                 20, "the allowed worker to register")

        cluster.xce("keys", "revoke", "rogue")
        wait_for(lambda: any(h.name == "rogue" and h.state == "unavail" for h in cluster.client.hosts()),
                 20, "the revoked worker's host to go unavail")
        assert proc.poll() is None  # refused, not crashed: it waits to be let in again
    finally:
        proc.terminate()
        proc.wait(10)


def test_keys_cli(cluster, tmp_path: Path) -> None:
    d = str(tmp_path / "k")
    out = cluster.xce("keys", "--dir", d, "init").stdout
    assert "server key" in out
    assert cluster.xce("keys", "--dir", d, "init", check=False).returncode == 2  # never silently replaced
    assert "allowed w1" in cluster.xce("keys", "--dir", d, "add", "w1").stdout
    bad = cluster.xce("keys", "--dir", d, "add", "w2", "--public-key", "short", check=False)
    assert bad.returncode == 2 and "not a 40-character Z85 CURVE key" in bad.stderr
    bad = cluster.xce("keys", "--dir", d, "add", "../etc", check=False)
    assert bad.returncode == 2 and "key name" in bad.stderr
    listing = cluster.xce("keys", "--dir", d, "list", "--json").stdout
    assert '"w1"' in listing
    cluster.xce("keys", "--dir", d, "revoke", "w1")
    assert '"w1"' not in cluster.xce("keys", "--dir", d, "list", "--json").stdout
    bad = cluster.xce("keys", "--dir", d, "revoke", "w1", check=False)
    assert bad.returncode == 2 and "no allowed key named 'w1'" in bad.stderr


def test_the_local_door_speaks_null_but_is_no_daemon(cluster) -> None:
    """The owner-only ipc door skips CURVE (the file system guards it), so it must never act as a daemon."""
    from xce.security.auth import ensure_daemon_token
    from xce.site.local import door_path

    cfg = cluster.client.cfg
    s = zmq.Context.instance().socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(f"ipc://{door_path(cluster.state_dir, cfg.controller.address)}")
    try:
        s.send(encode(Op.PING, 1, S.Empty()))
        assert s.poll(5000) and decode_envelope(s.recv()).op == Op.OK
        reg = S.RegisterRequest(host="via-door", slots=1, ncpus=1, mem_total=2**30, os_available=2**30,
                                version="x")
        s.send(encode(Op.REGISTER, 2, reg, token=ensure_daemon_token(cluster.state_dir)))
        assert s.poll(5000)
        env = decode_envelope(s.recv())
        assert env.op == Op.ERROR and b"not in the allow-list" in bytes(env.body)
    finally:
        s.close(0)
    assert "via-door" not in [h.name for h in cluster.client.hosts()]


def test_state_changing_requests_at_the_zmq_door_are_logged_for_admins(cluster) -> None:
    """Who, what, from where, and the answer: submits, kills and refusals, queryable by admins only."""
    from xce.client import Client
    from xce.core.errors import NotFound, PermissionDenied
    from xce.security.auth import TokenService, ensure_keyring
    from xce.security.policy import Principal

    c = cluster.client
    jid = c.submit(["sleep", "30"], name="logged")
    c.kill([jid])
    with pytest.raises(NotFound):  # refused by the state machine, when the command commits
        c.modify(jid + 10_000, 2**30)
    ring = TokenService(ensure_keyring(cluster.state_dir))
    with Client(state_dir=cluster.state_dir, token=ring.issue(Principal("vera", ("viewer",))), timeout=10) as v:
        with pytest.raises(PermissionDenied):
            v.submit(["true"])
        with pytest.raises(PermissionDenied, match="audit.read"):
            v.request_log()
    recs = c.request_log()
    mine = [r for r in recs if r.op in ("SUBMIT", "KILL") and r.result == "accepted"]
    assert any(r.op == "SUBMIT" and r.target.startswith("1 job(s) to") for r in mine)
    assert any(r.op == "KILL" and r.target == f"jobs {jid}" for r in mine)
    modify = [r for r in recs if r.op == "MODIFY"]  # logged with the answer the client got
    assert modify[-1].target == f"job {jid + 10_000} mem_limit {2**30}"
    assert modify[-1].result.startswith("refused: not_found"), modify[-1]
    assert modify[-1].user == mine[-1].user and modify[-1].client == mine[-1].client
    refused = [r for r in recs if r.user == "vera"]
    assert refused and refused[-1].op == "SUBMIT" and refused[-1].result.startswith("refused: forbidden")
    assert all(r.client in ("127.0.0.1", "local") for r in recs)
    # the CLI shows the same records
    out = cluster.xce("admin", "requests", "-u", "vera").stdout
    assert "vera" in out and "refused: forbidden" in out
    # kept in a file beside the controller's journal, so a restart keeps them
    (log,) = cluster.state_dir.glob("controller-1/**/requests.jsonl")
    assert b'"vera"' in log.read_bytes()


def test_a_worker_key_speaks_only_for_its_own_host(cluster) -> None:
    """security.bind_hosts: an allowed key named NAME cannot register or report as another host."""
    from xce.security.auth import ensure_daemon_token

    store = KeyStore(cluster.state_dir / "keys")
    victim = ""
    public = store.new_daemon("impostor")  # allowed, as `xce keys add impostor` would
    try:
        keys = ClientKeys(store.server_public(), public, store.daemon("impostor")[1])
        s = zmq.Context.instance().socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        use_curve(s, keys)
        s.connect(cluster.client.cfg.controller.address)
        token = ensure_daemon_token(cluster.state_dir)
        victim = next(h.name for h in cluster.client.hosts() if h.state == "ok")
        reg = S.RegisterRequest(host=victim, slots=1, ncpus=1, mem_total=2**30, os_available=2**30, version="x")
        hb = S.Heartbeat(host=victim, time=1.0, os_available=1)
        rids = iter(range(1, 1000))

        def answer(op: Op, body: object) -> bytes:
            s.send(encode(op, next(rids), body, token=token))
            assert s.poll(5000)
            env = decode_envelope(s.recv())
            assert env.op == Op.ERROR
            return bytes(env.body)

        # The controller re-reads the allow-list within a second of a change.
        wait_for(lambda: b"not in the allow-list" not in answer(Op.REGISTER, reg), 10, "the new key to be known")
        for op, body in [(Op.REGISTER, reg), (Op.HEARTBEAT, hb)]:
            assert b"speaks only for host 'impostor'" in answer(op, body)
        s.close(0)
    finally:
        store.revoke("impostor")
    assert next(h for h in cluster.client.hosts() if h.name == victim).state == "ok"  # never displaced
