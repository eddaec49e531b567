"""The REST resources against a fake controller: route table, RBAC matrix, bodies, errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from test_rest_fakes import Harness, jobview

from xce.core.errors import Conflict, NotFound, NotLeader, Unavailable
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.rest.app import endpoints
from xce.rest.config import PUBLIC_PATHS
from xce.rest.routes import AUTHENTICATED, PUBLIC
from xce.security.policy import DEFAULT_FILE, PERMISSIONS, Principal, load_policy


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    h = Harness(tmp_path)
    h.fake.jobs = {1: jobview(1, "alice"), 2: jobview(2, "bob"), 3: jobview(3, "alice", "PEND"),
                   4: jobview(4, "alice", "DONE", end_time=1.7e9 + 5), 5: jobview(5, "bob", "EXIT")}
    return h


# ---- the route table ---------------------------------------------------------------------------

def _walk(nodes: list[Any]) -> list[Any]:
    out = []
    for n in nodes:
        if n.resource is not None:
            out.append((n.uri_template, n.resource))
        out += _walk(n.children)
    return out


def test_every_route_declares_a_permission(h: Harness) -> None:
    served = _walk(h.app._router._roots)
    assert len({id(r) for _, r in served}) == len({e.path for e in endpoints()})
    for template, resource in served:
        methods = [m for m in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD") if hasattr(resource, f"on_{m.lower()}")]
        assert methods, template
        for m in methods:
            ep = resource.endpoints.get(m)
            assert ep is not None, f"{m} {template} has no declared endpoint"
            assert ep.permission in PERMISSIONS or ep.permission in (PUBLIC, AUTHENTICATED), \
                f"{m} {template}: permission {ep.permission!r}"


def test_public_routes_are_exactly_the_whitelisted_paths() -> None:
    public = {e.path for e in endpoints() if e.permission == PUBLIC}
    assert public == set(PUBLIC_PATHS)


# ---- the RBAC matrix: every route, every role ----------------------------------------------------

BODIES = {"submit_job": {"command": ["true"]}, "modify_job": {"mem_limit": 1 << 30}, "switch_job": {"queue": "high"},
          "signal_job": {"signal": "CONT"},
          "issue_token": {"username": "x", "password": "y"}}


def _path(template: str) -> str:
    return template.replace("{job_id:jobid}", "1").replace("{name}", "node1")


@pytest.mark.parametrize("role", ["admin", "operator", "user", "viewer", "daemon", "anonymous", None])
def test_rbac_matrix_every_route(tmp_path: Path, role: str | None) -> None:
    policy = load_policy(DEFAULT_FILE)
    for ep in endpoints():
        h = Harness(tmp_path)
        h.fake.jobs = {1: jobview(1, "alice", "PEND")}  # owned by the caller
        if ep.name == "issue_token":
            h.store.add("x", ["viewer"], "y")
        who = ("alice", role) if role else None
        r = h.req(ep.method, _path(ep.path), as_=who, json=BODIES.get(ep.name))
        where = f"{role}: {ep.method} {ep.path} -> {r.status_code} {r.text[:200]}"
        if ep.permission == PUBLIC:
            assert r.status_code not in (401, 403), where
        elif role is None:
            assert r.status_code == 401, where
        elif ep.permission == AUTHENTICATED or policy.scope(Principal("alice", (role,)), ep.permission):
            # job 1 pends and is no array: the permission let these through to the job's own answer
            assert r.status_code < 400 or (ep.name, r.status_code) in {("signal_job", 409), ("job_array", 404)}, where
        else:
            assert r.status_code == 403 and r.json["permission"] == ep.permission, where


def test_ownership_through_rest(h: Harness) -> None:
    assert [j["id"] for j in h.req("GET", "/v1/jobs").json] == [1, 3]          # own, unfinished
    assert [j["id"] for j in h.req("GET", "/v1/jobs", as_=("v", "viewer")).json] == [1, 2, 3]
    r = h.req("GET", "/v1/jobs", params={"user": "bob"})
    assert r.status_code == 403 and r.json["permission"] == "jobs.list"
    assert h.req("GET", "/v1/jobs/1").status_code == 200
    for method, perm, kw in [("GET", "jobs.read", {}), ("DELETE", "jobs.kill", {}),
                             ("PATCH", "jobs.modify", {"json": {"mem_limit": 5}})]:
        r = h.req(method, "/v1/jobs/2", **kw)
        assert r.status_code == 403 and r.json["permission"] == perm and "bob" in r.json["detail"]
    assert h.req("DELETE", "/v1/jobs/2", as_=("o", "operator")).status_code == 202
    assert [j["id"] for j in h.req("GET", "/v1/accounting").json] == [4]
    assert [j["id"] for j in h.req("GET", "/v1/accounting", as_=("v", "viewer")).json] == [4, 5]


def test_list_filters_and_cursor_pages(h: Harness) -> None:
    h.fake.jobs = {i: jobview(i, "alice", "RUN" if i % 3 else "PEND") for i in range(1, 26)}
    ids, url, pages = [], "/v1/jobs?limit=10&queue=normal", 0
    while url:
        r = h.req("GET", url.split("?")[0], query_string=url.split("?")[1])
        ids += [j["id"] for j in r.json]
        link = r.headers.get("link")
        url = link[1:link.index(">")] if link else ""
        pages += 1
    assert ids == list(range(1, 26)) and pages == 3
    pend = h.req("GET", "/v1/jobs", params={"state": "PEND"}).json
    assert {j["state"] for j in pend} == {"PEND"} and len(pend) == 8
    assert h.req("GET", "/v1/jobs", params={"state": "RUN,PEND", "all": "true"}).status_code == 200


def test_submit_maps_the_cli_fields(h: Harness) -> None:
    body = {"command": ["python3", "-c", "print(1)"], "resreq": "rusage[mem=2G]", "queue": "normal",
            "slots": 2, "mem_limit": "4G", "name": "mine", "env": {"A": "1"}, "cwd": "/tmp",
            "stdout": "out.%J", "rerunnable": True}
    r = h.req("POST", "/v1/jobs", json=body)
    assert r.status_code == 201 and r.json == {"id": 6, "queue": "normal"}
    assert r.headers["location"] == "/v1/jobs/6"
    token, op, req = h.fake.calls[-1]
    spec = req.jobs[0]
    assert op == Op.SUBMIT and h.tokens.verify(token).user == "alice"  # the caller's own token
    assert (spec.command, spec.resreq, spec.queue, spec.slots, spec.mem_limit, spec.name) == \
        (body["command"], "rusage[mem=2G]", "normal", 2, 4 << 30, "mine")
    assert (spec.env, spec.cwd, spec.stdout, spec.rerunnable, spec.user) == ({"A": "1"}, "/tmp", "out.%J", True, "alice")
    dry = h.req("POST", "/v1/jobs", json={"command": ["true"], "dry_run": True})
    assert dry.status_code == 200 and dry.json == {"id": None, "queue": "normal"}


def test_submit_as_another_user_needs_submit_as(h: Harness) -> None:
    r = h.req("POST", "/v1/jobs", json={"command": ["true"], "user": "bob"})
    assert r.status_code == 403 and r.json["permission"] == "jobs.submit_as"
    r = h.req("POST", "/v1/jobs", as_=("root", "admin"), json={"command": ["true"], "user": "bob"})
    assert r.status_code == 201 and h.fake.jobs[r.json["id"]].user == "bob"


@pytest.mark.parametrize("body, needle", [
    ({}, "missing required field `command`"),
    ({"command": []}, "length >= 1"),
    ({"command": "ls"}, "Expected `array`"),
    ({"command": ["true"], "slots": 0}, "slots"),
    ({"command": ["true"], "slots": "2"}, "slots"),
    ({"command": ["true"], "colour": "red"}, "unknown field `colour`"),
    ({"command": ["true"], "mem_limit": "lots"}, "mem_limit"),
    ({"command": ["true"], "mem_limit": "99999999999T"}, "mem_limit must be between"),
    ({"command": ["true"], "mem_limit": 0}, "mem_limit"),
    ({"command": ["true"], "mem_limit": "1M"}, "mem_limit must be at least 4.0M, got 1.0M"),  # the floor
    ({"command": ["true"], "mem_limit": 4095}, "mem_limit must be at least 4.0M"),
    ({"command": ["tr\u0000ue"]}, "command"),
    ({"command": ["true"], "env": {"A=B": "1"}}, "env"),
])
def test_bad_submissions_are_400_problems(h: Harness, body: dict[str, Any], needle: str) -> None:
    r = h.req("POST", "/v1/jobs", json=body)  # json= sends the NUL as \u0000
    assert r.status_code == 400, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert needle in r.json["detail"] and r.json["type"] == "urn:xce:problem:invalid"


@pytest.mark.parametrize("kw, status", [
    ({"body": "{not json", "headers": {"Content-Type": "application/json"}}, 400),
    ({"body": "", "headers": {"Content-Type": "application/json"}}, 400),
    ({"body": "command=true", "headers": {"Content-Type": "application/x-www-form-urlencoded"}}, 415),
    ({"body": "{}", "headers": {"Content-Type": "text/plain"}}, 415),
    ({"body": '{"command": ["' + "x" * (2 << 20) + '"]}', "headers": {"Content-Type": "application/json"}}, 413),
])
def test_bad_bodies_never_500(h: Harness, kw: dict[str, Any], status: int) -> None:
    r = h.req("POST", "/v1/jobs", **kw)
    assert r.status_code == status and r.headers["content-type"] == "application/problem+json"


@pytest.mark.parametrize("path, qs, status", [
    ("/v1/jobs/abc", "", 404), ("/v1/jobs/0", "", 404), ("/v1/jobs/-3", "", 404),
    ("/v1/jobs/99999999999999999999999", "", 404), ("/v1/jobs/99", "", 404), ("/v1/nope", "", 404),
    ("/v1/jobs", "limit=0", 400), ("/v1/jobs", "limit=abc", 400), ("/v1/jobs", "colour=red", 400),
    ("/v1/jobs", "state=RUNNING", 400), ("/v1/jobs", "user=a&user=b", 400), ("/v1/jobs", "after=-1", 400),
    ("/v1/jobs", "all=maybe", 400), ("/v1/hosts/nosuch", "", 404), ("/v1/accounting", "state=RUN", 400),
])
def test_bad_paths_and_queries(h: Harness, path: str, qs: str, status: int) -> None:
    r = h.req("GET", path, as_=("root", "admin"), query_string=qs)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json["status"] == status and r.json["instance"] == path


def test_kill_results(h: Harness) -> None:
    assert h.req("DELETE", "/v1/jobs/3").status_code == 200            # PEND: killed
    r = h.req("DELETE", "/v1/jobs/1")
    assert r.status_code == 202 and r.json == {"results": {"1": "kill requested"}}
    r = h.req("DELETE", "/v1/jobs/4")
    assert r.status_code == 409 and "already ended: DONE" in r.json["detail"]
    assert h.req("DELETE", "/v1/jobs/77").status_code == 404


def test_modify_memory_limit(h: Harness) -> None:
    r = h.req("PATCH", "/v1/jobs/1", json={"mem_limit": "2G"})
    assert r.status_code == 200 and r.json["mem_limit"] == 2 << 30 and r.json["id"] == 1
    assert h.req("PATCH", "/v1/jobs/1", json={"mem_limit": None}).json["mem_limit"] is None
    assert h.req("PATCH", "/v1/jobs/1", json={}).status_code == 400
    assert h.req("PATCH", "/v1/jobs/4", json={"mem_limit": 5 << 20}).status_code == 409
    r = h.req("PATCH", "/v1/jobs/1", json={"mem_limit": "3M"})
    assert r.status_code == 400 and "mem_limit must be at least 4.0M, got 3.0M" in r.json["detail"]


def test_hosts_queues_status(h: Harness) -> None:
    assert [x["name"] for x in h.req("GET", "/v1/hosts").json] == ["node1", "node2"]
    assert h.req("GET", "/v1/hosts/node2").json["mem_slack"] == 512 << 20
    op = ("o", "operator")
    assert h.req("POST", "/v1/hosts/node1/close", as_=op).json["state"] == "closed"
    assert h.req("POST", "/v1/hosts/node1/open", as_=op).json["state"] == "ok"
    assert h.req("POST", "/v1/hosts/nosuch/close", as_=op).status_code == 404
    q = h.req("GET", "/v1/queues").json
    assert q["default"] == "normal" and q["queues"][0]["name"] == "normal"
    s = h.req("GET", "/v1/status").json
    assert s["leader"] == "tcp://x" and s["term"] == 3 and s["rest_url"] == "http://127.0.0.1:7780"


def test_fairshare_and_limits_are_the_controllers_views(h: Harness) -> None:
    fs = h.req("GET", "/v1/fairshare").json
    assert fs["half_life"] == 18_000.0 and fs["rows"][0]["path"] == ["alice"] and fs["rows"][0]["priority"] == 0.5
    (lim,) = h.req("GET", "/v1/limits").json
    assert (lim["name"], lim["who"], lim["slots"], lim["max_slots"], lim["held"]) == ("user_slots", "alice", 8, 8, [4])
    h.fake.jobs[1] = jobview(1, "alice", "PEND")
    assert h.req("GET", "/v1/jobs/1?order=true").status_code == 200
    assert h.fake.calls[-1][2].order is True  # asked of the controller only when wanted
    h.req("GET", "/v1/jobs/1")
    assert h.fake.calls[-1][2].order is False


@pytest.mark.parametrize("err, status", [(NotLeader(None), 503), (Unavailable("down"), 503)])
def test_controller_trouble_is_503_with_retry_after(h: Harness, err: Exception, status: int) -> None:
    h.fake.fail = err  # type: ignore[assignment]
    r = h.req("GET", "/v1/jobs")
    assert r.status_code == status and r.headers["retry-after"] == "1"
    hz = h.req("GET", "/healthz", as_=None)
    assert hz.status_code == 503 and hz.json["status"] == "degraded"


def test_unexpected_errors_are_opaque_500s(h: Harness) -> None:
    h.fake.fail = RuntimeError("secret internals")  # type: ignore[assignment]
    r = h.req("GET", "/v1/jobs")
    assert r.status_code == 500 and "secret" not in r.text and r.json["type"] == "urn:xce:problem:error"


def test_token_endpoint_json_and_form(h: Harness) -> None:
    h.store.add("carol", ["viewer"], "pw1")
    r = h.req("POST", "/v1/auth/token", as_=None, json={"username": "carol", "password": "pw1"})
    assert r.status_code == 200 and r.json["token_type"] == "Bearer" and r.json["expires_in"] == 3600
    assert r.headers["cache-control"] == "no-store"
    assert h.tokens.verify(r.json["access_token"]) == Principal("carol", ("viewer",))
    who = h.client.simulate_get("/v1/auth/whoami", headers={"Authorization": f"Bearer {r.json['access_token']}"})
    assert who.json["user"] == "carol" and who.json["permissions"]["jobs.read"] == "any"
    form = h.req("POST", "/v1/auth/token", as_=None, body="grant_type=password&username=carol&password=pw1",
                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert form.status_code == 200
    bad = h.req("POST", "/v1/auth/token", as_=None, json={"username": "carol", "password": "nope"})
    assert bad.status_code == 401 and bad.json["detail"] == "invalid username or password"
    assert h.req("POST", "/v1/auth/token", as_=None, json={"username": "carol"}).status_code == 400


def test_public_routes_use_the_anonymous_token(h: Harness) -> None:
    h.req("GET", "/healthz", as_=None)
    assert h.fake.calls[-1][0] == "anon-token"


def test_audit_log_records_state_changes_and_refusals(h: Harness) -> None:
    h.store.add("carol", ["viewer"], "pw1")
    h.req("POST", "/v1/jobs", json={"command": ["true"]})
    h.req("GET", "/v1/jobs")                                             # reads are not audited
    h.req("POST", "/v1/jobs", as_=None, json={"command": ["true"]})      # 401
    h.req("DELETE", "/v1/jobs/2")                                        # 403, bob's job
    h.req("POST", "/v1/auth/token", as_=None, json={"username": "carol", "password": "bad"})
    recs = h.req("GET", "/v1/audit", as_=("root", "admin")).json
    got = [(r["user"], r["method"], r["path"], r["status"]) for r in recs]
    assert got == [("alice", "POST", "/v1/jobs", 201), (None, "POST", "/v1/jobs", 401),
                   ("alice", "DELETE", "/v1/jobs/2", 403), ("carol", "POST", "/v1/auth/token", 401)]
    assert recs[0]["result"] == "job 6 submitted to normal" and recs[0]["client"] == "127.0.0.1"
    assert "jobs.kill" in recs[2]["result"] and "bad" not in str(recs[3])
    assert h.req("GET", "/v1/audit", as_=("o", "operator")).status_code == 403
    assert [r["seq"] for r in h.req("GET", "/v1/audit", as_=("root", "admin"),
                                    params={"user": "alice", "after": "1"}).json] == [3]
    from xce.rest.auditlog import AuditLog

    again = AuditLog(h.audit.path)
    assert [r.seq for r in again.query()] == [1, 2, 3, 4] and again.seq == 4


def test_metrics_text(h: Harness) -> None:
    h.fake.hosts["we\"ird"] = h.fake.hosts["node1"].__class__(**{**__import__("msgspec").structs.asdict(
        h.fake.hosts["node1"]), "name": 'we"ird'})
    r = h.req("GET", "/metrics", as_=("v", "viewer"))
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    lines = r.text.splitlines()
    assert 'xce_hosts{state="ok"} 2' in lines and 'xce_jobs{state="RUN"} 1' in lines
    assert 'xce_jobs{state="UNKWN"} 0' in lines
    assert f'xce_host_mem_slack_bytes{{host="node1"}} {512 << 20}' in lines
    assert 'xce_host_mem_overage_bytes{host="we\\"ird"} 0' in lines
    assert "xce_scheduler_round_seconds 0.0015" in lines
    assert "# TYPE xce_host_mem_capacity_bytes gauge" in lines


def test_controller_refusals_keep_the_permission(h: Harness) -> None:
    from xce.proto import codec
    from xce.security.policy import Principal, denied

    # As the controller's refusal arrives: through the wire, its permission a field of its own.
    refused = denied(Principal("alice", ("user",)), "jobs.list", "is granted only for own jobs, not bob's")
    h.fake.fail = codec.error_from_reply(codec.error_body(refused))
    r = h.req("GET", "/v1/jobs")
    assert r.status_code == 403 and r.json["permission"] == "jobs.list"
    r = h.req("DELETE", "/v1/jobs/2")   # the controller hid bob's job: named as the kill it was
    assert r.status_code == 403 and r.json["permission"] == "jobs.kill" and "job 2" in r.json["detail"]


def test_every_write_sends_a_key_and_an_idempotency_key_header_is_the_key(h: Harness) -> None:
    """Each REST write reaches the controller with a key: the caller's header, else a fresh one."""
    h.req("POST", "/v1/jobs", json={"command": ["true"]})
    h.req("POST", "/v1/jobs", json={"command": ["true"]}, headers={"Idempotency-Key": "retry-1"})
    jid = max(h.fake.jobs)
    h.req("PATCH", f"/v1/jobs/{jid}", json={"mem_limit": "1G"}, headers={"Idempotency-Key": "retry-2"})
    h.req("DELETE", f"/v1/jobs/{jid}")
    h.req("POST", "/v1/hosts/node1/close", as_=("root", "admin"))
    sent = [(op, body.key) for _, op, body in h.fake.calls if isinstance(body, S.Write)]
    assert [op for op, _ in sent] == [Op.SUBMIT, Op.SUBMIT, Op.MODIFY, Op.KILL, Op.HOST_ADMIN]
    keys = [k for _, k in sent]
    assert keys[1:3] == ["retry-1", "retry-2"] and len(set(keys)) == 5 and all(keys)
    r = h.req("POST", "/v1/jobs", json={"command": ["true"]}, headers={"Idempotency-Key": "x" * 129})
    assert r.status_code == 400 and "Idempotency-Key" in r.json["detail"]


