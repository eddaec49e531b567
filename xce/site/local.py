"""What a client finds on this machine without loading the wire stack.

The state directory, the stored token, the Unix user and the controller's local
door (an ``ipc://`` endpoint beside the cluster file).  Stdlib only and cheap to
import: `xce submit`'s fast path (xce/cli/quick.py) and xce.client share these
so the two paths cannot drift apart.  Nothing here talks to a daemon.

Whether a command's first word is a job script (``script_file``) is read here too, so
the fast path, the full path and the ``bsub`` front-end decide it alike.

The door of a controller lives at ``<cluster state_dir>/doors/<its address>.sock``
(directory 0700, socket 0600): only the cluster's owner can connect, and the
token in the envelope is still checked as on any other endpoint.

Lazy imports: `xce submit`'s fast path reads this module; each helper loads its stdlib parts only when used.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False  # typing and pathlib cost the fast path ~20 ms: strings and os.path here
if TYPE_CHECKING:
    from pathlib import Path

CLUSTER_FILE = "cluster.toml"
DOORS = "doors"
UNIX_PATH_MAX = 107  # sun_path holds 108 bytes with the terminating NUL
AUTH_DIR, KEYS_FILE, ADMIN_TOKEN, LOGIN_TOKEN = "auth", "keys.toml", "admin.token", "login.token"  # = xce.security.auth's


def default_state_dir() -> Path:
    from pathlib import Path

    return Path(state_dir_default())


def state_dir_default() -> str:
    env = os.environ.get("XCE_STATE_DIR")
    if env:
        return env
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(base, "xce")


def door_path(state_dir: str | Path, address: str) -> str:
    """The socket file of the controller whose ROUTER is ``address`` (``tcp://127.0.0.1:7700``)."""
    where = address.partition("://")[2] or address
    name = "".join(ch if ch.isalnum() or ch in ".-" else "_" for ch in where)
    return os.path.join(state_dir, DOORS, f"{name}.sock")


def _read(path: str | Path) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def read_cluster_keys(path: str, wanted: set[tuple[str, str]]) -> dict[tuple[str, str], str] | None:
    """Plain string keys of a cluster file, as ``(table, key) -> value`` (top level: table "").

    Not a TOML parser: it reads ``key = "text"`` lines as `xce up` writes them and
    returns None when a wanted key is written any other way, so the caller takes
    the full path (tomllib plus validation) instead of guessing.
    """
    try:
        text = _read(path)
    except (OSError, UnicodeDecodeError):
        return None
    found: dict[tuple[str, str], str] = {}
    table = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            table = line.strip("[] ")
            continue
        key, eq, value = line.partition("=")
        k = (table, key.strip())
        if not eq or k not in wanted:
            continue
        value = value.strip()
        if len(value) < 2 or value[0] != '"' or value[-1] != '"' or "\\" in value or '"' in value[1:-1]:
            return None
        found[k] = value[1:-1]
    return found


def unix_user() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def stored_token_if_fresh(state_dir: str | Path) -> str | None:
    """The token to send, read without the JWT and crypto libraries; None only where
    ``xce.security.auth.cli_token`` would mint a new one (the caller then asks it).

    Past the fresh tokens this follows xce.security.auth.cli_token: with a readable key ring in a
    writable directory it mints (None here); otherwise the admin token as it is, or "".
    """
    env = os.environ.get("XCE_TOKEN")
    if env:
        return env
    d = os.path.join(state_dir, AUTH_DIR)
    for name, margin in ((LOGIN_TOKEN, 0.0), (ADMIN_TOKEN, 3600.0)):
        try:
            token = _read(os.path.join(d, name)).strip()
        except (OSError, UnicodeDecodeError):
            continue
        if _expiry(token) - margin > time.time():
            return token
    if os.access(os.path.join(d, KEYS_FILE), os.R_OK) and os.access(d, os.W_OK):
        return None
    try:
        return _read(os.path.join(d, ADMIN_TOKEN)).strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _expiry(token: str) -> float:
    """``exp`` of a JWT, read (not verified) from its payload; 0 if unreadable.

    What json.loads would give, found without importing json and base64 (~6 ms of the
    fast path) when the payload is a flat object with one numeric ``exp``, as pyjwt writes.
    """
    try:
        raw = _b64url(token.split(".")[1])
        quick = _flat_exp(raw)
        if quick is not None:
            return quick
        import json

        return float(json.loads(raw).get("exp", 0))
    except (IndexError, ValueError, TypeError, AttributeError):
        return 0.0


_B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _b64url(text: str) -> bytes:
    """A JWT part (base64url, padding optional) as bytes, as base64.urlsafe_b64decode reads a
    well-formed one, without binascii (a C module linked to zlib: ~0.3 ms of bsub's start);
    ValueError for a character outside the alphabet or an impossible length."""
    text = text.rstrip("=")
    bits = 6 * len(text)
    if bits % 8 >= 6:  # one character past a whole group of four carries no whole byte
        raise ValueError(f"a base64 text of {len(text)} characters")
    n = 0
    for ch in text:
        n = n << 6 | _B64URL.index(ch)
    return (n >> bits % 8).to_bytes(bits // 8, "big")


def _flat_exp(raw: bytes) -> float | None:
    """The number after the only ``"exp":`` of a one-level object; None when json must decide."""
    if raw.count(b"{") != 1 or raw.count(b'"exp"') != 1 or not raw.lstrip().startswith(b"{"):
        return None
    rest = raw.split(b'"exp"', 1)[1].lstrip()
    if not rest.startswith(b":"):
        return None
    rest = rest[1:].lstrip()
    end = 0
    while end < len(rest) and rest[end] in b"0123456789+-.eE":
        end += 1
    tail = rest[end:].lstrip()
    if not end or not tail or tail[0] not in b",}":
        return None
    try:
        return float(rest[:end])
    except ValueError:
        return None


def script_file(path: str) -> bool:
    """Is ``path`` a job script (a text file; xce.core.jobspec.scripts.is_script), whose
    ``#BSUB`` lines count and which is kept as submitted, rather than a program?"""
    from xce.core.jobspec.scripts import SCRIPT_SNIFF, is_script

    if not os.path.isfile(path):  # first: opening a FIFO would block
        return False
    try:
        with open(path, "rb") as f:
            return is_script(f.read(SCRIPT_SNIFF))
    except OSError:
        return False
