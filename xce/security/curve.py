"""CURVE key material of the daemon tier: the cluster's server key, each daemon's key, the allow-list.

The layout (``<state_dir>/keys`` unless ``security.keys_dir`` says otherwise) follows
ZeroMQ's certificate files, so operators can use CZMQ/pyzmq tools on them too::

    server.key, server.key_secret   the controllers' key pair (all controllers share it, so a
                                    client that follows the leader needs one server key)
    NAME.key, NAME.key_secret       a daemon's own key pair (a worker: its host name)
    allowed/NAME.key                 the public keys the controller lets register and take orders

Clients (CLI, scripts, xce-rest, xce-top) need only ``server.key``: they connect with an
ephemeral key pair and prove who they are with their token.  Revoking a key removes its
file from ``allowed/``; the controller re-reads the directory when it changes, and checks
the key of every daemon message, so a revoked worker is refused at its next heartbeat.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xce.core.errors import ConfigError, InvalidRequest

if TYPE_CHECKING:
    from xce.site.config import Config

SERVER = "server"
ALLOWED = "allowed"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_Z85 = re.compile(r"^[0-9A-Za-z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}$")


@dataclass(frozen=True)
class ClientKeys:
    """What a connecting socket needs: the server's public key and its own pair (all Z85)."""

    server_public: bytes
    public: bytes
    secret: bytes


@dataclass(frozen=True)
class ServerKeys:
    public: bytes
    secret: bytes


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise InvalidRequest(f"key name {name!r}: use letters, digits, '.', '_' or '-' (at most 128)")
    return name


def check_public(key: str) -> bytes:
    key = key.strip()
    if not _Z85.match(key):
        raise InvalidRequest(f"public key {key[:48]!r}: not a 40-character Z85 CURVE key")
    return key.encode()


def _write(path: Path, public: bytes, secret: bytes | None) -> None:
    # ZeroMQ's certificate format (ZPL), written owner-only and atomically.
    lines = ["#   ****  XCE CURVE certificate  ****", "metadata", "curve",
             f'    public-key = "{public.decode()}"']
    if secret is not None:
        lines.append(f'    secret-key = "{secret.decode()}"')
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if secret is not None else 0o644)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    tmp.replace(path)


def read_cert(path: Path) -> tuple[bytes, bytes | None]:
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read CURVE key: {e.strerror}") from None
    found: dict[str, bytes] = {}
    for line in text.splitlines():
        m = re.match(r'\s*(public|secret)-key\s*=\s*"(.{40})"\s*$', line)
        if m:
            found[m.group(1)] = m.group(2).encode()
    if "public" not in found:
        raise ConfigError(f"{path}: no public-key in this CURVE certificate")
    return found["public"], found.get("secret")


class KeyStore:
    """One directory of CURVE keys; every method is a small file operation."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.allowed_dir = self.root / ALLOWED

    def exists(self) -> bool:
        return (self.root / f"{SERVER}.key_secret").exists() or (self.root / f"{SERVER}.key").exists()

    def init(self, force: bool = False) -> bytes:
        """Make the cluster's server key pair (refused if one exists, unless forced)."""
        if self.exists() and not force:
            raise InvalidRequest(f"{self.root} already has a server key (--force replaces it, and "
                                 "every daemon and client then needs the new server.key)")
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.allowed_dir.mkdir(exist_ok=True, mode=0o700)
        public, secret = _keypair()
        _write(self.root / f"{SERVER}.key_secret", public, secret)
        _write(self.root / f"{SERVER}.key", public, None)
        return public

    def ensure_server(self) -> bytes:
        return self.server().public if self.exists() else self.init()

    def server(self) -> ServerKeys:
        public, secret = read_cert(self.root / f"{SERVER}.key_secret")
        if secret is None:
            raise ConfigError(f"{self.root / (SERVER + '.key_secret')}: no secret-key")
        return ServerKeys(public, secret)

    def server_public(self) -> bytes:
        return read_cert(self.root / f"{SERVER}.key")[0]

    def new_daemon(self, name: str) -> bytes:
        """A key pair for the daemon ``name`` (its secret stays here), allowed at once."""
        check_name(name)
        public, secret = _keypair()
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        _write(self.root / f"{name}.key_secret", public, secret)
        _write(self.root / f"{name}.key", public, None)
        self.allow(name, public)
        return public

    def ensure_daemon(self, name: str) -> bytes:
        path = self.root / f"{check_name(name)}.key_secret"
        if path.exists():
            public = read_cert(path)[0]
            self.allow(name, public)
            return public
        return self.new_daemon(name)

    def allow(self, name: str, public: bytes) -> None:
        check_name(name)
        if name == SERVER:
            raise InvalidRequest("'server' names the controllers' own key; pick another name")
        self.allowed_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        _write(self.allowed_dir / f"{name}.key", public, None)

    def revoke(self, name: str) -> None:
        path = self.allowed_dir / f"{check_name(name)}.key"
        if not path.exists():
            raise InvalidRequest(f"no allowed key named {name!r} in {self.allowed_dir}")
        path.unlink()

    def allowed(self) -> dict[bytes, str]:
        """Allowed public key (Z85) → daemon name."""
        out: dict[bytes, str] = {}
        try:
            files = sorted(self.allowed_dir.glob("*.key"))
        except OSError:
            return out
        for f in files:
            try:
                out[read_cert(f)[0]] = f.stem
            except ConfigError:
                continue  # a half-written or foreign file must not stop the controller
        return out

    def daemon(self, name: str) -> tuple[bytes, bytes]:
        public, secret = read_cert(self.root / f"{check_name(name)}.key_secret")
        if secret is None:
            raise ConfigError(f"{self.root / (name + '.key_secret')}: no secret-key")
        return public, secret


