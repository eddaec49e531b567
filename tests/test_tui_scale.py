"""The console's cheap paths at scale give the same figures as the views they stand for.

Per-host sample batches (Live's account plans), per-host change marks, header
totals read from the ledger, usage sort keys without views, rows placed by
bisection, and per-host sample logs are each checked against the plain way.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import msgspec
import pytest

from xce.client.follow import Sync
from xce.core.model import Alloc, JobState
from xce.proto.schema import Event, JobSample, Snapshot
from xce.replica.live import Live
from xce.replica.mirror import Mirror
from xce.tui import synth
from xce.tui.model import ConsoleModel
from xce.tui.record import read
from xce.tui.replay import Player
from xce.tui.rows import RowSet

FIXTURE = Path(__file__).parent / "fixtures" / "demo.xcerec"
M, G = 2**20, 2**30


def replayed() -> ConsoleModel:
    m = ConsoleModel()
    Player(read(FIXTURE), m).to_end()
    return m


def small_cluster(seconds: int, hosts: int = 20, jobs: int = 300, changes: int = 15) -> tuple[ConsoleModel, Snapshot]:
    snap = synth.big_snapshot(hosts, jobs)
    m = ConsoleModel()
    s = Sync(m, m.lock)
    s.requested()
    s.on_snapshot(snap, synth.T0)
    seq = 0
    for k in range(1, seconds + 1):
        evs = synth.one_second(snap, seq, synth.T0 + k, changes)
        seq += len(evs)
        for ev in evs:
            s.on_event(ev, synth.T0 + k)
    assert s.state == "LIVE"
    return m, snap


def models() -> list[ConsoleModel]:
    return [replayed(), small_cluster(4)[0]]


@pytest.mark.parametrize("m", models(), ids=["demo", "synth"])
def test_usage_keys_are_the_views_figures(m: ConsoleModel) -> None:
    for jid in m.mirror.jobs:
        v = m.job_view(jid)
        assert m.usage(jid) == (v.mem_reserved, v.mem_actual, v.mem_peak, v.mem_charged, v.efficiency), jid


@pytest.mark.parametrize("m", models(), ids=["demo", "synth"])
def test_header_totals_are_the_sums_of_the_host_views(m: ConsoleModel) -> None:
    m.take_changes()
    s = m.summary()
    views = [m.host_view(h) for h in m.mirror.hosts]
    # An unavail host's memory is not capacity the cluster has now (issue 12 item 8).
    assert s.mem == {"capacity": sum(v.mem_total for v in views if v.state != "unavail"), "reserved": sum(v.mem_reserved for v in views),
                     "actual": sum(v.mem_actual for v in views), "slack": sum(v.mem_slack for v in views),
                     "overage": sum(v.mem_overage for v in views)}
    assert s.hosts_by_state == Counter(v.state for v in views)
    assert s.jobs_by_state == Counter(j.state.value for j in m.mirror.jobs.values())


def test_header_totals_follow_frame_by_frame() -> None:
    """States move by deltas (hosts fill, free up, close), memory sums afresh: both equal the views'."""
    snap = synth.big_snapshot(10, 320)  # 32 one-slot jobs on each 32-slot host: every host full
    m = ConsoleModel()
    s = Sync(m, m.lock)
    s.requested()
    s.on_snapshot(snap, synth.T0)
    seq = 0
    seen: set[str] = set()
    for k in range(1, 6):
        evs = synth.one_second(snap, seq, synth.T0 + k, 3)
        seq += len(evs)
        if k == 2:  # the synthetic cluster is steady (every ended job is replaced): free a slot
            running = next(j for j in m.mirror.jobs.values() if j.state == JobState.RUN and "n0001" in j.hosts)
            seq += 1
            evs.append(Event(seq=seq, epoch=snap.epoch, time=synth.T0 + k,
                             jobs=[msgspec.structs.replace(running, state=JobState.DONE, end_time=synth.T0 + k)]))
        if k == 3:
            closed = msgspec.structs.replace(m.mirror.hosts["n0002"], closed=True)
            seq += 1
            evs.append(Event(seq=seq, epoch=snap.epoch, time=synth.T0 + k, hosts=[closed]))
        for ev in evs:
            s.on_event(ev, synth.T0 + k)
        m.take_changes()
        got = m.summary()
        views = [m.host_view(h) for h in m.mirror.hosts]
        assert got.hosts_by_state == Counter(v.state for v in views), k
        assert got.mem["slack"] == sum(v.mem_slack for v in views) and \
            got.mem["actual"] == sum(v.mem_actual for v in views), k
        seen |= set(got.hosts_by_state)
    assert {"ok", "full", "closed"} <= seen


