"""/v1/openapi.json: OpenAPI 3.1, complete, generated from the handlers' own shapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_rest_fakes import Harness

from xce.rest.app import endpoints
from xce.rest.routes import PUBLIC


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return ([node["$ref"]] if "$ref" in node else []) + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def test_document_is_complete(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    r = h.req("GET", "/v1/openapi.json", as_=None)
    assert r.status_code == 200
    doc = r.json
    assert doc["openapi"] == "3.1.0" and doc["info"]["title"]
    assert doc["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    schemas = doc["components"]["schemas"]
    for ref in _refs(doc):
        assert ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] in schemas, ref
    ops = {(m.upper(), p): op for p, item in doc["paths"].items() for m, op in item.items()}
    for ep in endpoints():
        op = ops.pop((ep.method, ep.openapi_path))
        assert op["x-xce-permission"] == ep.permission and op["operationId"] == ep.name
        assert str(ep.status) in op["responses"]
        assert (op.get("security") == []) == (ep.permission == PUBLIC)
        if ep.permission != PUBLIC:
            assert "401" in op["responses"] and "403" in op["responses"]
        for code, resp in op["responses"].items():
            if int(code) >= 400 and code != "503" or (code == "503" and ep.name != "healthz"):
                assert "application/problem+json" in resp["content"], (ep.name, code)
    assert not ops, f"documented but not served: {ops.keys()}"


def test_shapes_come_from_the_handlers_structs(tmp_path: Path) -> None:
    doc = Harness(tmp_path).req("GET", "/v1/openapi.json", as_=None).json
    schemas = doc["components"]["schemas"]
    job = schemas["JobView"]
    for field in ("id", "name", "user", "queue", "state", "slots", "hosts", "mem_reserved", "mem_actual",
                  "mem_peak", "mem_charged", "mem_limit", "reason", "exit_code", "submit_time",
                  "start_time", "end_time", "accounts"):
        assert field in job["properties"], field
    host = schemas["HostView"]["properties"]
    assert {"mem_slack", "mem_overage", "mem_available", "mem_os_available"} <= set(host)
    submit = doc["paths"]["/v1/jobs"]["post"]
    body = submit["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/SubmitBody"}
    assert schemas["SubmitBody"].get("required", []) == []  # a command or a script (the handler says which is missing)
    assert {"script", "depend", "array", "run_limit", "priority"} <= set(schemas["SubmitBody"]["properties"])
    assert schemas["SubmitBody"]["properties"]["slots"]["minimum"] == 1
    params = {p["name"]: p for p in doc["paths"]["/v1/jobs"]["get"]["parameters"]}
    assert set(params) == {"user", "queue", "state", "all", "after", "limit"}
    assert params["limit"]["schema"]["maximum"] == 10000 and params["limit"]["in"] == "query"
    job_id = doc["paths"]["/v1/jobs/{job_id}"]["get"]["parameters"][0]
    assert job_id["in"] == "path" and job_id["schema"]["pattern"] == r"^[0-9]+(\[[0-9]+\]|_[0-9]+)?$"  # 12, 12[3]
    assert "Link" in doc["paths"]["/v1/jobs"]["get"]["responses"]["200"]["headers"]
    token = doc["paths"]["/v1/auth/token"]["post"]["requestBody"]["content"]
    assert set(token) == {"application/json", "application/x-www-form-urlencoded"}
    assert "JobsQuery" not in schemas  # query Structs became parameters
