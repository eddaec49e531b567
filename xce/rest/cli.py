"""CLI commands of the auth area: `xce user`, `xce login`/`logout`, `xce token`, `xce signing-keys`.

Registered into `xce` through xce.cli.main.EXTENSIONS.  Files live under
``<state>/auth/`` (xce/security/auth.py): `user` edits users.toml, `signing-keys` the token key
ring (``init`` creates it, ``add`` rotates in a new signing key, ``revoke``
removes one: tokens it signed stop verifying), `login` asks the REST server for a
token and stores it (login.token, 0600) for the CLI, `token` prints the token the
CLI would send or, with ``--issue``, mints one from the local key ring.

Lazy imports: these `xce` extensions (login, users) load JWT, Falcon's users and urllib only when run.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from pathlib import Path
from typing import Any

from xce.core.errors import InvalidRequest, Unauthenticated, Unavailable


def _sd(a: argparse.Namespace) -> Path:
    from xce.site.config import default_state_dir

    return Path(a.state_dir) if a.state_dir else default_state_dir()


def _password(a: argparse.Namespace, confirm: bool = True) -> str:
    if getattr(a, "password", None):
        return a.password
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\n")
    pw = getpass.getpass("Password: ")
    if confirm and getpass.getpass("Again: ") != pw:
        raise InvalidRequest("the passwords differ")
    return pw


def cmd_user(a: argparse.Namespace) -> int:
    from xce.rest.users import UserStore
    from xce.security.policy import load_policy

    store = UserStore.for_state_dir(_sd(a))
    if a.sub == "add":
        roles = a.role or ["user"]
        unknown = set(roles) - set(load_policy(a.rbac).roles)
        if unknown:
            raise InvalidRequest(f"unknown role(s) {', '.join(sorted(unknown))}")
        store.add(a.name, roles, None if a.no_password else _password(a))
        print(f"user {a.name} added with role(s) {', '.join(roles)}")
    elif a.sub == "passwd":
        store.passwd(a.name, _password(a))
        print(f"password of {a.name} changed")
    elif a.sub == "del":
        store.delete(a.name)
        print(f"user {a.name} deleted (tokens already issued stay valid until they expire)")
    else:
        users = sorted(store.users().items())
        if a.json:
            print(json.dumps({n: {"roles": e.roles, "password": bool(e.hash)} for n, e in users}, indent=2))
        else:
            print("\n".join(f"{n}\t{','.join(e.roles)}" for n, e in users) or "no users")
    return 0


def _post_json(url: str, body: dict[str, Any]) -> dict[str, Any]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        try:
            detail = json.loads(e.read()).get("detail", e.reason)
        except ValueError:
            detail = e.reason
        raise (Unauthenticated if e.code == 401 else InvalidRequest)(f"{url}: {detail}") from None
    except OSError as e:
        raise Unavailable(f"{url}: {e}") from None


def cmd_login(a: argparse.Namespace) -> int:
    from xce.client import cluster_config
    from xce.security.auth import LOGIN_TOKEN, auth_dir, unix_user, write_secret

    url = a.url or cluster_config(_sd(a)).rest_url
    if not url:
        raise InvalidRequest("no REST URL: pass --url (the cluster file has no rest_url)")
    user = a.user or unix_user()
    reply = _post_json(url.rstrip("/") + "/v1/auth/token",
                       {"username": user, "password": _password(a, confirm=False)})
    write_secret(auth_dir(_sd(a)) / LOGIN_TOKEN, reply["access_token"] + "\n")
    print(f"logged in as {user}; token valid for {reply['expires_in']} s")
    return 0


def cmd_logout(a: argparse.Namespace) -> int:
    from xce.security.auth import LOGIN_TOKEN, auth_dir

    (auth_dir(_sd(a)) / LOGIN_TOKEN).unlink(missing_ok=True)
    return 0


def cmd_token(a: argparse.Namespace) -> int:
    import jwt

    from xce.security.auth import Principal, TokenService, cli_token, unix_user

    if a.issue:
        svc = TokenService.from_state_dir(_sd(a))
        token = svc.issue(Principal(a.user or unix_user(), tuple(a.role or ["user"])), ttl=a.ttl)
    else:
        token = cli_token(_sd(a))
        if not token:
            raise Unauthenticated("no token: set XCE_TOKEN, run `xce login`, or start a local `xce up`")
    print(json.dumps(jwt.decode(token, options={"verify_signature": False}), indent=2) if a.claims else token)
    return 0


def cmd_keys(a: argparse.Namespace) -> int:
    from xce.security.auth import KEYS_FILE, KeyRing, auth_dir

    path = auth_dir(_sd(a)) / KEYS_FILE
    if a.sub == "init":
        if path.exists() and not a.force:
            raise InvalidRequest(f"{path} exists (--force replaces it and invalidates every token)")
        ring = KeyRing(algorithms=[a.alg])
        key = ring.add(a.alg)
    else:
        ring = KeyRing.load(path)
    if a.sub == "add":
        if a.alg not in ring.algorithms:
            ring.algorithms.append(a.alg)
        key = ring.add(a.alg)
    elif a.sub == "revoke":
        ring.revoke(a.kid)
    elif a.sub == "list":
        for k in ring.keys:
            print(f"{k.kid}\t{k.alg}\t{'signing' if k.kid == ring.current else 'verify-only'}")
        return 0
    ring.save(path)
    print(f"key {a.kid} revoked" if a.sub == "revoke" else f"key {key.kid} ({key.alg}) now signs tokens")
    return 0


def register(sub: Any) -> None:
    s = sub.add_parser("user", help="REST users (local users file)")
    us = s.add_subparsers(dest="sub", required=True)
    c = us.add_parser("add")
    c.add_argument("name")
    c.add_argument("--role", action="append", help="role (repeatable; default user)")
    c.add_argument("--password", help="the password (default: prompt, or a line on stdin)")
    c.add_argument("--no-password", action="store_true", help="no password login (PAM only)")
    c.add_argument("--rbac", help="policy file to check roles against")
    c = us.add_parser("passwd")
    c.add_argument("name")
    c.add_argument("--password")
    us.add_parser("del").add_argument("name")
    us.add_parser("list").add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_user)

    s = sub.add_parser("login", help="get a token from the REST server and store it for the CLI")
    s.add_argument("--url", help="REST base URL (default: the cluster's rest_url)")
    s.add_argument("--user", help="user name (default: your login name)")
    s.add_argument("--password")
    s.set_defaults(func=cmd_login)
    sub.add_parser("logout", help="forget the stored login token").set_defaults(func=cmd_logout)

    s = sub.add_parser("token", help="print the token the CLI sends (for curl and scripts)")
    s.add_argument("--claims", action="store_true", help="print its claims instead")
    s.add_argument("--issue", action="store_true", help="mint a new token from the local key ring")
    s.add_argument("--user")
    s.add_argument("--role", action="append")
    s.add_argument("--ttl", type=int, default=3600)
    s.set_defaults(func=cmd_token)

    # `xce keys` is the daemon tier's CURVE keys (xce/cli/keys.py); these sign tokens.
    s = sub.add_parser("signing-keys", help="token signing keys (init, add = rotate, revoke, list)")
    ks = s.add_subparsers(dest="sub", required=True)
    for name in ("init", "add"):
        c = ks.add_parser(name)
        c.add_argument("--alg", default="EdDSA", choices=["EdDSA", "HS256"])
        if name == "init":
            c.add_argument("--force", action="store_true")
    ks.add_parser("revoke").add_argument("kid")
    ks.add_parser("list")
    s.set_defaults(func=cmd_keys)
