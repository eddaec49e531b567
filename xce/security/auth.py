"""Who is asking: JWT tokens, the signing key ring, the users file, PAM.

Owns: issuing and verifying tokens (pyjwt), the key ring ``<state>/auth/keys.toml``
(keys by ``kid``; the newest signs, all verify, so keys rotate), the users file
``<state>/auth/users.toml`` (argon2 hashes), the optional PAM backend, and the
tokens the CLI uses (``XCE_TOKEN``, a stored login, the local admin token that
`xce up` writes).  It never decides what a principal may do: xce/security/policy.py does.

Verification refuses, with a reason: a malformed token, an unknown ``kid``, an
algorithm not in the ring's allow-list or not the key's own (so an HS256 token
"signed" with an EdDSA public key never verifies), a bad signature, and a missing
or failing ``exp``/``iat``/``nbf``/``iss``/``aud``/``sub`` (``leeway`` seconds of
clock skew).  The time claims are checked here, not by pyjwt, which coerces them
with ``int()`` (``exp: "2000000000"`` or ``1e30`` passed): each must be a JSON
number of Unix seconds from 0 to ``TIME_CLAIM_HORIZON`` ahead of now.  Files
holding secrets are written 0600, atomically.
"""

from __future__ import annotations

import base64
import os
import secrets
import time
import tomllib
from pathlib import Path
from typing import Any, Literal

import jwt
import msgspec
import tomli_w
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from xce.core.errors import ConfigError, InvalidRequest, NotFound, Unauthenticated
from xce.security.policy import Principal
from xce.site.local import unix_user

__all__ = ["Principal", "KeyRing", "TokenService", "ensure_keyring", "ensure_local_admin", "ensure_daemon_token", "daemon_token",
           "cli_token"]

Alg = Literal["EdDSA", "HS256"]
AUTH_DIR, KEYS_FILE, ADMIN_TOKEN, LOGIN_TOKEN = "auth", "keys.toml", "admin.token", "login.token"
DAEMON_TOKEN = "daemon.token"
LOCAL_ADMIN_TTL = 30 * 86400
# No token XCE issues lives this long (the longest, xce-rest's anonymous one, 10 years), so a
# time claim beyond it is forged or broken; tokens with a ttl past it are refused at issue.
TIME_CLAIM_HORIZON = 20 * 365 * 86400
TIME_CLAIMS = ("exp", "nbf", "iat")


def check_time_claims(claims: dict[str, Any], now: float, leeway: float) -> float:
    """``exp`` of verified claims whose times are believable and current; Unauthenticated otherwise."""
    for name in TIME_CLAIMS:
        v = claims[name]
        if type(v) not in (int, float) or not 0 <= v <= now + TIME_CLAIM_HORIZON:
            raise Unauthenticated(f"invalid token: {name} must be Unix seconds between 0 and "
                                  f"{TIME_CLAIM_HORIZON // (365 * 86400)} years from now, got {v!r}"[:200])
    if claims["exp"] <= now - leeway:
        raise Unauthenticated("token expired")
    if max(claims["nbf"], claims["iat"]) > now + leeway:
        raise Unauthenticated("token not yet valid")
    return float(claims["exp"])


