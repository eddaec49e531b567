"""`xce keys init|add|revoke|list`: the daemon tier's CURVE keys (xce/security/curve.py).

Registered into `xce` through xce.cli.main.EXTENSIONS.  The keys directory is the
cluster's ``security.keys_dir`` (default ``<state_dir>/keys``) unless ``--dir`` names one.

Lazy imports: CURVE and the cluster config load only for `xce keys` (an extension every `xce` run registers).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from xce.core.errors import InvalidRequest


def _store(a: argparse.Namespace) -> Any:
    from xce.security.curve import KeyStore

    if a.dir:
        return KeyStore(a.dir)
    from xce.client import cluster_config
    from xce.site.config import default_state_dir

    sd = Path(a.state_dir) if a.state_dir else default_state_dir()
    cfg = cluster_config(sd)
    return KeyStore(Path(cfg.security.keys_dir) if cfg.security.keys_dir else sd / "keys")


def cmd_keys(a: argparse.Namespace) -> int:
    from xce.security.curve import check_public

    store = _store(a)
    if a.sub == "init":
        public = store.init(force=a.force)
        print(f"server key {public.decode()} in {store.root} (give server.key to clients and daemons)")
    elif a.sub == "add":
        if a.public_key and a.from_file:
            raise InvalidRequest("give --public-key or --from, not both")
        if a.public_key or a.from_file:
            from xce.security.curve import read_cert

            public = check_public(a.public_key) if a.public_key else read_cert(Path(a.from_file))[0]
            store.allow(a.name, public)
            print(f"allowed {a.name}: {public.decode()}")
        else:
            public = store.new_daemon(a.name)
            print(f"allowed {a.name}: {public.decode()} (its secret: {store.root / (a.name + '.key_secret')})")
    elif a.sub == "revoke":
        store.revoke(a.name)
        print(f"revoked {a.name}: the controller refuses it within a second")
    else:
        allowed = {name: key.decode() for key, name in store.allowed().items()}
        server = store.server_public().decode() if store.exists() else None
        if a.json:
            print(json.dumps({"keys_dir": str(store.root), "server": server,
                              "allowed": dict(sorted(allowed.items()))}, indent=2))
        else:
            print(f"server\t{server or '(none: xce keys init)'}")
            for name, key in sorted(allowed.items()):
                print(f"{name}\t{key}")
    return 0


def register(sub: Any) -> None:
    s = sub.add_parser("keys", help="CURVE keys of the daemon tier (init, add, revoke, list)")
    s.add_argument("--dir", help="keys directory (default: the cluster's security.keys_dir)")
    ks = s.add_subparsers(dest="sub", required=True)
    ks.add_parser("init", help="make the controllers' server key pair").add_argument("--force", action="store_true")
    c = ks.add_parser("add", help="allow a daemon: a new key pair for NAME, or its public key")
    c.add_argument("name")
    c.add_argument("--public-key", help="the daemon's public key (40 Z85 characters; write --public-key=KEY, "
                   "since a key may start with '-')")
    c.add_argument("--from", dest="from_file", help="a certificate file holding its public key")
    ks.add_parser("revoke", help="take NAME off the allow-list").add_argument("name")
    ks.add_parser("list", help="the server key and the allowed keys").add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_keys)
