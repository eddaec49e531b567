"""Errors as RFC 9457 problem details, mapped once for the whole API.

Owns the ``Problem`` body and the Falcon error handlers.  Each XceError class
maps by its own ``code``/``http_status`` (xce/core/errors.py), Falcon's HTTP errors
(404 route, 405, 413, 415, 429) keep their status, msgspec validation errors are
400, and anything else is a 500 whose detail hides internals (it is logged).
The handler also leaves the detail on ``req.context.problem`` for the audit log.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

import falcon
import msgspec

from xce.core.errors import (
    NotLeader,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
    XceError,
)

log = logging.getLogger("xce.rest")
PROBLEM_JSON = "application/problem+json"
_enc = msgspec.json.Encoder()


class Problem(msgspec.Struct, kw_only=True, omit_defaults=True):
    """RFC 9457 problem details, plus XCE's stable ``code`` and, on 403, the ``permission``."""

    type: str
    title: str
    status: int
    detail: str = ""
    instance: str = ""
    code: str = ""
    permission: str | None = None


def problem_type(code: str) -> str:
    return f"urn:xce:problem:{code}"


def _send(req: Any, resp: Any, status: int, problem: Problem, headers: dict[str, str] | None = None) -> None:
    resp.status = status
    resp.content_type = PROBLEM_JSON
    resp.data = _enc.encode(problem)
    for k, v in (headers or {}).items():
        resp.set_header(k, v)
    if status == 401 and not resp.get_header("WWW-Authenticate"):
        resp.set_header("WWW-Authenticate", 'Bearer realm="xce"')
    req.context.problem = problem.detail or problem.title


def _title(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


async def handle_xce(req: Any, resp: Any, ex: XceError, params: dict[str, Any]) -> None:
    status = ex.http_status
    if status >= 500 and not isinstance(ex, (NotLeader, Unavailable)):
        log.error("%s %s: %s", req.method, req.path, ex.message)
    headers = dict(getattr(ex, "headers", None) or {})
    if isinstance(ex, (NotLeader, Unavailable)):
        headers.setdefault("Retry-After", "1")
    if isinstance(ex, Unauthenticated) and "WWW-Authenticate" not in headers and req.get_header("Authorization"):
        headers["WWW-Authenticate"] = f'Bearer realm="xce", error="invalid_token", error_description="{_q(ex.message)}"'
    permission = ex.permission if isinstance(ex, PermissionDenied) else None
    _send(req, resp, status, Problem(type=problem_type(ex.code), title=_title(status), status=status,
                                     detail=ex.message, instance=req.path, code=ex.code,
                                     permission=permission), headers)


async def handle_http(req: Any, resp: Any, ex: falcon.HTTPError, params: dict[str, Any]) -> None:
    status = ex.status_code
    code = getattr(ex, "code", None) or _title(status).lower().replace(" ", "_")
    _send(req, resp, status, Problem(type="about:blank", title=_title(status), status=status,
                                     detail=ex.description or "", instance=req.path, code=str(code)),
          dict(ex.headers or {}))


async def handle_validation(req: Any, resp: Any, ex: Exception, params: dict[str, Any]) -> None:
    _send(req, resp, 400, Problem(type=problem_type("invalid"), title="Bad Request", status=400,
                                  detail=f"invalid input: {ex}", instance=req.path, code="invalid"))


async def handle_unexpected(req: Any, resp: Any, ex: Exception, params: dict[str, Any]) -> None:
    log.exception("%s %s failed", req.method, req.path)
    _send(req, resp, 500, Problem(type=problem_type("error"), title="Internal Server Error", status=500,
                                  detail="internal error (logged by xce-rest)", instance=req.path, code="error"))


def _q(text: str) -> str:
    return text.replace("\\", "").replace('"', "'").replace("\n", " ")[:200]


def install(app: falcon.asgi.App) -> None:
    """Register the handlers; Falcon picks the most specific class for each exception."""
    app.add_error_handler(Exception, handle_unexpected)
    app.add_error_handler(falcon.HTTPError, handle_http)
    app.add_error_handler(XceError, handle_xce)
    app.add_error_handler(msgspec.ValidationError, handle_validation)
    app.add_error_handler(msgspec.DecodeError, handle_validation)
