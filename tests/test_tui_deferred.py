"""The console keeps a heartbeat's samples until a frame reads them (xce/tui/model.py).

A console fed the leader's events with each host's totals (``HostLive.mem``) must
show exactly what one that applies every sample at once shows: every job's view and
usage, every host's view, and, once it has let its ledger take the kept batches, the
header.  The leader here is played as the controller plays it: ``Ledger.observe_host``
on each heartbeat, publishing what moved, then the host's totals.
"""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from xce.core.model import Alloc, Host, JobState
from xce.proto.schema import Event, HostLive, HostSamples, Snapshot
from xce.replica.live import host_mem
from xce.replica.mirror import Mirror
from xce.tui import synth
from xce.tui.model import ConsoleModel

G = 2**30
HOSTS = ("h1", "h2", "h3")
T0 = synth.T0


class Cluster:
    """A leader (a Mirror applying samples as the controller does) and the events it publishes."""

    def __init__(self, njobs: int) -> None:
        self.hosts = [Host(name=h, slots_total=8, mem_total=64 * G, ncpus=8) for h in HOSTS]
        self.jobs = {i: synth.job(i, f"j{i}", "alice", "rusage[mem=2G]", JobState.PEND) for i in range(1, njobs + 1)}
        self.leader = Mirror()
        self.seq = 0
        self.t = T0
        self.snap = Snapshot(seq=0, epoch=synth.EPOCH, time=T0, jobs=list(self.jobs.values()), hosts=self.hosts,
                             queues=[], default_queue="normal", live=[], samples=[], reasons={})
        self.leader.apply_snapshot(self.snap)

    def _event(self, **kw: object) -> Event:
        self.seq += 1
        self.t += 0.25
        ev = Event(seq=self.seq, epoch=synth.EPOCH, time=self.t, **kw)  # type: ignore[arg-type]
        assert self.leader.apply_event(ev)
        return ev

    def start(self, jid: int, host: str) -> Event:
        j = self.jobs[jid]
        j = self.jobs[jid] = msgspec.structs.replace(
            j, state=JobState.RUN, start_time=self.t, attempt=j.attempt + 1,
            allocs=[Alloc(host, 1, j.req.rusage[0].amount, {"slots": 1})])
        return self._event(jobs=[j])

    def end(self, jid: int) -> Event:
        j = self.jobs[jid] = msgspec.structs.replace(self.jobs[jid], state=JobState.DONE, end_time=self.t)
        return self._event(jobs=[j])

    def heartbeat(self, host: str, values: list[tuple[int, int]]) -> Event:
        """The worker reports ``values`` (index into its running jobs, MB); the leader publishes what moved."""
        return self.heartbeats({host: values})

    def heartbeats(self, beats: dict[str, list[tuple[int, int]]]) -> Event:
        """Several hosts' heartbeats in one event, as the controller gathers them in 50 ms."""
        live, samples = [], []
        ledger = self.leader.live.ledger
        for host, values in beats.items():
            running = [j.id for j in self.jobs.values() if j.state == JobState.RUN and j.hosts == [host]]
            picked = {running[i % len(running)]: mb for i, mb in values} if running else {}
            ids = [jid for jid in running if jid in picked]
            moved = ledger.observe_host(host, ids, None, [picked[j] << 20 for j in ids], [0] * len(ids),
                                        [float(self.seq)] * len(ids)) if ids else None
            live.append(HostLive(host, 60 * G, self.t, host_mem(ledger.host_totals(host))))
            if moved:
                samples.append(HostSamples(host, *moved))
        return self._event(live=live, host_samples=samples)


def synced(c: Cluster) -> ConsoleModel:
    m = ConsoleModel()
    m.apply_snapshot(c.snap, T0)
    return m


def views(m: ConsoleModel) -> tuple[object, ...]:
    m.take_changes()  # as a frame does: drops the views the changes made stale
    jobs = sorted(m.mirror.jobs)
    return ([m.job_view(j) for j in jobs], [m.usage(j) for j in jobs],
            [m.host_view(h) for h in HOSTS])


step = st.one_of(
    st.tuples(st.just("start"), st.integers(1, 12), st.sampled_from(HOSTS)),
    st.tuples(st.just("end"), st.integers(1, 12), st.none()),
    st.tuples(st.just("beat"), st.sampled_from(HOSTS),
              st.lists(st.tuples(st.integers(0, 7), st.integers(0, 4000)), max_size=8)),
    st.tuples(st.just("beats"), st.none(),
              st.dictionaries(st.sampled_from(HOSTS),
                              st.lists(st.tuples(st.integers(0, 7), st.integers(0, 4000)), max_size=8),
                              min_size=2)),
    st.tuples(st.just("read"), st.none(), st.none()),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(step, max_size=40))
