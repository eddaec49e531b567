"""Each middleware alone (a tiny Falcon app around it), then the chain and its order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import falcon
import falcon.asgi
import falcon.testing
import pytest
from test_rest_fakes import Harness

from xce.rest import problems
from xce.rest.app import CHAIN
from xce.rest.middleware import CORS, JWT, RBAC, RateLimit, WhitelistIP, WhitelistURL
from xce.rest.routes import AUTHENTICATED, PUBLIC, Endpoint
from xce.security.auth import KeyRing, TokenService
from xce.security.policy import ANONYMOUS, DEFAULT_FILE, Principal, load_policy


class Echo:
    """Answers with what the middleware left on req.context."""

    def __init__(self, permission: str = PUBLIC) -> None:
        async def handler(*a: Any) -> None:
            return None
        self.endpoints = {"GET": Endpoint("GET", "/x", permission, handler, "", "t")}

    async def on_get(self, req: Any, resp: Any) -> None:
        p = getattr(req.context, "principal", None)
        resp.media = {"public": getattr(req.context, "public", None), "client": getattr(req.context, "client", None),
                      "user": p.user if p else None, "token": getattr(req.context, "token", None)}


def client(*middleware: Any, permission: str = PUBLIC) -> falcon.testing.TestClient:
    app = falcon.asgi.App(middleware=list(middleware))
    problems.install(app)
    app.add_route("/x", Echo(permission))
    app.add_route("/open", Echo(permission))
    return falcon.testing.TestClient(app)


def test_whitelist_url_marks_exact_paths() -> None:
    c = client(WhitelistURL(["/open"]))
    assert c.simulate_get("/open").json["public"] is True
    assert c.simulate_get("/x").json["public"] is False
    assert c.simulate_get("/open/").status_code == 404  # exact match only; no prefix tricks


def test_whitelist_ip_allows_listed_networks_only() -> None:
    c = client(WhitelistIP(["10.0.0.0/8", "::1/128"]))
    assert c.simulate_get("/x", remote_addr="10.1.2.3").json["client"] == "10.1.2.3"
    r = c.simulate_get("/x", remote_addr="192.168.1.1")
    assert r.status_code == 403 and "192.168.1.1 is not allowed" in r.json["detail"]
    assert r.headers["content-type"] == "application/problem+json"


def test_whitelist_ip_believes_forwarded_for_only_from_trusted_proxies() -> None:
    c = client(WhitelistIP(["10.0.0.0/8"], trusted_proxies=["192.168.0.0/16"]))
    via_proxy = c.simulate_get("/x", remote_addr="192.168.0.5", headers={"X-Forwarded-For": "10.9.9.9"})
    assert via_proxy.status_code == 200 and via_proxy.json["client"] == "10.9.9.9"
    # two proxies: read right to left, skipping trusted hops; a spoofed leftmost entry is ignored
    hops = {"X-Forwarded-For": "10.6.6.6, 172.16.0.1, 192.168.0.9"}
    r = c.simulate_get("/x", remote_addr="192.168.0.5", headers=hops)
    assert r.status_code == 403 and "172.16.0.1" in r.json["detail"]
    spoof = c.simulate_get("/x", remote_addr="172.16.0.1", headers={"X-Forwarded-For": "10.1.1.1"})
    assert spoof.status_code == 403 and "172.16.0.1" in spoof.json["detail"]
    junk = c.simulate_get("/x", remote_addr="192.168.0.5", headers={"X-Forwarded-For": "not-an-ip"})
    assert junk.status_code == 403


def test_rate_limit_429_then_recovery_per_client() -> None:
    now = [100.0]
    c = client(RateLimit(rate=2.0, burst=3, clock=lambda: now[0]))
    assert [c.simulate_get("/x", remote_addr="10.0.0.1").status_code for _ in range(3)] == [200] * 3
    r = c.simulate_get("/x", remote_addr="10.0.0.1")
    assert r.status_code == 429 and r.headers["retry-after"] == "1"
    assert r.headers["content-type"] == "application/problem+json"
    assert c.simulate_get("/x", remote_addr="10.0.0.2").status_code == 200  # its own bucket
    now[0] += 0.6  # 1.2 tokens refilled
    assert c.simulate_get("/x", remote_addr="10.0.0.1").status_code == 200
    assert c.simulate_get("/x", remote_addr="10.0.0.1").status_code == 429


def test_rate_limit_forgets_idle_clients() -> None:
    rl = RateLimit(rate=1.0, burst=1, max_clients=10)
    c = client(rl)
    for i in range(30):
        c.simulate_get("/x", remote_addr=f"10.0.0.{i}")
    assert len(rl.buckets) <= 10


@pytest.fixture(scope="module")
def tokens() -> TokenService:
    ring = KeyRing()
    ring.add("EdDSA")
    return TokenService(ring)


def test_jwt_requires_a_valid_bearer_token(tokens: TokenService) -> None:
    c = client(JWT(tokens, "anon"))
    r = c.simulate_get("/x")
    assert r.status_code == 401 and r.headers["www-authenticate"] == 'Bearer realm="xce"'
    r = c.simulate_get("/x", headers={"Authorization": "Basic YTpi"})
    assert r.status_code == 401 and "Bearer" in r.json["detail"]
    r = c.simulate_get("/x", headers={"Authorization": "Bearer nonsense"})
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]
    tok = tokens.issue(Principal("alice", ("user",)))
    r = c.simulate_get("/x", headers={"Authorization": f"Bearer {tok}"})
    assert r.json == {"public": None, "client": None, "user": "alice", "token": tok}


def test_jwt_lets_public_paths_and_preflights_through_as_anonymous(tokens: TokenService) -> None:
    c = client(WhitelistURL(["/open"]), JWT(tokens, "anon"))
    assert c.simulate_get("/open").json["user"] == "anonymous"
    assert c.simulate_get("/open").json["token"] == "anon"
    pre = c.simulate_options("/x", headers={"Origin": "https://ui.example", "Access-Control-Request-Method": "GET"})
    assert pre.status_code == 200  # Falcon's default OPTIONS: no token was asked for
    assert c.simulate_options("/x").status_code == 401  # not a preflight: needs a token


def test_cors_preflight_and_simple_requests() -> None:
    c = client(CORS(["https://ui.example"], max_age=60))
    pre = c.simulate_options("/x", headers={"Origin": "https://ui.example",
                                            "Access-Control-Request-Method": "DELETE",
                                            "Access-Control-Request-Headers": "authorization"})
    assert pre.status_code == 204
    assert pre.headers["access-control-allow-origin"] == "https://ui.example"
    assert "DELETE" in pre.headers["access-control-allow-methods"]
    assert "Authorization" in pre.headers["access-control-allow-headers"]
    assert pre.headers["access-control-max-age"] == "60" and "Origin" in pre.headers["vary"]
    bad = c.simulate_options("/x", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"})
    assert bad.status_code == 403 and "access-control-allow-origin" not in bad.headers
    ok = c.simulate_get("/x", headers={"Origin": "https://ui.example"})
    assert ok.headers["access-control-allow-origin"] == "https://ui.example"
    assert "Link" in ok.headers["access-control-expose-headers"]
    assert "access-control-allow-origin" not in c.simulate_get("/x", headers={"Origin": "https://evil.example"}).headers
    star = client(CORS(["*"])).simulate_get("/x", headers={"Origin": "https://any.example"})
    assert star.headers["access-control-allow-origin"] == "*"


class SetPrincipal:
    def __init__(self, p: Principal | None) -> None:
        self.p = p

    async def process_request(self, req: Any, resp: Any) -> None:
        if self.p is not None:
            req.context.principal = self.p


@pytest.mark.parametrize("perm, who, status", [
    ("hosts.admin", Principal("a", ("operator",)), 200),
    ("hosts.admin", Principal("a", ("viewer",)), 403),
    ("hosts.admin", None, 401),                       # fail closed without a principal
    (PUBLIC, None, 200),
    (AUTHENTICATED, Principal("a", ("viewer",)), 200),
    (AUTHENTICATED, ANONYMOUS, 401),
    ("jobs.kill", Principal("a", ("user",)), 200),    # own grant: the handler checks the owner
])
def test_rbac_checks_the_route_permission(perm: str, who: Principal | None, status: int) -> None:
    c = client(SetPrincipal(who), RBAC(load_policy(DEFAULT_FILE)), permission=perm)
    r = c.simulate_get("/x")
    assert r.status_code == status
    if status == 403:
        assert r.json["permission"] == perm and perm in r.json["detail"]
    assert c.simulate_post("/x").status_code == 405  # no endpoint declared: Falcon's 405


# ---- the chain ---------------------------------------------------------------------------------

ORDER = [WhitelistURL, WhitelistIP, RateLimit, JWT, CORS, RBAC]


def test_chain_order_is_exact(tmp_path: Path) -> None:
    assert list(CHAIN) == ORDER
    h = Harness(tmp_path)
    kinds = [type(m) for m in h.app._unprepared_middleware]
    assert kinds[1:] == ORDER  # [0] is the Audit observer, outside the chain


def test_chain_order_shows_in_behaviour(tmp_path: Path) -> None:
    h = Harness(tmp_path, allow_networks=["127.0.0.0/8"], rate=0.001, burst=2,
                cors_origins=["https://ui.example"])
    # WhitelistIP before JWT: a stranger without a token gets 403, not 401 (even on a public path)
    assert h.req("GET", "/v1/jobs", as_=None, remote_addr="8.8.8.8").status_code == 403
    assert h.req("GET", "/healthz", as_=None, remote_addr="8.8.8.8").status_code == 403
    # RateLimit before JWT: a flood without tokens is throttled before any signature work
    codes = [h.req("GET", "/v1/jobs", as_=None, remote_addr="127.0.0.9").status_code for _ in range(3)]
    assert codes == [401, 401, 429]
    # JWT before CORS: a preflight (no token) is answered; a real call without a token is a
    # 401 that still carries CORS headers so the browser can read it
    h2 = Harness(tmp_path, cors_origins=["https://ui.example"])
    pre = h2.req("OPTIONS", "/v1/jobs", as_=None, headers={"Origin": "https://ui.example",
                                                            "Access-Control-Request-Method": "POST"})
    assert pre.status_code == 204
    r = h2.req("GET", "/v1/jobs", as_=None, headers={"Origin": "https://ui.example"})
    assert r.status_code == 401 and r.headers["access-control-allow-origin"] == "https://ui.example"
    # RBAC last: a valid token without the permission is 403 naming it, with CORS headers
    r = h2.req("POST", "/v1/hosts/node1/close", as_=("v", "viewer"), headers={"Origin": "https://ui.example"})
    assert r.status_code == 403 and r.json["permission"] == "hosts.admin"
    assert r.headers["access-control-allow-origin"] == "https://ui.example"
