"""The Falcon ASGI app factory: route table + middleware chain + problem details.

Middleware order is the contract (docs/rest.md)::

    Audit (observer: first in, last out)
      -> WhitelistURL -> WhitelistIP -> RateLimit -> JWT -> CORS -> RBAC -> handler

``chain=False`` (benchmarks only) replaces the whole chain with one step that
runs every request as a fixed principal, so the same handlers can be measured
with and without it.  Each path of the route table becomes one Falcon resource
whose ``endpoints`` map (method -> Endpoint) RBAC reads.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import falcon
import falcon.asgi

from xce.rest import problems
from xce.rest.auditlog import Audit, AuditLog
from xce.rest.backend import Backend, ControllerBackend, Services
from xce.rest.config import RestConf
from xce.rest.middleware import CORS, JWT, RBAC, RateLimit, WhitelistIP, WhitelistURL
from xce.rest.resources import JobIdConverter
from xce.rest.routes import ENDPOINTS, Endpoint, decode_body, decode_query, render
from xce.rest.users import Authenticator, UserStore
from xce.security.auth import TokenService, ensure_keyring
from xce.security.policy import ANONYMOUS, Policy, Principal, load_policy

CHAIN = (WhitelistURL, WhitelistIP, RateLimit, JWT, CORS, RBAC)


def endpoints() -> list[Endpoint]:
    """The route table (importing the route modules registers their endpoints)."""
    import xce.rest.cluster  # noqa: F401
    import xce.rest.control  # noqa: F401
    import xce.rest.ops  # noqa: F401
    import xce.rest.resources  # noqa: F401

    return list(ENDPOINTS)


def _responder(ep: Endpoint, svc: Services) -> Any:
    async def responder(resource: Any, req: falcon.asgi.Request, resp: falcon.asgi.Response, **params: Any) -> None:
        kw = dict(params)
        if ep.query is not None:
            kw["query"] = decode_query(req, ep.query)
        if ep.body is not None:
            kw["body"] = await decode_body(req, ep, svc.conf.max_body)
        render(resp, ep, await ep.handler(svc, req, **kw))
    responder.__name__ = ep.name
    return responder


def _resources(svc: Services) -> dict[str, Any]:
    by_path: dict[str, dict[str, Endpoint]] = defaultdict(dict)
    for ep in svc.endpoints:
        if ep.method in by_path[ep.path]:
            raise ValueError(f"{ep.method} {ep.path} is declared twice")
        by_path[ep.path][ep.method] = ep
    out = {}
    for path, eps in by_path.items():
        attrs: dict[str, Any] = {"endpoints": eps}
        attrs.update({f"on_{m.lower()}": _responder(ep, svc) for m, ep in eps.items()})
        out[path] = type("Resource_" + "_".join(e.name for e in eps.values()), (), attrs)()
    return out


class FixedPrincipal:
    """Stands in for the chain when it is off: every request runs as one principal."""

    def __init__(self, principal: Principal, token: str) -> None:
        self.principal, self.token = principal, token

    async def process_request(self, req: Any, resp: Any) -> None:
        req.context.principal, req.context.token = self.principal, self.token


def chain(conf: RestConf, svc: Services) -> list[Any]:
    return [
        WhitelistURL(conf.public_paths),
        WhitelistIP(conf.allow_networks, conf.trusted_proxies),
        RateLimit(conf.rate, conf.burst),
        JWT(svc.tokens, svc.anonymous_token),
        CORS(conf.cors_origins, conf.cors_max_age),
        RBAC(svc.policy),
    ]


def create_app(svc: Services, bench_principal: Principal | None = None) -> falcon.asgi.App:
    if not svc.endpoints:
        svc.endpoints = endpoints()
    if svc.conf.chain:
        middleware = [Audit(svc.audit), *chain(svc.conf, svc)]
    else:
        p = bench_principal or Principal("bench", ("admin",))
        middleware = [FixedPrincipal(p, svc.tokens.issue(p))]
    app = falcon.asgi.App(middleware=middleware)
    app.router_options.converters["jobid"] = JobIdConverter  # /v1/jobs/12[3]: before any route uses it
    problems.install(app)
    for path, resource in _resources(svc).items():
        app.add_route(path, resource)
    return app


def services(conf: RestConf, state_dir: str | Path, backend: Backend | None = None,
             policy: Policy | None = None) -> Services:
    """Everything a live server needs, from the cluster's state directory."""
    sd = Path(state_dir)
    ensure_keyring(sd)
    tokens = TokenService.from_state_dir(sd)  # follows `xce signing-keys add|revoke` while running
    authn = Authenticator(UserStore.for_state_dir(sd), tuple(conf.auth_backends), tuple(conf.pam_roles))
    audit = AuditLog(Path(conf.audit_file) if conf.audit_file else sd / "auth" / "audit.jsonl", conf.audit_keep)
    return Services(conf=conf, backend=backend or ControllerBackend(sd, workers=conf.pool,
                                                                    timeout=conf.controller_timeout),
                    policy=policy or load_policy(conf.rbac or None), tokens=tokens, authn=authn, audit=audit,
                    anonymous_token=tokens.issue(ANONYMOUS, ttl=10 * 365 * 86400))
