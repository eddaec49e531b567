"""Tokens, the key ring, the users file: every JWT attack of issue 5 is refused."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import stat
import time
from pathlib import Path

import jwt
import pytest
from argon2 import PasswordHasher

from xce.core.errors import Conflict, InvalidRequest, NotFound, Unauthenticated
from xce.rest.users import Authenticator, UserStore, pam_available
from xce.security import auth
from xce.security.auth import KeyRing, Principal, TokenService

ALICE = Principal("alice", ("user",))


@pytest.fixture
def ring() -> KeyRing:
    r = KeyRing(algorithms=["EdDSA"])
    r.add("EdDSA")
    return r


@pytest.fixture
def svc(ring: KeyRing) -> TokenService:
    return TokenService(ring)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def claims(ring: KeyRing, **over: object) -> dict[str, object]:
    t = int(time.time())
    c: dict[str, object] = {"sub": "alice", "roles": ["admin"], "iss": ring.issuer, "aud": ring.audience,
                            "iat": t, "nbf": t, "exp": t + 600}
    c.update(over)
    return {k: v for k, v in c.items() if v is not None}


def sign_ed(ring: KeyRing, c: dict[str, object], kid: str | None = None) -> str:
    from cryptography.hazmat.primitives import serialization

    k = ring.keys[-1]
    sk = serialization.load_pem_private_key(k.private_pem.encode(), None)
    return jwt.encode(c, sk, algorithm="EdDSA", headers={"kid": kid or k.kid})


def test_roundtrip_eddsa_and_hs256(svc: TokenService) -> None:
    assert svc.verify(svc.issue(ALICE)) == ALICE
    r = KeyRing(algorithms=["HS256"])
    r.add("HS256")
    hs = TokenService(r)
    tok = hs.issue(ALICE)
    assert jwt.get_unverified_header(tok)["alg"] == "HS256"
    assert hs.verify(tok) == ALICE


def refused(svc: TokenService, token: str, reason: str) -> None:
    with pytest.raises(Unauthenticated, match=reason):
        svc.verify(token)


def test_alg_none_refused(svc: TokenService, ring: KeyRing) -> None:
    header = {"alg": "none", "typ": "JWT", "kid": ring.current}
    tok = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims(ring)).encode())}."
    refused(svc, tok, "algorithm 'none' is not allowed")


def test_hs256_signed_with_the_eddsa_public_key_refused(svc: TokenService, ring: KeyRing) -> None:
    header = {"alg": "HS256", "typ": "JWT", "kid": ring.current}
    signing = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims(ring)).encode())}"
    mac = hmac.new(ring.keys[-1].public_pem.encode(), signing.encode(), hashlib.sha256).digest()
    refused(svc, f"{signing}.{b64(mac)}", "algorithm 'HS256' is not allowed")


def test_hs256_not_allowed_unless_configured(ring: KeyRing) -> None:
    ring.algorithms.append("HS256")
    ring.add("HS256")
    ring.algorithms.remove("HS256")  # key still in the ring, algorithm no longer allowed
    svc = TokenService(ring)
    refused(svc, jwt.encode(claims(ring), base64.b64decode(ring.keys[-1].secret_b64), algorithm="HS256",
                            headers={"kid": ring.current}), "not allowed")


def test_wrong_key_refused(svc: TokenService, ring: KeyRing) -> None:
    other = KeyRing()
    other.add("EdDSA")
    refused(svc, sign_ed(other, claims(ring), kid=ring.current), "Signature verification failed")


def test_unknown_kid_refused(svc: TokenService, ring: KeyRing) -> None:
    refused(svc, sign_ed(ring, claims(ring), kid="nope"), "unknown key id 'nope'")
    tok = sign_ed(ring, claims(ring))
    header, rest = tok.split(".", 1)
    no_kid = b64(json.dumps({"alg": "EdDSA", "typ": "JWT"}).encode())
    refused(svc, f"{no_kid}.{rest}", "unknown key id None")


def test_expired_not_yet_valid_and_future_iat_refused(svc: TokenService, ring: KeyRing) -> None:
    t = time.time()
    refused(svc, svc.issue(ALICE, ttl=60, now=t - 3600), "token expired")
    refused(svc, svc.issue(ALICE, nbf=t + 3600), "not yet valid")
    refused(svc, sign_ed(ring, claims(ring, iat=int(t) + 3600)), "not yet valid")
    # within the leeway both pass
    svc.verify(svc.issue(ALICE, ttl=60, now=t - 60 - ring.leeway // 2))
    svc.verify(svc.issue(ALICE, nbf=t + ring.leeway // 2))


@pytest.mark.parametrize("claim", ["exp", "nbf", "iat"])
@pytest.mark.parametrize("value", ["2000000000", 1e30, True, [1], float(2**62)])
def test_time_claims_must_be_numbers_within_bounds(svc: TokenService, ring: KeyRing, claim: str,
                                                    value: object) -> None:
    """pyjwt coerces exp="2000000000" or 1e30 with int(); XCE takes only Unix seconds it can believe."""
    refused(svc, sign_ed(ring, claims(ring, **{claim: value})), f"invalid token: {claim} must be")


def test_time_claims_at_the_bounds(svc: TokenService, ring: KeyRing) -> None:
    t = int(time.time())
    svc.verify(sign_ed(ring, claims(ring, exp=t + auth.TIME_CLAIM_HORIZON - 60, iat=float(t), nbf=0)))
    refused(svc, sign_ed(ring, claims(ring, exp=t + auth.TIME_CLAIM_HORIZON + 60)), "exp must be")
    refused(svc, sign_ed(ring, claims(ring, nbf=-1)), "nbf must be")
    with pytest.raises(InvalidRequest, match="ttl"):
        svc.issue(ALICE, ttl=auth.TIME_CLAIM_HORIZON + 1)


def test_wrong_audience_or_issuer_refused(svc: TokenService, ring: KeyRing) -> None:
    refused(svc, sign_ed(ring, claims(ring, aud="other-api")), "Audience")
    refused(svc, sign_ed(ring, claims(ring, iss="evil")), "issuer")


@pytest.mark.parametrize("missing", ["exp", "iat", "nbf", "iss", "aud", "sub"])
def test_missing_claim_refused(svc: TokenService, ring: KeyRing, missing: str) -> None:
    refused(svc, sign_ed(ring, claims(ring, **{missing: None})), f'"{missing}"')


def test_tampered_payload_refused(svc: TokenService) -> None:
    h, p, s = svc.issue(ALICE).split(".")
    body = json.loads(base64.urlsafe_b64decode(p + "=="))
    body["roles"] = ["admin"]
    refused(svc, f"{h}.{b64(json.dumps(body).encode())}.{s}", "Signature verification failed")


def test_garbage_and_bad_claim_types_refused(svc: TokenService, ring: KeyRing) -> None:
    for junk in ("", "abc", "a.b.c", "Bearer x"):
        refused(svc, junk, "malformed|invalid|unknown")
    refused(svc, sign_ed(ring, claims(ring, roles="admin")), "roles a list")


def test_rotation_and_revocation(tmp_path: Path) -> None:
    ring = auth.ensure_keyring(tmp_path)
    old = TokenService(ring).issue(ALICE)
    first = ring.current
    ring.add("EdDSA")
    svc = TokenService(ring)
    assert svc.verify(old) == ALICE and jwt.get_unverified_header(svc.issue(ALICE))["kid"] == ring.current
    ring.revoke(first)
    refused(TokenService(ring), old, "unknown key id")
    with pytest.raises(InvalidRequest, match="only key"):
        ring.revoke(ring.current)
    with pytest.raises(NotFound):
        ring.revoke("nope")


def test_local_admin_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XCE_TOKEN", raising=False)
    tok = auth.ensure_local_admin(tmp_path)
    path = tmp_path / "auth" / "admin.token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "auth" / "keys.toml").stat().st_mode) == 0o600
    p = TokenService.from_state_dir(tmp_path).verify(tok)
    assert p.roles == ("admin",) and p.user == auth.unix_user()
    assert auth.ensure_local_admin(tmp_path) == tok           # reused while fresh
    assert auth.cli_token(tmp_path) == tok
    (tmp_path / "auth" / "login.token").write_text("expired.token.x")
    assert auth.cli_token(tmp_path) == tok                     # an unreadable login is skipped
    login = TokenService.from_state_dir(tmp_path).issue(ALICE)
    (tmp_path / "auth" / "login.token").write_text(login)
    assert auth.cli_token(tmp_path) == login
    monkeypatch.setenv("XCE_TOKEN", "from-env")
    assert auth.cli_token(tmp_path) == "from-env"


@pytest.fixture
def store(tmp_path: Path) -> UserStore:
    return UserStore(tmp_path / "users.toml", PasswordHasher(time_cost=1, memory_cost=8, parallelism=1))


def test_users_file(store: UserStore) -> None:
    store.add("alice", ["user"], "s3cret")
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert "s3cret" not in store.path.read_text() and "$argon2id$" in store.path.read_text()
    assert store.verify("alice", "s3cret") == ALICE
    assert store.verify("alice", "wrong") is None
    assert store.verify("nobody", "s3cret") is None
    with pytest.raises(Conflict):
        store.add("alice", ["user"], "x")
    with pytest.raises(InvalidRequest):
        store.add("bad name", ["user"], "x")
    store.passwd("alice", "new")
    assert store.verify("alice", "s3cret") is None and store.verify("alice", "new") == ALICE
    store.add("pamonly", ["viewer"], None)
    assert store.verify("pamonly", "") is None
    store.delete("alice")
    assert store.verify("alice", "new") is None
    with pytest.raises(NotFound):
        store.delete("alice")


def test_users_file_reloaded_when_changed(store: UserStore) -> None:
    store.add("alice", ["user"], "pw")
    other = UserStore(store.path, store.hasher)
    assert other.verify("alice", "pw") == ALICE
    store.add("bob", ["viewer"], "pw2")
    os.utime(store.path, (time.time() + 5, time.time() + 5))
    assert other.verify("bob", "pw2") == Principal("bob", ("viewer",))


def test_pam_backend_is_optional(store: UserStore) -> None:
    store.add("alice", ["user"], "pw")
    a = Authenticator(store, ("file", "pam"))
    assert ("pam" in a.backends) == pam_available()
    assert a.authenticate("alice", "pw") == ALICE
    if not pam_available():
        assert a.authenticate("root", "x") is None


def test_running_service_follows_key_ring_changes(tmp_path: Path) -> None:
    auth.ensure_keyring(tmp_path)
    svc = TokenService.from_state_dir(tmp_path)
    tok = svc.issue(ALICE)
    ring = KeyRing.load(tmp_path / "auth" / "keys.toml")
    old = ring.current
    ring.add("EdDSA")
    ring.revoke(old)
    ring.save(tmp_path / "auth" / "keys.toml")
    os.utime(tmp_path / "auth" / "keys.toml", (time.time() + 5, time.time() + 5))
    svc._checked -= 2  # skip the once-a-second wait
    refused(svc, tok, "unknown key id")  # the cache was dropped with the old ring
    assert jwt.get_unverified_header(svc.issue(ALICE))["kid"] == ring.current


def test_daemon_token(tmp_path: Path) -> None:
    tok = auth.ensure_daemon_token(tmp_path)
    assert TokenService.from_state_dir(tmp_path).verify(tok) == Principal("xce-daemon", ("daemon",))
    assert auth.ensure_daemon_token(tmp_path) == tok
    assert auth.ensure_local_admin(tmp_path) != tok
