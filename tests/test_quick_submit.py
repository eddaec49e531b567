"""`xce submit`'s fast path (xce/cli/quick.py): the same job, line, errors and exit codes as the full path.

Unit part: the fast parser accepts only forms argparse reads the same way, and
builds the JobSpec cmd_submit builds, byte for byte.  End-to-end part: real
`xce submit` processes against `xce up`, with XCE_DEBUG_PATH saying which path
served and whether pyzmq or msgspec had been loaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import msgspec
import pytest
from conftest import Cluster, local_cluster, wait_for
from hypothesis import given, settings
from hypothesis import strategies as st

from xce.cli import main as cli
from xce.cli import quick, submit
from xce.client import cluster_config
from xce.core.errors import ResReqError
from xce.core.resources import catalog
from xce.core.resreq import parse_resreq
from xce.proto import lite
from xce.site.local import _b64url, _expiry, door_path, stored_token_if_fresh

SAME_AS_ARGPARSE = [
    ["submit", "true"],
    ["submit", "--", "sh", "-c", "echo hi"],
    ["--state-dir", "/tmp/sd", "--timeout", "3", "submit", "-q", "high", "-n", "2", "true"],
    ["--state-dir=/tmp/sd", "--timeout=2.5", "submit", "-R", "rusage[mem=1G] span[hosts=1]", "-M", "2G",
     "-J", "name", "-o", "out.%J", "-e", "err.%J", "--cwd", "/tmp", "--rerunnable", "--", "sleep", "1"],
    ["submit", "--cwd=/var", "-o", "", "sleep", "-n", "5"],   # options after the command belong to it
    ["submit", "-n", " 3 ", "true", "--", "x"],
    ["--state-dir", "/a", "submit", "--state-dir", "/b", "--timeout=4", "-n", "2", "true"],  # after, too
    ["submit", "-q", "high", "--timeout", "3", "--timeout", "5", "--", "true", "--timeout", "1"],
    ["submit", "-cwd", "/tmp", "-J", "x", "true"],  # bsub's spelling of --cwd: options.py's door fields
]
NOT_FOR_THE_FAST_PATH = [
    ["submit"], ["submit", "--"], ["submit", "--dry-run", "true"], ["submit", "--json", "true"],
    ["submit", "-n2", "true"], ["submit", "-n", "x", "true"], ["submit", "-q", "a", "-q", "b", "true"],
    ["submit", "--cw", "/tmp", "true"], ["submit", "-R", "-x", "true"], ["--state", "d", "submit", "true"],
    ["--timeout", "nan", "submit", "true"], ["-h", "submit", "true"], ["submit", "-h"], ["submit", "--", "-x"],
    ["submit", "-M", "4X", "true"], ["jobs", "submit"],
    ["submit", "-J", "a[1-3]", "true"], ["submit", "-oo", "x", "true"], ["submit", "-K", "true"],
    ["submit", "-env", "none", "true"], ["submit", "-n", "0", "true"],  # bsub's own message says why
    ["submit", "-M", "0", "true"], ["submit", "-W", "10", "true"], ["submit", "-cwd", "/a", "--cwd", "/b", "true"],
    ["submit", __file__],  # a text file given as the command is a job script: the full path reads it
]


@pytest.mark.parametrize("argv", SAME_AS_ARGPARSE)
def test_the_fast_parser_builds_the_spec_cmd_submit_builds(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XCE_STATE_DIR", raising=False)
    at = cli._raw_at(argv)
    assert at is not None
    a = cli.parser().parse_args(argv[:at + 1])
    args = submit.split_args(argv[at + 1:])
    a.state_dir = args.values.get("--state-dir", a.state_dir)
    a.timeout = float(args.values.get("--timeout", a.timeout))
    full, _ = submit.job_spec(args)
    q = quick.parse(argv)
    assert q is not None and (q.state_dir or None, q.timeout) == (a.state_dir, a.timeout)
    assert lite.packb(quick.spec_of(q)) == msgspec.msgpack.encode(full)


@pytest.mark.parametrize("argv", NOT_FOR_THE_FAST_PATH)
def test_what_the_fast_parser_leaves_to_argparse(argv: list[str]) -> None:
    q = quick.parse(argv)
    assert q is None or quick.spec_of(q) is None


def test_text_that_is_not_utf8_is_left_to_the_full_path(tmp_path: Path) -> None:
    body = {"jobs": [dict(quick.SPEC_DEFAULTS, command=["true"], env={"A": "\udcff"})], "dry_run": False, "key": "k"}
    out = quick.send(str(tmp_path), "tcp://127.0.0.1:1", body, "", 1.0, "k")
    assert isinstance(out, quick.Fallback) and out.reason.startswith("cannot encode") and out.key == "k"


def test_the_fast_path_imports_stay_light() -> None:
    """What the door path imports must not pull the heavy modules that its budget has no room for."""
    code = ("import sys; before = set(sys.modules); "
            "import xce.cli.main, xce.cli.quick, xce.site.local, xce.proto.lite, xce.proto.zmtp, xce.core.units; "
            "xce.site.local._expiry('a.eyJleHAiOjF9.c'); "
            "print(' '.join(sorted(set(sys.modules) - before)))")
    new = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())
    heavy = {"zmq", "msgspec", "argparse", "typing", "pathlib", "socket", "json", "base64", "tomllib", "enum",
             "binascii", "struct"}
    assert not new & heavy


@settings(max_examples=500)
@given(st.binary(max_size=200), st.booleans())
def test_a_jwt_part_decodes_as_base64_reads_it(data: bytes, padded: bool) -> None:
    """binascii (zlib with it) no longer loads for the token: the decoder against the stdlib's."""
    import base64

    text = base64.urlsafe_b64encode(data).decode()
    assert _b64url(text if padded else text.rstrip("=")) == data


