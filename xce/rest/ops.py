"""Routes around the cluster: tokens, whoami, health, metrics, the audit log, the OpenAPI document.

``POST /v1/auth/token`` is OAuth2's password grant in spirit: JSON (or form)
``{"username", "password"}`` in, ``{"access_token", "token_type", "expires_in"}``
out, with ``Cache-Control: no-store``; a failed login is a 401 problem and is
audited under the attempted name.  /healthz answers 200 while the controller
answers a PING, 503 otherwise (same body).
"""

from __future__ import annotations

import asyncio
from typing import Any

from xce import __version__ as VERSION
from xce.core.errors import Unauthenticated, XceError
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.rest import metrics
from xce.rest.backend import Services
from xce.rest.routes import AUTHENTICATED, PUBLIC, Reply, route
from xce.rest.schema import (
    AuditQuery,
    AuditRecord,
    Health,
    TokenBody,
    TokenReply,
    WhoAmI,
)

# argon2 verification costs ~64 MiB and tens of ms: at most two at a time, whatever the flood.
_LOGINS = asyncio.Semaphore(2)


@route("POST", "/v1/auth/token", PUBLIC, summary="Exchange a username and password for a bearer token",
       tag="auth", body=TokenBody, forms=True, reply=TokenReply, errors=(401,), backend=False)
async def issue_token(svc: Services, req: Any, body: TokenBody) -> Reply:
    req.context.audit_user = body.username
    if svc.authn is None:
        raise Unauthenticated("password login is not configured on this server")
    async with _LOGINS:
        loop = asyncio.get_running_loop()
        principal = await loop.run_in_executor(None, svc.authn.authenticate, body.username, body.password)
    if principal is None:
        raise Unauthenticated("invalid username or password")
    ttl = svc.tokens.ring.ttl
    token = svc.tokens.issue(principal, ttl=ttl)
    req.context.audit_result = f"token issued for {principal.user} ({', '.join(principal.roles)})"
    return Reply(TokenReply(access_token=token, token_type="Bearer", expires_in=ttl),
                 headers={"Cache-Control": "no-store", "Pragma": "no-cache"})


@route("GET", "/v1/auth/whoami", AUTHENTICATED, summary="The caller's user, roles and permissions",
       tag="auth", reply=WhoAmI, backend=False)
async def whoami(svc: Services, req: Any) -> WhoAmI:
    p = req.context.principal
    return WhoAmI(user=p.user, roles=list(p.roles), permissions=dict(svc.policy.permissions_of(p)))


@route("GET", "/v1/audit", "audit.read", summary="The request audit log (state-changing requests)",
       tag="audit", query=AuditQuery, reply=list[AuditRecord], backend=False)
async def audit_log(svc: Services, req: Any, query: AuditQuery) -> list[AuditRecord]:
    return svc.audit.query(query.user or None, query.since, query.after, query.limit)


@route("GET", "/healthz", PUBLIC, summary="Liveness; 503 when the controller does not answer",
       tag="ops", reply=Health, alt_status=(503,))
async def healthz(svc: Services, req: Any) -> Reply:
    try:
        await svc.call(req, Op.PING, S.Empty(), timeout=2.0)
    except XceError as e:
        return Reply(Health(status="degraded", controller=e.message, version=VERSION), 503)
    return Reply(Health(status="ok", controller="reachable", version=VERSION))


@route("GET", "/metrics", "cluster.read", summary="Prometheus metrics", tag="ops",
       content_type=metrics.CONTENT_TYPE, reply=str)
async def prometheus(svc: Services, req: Any) -> Reply:
    status, hosts = await asyncio.gather(svc.call(req, Op.STATUS), svc.call(req, Op.HOSTS, S.HostsRequest()))
    return Reply(text=metrics.render(status, hosts.hosts), content_type=metrics.CONTENT_TYPE)


@route("GET", "/v1/openapi.json", PUBLIC, summary="This API's OpenAPI 3.1 document", tag="ops",
       reply=dict, backend=False)
async def openapi_doc(svc: Services, req: Any) -> Reply:
    # the document reads every route module's table: built on first request, after they loaded
    from xce.rest.openapi import document

    return Reply(document(svc.endpoints, svc.conf.url), content_type="application/json")