@pytest.mark.parametrize("err, status", [
    (NotFound("dependency done(99): job 99 is not known"), 404),
    (Conflict("idempotency key 'k' was already used for a submit of other jobs"), 409),
])
def test_a_submit_refused_for_its_dependency_or_its_key_answers_a_documented_status(
        h: Harness, err: Exception, status: int) -> None:
    """The controller refuses a submit whose -w names an unknown job (404) or whose key was
    used for another request (409): both statuses are in the API's contract."""
    h.fake.fail = err  # type: ignore[assignment]
    r = h.req("POST", "/v1/jobs", json={"command": ["true"], "depend": "done(99)"})
    assert r.status_code == status and r.json["detail"] == str(err)
    doc = h.req("GET", "/v1/openapi.json", as_=None).json
    assert str(status) in doc["paths"]["/v1/jobs"]["post"]["responses"]


def test_an_array_element_is_addressed_as_id_index(h: Harness) -> None:
    """/v1/jobs/12[3] (and 12_3, as Slurm writes it) is element 3 of array 12, in every job route."""
    el = 12 << 32 | 3
    h.fake.jobs[el] = jobview(el, state="PEND")
    for path in ("/v1/jobs/12[3]", "/v1/jobs/12%5B3%5D", "/v1/jobs/12_3"):
        r = h.req("GET", path)
        assert r.status_code == 200 and r.json["id"] == el, (path, r.text)
    assert h.req("POST", "/v1/jobs/12[3]/stop").json == {"results": {str(el): "PSUSP"}}
    assert h.req("GET", "/v1/jobs/12[3]/history").status_code == 200
    for bad in ("/v1/jobs/12[0]", "/v1/jobs/12[1-3]", "/v1/jobs/12[", "/v1/jobs/0[1]", "/v1/jobs/12[4294967296]"):
        assert h.req("GET", bad).status_code == 404, bad
    assert h.req("GET", "/v1/jobs/12[4]").status_code == 404