@pytest.mark.parametrize("bad", ["a", "abcde", "ab+c", "ab/c", "a=bc", "abé", "ab c"])
def test_a_jwt_part_that_is_not_base64url_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        _b64url(bad)


def reference_expiry(token: str) -> float:
    """The reading xce.client made before the fast path existed: base64 and json."""
    import base64
    import json

    try:
        payload = token.split(".")[1]
        return float(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))).get("exp", 0))
    except (IndexError, ValueError, TypeError, AttributeError):
        return 0.0


def _nest(inner: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3))


json_scalars = (st.none() | st.booleans() | st.integers(-2**53, 2**53)
                | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8))
json_values = st.recursive(json_scalars, _nest, max_leaves=8)


@settings(max_examples=300)
@given(st.dictionaries(st.sampled_from(["exp", "sub", "iat", "x"]) | st.text(max_size=5), json_values, max_size=5),
       st.sampled_from([(",", ":"), (", ", ": ")]))
def test_token_expiry_reads_as_json_would(claims: dict, separators: tuple[str, str]) -> None:
    import base64
    import json

    payload = base64.urlsafe_b64encode(json.dumps(claims, separators=separators).encode()).rstrip(b"=").decode()
    token = f"h.{payload}.s"
    assert _expiry(token) == reference_expiry(token)


# ---- end to end ----------------------------------------------------------------------------

