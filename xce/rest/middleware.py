"""The middleware chain: WhitelistURL -> WhitelistIP -> RateLimit -> JWT -> CORS -> RBAC.

Each class does one thing and leaves its result on ``req.context``:

- WhitelistURL: ``public`` — the exact path needs no token;
- WhitelistIP: ``client`` — the caller's address (X-Forwarded-For is believed only
  from ``trusted_proxies``, read right to left); 403 outside ``allow_networks``;
- RateLimit: a token bucket per client address (it runs before the token is
  verified, so the address is the only identity it can trust); 429 + Retry-After;
- JWT: ``principal`` and ``token`` from ``Authorization: Bearer``; public paths and
  CORS preflights run as the ``anonymous`` principal; 401 + WWW-Authenticate;
- CORS: answers preflights (they carry no token) and tags responses for allowed origins;
- RBAC: after routing, the route's declared permission against the principal's roles;
  403 names the missing permission.  Ownership is checked by the handler that
  loads the object.

Falcon runs every ``process_response`` even when an earlier step refused, so
refusals still get CORS headers and reach the audit log.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

import falcon

from xce.core.errors import PermissionDenied, Unauthenticated
from xce.rest.routes import AUTHENTICATED, PUBLIC
from xce.security.auth import TokenService
from xce.security.policy import ANONYMOUS, Policy

IPNet = ipaddress.IPv4Network | ipaddress.IPv6Network


def is_preflight(req: Any) -> bool:
    return req.method == "OPTIONS" and bool(req.get_header("Origin")) \
        and bool(req.get_header("Access-Control-Request-Method"))


class WhitelistURL:
    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = frozenset(paths)

    async def process_request(self, req: Any, resp: Any) -> None:
        req.context.public = req.path in self.paths


@lru_cache(maxsize=4096)
def _addr(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None


class WhitelistIP:
    def __init__(self, networks: Iterable[str], trusted_proxies: Iterable[str] = ()) -> None:
        self.networks = [ipaddress.ip_network(n, strict=False) for n in networks]
        self.proxies = [ipaddress.ip_network(n, strict=False) for n in trusted_proxies]
        self._allowed: dict[str, bool] = {}  # per client address; bounded

    @staticmethod
    def _within(text: str, nets: list[IPNet]) -> bool:
        a = _addr(text)
        return a is not None and any(a in n for n in nets)

    def client_of(self, req: Any) -> str:
        addr = req.remote_addr or ""
        if not self.proxies or not self._within(addr, self.proxies):
            return addr
        hops = [h.strip() for h in (req.get_header("X-Forwarded-For") or "").split(",") if h.strip()]
        for hop in reversed(hops):
            if not self._within(hop, self.proxies):
                return hop
        return hops[0] if hops else addr

    async def process_request(self, req: Any, resp: Any) -> None:
        req.context.client = client = self.client_of(req)
        ok = self._allowed.get(client)
        if ok is None:
            ok = self._within(client, self.networks)
            if len(self._allowed) > 4096:
                self._allowed.clear()
            self._allowed[client] = ok
        if not ok:
            raise PermissionDenied(f"client address {client} is not allowed")


class RateLimit:
    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic,
                 max_clients: int = 10000) -> None:
        self.rate, self.burst, self.clock, self.max_clients = rate, float(burst), clock, max_clients
        self.buckets: dict[str, tuple[float, float]] = {}

    async def process_request(self, req: Any, resp: Any) -> None:
        key = getattr(req.context, "client", None) or req.remote_addr or "?"
        now = self.clock()
        tokens, last = self.buckets.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate)
        if tokens < 1.0:
            self.buckets[key] = (tokens, now)
            wait = max(1, math.ceil((1.0 - tokens) / self.rate))
            raise falcon.HTTPTooManyRequests(description=f"rate limit of {self.rate:g}/s (burst {self.burst:g}) "
                                             f"exceeded for {key}", retry_after=wait)
        self.buckets[key] = (tokens - 1.0, now)
        if len(self.buckets) > self.max_clients:  # forget the idlest half
            keep = sorted(self.buckets.items(), key=lambda kv: kv[1][1])[len(self.buckets) // 2:]
            self.buckets = dict(keep)


class JWT:
    def __init__(self, tokens: TokenService, anonymous_token: str = "") -> None:
        self.tokens = tokens
        self.anonymous_token = anonymous_token

    async def process_request(self, req: Any, resp: Any) -> None:
        if getattr(req.context, "public", False) or is_preflight(req):
            req.context.principal, req.context.token = ANONYMOUS, self.anonymous_token
            return
        header = req.get_header("Authorization")
        if not header:
            raise Unauthenticated("a bearer token is required (get one from POST /v1/auth/token)")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("expected 'Authorization: Bearer <token>'")
        req.context.token = token.strip()
        req.context.principal = self.tokens.verify(req.context.token)


class CORS:
    METHODS = "GET, POST, PATCH, DELETE, OPTIONS"
    EXPOSE = "Link, Location, Retry-After, WWW-Authenticate, X-Request-ID"

    def __init__(self, origins: Iterable[str], max_age: int = 600) -> None:
        self.origins = frozenset(origins)
        self.any = "*" in self.origins
        self.max_age = max_age

    def _allowed(self, origin: str | None) -> bool:
        return bool(origin) and (self.any or origin in self.origins)

    async def process_request(self, req: Any, resp: Any) -> None:
        if not is_preflight(req):
            return
        origin = req.get_header("Origin")
        if not self._allowed(origin):
            raise PermissionDenied(f"origin {origin} is not allowed (CORS)")
        resp.status = 204
        resp.set_header("Access-Control-Allow-Methods", self.METHODS)
        resp.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type")
        resp.set_header("Access-Control-Max-Age", str(self.max_age))
        resp.complete = True

    async def process_response(self, req: Any, resp: Any, resource: Any, ok: bool) -> None:
        origin = req.get_header("Origin")
        if not origin or not (self.any or origin in self.origins):
            return
        resp.set_header("Access-Control-Allow-Origin", "*" if self.any else origin)
        resp.append_header("Vary", "Origin")
        if req.method != "OPTIONS" or not is_preflight(req):
            resp.set_header("Access-Control-Expose-Headers", self.EXPOSE)


class RBAC:
    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    async def process_resource(self, req: Any, resp: Any, resource: Any, params: dict[str, Any]) -> None:
        ep = getattr(resource, "endpoints", {}).get(req.method)
        if ep is None or ep.permission == PUBLIC:  # no route / 405 / OPTIONS: Falcon answers
            return
        principal = getattr(req.context, "principal", None)
        if principal is None:
            raise Unauthenticated("no principal (the JWT step did not run)")  # fail closed
        if ep.permission == AUTHENTICATED:
            if principal == ANONYMOUS:
                raise Unauthenticated("this route needs a token")
            return
        self.policy.check(principal, ep.permission)