def test_live_batches_match_one_sample_at_a_time() -> None:
    """Account plans stay right while jobs start, end, requeue and drop a host's share."""
    m = replayed()
    batched, single = Live(), Live()
    for live in (batched, single):
        live.rebuild(m.mirror.jobs.values(), synth.T0)
    jobs = dict(m.mirror.jobs)

    def both(samples: list[JobSample]) -> None:
        assert batched.apply_samples(samples) == sum(single.apply_sample(s) for s in samples)

    def sync(job: object) -> None:
        for live in (batched, single):
            live.sync_job(job, synth.T0)  # type: ignore[arg-type]

    mpi = [JobSample(7, "node1", 400 * M, 400 * M, 1.0), JobSample(7, "node3", 600 * M, 600 * M, 1.0)]
    node1 = [JobSample(j, "node1", (100 + j) * M, (100 + j) * M, 1.0) for j in (1, 2, 3, 6)]
    for round_ in range(3):
        both(node1 + mpi)                        # two hosts in one event
        both(node1)                              # the same jobs again: the plan is reused
    sync(msgspec.structs.replace(jobs[7], finished_hosts=["node3"]))  # node3's share ended
    both(mpi)
    sync(msgspec.structs.replace(jobs[2], attempt=2, allocs=[Alloc("node1", 1, 300 * M, {"slots": 1})]))
    both(node1)                                  # the requeued job's new account takes the sample
    early = node1 + [JobSample(11, "node1", 40 * M, 40 * M, 1.0)]
    both(early)                                  # job 11 has no account yet: skipped...
    sync(msgspec.structs.replace(jobs[11], state=JobState.RUN, start_time=synth.T0, attempt=1,
                                 allocs=[Alloc("node1", 1, 50 * M, {"slots": 1})]))
    both(early)                                  # ...and counted once it starts
    sync(msgspec.structs.replace(jobs[3], state=JobState.DONE))
    both(node1 + [JobSample(99, "node1", 1, 1, 0.0)])  # an ended and an unknown job are skipped
    for live in (batched, single):
        assert not live.ledger.audit()
    assert batched.ledger.totals == single.ledger.totals
    assert {k: (a.actual, a.peak, a.used, a.cpu_time) for k, a in batched.ledger.accounts.items()} == \
        {k: (a.actual, a.peak, a.used, a.cpu_time) for k, a in single.ledger.accounts.items()}


def test_mirror_and_console_give_the_same_ledger() -> None:
    """The console applies samples itself (batched with its bookkeeping); the figures are the Mirror's."""
    m, snap = small_cluster(3)
    bare = Mirror()
    bare.apply_snapshot(snap)
    seq = 0
    for k in range(1, 4):
        evs = synth.one_second(snap, seq, synth.T0 + k, 15)
        seq += len(evs)
        for ev in evs:
            assert bare.apply_event(ev)
    assert bare.live.ledger.totals == m.mirror.live.ledger.totals
    assert not m.mirror.live.ledger.audit()


@pytest.mark.parametrize("column,reverse", [("state", False), ("state", True), ("hosts", False), ("run", True)])
def test_rows_placed_by_bisection_are_in_full_sort_order(column: str, reverse: bool) -> None:
    snap = synth.big_snapshot(20, 600)
    m = ConsoleModel()
    s = Sync(m, m.lock)
    s.requested()
    s.on_snapshot(snap, synth.T0)
    rs = RowSet("jobs", column, reverse=reverse)
    rs.update(m, m.take_changes(), synth.T0)
    seq = 0
    placed = 0
    for k in range(1, 6):
        evs = synth.one_second(snap, seq, synth.T0 + k, 20)
        seq += len(evs)
        for ev in evs:
            s.on_event(ev, synth.T0 + k)
        ch = m.take_changes()
        placed += bool(ch.hard)
        rs.update(m, ch, synth.T0 + k)
        fresh = RowSet("jobs", column, reverse=reverse)
        fresh.update(m, m.take_changes(), synth.T0 + k)
        assert rs.keys == fresh.keys, k
    assert placed


def test_sample_log_gives_each_job_its_series() -> None:
    m = replayed()
    times, values = m.job_series(4)              # "across": 50M, then 150M from 20 s, 350M from 40 s
    assert values[0] == 50 * M and values[-1] == 350 * M and times == sorted(times)
    assert {v for t, v in zip(times, values, strict=True) if 25 <= t - synth.T0 < 40} == {150 * M}
    times, values = m.job_series(7)              # mpi: node1 450M + node3 520M, summed
    assert values[-1] == 970 * M
    assert m.job_series(12) == ([], [])          # pending: nothing