def test_patch_modifies_a_pending_jobs_spec_as_bmod(h: Harness) -> None:
    """PATCH takes bmod's fields (-R -n -q -J -W -sp -w) beside mem_limit: it took mem_limit only."""
    h.fake.jobs[5] = jobview(5, state="PEND")
    r = h.req("PATCH", "/v1/jobs/5", json={"run_limit": 120, "priority": 3, "name": "renamed", "slots": 2})
    assert r.status_code == 200, r.text
    assert (r.json["run_limit"], r.json["priority"], r.json["name"], r.json["slots"]) == (120.0, 3, "renamed", 2)
    (_, _, sent), = [c for c in h.fake.calls if c[1] == Op.MODIFY_SPEC]
    assert (sent.id, sent.run_limit, sent.depend) == (5, 120.0, msgspec.UNSET)
    assert not [c for c in h.fake.calls if c[1] == Op.MODIFY]  # no mem_limit given: the limit is left alone
    h.req("PATCH", "/v1/jobs/5", json={"mem_limit": "1G", "depend": "done(3)"})
    assert [c[1] for c in h.fake.calls][-3:-1] == [Op.MODIFY, Op.MODIFY_SPEC]
    r = h.req("PATCH", "/v1/jobs/5", json={})
    assert r.status_code == 400 and "nothing to change" in r.json["detail"]
    assert h.req("PATCH", "/v1/jobs/5", json={"slots": 0}).status_code == 400
    h.fake.jobs[6] = jobview(6, state="RUN")
    assert h.req("PATCH", "/v1/jobs/6", json={"name": "x"}).status_code == 409


