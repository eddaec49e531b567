"""Tests for xce.sim: the SWF reader, hand-computed replays, one decision shared with the
daemons' scheduler, and `xce sim` end to end on a slice of the LANL CM-5 trace."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from xce.daemons.scheduler import round_caps
from xce.core.errors import InvalidRequest
from xce.replica.live import Live
from xce.replica.mirror import Mirror
from xce.core.model import JobState
from xce.core.placement import pending_order, schedule
from xce.core.sched.backfill import releases
from xce.proto.schema import HostLive
from xce.sim import metrics
from xce.sim.engine import Engine, fair_state
from xce.sim.model import Machine, UsageModel, machine, sim_jobs
from xce.sim.policies import POLICIES, policies
from xce.sim.swf import TraceError, load, parse

MB = 1 << 20
TRACE = Path("/work/shared/traces/LANL-CM5-1994-4.1-cln.swf.gz")
HEADER = """; Version: 2.2
; Computer: a test machine
; MaxNodes: 4
; MaxProcs: 8
; Queue:  0  interactive
; Queue:  1  batch
;
"""


def line(job: int, submit: float, run: float, procs: int, used_kb: float = -1, req_kb: float = -1,
         wait: float = 0, user: int = 1, queue: int = 1, req_procs: int | None = None, req_time: float = -1) -> str:
    req_p = procs if req_procs is None else req_procs
    return (f"{job} {submit} {wait} {run} {procs} -1 {used_kb} {req_p} {req_time} {req_kb} 1 {user} 1 1 {queue} "
            "-1 -1 -1")


def replay(lines: list[str], policy: str, m: Machine, usage: UsageModel = UsageModel(ramp=0.1, steps=1),
           kill_grace: float = 0.0) -> dict:
    trace = parse([*HEADER.splitlines(), *lines])
    jobs, _ = sim_jobs(trace, m, memory=m.mem > 0)
    eng = Engine(m, jobs, POLICIES[policy], usage, kill_grace)
    out = eng.run()
    assert eng.live.ledger.audit() == []
    return {"summary": metrics.summary(out), "records": out.records, "engine": eng}


# ---- reading SWF ---------------------------------------------------------------------------

def test_header_fields_unknowns_and_interactive_jobs_load() -> None:
    t = parse([*HEADER.splitlines(), line(1, 0, 10, 2), line(2, 5, 7, 1, req_procs=-1, queue=0) + "\n", "\n"])
    assert (t.header.max_nodes, t.header.max_procs) == (4, 8)
    assert t.header.queues == {0: "interactive", 1: "batch"}
    assert t.header.fields["Computer"] == "a test machine"
    assert [j.req_procs for j in t.jobs] == [2, -1]
    jobs, skipped = sim_jobs(t, machine(t))
    assert [(j.slots, j.queue, j.reserve_slot) for j in jobs] == [(2, "batch", 0), (1, "interactive", 0)]
    assert skipped == 0


def test_gzip_and_plain_traces_load_alike(tmp_path: Path) -> None:
    text = HEADER + line(1, 0, 10, 2, used_kb=512, req_kb=1024) + "\n"
    (tmp_path / "t.swf").write_text(text)
    with gzip.open(tmp_path / "t.swf.gz", "wt") as f:
        f.write(text)
    assert load(tmp_path / "t.swf").jobs == load(tmp_path / "t.swf.gz").jobs


def test_a_bad_line_is_named() -> None:
    with pytest.raises(TraceError, match=r"trace line 2: field 'run' is 'abc'"):
        parse([";x", "1 0 0 abc 2 -1 -1 2 -1 -1 1 1 1 1 1 -1 -1 -1"])
    with pytest.raises(TraceError, match="line 1: 3 fields, SWF has 18"):
        parse(["1 2 3"])


def test_jobs_without_processors_or_run_time_are_skipped_and_counted() -> None:
    t = parse([*HEADER.splitlines(), line(1, 0, 10, -1, req_procs=-1), line(2, 0, -1, 2), line(3, 0, 5, 2)])
    jobs, skipped = sim_jobs(t, machine(t))
    assert [j.trace_id for j in jobs] == [3] and skipped == 2


def test_machine_from_header_and_flags() -> None:
    t = parse([*HEADER.splitlines(), line(1, 0, 10, 2, used_kb=3000, req_kb=2048)])
    assert machine(t) == Machine(8, 1, 3000 * 1024)          # MaxProcs, space-shared
    assert machine(t, slots=4) == Machine(2, 4, 4 * 3000 * 1024)
    assert machine(t, hosts=2, mem=5) == Machine(2, 4, 5)
    with pytest.raises(InvalidRequest, match="--hosts and --slots"):
        machine(t, hosts=0, slots=2)


def test_unknown_policy_is_named() -> None:
    with pytest.raises(InvalidRequest, match="unknown policy 'slurm'"):
        policies("flat,slurm")


# ---- replays computed by hand --------------------------------------------------------------

def test_space_shared_waits_slowdown_and_utilisation_by_hand() -> None:
    # 2 slots: j1 takes both for 100 s; j2 (50 s) and j3 (10 s) wait for it and start together.
    s = replay([line(1, 0, 100, 2), line(2, 10, 50, 1), line(3, 20, 10, 1)], "flat", Machine(1, 2, 0))["summary"]
    assert s["started"] == 3 and s["makespan_s"] == 150
    assert s["wait_mean_s"] == pytest.approx((0 + 90 + 80) / 3)
    assert (s["wait_median_s"], s["wait_p95_s"]) == (80, 90)
    assert s["bounded_slowdown_mean"] == pytest.approx((1 + 140 / 50 + 90 / 10) / 3)
    assert s["util_slots"] == pytest.approx((2 * 100 + 50 + 10) / (2 * 150))
    assert s["mem_kills"] == 0 and s["fairness_jain"] == 1.0


def test_slack_share_and_memory_utilisation_by_hand() -> None:
    # reserves 60M, reports 30M at 10 s (ramp 10 %, one step), ends at 100 s
    s = replay([line(1, 0, 100, 1, used_kb=30 * 1024, req_kb=60 * 1024)], "xce", Machine(1, 2, 100 * MB))["summary"]
    assert s["slack_share"] == pytest.approx((60 * 10 + 30 * 90) / (60 * 100))
    assert s["util_mem"] == pytest.approx(30 * 90 / (100 * 100))
    assert s["reserved_share"] == pytest.approx(0.6)


@pytest.mark.parametrize("policy,wait", [("flat", 0), ("xce", 0), ("lsf", 80)])
def test_lsf_counts_a_used_reservation_twice_xce_only_its_slack(policy: str, wait: float) -> None:
    # A: 60M reserved, 30M used from 10 s. B asks 30M at 20 s:
    # flat 100-60 = 40 fits; xce OS 70 - slack 30 = 40 fits; lsf OS 70 - reserved 60 = 10 does not.
    recs = replay([line(1, 0, 100, 1, used_kb=30 * 1024, req_kb=60 * 1024),
                   line(2, 20, 10, 1, used_kb=30 * 1024, req_kb=30 * 1024)], policy, Machine(1, 2, 100 * MB))["records"]
    assert recs[1].start - recs[1].submit == wait


def overgrown(policy: str, kill_grace: float = 0.0) -> dict:
    # A reserves 20M and grows to 80M at 10 s; B asks 50M at 12 s and uses 50M from 22 s.
    return replay([line(1, 0, 100, 1, used_kb=80 * 1024, req_kb=20 * 1024),
                   line(2, 12, 100, 1, used_kb=50 * 1024, req_kb=50 * 1024)], policy, Machine(1, 2, 100 * MB),
                  kill_grace=kill_grace)


def test_flat_places_on_an_overgrown_host_and_memory_pressure_kills_the_largest_overage() -> None:
    r = overgrown("flat")
    a, b = r["records"]
    assert b.start == 12 and a.killed and not b.killed and a.end == 22
    s = r["summary"]
    assert s["mem_kills"] == 1
    assert s["mem_seconds_lost"] == 80 * MB * 12   # A held 80M from 10 s to its kill at 22 s
    assert s["slot_seconds_lost"] == 22
    assert s["oversubscribed_host_minutes"] == 0    # killed the moment it was seen


def test_a_kill_grace_leaves_the_host_oversubscribed_meanwhile() -> None:
    s = overgrown("flat", kill_grace=30)["summary"]
    assert s["oversubscribed_host_minutes"] == pytest.approx(30 / 60)
    assert s["mem_seconds_lost"] == 80 * MB * 42


@pytest.mark.parametrize("policy", ["xce", "lsf"])
def test_xce_charges_the_overgrown_job_and_waits_instead(policy: str) -> None:
    r = overgrown(policy)
    a, b = r["records"]
    assert b.start == 100 and not a.killed and r["summary"]["mem_kills"] == 0


@pytest.mark.parametrize("run_limits,ends", [(False, [100, 52, 200]), (True, [55, 52, 155])])
def test_a_job_past_its_requested_time_is_killed_as_the_worker_kills_it(run_limits: bool, ends: list) -> None:
    # 2 slots, kill grace 5 s.  j1 asks 50 s and runs 100: past its -W it is killed, gone 5 s
    # later (TERM_RUNLIMIT).  j2 asks 50 s and runs 52: killed too, its own end comes first.
    # j3 (2 slots, no requested time) waits for both.
    trace = parse([*HEADER.splitlines(), line(1, 0, 100, 1, req_time=50), line(2, 0, 52, 1, req_time=50),
                   line(3, 1, 100, 2)])
    jobs, _ = sim_jobs(trace, Machine(1, 2, 0), memory=False)
    eng = Engine(Machine(1, 2, 0), jobs, POLICIES["flat"], UsageModel(memory=False), 5.0, run_limits=run_limits)
    out = eng.run()
    assert [r.end for r in out.records] == ends
    assert [r.timed_out for r in out.records] == [run_limits, run_limits, False]
    assert metrics.summary(out)["runlimit_kills"] == 2 * run_limits
    if run_limits:
        assert {eng.cs.jobs[j].reason for j in (1, 2)} == {"TERM_RUNLIMIT"}


@pytest.mark.parametrize("policy,order", [("xce", [1, 2, 3]), ("xce-fair", [1, 3, 2])])
def test_fairshare_starts_the_user_with_less_usage_first(policy: str, order: list) -> None:
    # One slot.  u1's j1 runs 0-100; u1's j2 (at 10) and u2's j3 (at 20) wait.  In submit order
    # j2 goes next; under fairshare u2, who has used nothing, goes first.
    recs = replay([line(1, 0, 100, 1, user=1), line(2, 10, 50, 1, user=1), line(3, 20, 50, 1, user=2)],
                  policy, Machine(1, 1, 0))["records"]
    assert [i + 1 for i, _ in sorted(enumerate(recs), key=lambda r: r[1].start)] == order


def test_noise_is_seeded_and_the_same_for_every_policy() -> None:
    t = parse([*HEADER.splitlines(), line(7, 0, 100, 1, used_kb=1000, req_kb=1000)])
    (j,), _ = sim_jobs(t, machine(t))
    u = UsageModel(noise=0.5, seed=3)
    assert u.reports(j) == u.reports(j) != UsageModel(noise=0.5, seed=4).reports(j)
    assert UsageModel().reports(j) == [(2.5, 256000), (5.0, 512000), (7.5, 768000), (10.0, 1024000)]


# ---- the simulator and the daemons decide alike -------------------------------------------

class Checked(Engine):
    """An engine that, at every round, also asks the scheduler daemon's own path: a Mirror of
    the same hard state, ``round_caps`` (ledger re-derived from the accounts) and the whole
    pending queue.  The sim's incremental host views and short rounds must not change a thing."""

    compared = 0

    def plan(self, ordered):
        m = Mirror()
        m.hosts = dict(self.cs.hosts)
        m.jobs = dict(self.cs.jobs)
        m.pending = {j.id: j for j in self.cs.jobs.values() if j.state == JobState.PEND}
        m.live = Live()
        m.live.rebuild(m.jobs.values(), self.now)
        m.live.apply_samples(self.live.samples())
        for h in m.hosts:
            m.live.apply_live(HostLive(h, self.os_available(h), self.now))
        m.running = {j.id: j for j in self.cs.jobs.values() if j.state == JobState.RUN}
        prio = {q.name: q.priority for q in self.cs.queues.values()}
        caps = round_caps(m)
        rules = self.policy.backfill
        if self.policy.fairshare:  # the scheduler's own path: its book folds every job the cluster keeps
            self.daemon_fair = getattr(self, "daemon_fair", None) or fair_state(self.policy)
            got = self.daemon_fair.round_inputs(m.jobs.values(), m.pending.values(), m.running.values(),
                                                m.live.ledger, prio, self.now)
            order, rel = got.ordering.order(m.pending.values()), got.releases
        else:
            order = pending_order(m.pending.values(), prio)
            rel = releases(m.running.values(), rules, self.now, m.live.ledger)
        daemon = schedule(caps, order, self.now, backfill=rules, releases=rel)
        mine = super().plan(ordered)
        assert mine.placements == daemon.placements
        type(self).compared += 1
        return mine


