"""/v1/openapi.json: OpenAPI 3.1, generated from the route table and the handlers' own Structs.

Owns no shapes: query parameters, request bodies and replies are the msgspec
Structs the handlers decode and encode (msgspec.json.schema_components gives
JSON Schema 2020-12, which OpenAPI 3.1 uses as is), and each operation's
security, permission (``x-xce-permission``) and error statuses follow from its
Endpoint.  Every error status an operation can give is documented with the
Problem schema, so a schema checker can hold the server to it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import msgspec

from xce import __version__
from xce.rest.problems import PROBLEM_JSON, Problem
from xce.rest.resources import JOB_ID_PATTERN
from xce.rest.routes import FORM, JSON, PUBLIC, Endpoint

REF = "#/components/schemas/{name}"
HEADERS = {
    "Link": "RFC 8288 link to the next page (rel=\"next\"), present when the page is full",
    "Location": "URL of the created job",
    "Retry-After": "seconds to wait before retrying",
    "WWW-Authenticate": "the Bearer challenge (RFC 6750)",
}
_PARAM = re.compile(r"\{(\w+)(?::(\w+)(?:\((.*?)\))?)?\}")


def _path_params(ep: Endpoint) -> list[dict[str, Any]]:
    out = []
    for name, conv, args in _PARAM.findall(ep.path):
        schema: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 255,
                                  "pattern": "^[A-Za-z0-9_][A-Za-z0-9_.-]*$"}
        if conv == "jobid":  # xce/rest/resources.py JobIdConverter
            schema = {"type": "string", "maxLength": 40, "pattern": JOB_ID_PATTERN}
        if conv == "int":
            schema = {"type": "integer"}
            for arg in filter(None, (a.strip() for a in args.split(","))):
                k, _, v = arg.partition("=")
                schema[{"min": "minimum", "max": "maximum"}[k.strip()]] = int(v)
        out.append({"name": name, "in": "path", "required": True, "schema": schema})
    return out


def _problem_statuses(ep: Endpoint) -> set[int]:
    codes = {403, 429, *ep.errors}                      # WhitelistIP, RateLimit
    if ep.permission != PUBLIC:
        codes |= {401}
    if ep.query or ep.body or ep.backend:
        codes |= {400}
    if ep.body:
        codes |= {413, 415}
    if _PARAM.search(ep.path):
        codes |= {404}
    if ep.backend:
        codes |= {503}
    return codes


def _operation(ep: Endpoint, schema_of: dict[Any, dict[str, Any]], comps: dict[str, Any]) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": ep.name, "summary": ep.summary, "tags": [ep.tag],
                          "x-xce-permission": ep.permission}
    if ep.permission == PUBLIC:
        op["security"] = []
    params = _path_params(ep)
    if ep.query is not None:
        qs = comps[ep.query.__name__]
        for name, s in qs["properties"].items():
            params.append({"name": name, "in": "query", "required": name in qs.get("required", []),
                           "schema": s})
    if params:
        op["parameters"] = params
    if ep.body is not None:
        content = {JSON: {"schema": schema_of[ep.body]}}
        if ep.forms:
            content[FORM] = {"schema": schema_of[ep.body]}
        op["requestBody"] = {"required": True, "content": content}
    problem = {"content": {PROBLEM_JSON: {"schema": {"$ref": REF.format(name="Problem")}}}}
    responses: dict[str, Any] = {}
    for code in sorted(_problem_statuses(ep)):
        r: dict[str, Any] = {"description": _DESCR.get(code, "error"), **problem}
        hdr = {401: "WWW-Authenticate", 429: "Retry-After", 503: "Retry-After"}.get(code)
        if hdr:
            r["headers"] = {hdr: {"description": HEADERS[hdr], "schema": {"type": "string"}}}
        responses[str(code)] = r
    body = {ep.content_type: {"schema": schema_of.get(ep.reply, {})}} if ep.reply is not None else None
    for code in (ep.status, *ep.alt_status):
        r = {"description": ep.summary}
        if body:
            r["content"] = body
        if ep.headers:
            r["headers"] = {h: {"description": HEADERS[h], "schema": {"type": "string"}} for h in ep.headers}
        responses[str(code)] = r
    op["responses"] = dict(sorted(responses.items()))
    return op


_DESCR = {400: "invalid input", 401: "no valid token", 403: "refused: client address, origin or permission",
          404: "not found", 409: "conflicts with the current state", 413: "body too large",
          415: "unsupported content type", 429: "rate limited", 503: "controller unavailable"}


def document(endpoints: list[Endpoint], server_url: str = "/") -> dict[str, Any]:
    return _document(tuple(endpoints), server_url)


@lru_cache(maxsize=8)
def _document(endpoints: tuple[Endpoint, ...], server_url: str) -> dict[str, Any]:
    types: list[Any] = [Problem]
    for ep in endpoints:
        for t in (ep.query, ep.body, ep.reply):
            if t is not None and t not in types and t not in (str, dict):
                types.append(t)
    schemas, comps = msgspec.json.schema_components(types, ref_template=REF)
    schema_of: dict[Any, dict[str, Any]] = dict(zip(types, schemas, strict=True))
    schema_of[str], schema_of[dict] = {"type": "string"}, {"type": "object"}
    paths: dict[str, dict[str, Any]] = {}
    for ep in endpoints:
        paths.setdefault(ep.openapi_path, {})[ep.method.lower()] = _operation(ep, schema_of, comps)
    for q in {ep.query.__name__ for ep in endpoints if ep.query is not None}:
        comps.pop(q, None)  # query Structs became parameters
    return {
        "openapi": "3.1.0",
        "info": {"title": "XCE REST API", "version": __version__,
                 "description": "Jobs, hosts, queues and accounting of an XCE cluster. Bodies are the "
                                "CLI's --json shapes; errors are RFC 9457 problem details."},
        "servers": [{"url": server_url}],
        "security": [{"bearerAuth": []}],
        "paths": dict(sorted(paths.items())),
        "components": {"schemas": comps,
                       "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer",
                                                          "bearerFormat": "JWT"}}},
    }