def test_a_steady_job_older_than_the_log_plots_its_current_figure() -> None:
    m = ConsoleModel(history=4)
    s = Sync(m, m.lock)
    s.requested()
    snap = msgspec.msgpack.decode(synth.demo_records(1)[1].body, type=Snapshot)
    s.on_snapshot(snap, synth.T0)
    for k in range(1, 10):  # only job 1 reports; job 2's last report rolls out of the log
        ev = Event(seq=k, epoch=snap.epoch, time=synth.T0 + k,
                   samples=[JobSample(1, "node1", k * M, k * M, 0.0)] + ([JobSample(2, "node1", 77 * M, 77 * M, 0.0)]
                                                                       if k == 1 else []))
        s.on_event(ev, synth.T0 + k)
    times, values = m.job_series(2)
    assert values == [77 * M] and times[0] <= synth.T0 + 6
    assert m.job_series(1)[1][-1] == 9 * M


def test_rows_change_only_where_their_hosts_reported() -> None:
    m, _ = small_cluster(1)
    m.take_changes()
    jid = next(j.id for j in m.mirror.jobs.values() if j.state == JobState.RUN and "n0000" in j.hosts)
    ev = Event(seq=m.mirror.seq + 1, epoch=m.mirror.epoch, time=synth.T0 + 9,
               samples=[JobSample(jid, "n0000", 1 * G, 1 * G, 0.0)])
    assert m.apply_event(ev, synth.T0 + 9)
    ch = m.take_changes()
    on_n0 = [j for j in m.mirror.jobs.values() if "n0000" in j.hosts]
    elsewhere = [j for j in m.mirror.jobs.values() if "n0000" not in j.hosts]
    assert all(ch.job_changed(j, j.id) for j in on_n0)
    assert not any(ch.job_changed(j, j.id) for j in elsewhere)
    assert m.job_view(jid).mem_actual == 1 * G


def test_an_event_already_applied_changes_nothing() -> None:
    m = replayed()
    seq, epoch = m.mirror.seq, m.mirror.epoch
    before = m.job_view(1).mem_actual
    old = Event(seq=seq - 5, epoch=epoch, time=synth.T0, samples=[JobSample(1, "node1", 1 * G, 1 * G, 0.0)])
    m.take_changes()
    assert m.apply_event(old, synth.T0 + 100)
    assert m.job_view(1).mem_actual == before and not m.take_changes().any


def test_usage_keys_follow_jobs_that_end_later() -> None:
    snap = synth.big_snapshot(10, 200)
    m = ConsoleModel()
    s = Sync(m, m.lock)
    s.requested()
    s.on_snapshot(snap, synth.T0)
    seq = 0
    for k in range(1, 6):
        for jid in m.mirror.jobs:  # read (and keep) every job's figures before the next second
            m.usage(jid)
        evs = synth.one_second(snap, seq, synth.T0 + k, 30)
        seq += len(evs)
        for ev in evs:
            s.on_event(ev, synth.T0 + k)
        pend = msgspec.structs.replace(m.mirror.jobs[1 + k], state=JobState.PEND, allocs=[], attempt=k + 1)
        seq += 1
        s.on_event(Event(seq=seq, epoch=snap.epoch, time=synth.T0 + k, jobs=[pend]), synth.T0 + k)
        m.take_changes()  # as a frame does: the views of jobs whose hosts reported go
        for jid in m.mirror.jobs:
            v = m.job_view(jid)
            assert m.usage(jid) == (v.mem_reserved, v.mem_actual, v.mem_peak, v.mem_charged, v.efficiency), jid


def test_heartbeats_one_to_an_event_and_many_to_an_event_leave_the_same_console() -> None:
    """One host's heartbeat per event takes a path of its own; the controller sends many."""
    fast, snap = small_cluster(0)
    plain, _ = small_cluster(0)
    leader = Mirror()
    leader.apply_snapshot(snap)
    seq = [0, 0]
    for k in range(1, 4):
        mem = {}
        for ev in synth.one_second(snap, seq[0], synth.T0 + k, 15):
            assert leader.apply_event(ev)
            synth.stamp(leader, ev)
            mem.update((hl.host, hl.mem) for hl in ev.live)
            assert fast.apply_event(ev, synth.T0 + k)
            seq[0] += 1
        evs = synth.one_second(snap, seq[1], synth.T0 + k, 15, per_event=7)
        assert len(evs) == 4  # 20 hosts, 7 to an event, then the job changes
        for ev in evs:
            for hl in ev.live:  # each host's totals right after its heartbeat, as the leader sent them
                hl.mem = mem[hl.host]
            assert plain.apply_event(ev, synth.T0 + k)
            seq[1] += 1
        a, b = fast.take_changes(), plain.take_changes()
        assert (a.sampled, a.hosts, a.placed, a.hard) == (b.sampled, b.hosts, b.placed, b.hard)
        assert fast.summary() == plain.summary()
    for h in fast.mirror.hosts:
        assert fast.host_series(h) == plain.host_series(h) and fast.host_series(h)[0]
    for jid in fast.mirror.jobs:
        assert fast.job_series(jid) == plain.job_series(jid)