class AllowList:
    """The controller's view of ``allowed/``, re-read when the directory changes (checked ≤ 1/s)."""

    def __init__(self, store: KeyStore) -> None:
        self.store = store
        self.keys: dict[bytes, str] = {}
        self._stamp: tuple[int, int] | None = None
        self._next = 0.0

    def refresh(self, now: float) -> None:
        if now < self._next:
            return
        self._next = now + 1.0
        try:
            st = self.store.allowed_dir.stat()
            stamp = (st.st_mtime_ns, st.st_ino)
        except OSError:
            stamp = (0, 0)
        if stamp != self._stamp:
            self._stamp = stamp
            self.keys = self.store.allowed()

    def name_of(self, user_id: bytes | str | None) -> str | None:
        if not user_id:
            return None
        return self.keys.get(user_id.encode() if isinstance(user_id, str) else user_id)


def _keypair() -> tuple[bytes, bytes]:
    # zmq only here: the pure reactors import this module's key checks without it
    import zmq

    return zmq.curve_keypair()


def ephemeral(server_public: bytes) -> ClientKeys:
    public, secret = _keypair()
    return ClientKeys(server_public, public, secret)


def keys_root(cfg: Config) -> Path:
    if cfg.security.keys_dir:
        return Path(cfg.security.keys_dir)
    if not cfg.state_dir:
        raise ConfigError("security.curve is on but neither security.keys_dir nor state_dir is set")
    return Path(cfg.state_dir) / "keys"


def _server_public(cfg: Config) -> bytes:
    if cfg.security.server_key:
        try:
            return check_public(cfg.security.server_key)
        except InvalidRequest as e:
            raise ConfigError(f"key security.server_key: {e.message}") from None
    return KeyStore(keys_root(cfg)).server_public()


def server_keys(cfg: Config) -> ServerKeys | None:
    """The controllers' key pair, or None when CURVE is off."""
    return KeyStore(keys_root(cfg)).server() if cfg.security.curve else None


def client_keys(cfg: Config) -> ClientKeys | None:
    """A throw-away key pair for a client (CLI, scripts, REST, console), or None when CURVE is off."""
    return ephemeral(_server_public(cfg)) if cfg.security.curve else None


# The allowed key that may act as the scheduler (PLACE), and that may not act as a worker.
SCHEDULER_KEY = "scheduler"


def daemon_keys(cfg: Config, default_name: str) -> ClientKeys | None:
    """A daemon's own key pair (the one the controller's allow-list knows), or None when CURVE is off."""
    if not cfg.security.curve:
        return None
    public, secret = KeyStore(keys_root(cfg)).daemon(cfg.security.key_name or default_name)
    return ClientKeys(_server_public(cfg), public, secret)


def start_authenticator(ctx: Any) -> Any:
    """A ZAP handler that lets any CURVE key connect and names it by its public key.

    Clients use throw-away keys, so the handshake cannot be the gate; the controller
    reads each daemon message's ``User-Id`` (the Z85 public key) and checks it against
    the allow-list instead.  That also makes a revocation bite at the next message.
    """
    # zmq only here: the pure reactors import this module's key checks without it
    import zmq.auth
    from zmq.auth.thread import ThreadAuthenticator  # (the same reason)

    auth = ThreadAuthenticator(ctx)
    auth.start()
    auth.configure_curve(domain="*", location=zmq.auth.CURVE_ALLOW_ANY)
    return auth
