"""`xce sim-fleet`: simulated hosts against the real daemons, and a simulated host's rules.

The end-to-end test starts a real cluster with no worker (`xce up --hosts 0`), a fleet
of 50 simulated hosts as a real process, and checks that they register over CURVE with
their own keys, take jobs, report the model's memory and finish them, and that a kill
reaches a simulated job.  The unit tests drive one SimHost with real envelopes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import msgspec

from conftest import local_cluster, wait_for

from xce.core.model import Alloc, JobSpec
from xce.proto import schema as S
from xce.proto.codec import decode_envelope, encode
from xce.proto.opcodes import Op
from xce.sim.fleet import FleetModel, SimHost, run_time

G = 1 << 30


def test_fleet_registers_takes_jobs_and_finishes_them(tmp_path: Path) -> None:
    with local_cluster(tmp_path, "--hosts", "0", "--heartbeat", "0.5") as c:
        stats = tmp_path / "fleet.json"
        fleet = subprocess.Popen([sys.executable, "-m", "xce.cli.main", "--state-dir", str(c.state_dir), "sim-fleet",
                                  "--hosts", "50", "--slots", "2", "--mem", "4G", "--run-time", "1",
                                  "--stats", str(stats)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_for(lambda: sum(h.state == "ok" for h in c.client.hosts()) == 50, 30, "50 simulated hosts ok")
            assert (c.state_dir / "keys" / "allowed" / "sim00050.key").exists()  # its own key, allowed
            ids = c.client.submit_many([{"command": ["sleep", "1"], "resreq": "rusage[mem=1G]"}] * 100)
            long = c.client.submit(["sleep", "600"])
            done = wait_for(lambda: (js := c.client.jobs(ids, all=True)) and all(j.state == "DONE" for j in js)
                            and js, 30, "100 simulated jobs DONE")
            assert len({j.hosts[0] for j in done}) > 10  # spread over the fleet
            assert all(j.exit_code == 0 and j.mem_peak == int(0.8 * G) for j in done)  # the model's 80 %
            wait_for(lambda: c.client.job(long).state == "RUN", 20, "the long job to run")
            c.client.kill([long])
            assert c.wait_job(long).state == "EXIT"
            wait_for(lambda: json.loads(stats.read_text())["ended"] == 101, 20, "the fleet's counters")
        finally:
            os.kill(fleet.pid, signal.SIGTERM)
            assert fleet.wait(20) == 0, fleet.stderr.read() if fleet.stderr else ""


def order(op: Op, body: object, rid: int = 1, term: int = 1) -> S.Envelope:
    return decode_envelope(encode(op, rid, body, term=term))


def run_job(job_id: int, command: list[str], mem: int = 2 * G, mem_limit: int | None = None) -> S.RunJob:
    return S.RunJob(job_id=job_id, attempt=1, spec=JobSpec(command=command, mem_limit=mem_limit),
                    alloc=Alloc(host="h", slots=2, mem=mem), hosts=["h"])


def test_run_time_is_the_sleep_else_the_fleets() -> None:
    assert run_time(JobSpec(command=["sleep", "7"]), 30) == 7
    assert run_time(JobSpec(command=["sh", "-c", "sleep 2.5"]), 30) == 2.5
    assert run_time(JobSpec(command=["./a.out", "sleep", "3"]), 30) == 30


def test_a_dispatch_is_confirmed_once_and_its_end_sent_until_committed() -> None:
    h = SimHost("h", "tok", FleetModel(slots=4, mem=8 * G, use_ratio=0.5))
    h.registered = True
    first = h.receive(order(Op.RUN_JOB, run_job(1, ["sleep", "10"])), now=100.0)
    assert [decode_envelope(f).op for f in first] == [Op.JOB_STARTED]
    # retried (or a new -M): started once, its start confirmed again with the time it started
    (again,) = h.receive(order(Op.RUN_JOB, run_job(1, ["sleep", "10"], mem_limit=3 * G)), now=100.5)
    started = msgspec.msgpack.decode(decode_envelope(again).body, type=S.JobStarted)
    assert (started.job_id, started.time, h.started, h.tasks[(1, 1)].mem_limit) == (1, 100.0, 1, 3 * G)
    h.end_due(105.0)
    assert h.tasks[(1, 1)].rss == G  # half of 2G, reached after the ramp (10 % of the run)
    h.end_due(110.0)
    (sent,) = h.flush(now_mono=0.0)
    fin = decode_envelope(sent)
    assert fin.op == Op.JOB_FINISHED and h.ended == 1
    assert h.flush(now_mono=1.0) == []      # not yet due again
    assert len(h.flush(now_mono=2.5)) == 1  # no commit within 2 s: sent again
    assert h.receive(order(Op.RUN_JOB, run_job(1, ["sleep", "10"])), now=111.0) == []  # ending: not again


def test_an_order_of_an_older_term_is_refused_and_a_mem_limit_kills() -> None:
    h = SimHost("h", "tok", FleetModel())
    h.registered = True
    h.receive(order(Op.RUN_JOB, run_job(1, ["sleep", "10"], mem_limit=G), term=3), now=0.0)
    (err,) = h.receive(order(Op.RUN_JOB, run_job(2, ["sleep", "10"]), term=2), now=0.0)
    assert decode_envelope(err).op == Op.ERROR and (2, 1) not in h.tasks
    h.end_due(5.0)  # 0.8 x 2G passes the 1G limit
    assert h.pending[0].reason == "MEMLIMIT" and not h.tasks
