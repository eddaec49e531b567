"""The route table: every endpoint declared once, with its permission and its shapes.

``@route(...)`` registers a handler in ``ENDPOINTS``; from that one list the app
builds its Falcon resources, RBAC reads each route's permission, and
/v1/openapi.json is generated (xce/rest/openapi.py).  A route must declare a
permission: a name from xce/security/policy.py, ``PUBLIC`` (no token, no check) or
``AUTHENTICATED`` (any valid token).  Handlers are ``async fn(svc, req, **kw)``
where kw holds the path parameters, ``query`` and ``body`` (already decoded and
validated into their Structs); they return a value to encode as JSON, or a
``Reply`` for another status, headers or a text body.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import falcon
import msgspec

from xce.security.policy import PERMISSIONS

PUBLIC = "public"
AUTHENTICATED = "authenticated"
JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
_enc = msgspec.json.Encoder()


@dataclass
class Reply:
    body: Any = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    text: str | None = None
    content_type: str = JSON


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str                   # Falcon template, e.g. /v1/jobs/{job_id:int(min=1)}
    permission: str
    handler: Callable[..., Awaitable[Any]]
    summary: str
    tag: str
    query: type | None = None
    body: type | None = None
    forms: bool = False         # body may also come form-encoded (OAuth2 token request)
    reply: Any = None           # a type, list[T], or None for no body
    status: int = 200
    errors: tuple[int, ...] = ()  # statuses answered with a problem, besides the usual ones
    alt_status: tuple[int, ...] = ()  # other statuses whose body is ``reply`` too
    content_type: str = JSON
    headers: tuple[str, ...] = ()  # response headers worth documenting (Link, Location, ...)
    backend: bool = True        # talks to the controller (so it can answer 503)

    @property
    def name(self) -> str:
        return self.handler.__name__

    @property
    def openapi_path(self) -> str:
        return re.sub(r"\{(\w+)(:[^}]*)?\}", r"{\1}", self.path)


ENDPOINTS: list[Endpoint] = []


def route(method: str, path: str, permission: str, **kw: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    if permission not in (PUBLIC, AUTHENTICATED) and permission not in PERMISSIONS:
        raise ValueError(f"{method} {path}: unknown permission {permission!r}")

    def deco(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        ENDPOINTS.append(Endpoint(method, path, permission, fn, **kw))
        return fn
    return deco


def decode_query(req: falcon.asgi.Request, t: type) -> Any:
    return msgspec.convert(dict(req.params), t, strict=False)


async def decode_body(req: falcon.asgi.Request, ep: Endpoint, limit: int) -> Any:
    if req.content_length is not None and req.content_length > limit:
        raise falcon.HTTPContentTooLarge(description=f"the body exceeds {limit} bytes")
    data = await req.stream.read(limit + 1)
    if len(data) > limit:
        raise falcon.HTTPContentTooLarge(description=f"the body exceeds {limit} bytes")
    ctype = (req.content_type or "").split(";")[0].strip().lower()
    if ctype == JSON or (not ctype and data[:1] in (b"{", b"[")):
        return msgspec.json.decode(data, type=ep.body)
    if ctype == FORM and ep.forms:
        try:
            fields = dict(parse_qsl(data.decode(), keep_blank_values=True, strict_parsing=bool(data)))
        except (UnicodeDecodeError, ValueError) as e:
            raise falcon.HTTPBadRequest(description=f"bad form body: {e}") from None
        return msgspec.convert(fields, ep.body, strict=False)
    allowed = JSON + (f" or {FORM}" if ep.forms else "")
    raise falcon.HTTPUnsupportedMediaType(description=f"send {allowed}")


def render(resp: falcon.asgi.Response, ep: Endpoint, out: Any) -> None:
    reply = out if isinstance(out, Reply) else Reply(out, ep.status, content_type=ep.content_type)
    resp.status = reply.status
    for k, v in reply.headers.items():
        resp.set_header(k, v)
    if reply.text is not None:
        resp.content_type = reply.content_type
        resp.text = reply.text
    elif reply.status != 204:
        resp.content_type = reply.content_type
        resp.data = _enc.encode(reply.body)