def test_a_console_that_keeps_samples_shows_what_one_that_applies_them_shows(steps: list[tuple]) -> None:
    c = Cluster(12)
    lazy, eager = ConsoleModel(), ConsoleModel()
    lazy.apply_snapshot(c.snap, T0)
    eager.apply_snapshot(c.snap, T0)
    for kind, a, b in steps:
        if kind == "read":
            assert views(lazy) == views(eager)
            continue
        if kind == "start":  # a job that runs is placed again: a new attempt, maybe elsewhere
            ev = c.start(a, b)
        elif kind == "end":
            ev = c.end(a)
        elif kind == "beat":
            ev = c.heartbeat(a, b)
        else:
            ev = c.heartbeats(b)
        assert lazy.apply_event(ev, c.t)
        plain = msgspec.structs.replace(ev, live=[msgspec.structs.replace(hl, mem=None) for hl in ev.live])
        assert eager.apply_event(plain, c.t)
    assert views(lazy) == views(eager)
    lazy.kept.settle()
    assert lazy.summary() == eager.summary()
    assert lazy.mirror.live.ledger.totals == eager.mirror.live.ledger.totals
    assert lazy.mirror.live.ledger.audit() == []


def test_the_header_counts_a_host_whose_samples_wait_at_its_reported_totals() -> None:
    c = Cluster(4)
    m = synced(c)
    for jid, host in ((1, "h1"), (2, "h1"), (3, "h2")):
        assert m.apply_event(c.start(jid, host), c.t)
    assert m.apply_event(c.heartbeat("h1", [(0, 3000), (1, 500)]), c.t)
    assert m.apply_event(c.heartbeat("h2", [(0, 2048)]), c.t)
    m.take_changes()
    assert set(m.kept.batches) == {"h1", "h2"}  # nothing read them yet
    mem = m.summary().mem
    assert (mem["reserved"], mem["actual"]) == (6 * G, (3000 + 500 + 2048) << 20)
    assert mem["overage"] == (3000 - 2048) << 20 and mem["slack"] == (2048 - 500) << 20
    assert m.host_view("h1").mem_actual == (3000 + 500) << 20  # a read lets the ledger take h1's batch
    assert set(m.kept.batches) == {"h2"}
    assert m.summary().mem == mem


def test_a_newer_batch_that_leaves_a_job_out_keeps_that_jobs_older_sample() -> None:
    c = Cluster(3)
    m = synced(c)
    for jid in (1, 2):
        assert m.apply_event(c.start(jid, "h1"), c.t)
    assert m.apply_event(c.heartbeat("h1", [(0, 100), (1, 200)]), c.t)
    assert m.apply_event(c.heartbeat("h1", [(1, 300)]), c.t)  # job 1 did not move
    assert (m.usage(1)[1], m.usage(2)[1]) == (100 << 20, 300 << 20)


def test_a_job_placed_again_does_not_take_its_old_attempts_kept_sample() -> None:
    c = Cluster(2)
    m = synced(c)
    assert m.apply_event(c.start(1, "h1"), c.t)
    assert m.apply_event(c.heartbeat("h1", [(0, 700)]), c.t)
    assert m.apply_event(c.start(1, "h1"), c.t)  # requeued onto the same host: attempt 2
    assert m.job(1).attempt == 2 and m.usage(1)[1] is None  # not yet reported
    assert m.mirror.live.ledger.audit() == []


def test_a_heartbeat_with_nothing_moved_still_brings_the_hosts_totals_to_the_header() -> None:
    c = Cluster(4)
    m = synced(c)
    for jid in (1, 2):
        assert m.apply_event(c.start(jid, "h1"), c.t)
    assert m.apply_event(c.heartbeat("h1", [(0, 300), (1, 500)]), c.t)
    assert m.apply_event(c.start(3, "h1"), c.t)
    m.take_changes()
    assert m.summary().mem["reserved"] == 4 * G  # the kept batch's totals: a heartbeat behind
    ev = c.heartbeat("h1", [(0, 300), (1, 500)])
    assert not ev.host_samples and ev.live[0].mem is not None  # nothing moved: totals only
    assert m.apply_event(ev, c.t)
    m.take_changes()
    assert set(m.kept.batches) == {"h1"} and m.summary().mem["reserved"] == 6 * G
