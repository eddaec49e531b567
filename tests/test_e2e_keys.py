"""Every write carries an idempotency key, scoped by who sent it, and the request log says
what the client was answered (issue 12 items 3, 4 and 12), with real daemons on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.request
from pathlib import Path

from conftest import local_cluster, sigstop, wait_for
from test_e2e_ha import HA_ARGS, controller_pids, leader_pid

from xce.client import Client, cluster_config
from xce.core.model import JobSpec
from xce.proto.opcodes import Op


def post_job(url: str, token: str, body: dict, timeout: float = 30) -> tuple[int, dict]:
    req = urllib.request.Request(f"{url}/v1/jobs", method="POST", data=json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, json.loads(r.read())


def test_a_rest_submit_while_both_followers_are_paused_creates_one_job(tmp_path: Path) -> None:
    """The commit waits on a majority for 4 s; the REST door's client re-sends meanwhile."""
    with local_cluster(tmp_path, *HA_ARGS) as c:
        url = cluster_config(c.state_dir).rest_url
        token = c.xce("token").stdout.strip()
        wait_for(lambda: post_job(url, token, {"command": ["true"], "name": "warm-up"})[0] == 201, 30,
                 "REST to submit")
        lead = leader_pid(c)
        followers = [p for p in controller_pids(c).values() if p != lead]
        for p in followers:
            sigstop(p)
        resume = threading.Timer(4.0, lambda: [os.kill(p, signal.SIGCONT) for p in followers])
        resume.start()
        try:
            status, reply = post_job(url, token, {"command": ["true"], "name": "once"})
        finally:
            resume.join()
            for p in followers:
                os.kill(p, signal.SIGCONT)
        assert status == 201, reply

        def settled() -> list:
            views = [v for v in c.client.jobs(all=True) if v.name == "once"]
            return views if views and all(v.state in ("DONE", "EXIT") for v in views) else []

        views = wait_for(settled, 30, "the submitted job to end")
        # Let any second copy still in flight land before counting.
        c.client.submit(["true"], name="barrier")
        views = [v for v in c.client.jobs(all=True) if v.name == "once"]
        assert [v.id for v in views] == [reply["id"]]


def test_keys_are_scoped_by_principal_and_the_log_records_each_answer(tmp_path: Path) -> None:
    with local_cluster(tmp_path, "--hosts", "1", "--slots-per-host", "2", "--mem-per-host", "2G",
                       "--heartbeat", "0.5") as c:
        def token(user: str) -> str:
            return c.xce("token", "--issue", "--user", user, "--role", "user").stdout.strip()

        from xce.proto import writes

        spec = JobSpec(command=["true"], cwd=str(tmp_path))  # user "": the token's user
        key = writes.new_key()
        with Client(state_dir=c.state_dir, token=token("alice"), timeout=15) as alice, \
                Client(state_dir=c.state_dir, token=token("bob"), timeout=15) as bob:
            (a,) = alice.request(Op.SUBMIT, writes.submit([spec], key=key)).ids
            (b,) = bob.request(Op.SUBMIT, writes.submit([spec], key=key)).ids
            assert b != a                                   # Bob's own job, not Alice's id
            assert bob.job(b).user == "bob"
            assert bob.request(Op.SUBMIT, writes.submit([spec], key=key)).ids == [b]  # his retry

        # A kill answered "already ended" is logged with that answer, not as "accepted".
        done = c.client.submit(["true"], name="ends")
        c.wait_job(done)
        assert c.client.kill([done]) == {done: "already DONE"}
        running = c.client.submit(["sleep", "30"], name="runs")
        wait_for(lambda: c.client.job(running).state == "RUN", 20, "RUN")
        assert c.client.kill([running]) == {running: "kill requested"}
        kills = {r.target: r.result for r in c.client.request_log() if r.op == "KILL"}
        assert kills[f"jobs {done}"] == f"job {done}: already DONE"
        assert kills[f"jobs {running}"] == "accepted"
