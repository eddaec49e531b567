"""`xce-rest`: the REST API of one cluster, served by uvicorn.

Why ASGI under uvicorn: one process and one asyncio loop serve many slow
clients cheaply (h11 or httptools parsing, graceful SIGTERM), and the same loop
can host zmq.asyncio sockets; controller calls run the sync xce.client in a small
thread pool (xce/rest/backend.py) so its leader-following logic is not
duplicated.  The server finds its cluster through ``--state-dir`` (cluster.toml,
auth/keys.toml, auth/users.toml) like every other XCE client; it creates the
key ring if the state dir has none.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

import uvicorn

from xce.core.errors import XceError
from xce.rest.app import create_app, services
from xce.rest.config import check, load_rest_conf
from xce.site.config import default_state_dir


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="xce-rest", description="XCE REST API server")
    p.add_argument("--state-dir", default=os.environ.get("XCE_STATE_DIR"),
                   help="the cluster's state directory (default $XCE_STATE_DIR or ~/.local/state/xce)")
    p.add_argument("--config", help="REST settings (TOML; see docs/rest.md)")
    p.add_argument("--listen", help="HOST:PORT (overrides the config's listen)")
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:


    a = parse(argv)
    logging.basicConfig(level=a.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    sd = Path(a.state_dir) if a.state_dir else default_state_dir()
    try:
        conf = load_rest_conf(a.config)
        if a.listen:
            conf.listen = a.listen
            check(conf, "--listen")
        svc = services(conf, sd)
    except XceError as e:
        print(f"xce-rest: {e.message}", file=sys.stderr)
        return 2
    host, port = conf.host_port
    # proxy_headers=False: uvicorn would otherwise take the peer address from X-Forwarded-For
    # whenever the peer is 127.0.0.1 (its forwarded_allow_ips default), so any local client could
    # name itself.  Only XCE's trusted_proxies decide who may set the header (xce/rest/middleware.py).
    server = uvicorn.Server(uvicorn.Config(create_app(svc), host=host, port=port, log_level=a.log_level,
                                           access_log=False, lifespan="off", server_header=False,
                                           proxy_headers=False))
    print(f"xce-rest: serving {conf.url} for the cluster in {sd}", flush=True)
    try:
        server.run()
    finally:
        svc.backend.close()
    return 0 if server.started else 1


if __name__ == "__main__":
    sys.exit(main())
