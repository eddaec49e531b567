"""The job-control commands of `xce` on a real local cluster (issue 14 items 5 and 6, the CLI's doors):
stop/resume act on the processes, requeue, switch, top/bottom, modify of a pending job, hist,
jobs -l and the bjobs state filters, each with --json."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Cluster, local_cluster, proc_state, wait_for


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with local_cluster(tmp_path_factory.mktemp("jobcli"), "--hosts", "1", "--slots-per-host", "2",
                       "--mem-per-host", "2G") as c:
        yield c


def submit(c: Cluster, *args: str, cwd: Path) -> int:
    out = c.xce("submit", *args, cwd=cwd).stdout
    return int(out.split("<")[1].split(">")[0])


def test_stop_and_resume_act_on_the_processes_and_hist_lists_it(cluster: Cluster, tmp_path: Path) -> None:
    pid_file, ticks = tmp_path / "pid", tmp_path / "ticks"
    jid = submit(cluster, "-J", "ticker", "--", "sh", "-c",
                 f"echo $$ > {pid_file}; while :; do echo t >> {ticks}; sleep 0.1; done", cwd=tmp_path)
    wait_for(lambda: proc_state(pid_file) in ("S", "R"), what="the job running")
    # Its start, from the leader's soft state while it runs (the Finish commits it: no commit per start).
    wait_for(lambda: "started by " in cluster.xce("hist", str(jid)).stdout, what="hist's started of a running job")
    assert cluster.xce("stop", str(jid)).stdout == f"Job <{jid}> is being stopped (now USUSP)\n"
    wait_for(lambda: proc_state(pid_file) == "T", what="its shell stopped (SIGSTOP)")
    size = ticks.stat().st_size
    assert json.loads(cluster.xce("jobs", "-s", "--json").stdout)[0]["state"] == "USUSP"
    assert json.loads(cluster.xce("resume", str(jid), "--json").stdout) == {str(jid): "RUN"}
    wait_for(lambda: proc_state(pid_file) in ("S", "R") and ticks.stat().st_size > size,
             what="its shell running and writing again (SIGCONT)")
    assert str(jid) in cluster.xce("jobs", "-r").stdout and "No pending job found" in cluster.xce("jobs", "-p").stdout
    cluster.xce("kill", str(jid))
    cluster.wait_job(jid)
    text = cluster.xce("hist", str(jid)).stdout
    events = [line.split(": ", 1)[1] for line in text.splitlines()[1:]]
    assert [e.split(" by ")[0] for e in events] == ["submitted", "dispatched", "started", "suspended", "resumed",
                                                 "kill requested", "ended EXIT"]
    js = json.loads(cluster.xce("hist", str(jid), "--json").stdout)[str(jid)]
    assert [e[1] for e in js][:4] == ["submitted", "dispatched", "started", "suspended"]  # [time, event, by, detail]
    assert str(jid) in cluster.xce("jobs", "-d").stdout


def test_pending_job_control_modify_switch_top_bottom_and_jobs_l(cluster: Cluster, tmp_path: Path) -> None:
    gate = tmp_path / "go"
    first = submit(cluster, "--", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done", cwd=tmp_path)
    held = submit(cluster, "-w", f"done({first})", "-o", "out.%J", "-P", "proj7", "-G", "grp7", "-We", "3",
                  "--", "echo", "a b", cwd=tmp_path)
    wait_for(lambda: f"\n waiting for done({first}): job {first} is RUN;" in cluster.xce("jobs", "-p").stdout,
             what="bjobs -p's reason under the job's row")
    assert cluster.xce("stop", str(held)).stdout == f"Job <{held}> is being stopped (now PSUSP)\n"
    r = cluster.xce("modify", "-J", "renamed", "-sp", "7", "-W", "2", "-R", "rusage[mem=10]", str(held))
    assert r.stdout == f"Parameters of job <{held}> are being changed: name, priority, resreq, run_limit\n"
    assert "priority 8" in cluster.xce("top", str(held)).stdout  # alone in its queue: its own priority + 1
    assert json.loads(cluster.xce("bottom", str(held), "--json").stdout)["detail"] == "priority 7"
    assert cluster.xce("switch", "high", str(held)).stdout == f"Job <{held}> is switched to queue <high>\n"
    long = cluster.xce("jobs", "-l", str(held)).stdout
    for part in (f"Queue <high>, State <PSUSP>", "Name <renamed>", "Command: echo 'a b'", f"Cwd: {tmp_path}",
                 "Output: out.%J", f"Dependency: done({first})", "Priority: 7   Run limit: 2 min", "Submitted: ",
                 "Project: proj7   Group: grp7   Run estimate: 3 min"):
        assert part in long, (part, long)
    assert json.loads(cluster.xce("jobs", "-p", "--json").stdout)[0]["depend"] == f"done({first})"
    r = cluster.xce("modify", "-x", str(held), check=False)
    assert r.returncode == 2 and "-x" in r.stderr
    assert cluster.xce("resume", str(held)).returncode == 0
    gate.touch()
    assert cluster.wait_job(held).state == "DONE"
    assert (tmp_path / f"out.{held}").read_text() == "a b\n"
    r = cluster.xce("stop", str(held), check=False)  # a finished job: refused by the state table
    assert r.returncode != 0 and f"job {held}: cannot stop a job in state DONE" in r.stderr
    assert cluster.xce("requeue", str(held)).stdout == f"Job <{held}> is being requeued (now requeued)\n"
    wait_for(lambda: (tmp_path / f"out.{held}").read_text() == "a b\na b\n", what="the requeued job ran again")


def test_arrays_through_the_cli_ids_with_index_and_jobs_a(cluster: Cluster, tmp_path: Path) -> None:
    gate = tmp_path / "go"
    script = (f'#!/bin/sh\n#BSUB -J "sweep[1-3]"\n#BSUB -o o.%J.%I\n'
              f'while [ ! -e {gate} ]; do sleep 0.05; done; echo $LSB_JOBINDEX\n')
    aid = int(cluster.xce("submit", cwd=tmp_path, input=script).stdout.split("<")[1].split(">")[0])
    (summary,) = json.loads(cluster.xce("jobs", "-A", "--json", str(aid)).stdout)
    assert (summary["name"], summary["indices"], summary["elements"]) == ("sweep", "1-3", 3)
    wait_for(lambda: f"{aid}[2]" in cluster.xce("jobs", "-r").stdout, what="element 2 running")
    assert cluster.xce("stop", f"{aid}[2]").stdout == f"Job <{aid}[2]> is being stopped (now USUSP)\n"
    assert f"Array: sweep[1-3], element 2" in cluster.xce("jobs", "-l", f"{aid}[2]").stdout
    assert json.loads(cluster.xce("resume", f"{aid}[2]", "--json").stdout) == {str((aid << 32) | 2): "RUN"}
    gate.touch()
    wait_for(lambda: json.loads(cluster.xce("jobs", "-A", "--json", str(aid)).stdout)[0]["counts"] == {"DONE": 3},
             what="every element DONE")
    for i in (1, 2, 3):  # %J is the array's id, %I the element's index
        assert (tmp_path / f"o.{aid}.{i}").read_text() == f"{i}\n"
    assert f"ARRAY_SPEC" in cluster.xce("jobs", "-A").stdout
    r = cluster.xce("submit", "-J", "big[1-1001]", "--", "true", check=False)  # past the default 1000
    assert r.returncode != 0 and 'array "big[1-1001]": index 1001 is above the largest index 1000' in r.stderr
    assert "(controller.max_array_size)" in r.stderr
    # Waiting on an array waits for every element, also those not materialised yet (%1: one at a time).
    aid = int(cluster.xce("submit", "-J", "one[1-4]%1", "--", "true").stdout.split("<")[1].split(">")[0])
    views = cluster.client.wait([aid], timeout=30)
    assert cluster.client.arrays([aid])[0].counts == {"DONE": 4}
    assert sorted(v.id & 0xFFFFFFFF for v in views) == [1, 2, 3, 4] and {v.state for v in views} == {"DONE"}
    # jobs -A shows the indices as submitted (LSF's ARRAY_SPEC); `xce jobs` lists every element, those
    # not materialised yet too (%1 keeps one at a time), as `xce jobs ARRAY` does.
    gate2 = tmp_path / "go2"
    aid = int(cluster.xce("submit", "-J", "odd[1-100:2]%1", "--", "sh", "-c",
                          f"while [ ! -e {gate2} ]; do sleep 0.05; done").stdout.split("<")[1].split(">")[0])
    row = next(line for line in cluster.xce("jobs", "-A").stdout.splitlines() if line.startswith(f"{aid} "))
    assert row.split()[1] == "odd[1-100:2]%1"
    listed = [line.split()[0] for line in cluster.xce("jobs").stdout.splitlines()[1:]]
    odd = [f"{aid}[{i}]" for i in range(1, 100, 2)]
    assert [j for j in listed if j.startswith(f"{aid}[")] == odd
    assert [line.split()[0] for line in cluster.xce("jobs", str(aid)).stdout.splitlines()[1:]] == odd
    assert f"Array: odd[1-100:2]%1, element 1" in cluster.xce("jobs", "-l", f"{aid}[1]").stdout
    cluster.xce("kill", str(aid))


def test_every_command_takes_an_element_and_a_range_and_names_elements_as_given(cluster: Cluster,
                                                                                tmp_path: Path) -> None:
    """kill, kill -s, peek, wait, modify, hist on ID[INDEX] and ranges (issue 14 item 2), as LSF does."""
    gate = tmp_path / "go"
    aid = submit(cluster, "-J", "ctl[1-6]%1", "-o", "o.%J.%I", "--", "sh", "-c",
                 f"echo started $LSB_JOBINDEX; while [ ! -e {gate} ]; do sleep 0.05; done",
                 cwd=tmp_path)
    wait_for(lambda: f"{aid}[1]" in cluster.xce("jobs", "-r").stdout, what="element 1 running")
    # bmod of the whole array: every pending element, those not materialised yet too
    r = cluster.xce("modify", "-W", "7", "-sp", "3", str(aid))
    assert r.stdout == f"Parameters of job <{aid}> are being changed: priority, run_limit\n"
    assert cluster.xce("modify", "-J", "renamed", f"{aid}[5-6]").stdout == \
        f"Parameters of job <{aid}[5]> are being changed: name\nParameters of job <{aid}[6]> are being changed: name\n"
    assert cluster.xce("kill", f"{aid}[4-5]").stdout == f"Job <{aid}[4]> is killed\nJob <{aid}[5]> is killed\n"
    assert cluster.xce("kill", "-s", "CONT", f"{aid}[1]").stdout == f"Job <{aid}[1]>: signal 18 sent\n"
    wait_for(lambda: "started 1" in cluster.xce("peek", f"{aid}[1]").stdout, what="peek of an element")
    assert f"Job <{aid}[1]>:" in cluster.xce("hist", f"{aid}[1]").stdout
    assert "submitted" in cluster.xce("hist", str(aid)).stdout  # the array's own history
    gate.touch()
    r = cluster.xce("wait", f"{aid}[1-3]", f"{aid}[6]", check=False, timeout=60)
    assert r.returncode == 0, r.stderr
    views = {v.id & 0xFFFFFFFF: v for v in cluster.client.jobs([aid], all=True)}
    assert {i: (v.state, v.run_limit, v.priority) for i, v in views.items() if i != 1} == {
        2: ("DONE", 420.0, 3), 3: ("DONE", 420.0, 3), 4: ("EXIT", 420.0, 3), 5: ("EXIT", 420.0, 3),
        6: ("DONE", 420.0, 3)}
    assert (views[5].name, views[6].name, views[3].name) == ("renamed", "renamed", "ctl")  # a range: each of it
    r = cluster.xce("wait", f"{aid}", check=False)
    assert r.returncode == 1 and f"Job <{aid}[4]> ended EXIT" in r.stderr
