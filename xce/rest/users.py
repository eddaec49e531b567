"""Password logins: the local users file (argon2 hashes) and PAM where it is importable.

Owns ``<state>/auth/users.toml``::

    [users.alice]
    roles = ["user"]
    hash = "$argon2id$v=19$m=65536,t=3,p=4$..."   # empty: no password login (PAM only)

The file is re-read when its mtime changes, so `xce user add` takes effect on a
running xce-rest.  Unknown users cost one dummy argon2 verification, so timing
does not tell which names exist.  PAM (``python-pam``) is used only if installed
and configured; without it the backend reports itself unavailable.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import msgspec
import tomli_w
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from xce.core.errors import ConfigError, Conflict, InvalidRequest, NotFound
from xce.security.auth import auth_dir, write_secret
from xce.security.policy import Principal

USERS_FILE = "users.toml"
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


class UserEntry(msgspec.Struct, forbid_unknown_fields=True):
    roles: list[str]
    hash: str = ""


class UserStore:
    def __init__(self, path: Path, hasher: PasswordHasher | None = None) -> None:
        self.path = path
        self.hasher = hasher or PasswordHasher()
        self._users: dict[str, UserEntry] = {}
        self._mtime = -1.0
        self._dummy = self.hasher.hash("not a password")

    @classmethod
    def for_state_dir(cls, state_dir: str | Path) -> UserStore:
        return cls(auth_dir(state_dir) / USERS_FILE)

    def users(self) -> dict[str, UserEntry]:
        try:
            mtime = self.path.stat().st_mtime
        except FileNotFoundError:
            self._users, self._mtime = {}, -1.0
            return self._users
        if mtime != self._mtime:
            try:
                data = tomllib.loads(self.path.read_text())
                self._users = msgspec.convert(data.get("users", {}), dict[str, UserEntry])
            except (tomllib.TOMLDecodeError, msgspec.ValidationError) as e:
                raise ConfigError(f"{self.path}: {e}") from None
            self._mtime = mtime
        return self._users

    def _save(self, users: dict[str, UserEntry]) -> None:
        write_secret(self.path, tomli_w.dumps({"users": msgspec.to_builtins(users)}))
        self._mtime = -1.0

    def add(self, name: str, roles: list[str], password: str | None) -> None:
        if not NAME.match(name) or name == "anonymous":
            raise InvalidRequest(f"bad user name {name!r} (letters, digits, _ . -; at most 64; "
                                 "'anonymous' is reserved)")
        users = dict(self.users())
        if name in users:
            raise Conflict(f"user {name} exists (use `xce user passwd`)")
        users[name] = UserEntry(roles=list(roles), hash=self.hasher.hash(password) if password else "")
        self._save(users)

    def passwd(self, name: str, password: str) -> None:
        users = dict(self.users())
        if name not in users:
            raise NotFound(f"no user {name}")
        users[name] = UserEntry(roles=users[name].roles, hash=self.hasher.hash(password))
        self._save(users)

    def delete(self, name: str) -> None:
        users = dict(self.users())
        if users.pop(name, None) is None:
            raise NotFound(f"no user {name}")
        self._save(users)

    def verify(self, name: str, password: str) -> Principal | None:
        entry = self.users().get(name)
        try:
            if entry is None or not entry.hash:
                self.hasher.verify(self._dummy, password + "x")  # same cost as a real check
                return None
            self.hasher.verify(entry.hash, password)
        except (VerificationError, InvalidHashError):
            return None
        return Principal(name, tuple(entry.roles))


def pam_available() -> bool:
    try:
        import pam  # noqa: F401  # python-pam
    except ImportError:
        return False
    return True


class Authenticator:
    """Password -> principal through the configured backends, in order ("file", "pam")."""

    def __init__(self, store: UserStore, backends: tuple[str, ...] = ("file",),
                 pam_roles: tuple[str, ...] = ("user",), pam_service: str = "login") -> None:
        bad = set(backends) - {"file", "pam"}
        if bad:
            raise ConfigError(f"unknown auth backend(s) {sorted(bad)} (file, pam)")
        self.store = store
        self.backends = tuple(b for b in backends if b != "pam" or pam_available())
        self.pam_roles, self.pam_service = pam_roles, pam_service

    def authenticate(self, name: str, password: str) -> Principal | None:
        for b in self.backends:
            if b == "file":
                p = self.store.verify(name, password)
                if p is not None:
                    return p
            elif b == "pam" and self._pam(name, password):
                entry = self.store.users().get(name)
                return Principal(name, tuple(entry.roles) if entry else self.pam_roles)
        return None

    def _pam(self, name: str, password: str) -> bool:
        # python-pam is optional: only a users file with PAM entries needs it
        import pam

        return bool(pam.pam().authenticate(name, password, service=self.pam_service))