@pytest.mark.parametrize("policy", ["xce", "xce-easy", "xce-fair", "xce-fair-easy", "xce-conservative"])
def test_every_round_of_a_replay_is_the_daemons_decision(policy: str) -> None:
    trace = load(TRACE, limit=150)
    m = machine(trace, slots=32, mem=640 * MB)
    jobs, _ = sim_jobs(trace, m)
    Checked.compared = 0
    eng = Checked(m, jobs, POLICIES[policy], UsageModel())
    out = eng.run()
    assert Checked.compared > 50 and sum(r.start is not None for r in out.records) == len(jobs)


# ---- `xce sim` end to end ------------------------------------------------------------------

def xce(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "xce.cli.main", "sim", *args], capture_output=True,
                          text=True, timeout=240)


@pytest.fixture(scope="module")
def trace_slice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "slice.swf"
    with gzip.open(TRACE, "rt") as f:
        path.write_text("".join(next(f) for _ in range(600)))
    return path


def test_xce_sim_prints_a_table_and_json_for_each_policy(trace_slice: Path) -> None:
    r = xce(str(trace_slice), "--slots", "32", "--mem", "640M", "--json", "--record")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [p["policy"] for p in out["policies"]] == ["flat", "lsf", "xce", "record"]
    assert out["machine"] == {"hosts": 32, "slots": 32, "mem": 640 * MB}
    flat, lsf, x = out["policies"][:3]
    assert flat["jobs"] == x["jobs"] == out["jobs"] > 500
    assert lsf["wait_mean_s"] >= x["wait_mean_s"]     # lsf counts used reservations twice
    assert x["mem_kills"] <= flat["mem_kills"]
    assert all(p["events"] > 0 and p["us_per_event"] > 0 for p in out["policies"][:3])
    assert r.stderr == ""  # no progress bar when stderr is not a terminal
    table = xce(str(trace_slice), "--slots", "32", "--mem", "640M", "--policy", "xce")
    assert table.returncode == 0 and table.stdout.splitlines()[2].startswith("xce ")


def test_xce_sim_report_writes_plots_and_one_self_contained_page(trace_slice: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    r = xce(str(trace_slice), "--slots", "16", "--mem", "320M", "--policy", "flat,xce", "--report",
            str(tmp_path / "rep"))
    assert r.returncode == 0, r.stderr
    pngs = sorted(p.name for p in (tmp_path / "rep").glob("*.png"))
    assert pngs == ["kills.png", "memory.png", "utilisation.png", "wait_cdf.png"]
    page = (tmp_path / "rep" / "index.html").read_text()
    assert page.count("data:image/png;base64,") == 4 and "<td>xce</td>" in page and "src=\"http" not in page


def test_xce_sim_refuses_bad_input_with_a_named_problem(tmp_path: Path) -> None:
    r = xce(str(tmp_path / "missing.swf"))
    assert r.returncode == 2 and "cannot read trace" in r.stderr
    r = xce(str(tmp_path / "missing.swf"), "--policy", "fifo")
    assert r.returncode == 2 and "unknown policy 'fifo'" in r.stderr
