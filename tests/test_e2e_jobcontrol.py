"""End to end on a real cluster: a dependency chain, stop/resume of a pending job, requeue,
never-satisfied reasons and the job history (issue 14, items 3 and 5)."""

from __future__ import annotations

from pathlib import Path

from conftest import Cluster, proc_state, wait_for

from xce.core.jobspec.depend import parse_depend


def test_a_chain_with_a_held_link_stop_resume_requeue_and_history(cluster2: Cluster, tmp_path: Path) -> None:
    c = cluster2.client
    order, gate = tmp_path / "order", tmp_path / "go"
    step = lambda name: ["sh", "-c", f"echo {name} >> {order}"]  # noqa: E731
    a = c.submit(["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done; echo a >> {order}"],
                 resreq="rusage[mem=10M]")
    b = c.submit(step("b"), resreq="rusage[mem=10M]", depend=parse_depend(f"done({a})"))
    cc = c.submit(step("c"), resreq="rusage[mem=10M]", depend=parse_depend(f"done({b})"))
    never = c.submit(step("x"), resreq="rusage[mem=10M]", depend=parse_depend(f"exit({a})"))
    wait_for(lambda: c.job(b).reason == f"waiting for done({a}): job {a} is RUN", what="b waits on a running")
    assert c.stop([cc]) == {cc: "PSUSP"}
    assert c.job(cc).state == "PSUSP"
    gate.touch()
    wait_for(lambda: c.job(b).state == "DONE", what="b done")
    assert c.job(cc).state == "PSUSP"  # held by its user: its dependency is met, it is not placed
    assert c.job(never).reason == f"never satisfied: exit({a}): job {a} ended DONE"
    assert c.resume([cc]) == {cc: "PEND"}
    assert c.wait([cc], timeout=30)[0].state == "DONE"
    assert order.read_text() == "a\nb\nc\n"
    events = [e.event for e in c.hist(cc)]
    assert events[:4] == ["submitted", "suspended", "released", "resumed"]  # b ended while c was held
    assert events[-3:] == ["dispatched", "started", "ended DONE"]  # the start, committed with the end
    # brequeue of an ended job: PEND again, a new attempt, and it runs again.
    assert c.requeue([a]) == {a: "requeued"}
    wait_for(lambda: order.read_text().count("a") == 2, what="a ran again")
    assert c.wait([a], timeout=30)[0].state == "DONE"
    assert "requeued" in [e.event for e in c.hist(a)]
    c.kill([never])


def test_top_switch_and_modify_of_pending_jobs(cluster2: Cluster, tmp_path: Path) -> None:
    c = cluster2.client
    gate = tmp_path / "go"
    first = c.submit(["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done"], resreq="rusage[mem=10M]")
    held = c.submit(["true"], resreq="rusage[mem=10M]", depend=parse_depend(f"done({first})"))  # never placed early
    wait_for(lambda: c.job(first).state == "RUN", what="the first job running: no other job pending")
    assert c.stop([held]) == {held: "PSUSP"}
    c.modify_spec(held, name="renamed", priority=7, run_limit=120.0)
    assert c.move(held, "top") == "priority 8"  # the only pending job of its queue: its own priority + 1
    c.modify_spec(held, slots=2, depend=f"ended({first})")
    v = c.job(held)
    assert (v.name, v.slots, v.reason) == ("renamed", 2, f"waiting for ended({first}): job {first} is RUN") or \
        (v.name, v.slots, v.reason) == ("renamed", 2, f"waiting for ended({first}): job {first} is PEND")
    assert [e.event for e in c.hist(held)][-3:] == ["modified", "moved to top", "modified"]
    assert c.resume([held]) == {held: "PEND"}
    gate.touch()
    assert c.wait([held], timeout=30)[0].state == "DONE"


def test_stop_and_resume_of_a_running_job_signal_its_processes(cluster2: Cluster, tmp_path: Path) -> None:
    c = cluster2.client
    pid_file = tmp_path / "pid"
    jid = c.submit(["sh", "-c", f"echo $$ > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; "
                                "while true; do sleep 0.05; done"], resreq="rusage[mem=10M]")
    wait_for(lambda: pid_file.exists() and c.job(jid).state == "RUN", what="job running")
    assert c.stop([jid]) == {jid: "USUSP"}
    wait_for(lambda: proc_state(pid_file) == "T", what="its shell stopped (SIGSTOP)")
    v = c.job(jid)
    assert v.state == "USUSP" and v.mem_reserved > 0  # still charged
    assert c.resume([jid]) == {jid: "RUN"}
    wait_for(lambda: proc_state(pid_file) in ("S", "R"), what="its shell running again (SIGCONT)")
    c.kill([jid])
    assert c.wait([jid], timeout=30)[0].state == "EXIT"


def test_an_array_runs_its_elements_with_lsb_jobindex(cluster2: Cluster, tmp_path: Path) -> None:
    from xce.core.arrays import element_id
    from xce.core.jobspec.arrays import parse_lsf_job_name

    c = cluster2.client
    out = tmp_path / "out"
    name, arr = parse_lsf_job_name("sweep[1-9:2,20]%2")
    aid = c.submit(["sh", "-c", f'echo "$LSB_JOBID $LSB_JOBINDEX $LSB_JOBINDEX_STEP $LSB_JOBINDEX_END" >> {out}'],
                   resreq="rusage[mem=10M]", name=name, array=arr)
    elements = [element_id(aid, i) for i in arr]
    views = c.wait(elements, timeout=60)
    assert [v.state for v in views] == ["DONE"] * 6
    lines = sorted(out.read_text().splitlines(), key=lambda s: int(s.split()[1]))
    assert lines == [f"{aid} {i} {2 if i < 20 else 1} 20" for i in (1, 3, 5, 7, 9, 20)]
    (summary,) = c.arrays([aid])
    assert (summary.name, summary.indices, summary.limit, summary.elements, summary.counts) == \
        ("sweep", "1-9:2,20", 2, 6, {"DONE": 6})
    assert sorted(v.id for v in c.jobs([aid], all=True)) == elements  # JOBS by an array's id: its elements
    after = c.submit(["true"], resreq="rusage[mem=10M]", depend=parse_depend(f"done({aid})"))
    assert c.wait([after], timeout=30)[0].state == "DONE"  # a dependency on the whole array
