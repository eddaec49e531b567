"""End to end over real HTTP: `xce up` (which starts xce-rest) -> token -> submit -> list ->
modify limit -> kill -> accounting record -> audit, with real daemons on 127.0.0.1."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from conftest import local_cluster, wait_for

from xce.client import cluster_config
from xce.security.auth import unix_user


def http(method: str, url: str, token: str | None = None, body: Any = None) -> tuple[int, dict[str, str], Any]:
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, method=method, headers=headers,
                                 data=json.dumps(body).encode() if body is not None else None)
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            status, hdrs, data = r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        status, hdrs, data = e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()
    ctype = hdrs.get("content-type", "")
    return status, hdrs, json.loads(data) if "json" in ctype else data.decode()


def login(url: str, user: str, password: str) -> str:
    status, _, reply = http("POST", f"{url}/v1/auth/token", body={"username": user, "password": password})
    assert status == 200, reply
    assert reply["token_type"] == "Bearer" and reply["expires_in"] > 0
    return reply["access_token"]


def test_rest_end_to_end(tmp_path: Path) -> None:
    with local_cluster(tmp_path, "--hosts", "1", "--slots-per-host", "2", "--mem-per-host", "2G",
                       "--heartbeat", "0.5") as c:
        url = cluster_config(c.state_dir).rest_url
        assert url.startswith("http://127.0.0.1:")
        wait_for(lambda: http("GET", f"{url}/healthz")[0] == 200, 20, "xce-rest to answer /healthz")
        me = unix_user()  # jobs run as this user, so the REST user must exist on the host
        c.xce("user", "add", me, "--role", "user", "--password", "pw-me")
        c.xce("user", "add", "bob", "--role", "user", "--password", "pw-bob")
        token = login(url, me, "pw-me")

        status, hdrs, sub = http("POST", f"{url}/v1/jobs", token,
                                 {"command": ["sleep", "60"], "resreq": "rusage[mem=50M]", "name": "e2e",
                                  "cwd": str(tmp_path)})
        assert status == 201, sub
        jid = sub["id"]
        assert hdrs["location"] == f"/v1/jobs/{jid}" and sub["queue"] == "normal"

        status, _, jobs = http("GET", f"{url}/v1/jobs", token)
        assert status == 200 and [(j["id"], j["user"], j["name"]) for j in jobs] == [(jid, me, "e2e")]
        wait_for(lambda: http("GET", f"{url}/v1/jobs/{jid}", token)[2]["state"] == "RUN", 20, "job RUN")

        status, _, view = http("PATCH", f"{url}/v1/jobs/{jid}", token, {"mem_limit": "1G"})
        assert status == 200 and view["mem_limit"] == 1 << 30
        assert c.client.job(jid).mem_limit == 1 << 30  # the CLI's door sees the same job

        bob = login(url, "bob", "pw-bob")
        status, _, problem = http("DELETE", f"{url}/v1/jobs/{jid}", bob)
        assert status == 403 and problem["permission"] == "jobs.kill"

        status, _, killed = http("DELETE", f"{url}/v1/jobs/{jid}", token)
        assert status in (200, 202) and str(jid) in killed["results"]

        def record() -> Any:
            acc = http("GET", f"{url}/v1/accounting", token)[2]
            return next((j for j in acc if j["id"] == jid), None)
        rec = wait_for(record, 20, "the accounting record")
        assert rec["state"] == "EXIT" and rec["user"] == me and f"killed by {me}" in rec["reason"]
        assert rec["end_time"] is not None and rec["mem_limit"] == 1 << 30

        admin = c.xce("token").stdout.strip()  # the local admin token `xce up` made possible
        status, _, audit = http("GET", f"{url}/v1/audit", admin)
        assert status == 200
        mine = [(a["user"], a["method"], a["status"]) for a in audit if a["path"].startswith("/v1/jobs")]
        assert mine == [(me, "POST", 201), (me, "PATCH", 200), ("bob", "DELETE", 403),
                        (me, "DELETE", status_kill(killed))]
        assert http("GET", f"{url}/v1/audit", token)[0] == 403

        status, _, st = http("GET", f"{url}/v1/status", token)
        assert st["rest_url"] == url and st["leader"]
        assert json.loads(c.xce("status", "--json").stdout)["rest_url"] == url
        status, _, metrics = http("GET", f"{url}/metrics", admin)
        assert status == 200 and 'xce_jobs{state="EXIT"} 1' in metrics

        c.xce("login", "--user", "bob", "--password", "pw-bob")   # rest_url from cluster.toml
        assert json.loads(c.xce("token", "--claims").stdout)["sub"] == "bob"
        assert c.xce("login", "--user", "bob", "--password", "nope", check=False).returncode == 1
        c.xce("logout")
        assert c.xce("token").stdout.strip() == admin


def status_kill(killed: dict[str, Any]) -> int:
    return 202 if "kill requested" in killed["results"].values() else 200
