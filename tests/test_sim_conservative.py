"""Conservative backfill on a kept profile (xce.core.sched.conservative) through the replay engine:
no reservation ever moves later unless a job overran its estimate, no job starts after its first
reservation, and the hosts' planned futures never take more than a host has."""

from __future__ import annotations

import math
import random

import pytest

from xce.core.sched.conservative import Profile
from xce.sim.engine import Engine
from xce.sim.model import Machine, SimJob, UsageModel
from xce.sim.policies import POLICIES


def trace(seed: int, n: int, hosts: int, slots: int, overrun: bool = False) -> list[SimJob]:
    r = random.Random(seed)
    out, t = [], 0.0
    for i in range(n):
        t += r.choice([0.0, 0.0, 10.0, 60.0, 300.0])
        est = float(r.choice([100, 600, 3600]))
        run = est * (r.uniform(1.0, 2.0) if overrun and r.random() < 0.3 else r.uniform(0.05, 1.0))
        out.append(SimJob(trace_id=i + 1, submit=t, run=round(run), slots=r.randint(1, hosts * slots),
                          reserve_slot=0, use_slot=0, user=f"u{i % 3}", queue="q", wait=-1.0, req_time=est))
    return out


class Watched(Engine):
    """The replay, checked around each of its profile's rounds."""

    def __init__(self, *a, **kw) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*a, **kw)
        self.first: dict[int, float] = {}  # job -> the start of its first reservation
        self.later = 0
        self.strict = True  # no job overruns: the plan never overfills a host
        prof = self.profile
        assert prof is not None
        inner = prof.round

        def round(arrivals, now, ledger=None, freed=False, explain=False):  # type: ignore[no-untyped-def]
            before = {jid: h.start for jid, h in prof.holds.items()}
            got = inner(arrivals, now, ledger, freed, explain=True)
            self.later += got.moved_later
            for jid, h in prof.holds.items():
                self.first.setdefault(jid, h.start)
                # A reservation whose start has come and whose hosts are still busy (a job overran)
                # waits from now on; any other moves only earlier, unless an overrun moved it.
                if jid in before and before[jid] > now and got.moved_later == 0:
                    assert h.start <= before[jid], f"job {jid} moved later: {before[jid]} -> {h.start}"
                assert got.reasons[jid].startswith(f"conservative: job {jid} ")
            for jid, _ in got.placements:
                self.first.setdefault(jid, now)
                assert not self.strict or now <= self.first[jid], f"job {jid} started at {now}, reserved at {self.first[jid]}"
            if self.strict:
                check_futures(prof, now)
            return got

        prof.round = round  # type: ignore[method-assign]


def check_futures(prof: Profile, now: float) -> None:
    """From now on, no host's planned state has fewer than 0 slots free (running jobs past their
    estimate are due now, so the plan's now may differ from the hosts')."""
    for host in prof.caps:
        times, states, _ = prof._states(host)
        for t, c in zip(times, states):
            if t >= now:
                assert c.slots_free >= 0, f"{host} at {t}: {c.slots_free} slots free"


def replay(jobs: list[SimJob], hosts: int, slots: int, strict: bool = True) -> Watched:
    e = Watched(Machine(hosts, slots, 0), jobs, POLICIES["xce-conservative-kept"], UsageModel(memory=False))
    e.strict = strict
    e.run()
    return e


@pytest.mark.parametrize("seed", range(6))
def test_without_overruns_no_reservation_moves_later_and_every_job_starts_by_its_first(seed: int) -> None:
    jobs = trace(seed, 60, hosts=3, slots=4)
    e = replay(jobs, 3, 4)
    assert e.later == 0
    recs = list(e.records.values())
    assert all(r.start is not None and r.end is not None for r in recs)
    for jid, r in zip(sorted(e.records), recs):
        assert r.start is not None and r.start <= e.first[jid]


@pytest.mark.parametrize("seed", range(4))
def test_with_overruns_every_job_still_runs(seed: int) -> None:
    jobs = trace(100 + seed, 60, hosts=3, slots=4, overrun=True)
    e = replay(jobs, 3, 4, strict=False)  # a waiting reservation overlaps later ones until their start
    assert all(r.start is not None and r.end is not None for r in e.records.values())
    # Never two jobs on more slots than a host has (the state machine would refuse the placement).
    assert e.slots_used == 0


def test_a_wide_job_keeps_its_reservation_against_later_narrow_ones() -> None:
    """Job 2 (all 8 slots) is reserved at job 1's expected end; job 3 (1 slot, 1 h) arrives later
    and must not start before job 2 ends, though a slot is free: it would delay job 2."""
    jobs = [SimJob(1, 0.0, 600.0, 4, 0, 0, "a", "q", -1.0, 600.0),
            SimJob(2, 1.0, 600.0, 8, 0, 0, "a", "q", -1.0, 600.0),
            SimJob(3, 2.0, 3600.0, 1, 0, 0, "a", "q", -1.0, 3600.0),
            SimJob(4, 3.0, 100.0, 1, 0, 0, "a", "q", -1.0, 100.0)]
    e = replay(jobs, 2, 4)
    r = {i: e.records[jid] for i, jid in enumerate(sorted(e.records), 1)}
    assert r[2].start == 600.0
    assert r[4].start == 3.0  # ends before job 2's start: backfilled beside job 1
    assert r[3].start is not None and r[3].start >= 1200.0
    assert not math.isinf(e.first[3])


def test_every_job_of_a_real_trace_slice_runs() -> None:
    """The first 400 LANL CM-5 jobs on 32 x 32: a reservation made again at now behind an
    overrun, whose hosts were busy, was dropped from the due list and never started (18 of the
    first 1,000 jobs waited for ever) before ``next_start`` kept such ones as blocked."""
    from pathlib import Path

    from xce.sim.model import machine, sim_jobs
    from xce.sim.swf import load

    path = Path("/work/shared/traces/LANL-CM5-1994-4.1-cln.swf.gz")
    if not path.exists():
        pytest.skip("the LANL CM-5 trace is not on this machine")
    t = load(str(path), 400)
    m = machine(t, None, 32, 0)
    jobs, _ = sim_jobs(t, m, memory=False)
    e = replay(jobs, m.hosts, m.slots, strict=False)
    assert [jid for jid, r in e.records.items() if r.end is None and not r.rejected] == []
