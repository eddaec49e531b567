"""`xce user`, `xce signing-keys`, `xce token` in-process (login is covered end to end)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xce.cli.main import main
from xce.rest.users import UserStore
from xce.security.auth import TokenService


def run(sd: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["--state-dir", str(sd), *args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(autouse=True)
def cheap_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    from argon2 import PasswordHasher

    import xce.rest.users

    monkeypatch.setattr(xce.rest.users, "PasswordHasher",
                        lambda: PasswordHasher(time_cost=1, memory_cost=8, parallelism=1))


def test_users(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(tmp_path, capsys, "user", "add", "alice", "--role", "user", "--password", "pw")[0] == 0
    assert run(tmp_path, capsys, "user", "add", "vic", "--role", "viewer", "--role", "user",
               "--password", "pw2")[0] == 0
    rc, _, err = run(tmp_path, capsys, "user", "add", "eve", "--role", "root", "--password", "x")
    assert rc == 2 and "unknown role(s) root" in err
    rc, out, _ = run(tmp_path, capsys, "user", "list", "--json")
    assert json.loads(out) == {"alice": {"roles": ["user"], "password": True},
                               "vic": {"roles": ["viewer", "user"], "password": True}}
    store = UserStore.for_state_dir(tmp_path)
    assert store.verify("alice", "pw") is not None
    assert run(tmp_path, capsys, "user", "passwd", "alice", "--password", "new")[0] == 0
    assert store.verify("alice", "pw") is None and store.verify("alice", "new") is not None
    assert run(tmp_path, capsys, "user", "del", "alice")[0] == 0
    rc, _, err = run(tmp_path, capsys, "user", "del", "alice")
    assert rc == 1 and "no user alice" in err
    assert run(tmp_path, capsys, "user", "list")[1].strip() == "vic\tviewer,user"


def test_keys_and_tokens(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XCE_TOKEN", raising=False)
    rc, _, err = run(tmp_path, capsys, "token")
    assert rc == 1 and "no token" in err
    assert run(tmp_path, capsys, "signing-keys", "init")[0] == 0
    assert run(tmp_path, capsys, "signing-keys", "init")[0] == 2  # refuses to replace silently
    first = run(tmp_path, capsys, "signing-keys", "list")[1].split()[0]
    rc, tok, _ = run(tmp_path, capsys, "token", "--issue", "--user", "bob", "--role", "viewer", "--ttl", "60")
    old = tok.strip()
    assert TokenService.from_state_dir(tmp_path).verify(old).roles == ("viewer",)
    assert run(tmp_path, capsys, "signing-keys", "add", "--alg", "HS256")[0] == 0
    lines = run(tmp_path, capsys, "signing-keys", "list")[1].splitlines()
    assert lines[0].endswith("verify-only") and lines[1].split()[1:] == ["HS256", "signing"]
    assert TokenService.from_state_dir(tmp_path).verify(old).user == "bob"   # rotation keeps old tokens
    assert run(tmp_path, capsys, "signing-keys", "revoke", first)[0] == 0
    with pytest.raises(Exception, match="unknown key id"):
        TokenService.from_state_dir(tmp_path).verify(old)
    rc, out, _ = run(tmp_path, capsys, "token", "--claims")   # the local admin token, minted on demand
    assert rc == 0 and json.loads(out)["roles"] == ["admin"]
    monkeypatch.setenv("XCE_TOKEN", "from-env")
    assert run(tmp_path, capsys, "token")[1].strip() == "from-env"
