"""REST over real HTTP: a job script and the new fields through POST /v1/jobs, job control as
sub-resources (stop, resume, switch, top, bottom, requeue) and the history, on a real cluster."""

from __future__ import annotations

from pathlib import Path

from conftest import local_cluster, proc_state, wait_for
from test_rest_e2e import http, login

from xce.client import cluster_config
from xce.security.auth import unix_user


def test_scripts_and_job_control_over_rest(tmp_path: Path) -> None:
    with local_cluster(tmp_path, "--hosts", "1", "--slots-per-host", "2", "--mem-per-host", "2G") as c:
        url = cluster_config(c.state_dir).rest_url
        wait_for(lambda: http("GET", f"{url}/healthz")[0] == 200, 20, "xce-rest to answer /healthz")
        me = unix_user()
        c.xce("user", "add", me, "--role", "user", "--password", "pw-me")
        c.xce("user", "add", "bob", "--role", "user", "--password", "pw-bob")
        token = login(url, me, "pw-me")
        pid_file = tmp_path / "pid"
        script = f"#!/bin/sh\necho $$ > {pid_file}\nwhile :; do sleep 0.1; done\n"
        status, _, sub = http("POST", f"{url}/v1/jobs", token,
                              {"script": script, "name": "s", "cwd": str(tmp_path), "priority": 3,
                               "run_limit": 600, "stdout": "out.%J", "stdout_overwrite": True})
        assert status == 201, sub
        jid = sub["id"]
        wait_for(lambda: proc_state(pid_file) in ("S", "R"), what="the script running")
        view = http("GET", f"{url}/v1/jobs/{jid}", token)[2]
        assert (view["command"], view["script"], view["priority"], view["run_limit"]) == (["STDIN"], True, 3, 600)

        bob = login(url, "bob", "pw-bob")
        status, _, problem = http("POST", f"{url}/v1/jobs/{jid}/stop", bob)
        assert status == 403 and problem["permission"] == "jobs.modify"
        status, _, r = http("POST", f"{url}/v1/jobs/{jid}/stop", token)
        assert status == 200 and r["results"] == {str(jid): "USUSP"}
        wait_for(lambda: proc_state(pid_file) == "T", what="stopped by SIGSTOP")
        status, _, r = http("POST", f"{url}/v1/jobs/{jid}/stop", token)
        assert status == 409, r  # USUSP cannot be stopped again
        assert http("POST", f"{url}/v1/jobs/{jid}/resume", token)[2]["results"] == {str(jid): "RUN"}
        wait_for(lambda: proc_state(pid_file) in ("S", "R"), what="continued by SIGCONT")
        status, _, r = http("POST", f"{url}/v1/jobs/{jid}/switch", token, {"queue": "high"})
        assert status == 200 and r["results"] == {str(jid): "high"}

        status, _, dep = http("POST", f"{url}/v1/jobs", token, {"command": ["true"], "depend": f"done({jid})"})
        assert status == 201
        status, _, moved = http("POST", f"{url}/v1/jobs/{dep['id']}/top", token)
        assert status == 200 and moved["to"] == "top" and moved["detail"].startswith("priority")
        assert http("GET", f"{url}/v1/jobs/{dep['id']}", token)[2]["depend"] == f"done({jid})"

        status, _, r = http("POST", f"{url}/v1/jobs/{jid}/requeue", token)
        assert status == 200 and r["results"] == {str(jid): "requeue requested"}
        status, _, events = http("GET", f"{url}/v1/jobs/{jid}/history", token)
        assert status == 200
        names = [e[1] for e in events]
        # 'started' comes from the worker's confirmation, which may trail the dispatch: not ordered here
        assert [n for n in names if n != "started"][:5] == [
            "submitted", "dispatched", "suspended", "resumed", "switched"], names
        assert "requeue requested" in names
        c.client.kill([jid, dep["id"]])

        status, _, spec = http("GET", f"{url}/v1/openapi.json")
        paths = spec["paths"]
        for action in ("stop", "resume", "requeue", "switch", "top", "bottom"):
            assert f"/v1/jobs/{{job_id}}/{action}" in paths, sorted(paths)
        assert "/v1/jobs/{job_id}/history" in paths