def run_xce(sd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    e = {**os.environ, "XCE_DEBUG_PATH": "1", **env}
    return subprocess.run([sys.executable, "-m", "xce.cli.main", "--state-dir", str(sd), *args],
                          capture_output=True, text=True, timeout=60, env=e)


def without_debug(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if not ln.startswith("xce: submit path")]


@pytest.fixture(scope="module")
def one_host(tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    # A short directory: the door is a Unix socket, and its path must fit in 107 bytes.
    with local_cluster(tmp_path_factory.mktemp("q"), "--hosts", "1", "--slots-per-host", "2",
                       "--mem-per-host", "1G", "--heartbeat", "0.5") as c:
        yield c


def test_submit_takes_the_door_without_pyzmq_or_msgspec_and_the_job_runs(one_host: Cluster, tmp_path: Path) -> None:
    sd = one_host.state_dir
    cfg = cluster_config(sd)
    door = door_path(sd, cfg.controller.address)
    assert os.path.exists(door)
    r = run_xce(sd, "submit", "-R", "rusage[mem=10M]", "-o", str(tmp_path / "%J.out"), "-J", "door",
                "--", "sh", "-c", "echo via the door")
    assert r.returncode == 0, r.stderr
    assert "submit path door; loaded: none of zmq, msgspec, argparse" in r.stderr
    jid = int(r.stdout.split("<")[1].split(">")[0])
    assert r.stdout == f"Job <{jid}> is submitted to queue <normal>.\n"
    v = one_host.wait_job(jid)
    assert (v.state, v.name, v.resreq) == ("DONE", "door", "rusage[mem=10M]")
    assert (tmp_path / f"{jid}.out").read_text() == "via the door\n"


def test_the_installed_xce_command_reaches_the_door_with_nothing_before_it(one_host: Cluster) -> None:
    """`xce` as pip installed it (scripts/xce): not pip's entry-point wrapper, whose `import re`
    ran before our code (~6 ms, issue 19 item 4), and through the door with no thread started,
    so that it leaves at once (xce.compat.session.leave)."""
    script = Path(sys.executable).parent / "xce"
    head = script.read_text().splitlines()
    assert head[0] == f"#!{sys.executable}" or head[0].startswith(f"#!{Path(sys.executable).parent}/python")
    assert not any(ln.startswith(("import re", "from re ")) for ln in head), "pip's entry-point wrapper"
    e = {**os.environ, "XCE_DEBUG_PATH": "1", "PYTHONPROFILEIMPORTTIME": "1"}
    r = subprocess.run([str(script), "--state-dir", str(one_host.state_dir), "submit", "true"],
                       capture_output=True, text=True, timeout=60, env=e)
    assert r.returncode == 0, r.stderr
    assert "submit path door; loaded: none of zmq, msgspec, argparse" in r.stderr
    loaded = {ln.split("|")[-1].strip() for ln in r.stderr.splitlines() if ln.startswith("import time:")}
    assert not loaded & {"threading", "atexit"}, "a thread or exit hook: leave() would take the slow exit"
    assert one_host.wait_job(int(r.stdout.split("<")[1].split(">")[0])).state == "DONE"


@pytest.mark.parametrize("args", [
    ["-R", "rusage[mem=1G] frobnicate[x]", "true"],
    ["-R", "rusage[foo=10]", "true"],
    ["-R", "rusage[mem=10", "true"],
    ["-q", "nosuchqueue", "true"],
    ["-R", "rusage[mem=64G]", "true"],   # no host could ever fit it
])
def test_errors_read_and_exit_as_on_the_full_path(one_host: Cluster, args: list[str]) -> None:
    door = run_xce(one_host.state_dir, "submit", *args)
    full = run_xce(one_host.state_dir, "submit", *args, XCE_QUICK="0")
    assert "submit path door" in door.stderr and "submit path full" in full.stderr
    assert (door.returncode, without_debug(door.stderr), door.stdout) == \
        (full.returncode, without_debug(full.stderr), full.stdout)
    assert door.returncode == 2


def test_the_server_rejects_a_bad_resreq_with_the_local_parsers_message(one_host: Cluster) -> None:
    """The full path parses -R only for --dry-run; a plain submit relies on the controller's check."""
    text = "rusage[mem=1G] order[-mem] bogus[1]"
    with pytest.raises(ResReqError) as local:
        parse_resreq(text, catalog(cluster_config(one_host.state_dir).site_resources()))
    r = run_xce(one_host.state_dir, "submit", "-R", text, "true")
    assert "submit path door" in r.stderr and r.returncode == 2
    assert without_debug(r.stderr) == f"xce submit: {local.value.message}".splitlines()


@pytest.mark.parametrize("args, env, why", [
    (["--json", "true"], {}, "options the fast path does not parse"),
    (["true"], {"XCE_QUICK": "0"}, "XCE_QUICK=0"),
    (["true"], {"XCE_CONTROLLER": "tcp://127.0.0.1:1"}, "XCE_CONTROLLER"),
])
def test_what_the_door_does_not_serve_goes_the_full_path(one_host: Cluster, args: list[str], env: dict[str, str],
                                                         why: str) -> None:
    r = run_xce(one_host.state_dir, "--timeout", "1", "submit", *args, **env)
    assert f"submit path full ({why}" in r.stderr
    if "XCE_CONTROLLER" in env:  # nobody there: the full path's own error, not a door's answer
        assert r.returncode == 1 and "xce submit: controller at tcp://127.0.0.1:1 did not answer" in r.stderr
    else:
        assert r.returncode == 0, r.stderr


def test_a_door_that_hangs_up_hands_its_key_to_the_full_path(one_host: Cluster, tmp_path: Path) -> None:
    """The door took the request and died: the full path resends the same key, so no double submit.

    A second state directory names the same controller, but its door is a stand-in that
    reads the request and hangs up without an answer.
    """
    import shutil

    import zmq

    from xce.proto import codec
    from xce.proto import schema as S
    from xce.proto.opcodes import Op

    sd, sd2 = one_host.state_dir, tmp_path / "sd2"
    (sd2 / "auth").mkdir(parents=True)
    text = (sd / "cluster.toml").read_text().replace(f'state_dir = "{sd}"', f'state_dir = "{sd2}"')
    (sd2 / "cluster.toml").write_text(text)
    shutil.copy(sd / "auth" / "admin.token", sd2 / "auth" / "admin.token")
    (sd2 / "keys").mkdir()
    shutil.copy(sd / "keys" / "server.key", sd2 / "keys" / "server.key")  # the full path speaks CURVE
    door = door_path(sd2, cluster_config(sd2).controller.address)
    os.makedirs(os.path.dirname(door), mode=0o700)
    ctx = zmq.Context()
    stand_in = ctx.socket(zmq.ROUTER)
    stand_in.bind(f"ipc://{door}")
    seen: list[bytes] = []

    def take_and_hang_up() -> None:
        if stand_in.poll(20_000):
            seen.append(stand_in.recv_multipart()[1])
        stand_in.close(0)
    t = threading.Thread(target=take_and_hang_up, daemon=True)
    t.start()
    try:
        r = run_xce(sd2, "submit", "--", "true")
    finally:
        t.join(5)
        ctx.destroy(linger=0)
    assert r.returncode == 0, r.stderr
    assert "submit path full (door:" in r.stderr
    jid = int(r.stdout.split("<")[1].split(">")[0])
    # What the door saw, sent again: the same job answers, and none is added.
    op, sent = codec.decode_request(codec.decode_envelope(seen[0]))
    assert op == Op.SUBMIT and len(sent.key) == 24
    before = len(one_host.client.jobs(all=True))
    assert one_host.client.request(Op.SUBMIT, S.SubmitRequest(jobs=sent.jobs, key=sent.key)).ids == [jid]
    assert len(one_host.client.jobs(all=True)) == before


def test_with_three_controllers_every_door_leads_to_the_leader(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A follower's door answers not_leader; the fast path follows it to the leader's door."""
    with local_cluster(tmp_path_factory.mktemp("ha"), "--controllers", "3", "--hosts", "1",
                       "--slots-per-host", "1", "--mem-per-host", "1G") as c:
        cfg = cluster_config(c.state_dir)
        addresses = [cfg.controller.address, *cfg.controller.peer_addresses]
        doors = [door_path(c.state_dir, a) for a in addresses]
        wait_for(lambda: all(os.path.exists(d) for d in doors), 20, "a door per controller")
        token = stored_token_if_fresh(str(c.state_dir))
        assert token is not None
        for i, address in enumerate(addresses):  # the leader's door, and two that redirect to it
            body = {"jobs": [dict(quick.SPEC_DEFAULTS, command=["true"], cwd="/")], "dry_run": False,
                    "key": f"ha-{i}"}
            assert quick.send(str(c.state_dir), address, body, token, 10.0, f"ha-{i}") == 0
        r = run_xce(c.state_dir, "submit", "true")
        assert r.returncode == 0 and "submit path door" in r.stderr
        assert len(c.client.jobs(all=True)) == 4
    assert not any(os.path.exists(d) for d in doors)  # each controller took its door with it