def test_a_signal_and_an_arrays_summary_are_sub_resources(h: Harness) -> None:
    """bkill -s as POST /v1/jobs/{id}/signal, bjobs -A as GET /v1/jobs/{id}/array: neither existed."""
    from xce.core.views import ArrayView

    h.fake.jobs[3] = jobview(3, state="RUN")
    r = h.req("POST", "/v1/jobs/3/signal", json={"signal": "USR1"})
    assert r.status_code == 200 and r.json == {"results": {"3": "signal 10 sent"}}
    (_, _, sent), = [c for c in h.fake.calls if c[1] == Op.KILL]
    assert (sent.ids, sent.signal, sent.to) == ([3], 10, "")
    assert h.req("POST", "/v1/jobs/3/signal", json={"signal": "9"}).json == {"results": {"3": "signal 9 sent"}}
    assert h.req("POST", "/v1/jobs/3/signal", json={"signal": "USR2", "to": "steps"}).status_code == 200
    assert [c[2].to for c in h.fake.calls if c[1] == Op.KILL][-1] == "steps"  # scancel's default
    r = h.req("POST", "/v1/jobs/3/signal", json={"signal": "USR2", "to": "shell"})
    assert r.status_code == 400 and "to" in r.json["detail"], r.json
    r = h.req("POST", "/v1/jobs/3/signal", json={"signal": "NOPE"})
    assert r.status_code == 400 and "unknown signal 'NOPE'" in r.json["detail"]
    el = 12 << 32 | 1
    h.fake.jobs[el] = jobview(el, state="RUN")
    h.fake.arrays = [ArrayView(id=12, name="a", user="alice", queue="normal", indices="1-10", limit=2, elements=10,
                               counts={"RUN": 1, "PEND": 9})]
    r = h.req("GET", "/v1/jobs/12/array")
    assert r.status_code == 200 and (r.json["elements"], r.json["counts"]) == (10, {"RUN": 1, "PEND": 9})
    r = h.req("GET", "/v1/jobs/3/array")
    assert r.status_code == 404 and "job 3 is not an array" in r.json["detail"]