class Key(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    kid: str
    alg: Alg
    created: float
    private_pem: str = ""   # EdDSA signing key (absent on verify-only copies)
    public_pem: str = ""    # EdDSA
    secret_b64: str = ""    # HS256 shared secret


class KeyRing(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Token trust settings and keys; every verifier (REST, controller) reads the same file."""

    issuer: str = "xce"
    audience: str = "xce"
    algorithms: list[Alg] = msgspec.field(default_factory=lambda: ["EdDSA"])
    ttl: int = 3600          # seconds a token issued by POST /v1/auth/token lives
    leeway: int = 30         # seconds of clock skew accepted on exp/nbf/iat
    current: str = ""
    keys: list[Key] = []

    def add(self, alg: Alg = "EdDSA") -> Key:
        """Generate a new key and make it the signing one (rotation)."""
        if alg not in self.algorithms:
            raise InvalidRequest(f"algorithm {alg} is not allowed by this key ring ({self.algorithms})")
        kid = f"{time.strftime('%Y%m%d')}-{secrets.token_hex(4)}"
        if alg == "HS256":
            key = Key(kid=kid, alg=alg, created=time.time(),
                      secret_b64=base64.b64encode(secrets.token_bytes(32)).decode())
        else:
            sk = Ed25519PrivateKey.generate()
            key = Key(kid=kid, alg=alg, created=time.time(),
                      private_pem=sk.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                   serialization.NoEncryption()).decode(),
                      public_pem=sk.public_key().public_bytes(serialization.Encoding.PEM,
                                                              serialization.PublicFormat.SubjectPublicKeyInfo).decode())
        self.keys.append(key)
        self.current = kid
        return key

    def revoke(self, kid: str) -> None:
        if kid not in {k.kid for k in self.keys}:
            raise NotFound(f"no key {kid!r} in the ring")
        if len(self.keys) == 1:
            raise InvalidRequest(f"{kid} is the only key; add a new one first")
        self.keys = [k for k in self.keys if k.kid != kid]
        if self.current == kid:
            self.current = max(self.keys, key=lambda k: k.created).kid

    @staticmethod
    def load(path: Path) -> KeyRing:
        try:
            return msgspec.convert(tomllib.loads(path.read_text()), KeyRing)
        except OSError as e:
            raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
        except (tomllib.TOMLDecodeError, msgspec.ValidationError) as e:
            raise ConfigError(f"{path}: {e}") from None

    def save(self, path: Path) -> None:
        write_secret(path, tomli_w.dumps(msgspec.to_builtins(self)))


def write_secret(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    tmp.replace(path)


class TokenService:
    """Issues and verifies tokens with one key ring; verified tokens are cached until exp.

    Built from a file (``from_state_dir``), it re-reads the ring at most once a second
    when the file changed, so `xce signing-keys add|revoke` act on running servers.
    """

    REQUIRED = ["exp", "iat", "nbf", "iss", "aud", "sub"]

    def __init__(self, ring: KeyRing, path: Path | None = None) -> None:
        self.path, self._mtime, self._checked = path, path.stat().st_mtime if path else 0.0, time.monotonic()
        self._load(ring)

    def _load(self, ring: KeyRing) -> None:
        self.ring = ring
        self._sign: dict[str, Any] = {}
        self._verify: dict[str, tuple[str, Any]] = {}
        for k in ring.keys:
            if k.alg == "HS256":
                self._sign[k.kid] = base64.b64decode(k.secret_b64)
                self._verify[k.kid] = ("HS256", self._sign[k.kid])
            else:
                self._verify[k.kid] = ("EdDSA", serialization.load_pem_public_key(k.public_pem.encode()))
                if k.private_pem:
                    self._sign[k.kid] = serialization.load_pem_private_key(k.private_pem.encode(), None)
        self._cache: dict[str, tuple[Principal, float]] = {}

    def _refresh(self) -> None:
        if self.path is None or time.monotonic() - self._checked < 1.0:
            return
        self._checked = time.monotonic()
        try:
            mtime = self.path.stat().st_mtime
        except OSError:
            return
        if mtime != self._mtime:
            self._mtime = mtime
            self._load(KeyRing.load(self.path))

    @classmethod
    def from_state_dir(cls, state_dir: str | Path) -> TokenService:
        path = auth_dir(state_dir) / KEYS_FILE
        return cls(KeyRing.load(path), path)

    def issue(self, principal: Principal, ttl: int | None = None, now: float | None = None,
              nbf: float | None = None) -> str:
        self._refresh()
        key = next((k for k in self.ring.keys if k.kid == self.ring.current), None)
        if key is None or key.kid not in self._sign:
            raise ConfigError("the key ring has no signing key (`xce signing-keys init`)")
        if ttl is not None and not 0 <= ttl <= TIME_CLAIM_HORIZON or self.ring.ttl > TIME_CLAIM_HORIZON:
            raise InvalidRequest(f"a token's ttl must be between 0 and {TIME_CLAIM_HORIZON} s")
        t = int(time.time() if now is None else now)
        claims = {"sub": principal.user, "roles": list(principal.roles), "iss": self.ring.issuer,
                  "aud": self.ring.audience, "iat": t, "nbf": int(nbf) if nbf is not None else t,
                  "exp": t + (self.ring.ttl if ttl is None else ttl), "jti": secrets.token_hex(8)}
        return jwt.encode(claims, self._sign[key.kid], algorithm=key.alg, headers={"kid": key.kid})

    def verify(self, token: str) -> Principal:
        """The principal a token vouches for; Unauthenticated (with the reason) otherwise."""
        self._refresh()
        hit = self._cache.get(token)
        if hit is not None:
            if time.time() <= hit[1] + self.ring.leeway:
                return hit[0]
            del self._cache[token]
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthenticated("malformed token") from None
        kid, alg = header.get("kid"), header.get("alg")
        if not isinstance(kid, str) or kid not in self._verify:
            raise Unauthenticated(f"unknown key id {kid!r}")
        key_alg, key = self._verify[kid]
        if alg != key_alg or alg not in self.ring.algorithms:
            raise Unauthenticated(f"algorithm {alg!r} is not allowed for key {kid}")
        try:  # the times are check_time_claims' to judge: pyjwt would coerce them
            claims = jwt.decode(token, key, algorithms=[key_alg], audience=self.ring.audience,
                                issuer=self.ring.issuer, options={
                                    "require": self.REQUIRED, "verify_exp": False, "verify_nbf": False,
                                    "verify_iat": False})
        except jwt.PyJWTError as e:
            raise Unauthenticated(f"invalid token: {e}") from None
        exp = check_time_claims(claims, time.time(), self.ring.leeway)
        roles, sub = claims.get("roles", []), claims["sub"]
        if not isinstance(sub, str) or not sub or not isinstance(roles, list) \
                or not all(isinstance(r, str) for r in roles):
            raise Unauthenticated("invalid token: sub must be a name and roles a list of names")
        principal = Principal(sub, tuple(roles))
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[token] = (principal, exp)
        return principal


def auth_dir(state_dir: str | Path) -> Path:
    return Path(state_dir) / AUTH_DIR


def ensure_keyring(state_dir: str | Path, alg: Alg = "EdDSA") -> KeyRing:
    """The state dir's key ring, created (one ``alg`` key) if there is none; safe against races."""
    path = auth_dir(state_dir) / KEYS_FILE
    if not path.exists():
        ring = KeyRing(algorithms=[alg])
        ring.add(alg)
        tmp = path.with_name(f".{KEYS_FILE}.new.{os.getpid()}")
        ring.save(tmp)
        try:
            os.link(tmp, path)  # first creator wins; a racing one loads the winner's ring
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return KeyRing.load(path)


def ensure_local_admin(state_dir: str | Path) -> str:
    """An admin token for the user running `xce up`, in ``<state>/auth/admin.token`` (0600)."""
    return _ensure_token(state_dir, ADMIN_TOKEN, Principal(unix_user(), ("admin",)))


def daemon_token(state_dir: str | Path | None) -> str:
    """The daemon-role token the local scheduler and workers show the controller:
    $XCE_DAEMON_TOKEN, else ``<state>/auth/daemon.token``, else none."""
    env = os.environ.get("XCE_DAEMON_TOKEN")
    if env:
        return env
    try:
        return (auth_dir(state_dir) / DAEMON_TOKEN).read_text().strip() if state_dir else ""
    except OSError:
        return ""


def ensure_daemon_token(state_dir: str | Path) -> str:
    """A ``daemon``-role token for the local scheduler and workers, ``<state>/auth/daemon.token``."""
    return _ensure_token(state_dir, DAEMON_TOKEN, Principal("xce-daemon", ("daemon",)))


def _ensure_token(state_dir: str | Path, name: str, principal: Principal) -> str:
    """Reused while it verifies and has more than a day to live; re-issued otherwise."""
    svc = TokenService(ensure_keyring(state_dir))
    path = auth_dir(state_dir) / name
    try:
        token = path.read_text().strip()
        if svc.verify(token) == principal and token_expiry(token) - time.time() > 86400:
            return token
    except (OSError, Unauthenticated):
        pass
    token = svc.issue(principal, ttl=LOCAL_ADMIN_TTL)
    write_secret(path, token + "\n")
    return token


def token_expiry(token: str) -> float:
    """``exp`` of a token, read without verifying it (for choosing which token to send)."""
    try:
        return float(jwt.decode(token, options={"verify_signature": False}).get("exp", 0))
    except (jwt.PyJWTError, TypeError, ValueError):
        return 0.0


def cli_token(state_dir: str | Path) -> str:
    """The token the CLI sends: ``XCE_TOKEN``, else `xce login`'s, else the local admin one."""
    env = os.environ.get("XCE_TOKEN")
    if env:
        return env
    d = auth_dir(state_dir)
    try:
        token = (d / LOGIN_TOKEN).read_text().strip()
        if token_expiry(token) > time.time():
            return token
    except OSError:
        pass
    if os.access(d / KEYS_FILE, os.R_OK) and os.access(d, os.W_OK):
        return ensure_local_admin(state_dir)  # we can mint: keep the local token fresh
    try:
        return (d / ADMIN_TOKEN).read_text().strip()
    except OSError:
        return ""
