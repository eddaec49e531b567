"""X-Forwarded-For is believed only from XCE's `trusted_proxies` (issue 12, item 5).

A real `xce-rest` process on 127.0.0.1: uvicorn must not rewrite the peer address
from the header on its own (its default trusts 127.0.0.1), or any local client
escapes its rate-limit bucket and writes what address it likes into the audit log.
No controller is needed: POST /v1/auth/token is public, answered by xce-rest itself,
and audited as a state-changing request.
"""

from __future__ import annotations

import contextlib
import json
import random
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from conftest import wait_for

from xce.cli.up import free_port


@contextlib.contextmanager
def rest_server(tmp_path: Path, trusted: list[str]) -> Iterator[str]:
    sd = tmp_path / "xce"
    url = f"http://127.0.0.1:{free_port()}"
    conf = tmp_path / "rest.toml"
    # A bucket of 3 that refills once a minute: the 4th request of one client gets 429, however fast.
    conf.write_text(f"listen = \"{url[7:]}\"\nrate = 0.016\nburst = 3\ntrusted_proxies = {json.dumps(trusted)}\n")
    p = subprocess.Popen([sys.executable, "-m", "xce.rest.server", "--state-dir", str(sd), "--config", str(conf)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: p.poll() is None and status(f"{url}/healthz", {}) > 0, 20, "xce-rest to answer")
        yield url
    finally:
        p.terminate()
        p.wait(20)


def status(url: str, headers: dict[str, str]) -> int:
    req = urllib.request.Request(url, headers=headers)
    if url.endswith("/token"):
        req = urllib.request.Request(url, data=b'{"username": "nobody", "password": "x"}', method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def forged() -> str:
    return f"127.{random.randrange(1, 256)}.{random.randrange(256)}.{random.randrange(1, 255)}"  # allow-listed, never the peer


def audited_clients(tmp_path: Path) -> set[str]:
    lines = (tmp_path / "xce" / "auth" / "audit.jsonl").read_text().splitlines()
    return {json.loads(ln)["client"] for ln in lines if '"/v1/auth/token"' in ln}


def test_a_forged_header_from_an_untrusted_peer_changes_nothing(tmp_path: Path) -> None:
    with rest_server(tmp_path, trusted=[]) as url:
        codes = [status(f"{url}/v1/auth/token", {"X-Forwarded-For": forged()}) for _ in range(12)]
    assert codes[:2] == [401, 401] and codes.count(429) >= 8, codes  # one bucket: the peer's
    assert audited_clients(tmp_path) == {"127.0.0.1"}


def test_a_trusted_proxy_names_the_client(tmp_path: Path) -> None:
    with rest_server(tmp_path, trusted=["127.0.0.1/32"]) as url:
        clients = [forged() for _ in range(6)]
        codes = [status(f"{url}/v1/auth/token", {"X-Forwarded-For": c}) for c in clients]
        assert 429 not in codes, codes  # each named client has its own bucket
        again = [status(f"{url}/v1/auth/token", {"X-Forwarded-For": clients[0]}) for _ in range(4)]
        assert 429 in again, again
    assert set(clients) <= audited_clients(tmp_path)
