"""The replay: a discrete-event loop on a virtual clock over the daemons' own pure core.

State is the controller's ``ClusterState`` (Submit / Place / Finish / Kill commands that
carry their own times), accounts are a ``Live`` ledger opened from the hard placements
exactly as the controller's and the scheduler's are, placement is ``placement.schedule``
on ``placement.host_caps`` with the policy's memory view, and a memory-pressure victim is
``accounting.pressure_victim``.  No sockets, no sleeps, no wall clock, no rule of its own.

Events at one instant run in the order ends, kills, usage reports, submits; then one
scheduling round (the daemon's scheduler runs a round on any event that could help,
undebounced by default).  Rounds stay cheap without changing a decision because
resources only grow when a job ends, is killed or reports less memory: until then every
job that failed a round fails again (the argument placement.py makes within a round),
so such a round only needs the jobs submitted since (in the policy's order among
themselves: with fairshare that order moves with usage, but jobs that fail whatever their
place fail in any order, and failing takes nothing).  Host views are rebuilt from the
ledger only for hosts something happened on.

Fairshare goes through the scheduler's own ``PolicyState.round_inputs``: each ended job is
handed to its usage book once (as a cluster that forgot it would: its usage stays), and
the pending jobs as one per (user, group, project, queue) key, which is all a share tree
reads of them.  With ``run_limits`` a job that runs past its requested time (SWF field 9,
its -W) is killed as the worker kills it (TERM_RUNLIMIT: the decision the moment it is
past, its end ``kill_grace`` later at worst, or at its own end if that comes first).

Issue 18's features run through the same code as the daemons (policies.py says which):
reclaiming jobs are placed on ``placement.host_caps``' reclaimable memory and sent away by
xce/core/reclaim.py's ``decide`` after each usage report (the controller's rule, its
command applied to the state); a memory kill in a queue with ``mem_retries`` is requeued
larger by the state machine itself (xce/core/memretry.py, on Finish); a right-sized job is
sized at submit by xce/core/autosize.py through history.py.  A job settles (and lends) with
time, so a settling moment is an event (SETTLE) after which the pending reclaiming jobs
try again: nothing else can gain from it.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from xce.core import reclaim
from xce.core.accounting import ReclaimRules, pressure_victim, shrink_moment
from xce.core.shrink import restore_to, shrink_to
from xce.core.memretry import mem_kill
from xce.replica.live import Live
from xce.core.model import RECLAIMED, Alloc, Host, Job, JobSpec, JobState, Queue, reclaim_queues, reclaiming
from xce.core.placement import HostCap, Plan, host_caps, job_demand, never_fits, pending_order, schedule
from xce.core.sched.backfill import ReleaseBook
from xce.core.sched.conservative import Profile
from xce.core.sched.fairshare import Key, key_of
from xce.core.sched.site import PolicyState, SitePolicy
from xce.site.config import Config
from xce.core.resreq import ResReq, parse_resreq
from xce.sim.history import History
from xce.sim.model import Machine, SimJob, UsageModel
from xce.sim.policies import Knobs, Policy
from xce.core.state import ClusterState, Finish, Kill, Place, RegisterHost, SetQueues, Submit

END, KILL, RUNLIMIT, EVICT, STEP, SETTLE, SHRINK = 0, 1, 2, 3, 4, 5, 6  # at one instant: ends, kills, reports, settling
WAKE = 7  # a kept reservation's start (policies with a profile): a round, nothing else
LENT = 1 << 15  # in a KILL event's arg: the victim ran on reclaimable memory (its reason is RECLAIMED)
SAMPLES = 600  # points of each time series


@dataclass(slots=True)
class JobRecord:
    """One replayed job's outcome (what metrics.py summarises)."""

    submit: float
    start: float | None
    end: float | None
    run: float
    slots: int
    user: str
    killed: bool = False  # its last run was killed for its memory (MEMPRESSURE, RECLAIMED): lost for good
    timed_out: bool = False  # TERM_RUNLIMIT
    rejected: str = ""
    mem_seconds: float = 0.0  # byte-seconds of actual memory over the current (at the end, last) run
    kills: int = 0  # runs killed by memory pressure (the worker's rule)
    kill_mem_s: float = 0.0  # byte-seconds those runs had used: lost
    kill_slot_s: float = 0.0
    evictions: int = 0  # runs sent away by reclaim (the controller's rule)
    evict_mem_s: float = 0.0
    evict_slot_s: float = 0.0
    retries: int = 0  # requeued with more memory (memretry)
    lent: bool = False  # it accepts reclamation
    sized: bool = False  # its reservation came from history


@dataclass(slots=True)
class Series:
    t: list[float] = field(default_factory=list)
    slots_used: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    reserved: list[int] = field(default_factory=list)
    actual: list[int] = field(default_factory=list)
    slack: list[int] = field(default_factory=list)
    held: list[int] = field(default_factory=list)
    kills: list[int] = field(default_factory=list)


@dataclass(slots=True)
class Integrals:
    """Time integrals (value x seconds) of the cluster's totals."""

    slots: float = 0.0
    reserved: float = 0.0
    actual: float = 0.0
    slack: float = 0.0
    over_hosts: float = 0.0  # host-seconds with Σ actual > capacity
    held: float = 0.0  # Σ over hosts of min(capacity, Σ charged) - Σ actual: held by a promise, used by nobody


@dataclass(slots=True)
class Outcome:
    policy: str
    machine: Machine
    records: list[JobRecord]
    integrals: Integrals
    series: Series
    start: float
    end: float
    events: int
    rounds: int


def host_name(i: int) -> str:
    return f"h{i:04d}"


def fair_state(policy: Policy) -> PolicyState | None:
    """The scheduler's between-rounds state under the daemons' default fairshare, or None."""
    if not policy.fairshare:
        return None
    return PolicyState(replace(SitePolicy.from_config(Config()), backfill=policy.backfill, limits=()))


class Engine:
    def __init__(self, m: Machine, jobs: list[SimJob], policy: Policy, usage: UsageModel,
                 kill_grace: float = 0.0, mem_floor: int = 0,
                 progress: Callable[[float, int], None] | None = None, run_limits: bool = False,
                 knobs: Knobs = Knobs()) -> None:
        self.m, self.jobs, self.policy, self.usage = m, jobs, policy, usage
        self.kill_grace, self.mem_floor, self.progress = kill_grace, mem_floor, progress
        self.run_limits, self.knobs = run_limits, knobs
        self.fair = fair_state(policy)
        # The running jobs' releases, kept as jobs start, report and end (only where reservations read them).
        self.releases = ReleaseBook(policy.backfill) if policy.backfill.reservations and not policy.profile else None
        self.profile: Profile | None = None  # policy.profile: the reservations kept between rounds (set up below)
        self.woken = False
        self.wakes: set[float] = set()  # the instants a WAKE is queued for
        self.ended_since: list[Job] = []  # for the fairshare book: each ended job once
        self.pend_keys: dict[Key, dict[int, Job]] = {}  # pending jobs by fairshare key
        self.cs = ClusterState()
        self.rules = ReclaimRules(knobs.settle, knobs.settle, knobs.reclaim_margin, knobs.shrink_age)
        self.live = Live(self.rules)
        self.heap: list[tuple[float, int, int, int, int]] = []  # (time, kind, seq, job id, arg)
        self.seq = 0
        self.sim: dict[int, SimJob] = {}
        self.records: dict[int, JobRecord] = {}
        self.reports: dict[int, list[tuple[float, int]]] = {}
        self.last_use: dict[int, tuple[float, int]] = {}  # job -> (since, actual bytes, whole job)
        self.peak_slot: dict[int, int] = {}  # job -> its run's peak per slot (right-sizing's history)
        self.dying: set[int] = set()
        self.pending: dict[int, Job] = {}
        self.pending_lent: dict[int, Job] = {}  # the pending jobs that run on reclaimable memory
        self.running: dict[int, Job] = {}
        self.new: list[Job] = []
        self.freed = True
        self.settled = False  # a job settled: the pending reclaiming jobs may fit now
        self.touched: set[str] = set()
        self.over: set[str] = set()
        self.caps: dict[str, HostCap] = {}
        self.reqs: dict[int, ResReq] = {}
        self.never: dict[tuple[int, ResReq], str | None] = {}  # (slots, request) -> never_fits' answer
        self.history: History | None = None
        self.slots_used = 0
        self.tot = [0, 0, 0, 0]  # cluster Σ reserved, Σ actual, Σ slack, Σ held
        self.acc = Integrals()
        self.series = Series()
        self.now = 0.0
        self.kills = 0
        self.timeouts = 0
        self.shrinks = self.restores = 0  # reservations lowered (policy.shrink), and raised back
        self.ended = 0  # jobs that ran and ended, or were refused: the progress bar's measure
        self.next_progress = 0
        self.events = 0
        self.rounds = 0
        self._setup()
        if policy.profile:
            self.profile = Profile(policy.backfill, self.caps, self.live.reclaim_queues)

    # ---- set-up -------------------------------------------------------------------------

    def _queue(self, name: str) -> Queue:
        """A trace queue as the policy configures it (reclaimable, retries, the right-sizing margin)."""
        p, k = self.policy, self.knobs
        return Queue(name=name, reclaimable=p.reclaim and name in k.reclaim_queues,
                     reclaim_policy=k.reclaim_policy, mem_retries=k.mem_retries if p.retry else 0,
                     mem_retry_factor=k.mem_retry_factor,
                     # a try may grow to a host's memory per slot: more could never be placed
                     mem_retry_max=self.m.mem // self.m.slots if self.m.mem else 0,
                     mem_auto_margin=k.size_margin, mem_auto_min_runs=k.size_min_runs)

    def _setup(self) -> None:
        queues = sorted({j.queue for j in self.jobs}) or ["default"]
        qs = [self._queue(q) for q in queues]
        self.cs.apply(SetQueues(time=0.0, queues=qs, default_queue=queues[0]))
        if self.policy.reclaim:
            self.live.reclaim_queues = reclaim_queues(qs)
        if self.policy.rightsize:
            self.history = History(self.cs.queues, self.knobs.history)
        for i in range(self.m.hosts):
            self.cs.apply(RegisterHost(time=0.0, host=Host(name=host_name(i), slots_total=self.m.slots,
                                                           mem_total=self.m.mem, ncpus=self.m.slots)))
        self.caps = self._caps(self.cs.hosts)
        self.empty = {n: HostCap(c.name, c.schedulable, c.slots_total, c.slots_free, c.mem_total,
                                 c.os_available, c.slack) for n, c in self.caps.items()}
        self.prio = {q.name: q.priority for q in self.cs.queues.values()}
        self.one_priority = len(set(self.prio.values())) <= 1
        first = self.jobs[0].submit if self.jobs else 0.0
        self.now = self.t0 = first
        self.sample_every = max(1.0, (self._horizon() - first) / SAMPLES)
        self.next_sample = first

    def _horizon(self) -> float:
        return max((j.submit + j.run for j in self.jobs), default=0.0)

    def _caps(self, names: object) -> dict[str, HostCap]:
        hosts = [self.cs.hosts[n] for n in names]  # type: ignore[attr-defined]
        osa = {h.name: self.os_available(h.name) for h in hosts}
        lend = (self.now, self.rules) if self.policy.reclaim else None
        return host_caps(hosts, self.live.ledger, osa, self.policy.mem_view, reclaim=lend)

    def os_available(self, host: str) -> int:
        """The model's OS: a host's memory less what its jobs really use (no other tenant)."""
        return self.m.mem - self.live.ledger.host_totals(host).mem_actual

    def accepts_reclaim(self, sj: SimJob) -> bool:
        """Whether a trace job runs on reclaimable memory: its queue is listed, or the seeded draw
        (the same for every policy and every margin) falls in the share.  Never a job that reserves
        nothing: placement lets it onto a host whatever its room, and sending it away gives no
        reservation back, so it would be placed and sent away again and again."""
        k = self.knobs
        if not self.policy.reclaim or sj.reserve_slot <= 0:
            return False
        if sj.queue in k.reclaim_queues:
            return True
        return k.reclaim_share > 0 and random.Random(k.seed * 7_919 + sj.trace_id).random() < k.reclaim_share

    # ---- the loop -----------------------------------------------------------------------

    def run(self) -> Outcome:
        jobs, n, i = self.jobs, len(self.jobs), 0
        heap = self.heap
        while i < n or heap:
            t_sub = jobs[i].submit if i < n else float("inf")
            t = min(t_sub, heap[0][0]) if heap else t_sub
            self._advance(t)
            while heap and heap[0][0] == t:
                _, kind, _, jid, arg = heapq.heappop(heap)
                self._event(kind, jid, arg)
            while i < n and jobs[i].submit == t:
                self._submit(jobs[i])
                i += 1
            self._round()
            if self.progress is not None and self.events >= self.next_progress:
                self.next_progress = self.events + 20_000
                self.progress(self.ended / max(1, n), self.events)
        self._sample(force=True)
        end = max((r.end for r in self.records.values() if r.end is not None), default=self.t0)
        return Outcome(self.policy.name, self.m, list(self.records.values()), self.acc, self.series,
                       self.t0, end, self.events, self.rounds)

    def _push(self, t: float, kind: int, jid: int, arg: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, kind, self.seq, jid, arg))

    def _event(self, kind: int, jid: int, arg: int) -> None:
        if kind == WAKE:
            self.wakes.discard(self.now)
            self.woken = True
            return
        self.events += 1
        job = self.cs.jobs[jid]
        if job.state != JobState.RUN or job.attempt != arg >> 16:
            return  # a report or end of a run that was killed meanwhile
        if kind == END:
            self._finish(job, "")
        elif kind == KILL:
            self._killed(job, RECLAIMED if arg & LENT else "MEMPRESSURE")
        elif kind == RUNLIMIT:
            self.timeouts += 1
            self.records[jid].timed_out = True
            self._finish(job, "TERM_RUNLIMIT")
        elif kind == EVICT:
            self._evicted(job)
        elif kind == SETTLE:
            self.touched.update(job.hosts)
            self.settled = self.settled or bool(self.pending_lent)
        elif kind == SHRINK:
            self._shrink(job)
        else:
            self._report(job, arg & 0x7FFF)

    # ---- time ---------------------------------------------------------------------------

    def _advance(self, t: float) -> None:
        dt = t - self.now
        if dt > 0:
            a = self.acc
            a.slots += self.slots_used * dt
            a.reserved += self.tot[0] * dt
            a.actual += self.tot[1] * dt
            a.slack += self.tot[2] * dt
            a.held += self.tot[3] * dt
            a.over_hosts += len(self.over) * dt
        while self.next_sample <= t:
            self._sample()
        self.now = t

    def _sample(self, force: bool = False) -> None:
        s = self.series
        s.t.append(self.next_sample if not force else self.now)
        s.slots_used.append(self.slots_used)
        s.pending.append(len(self.pending))
        s.reserved.append(self.tot[0])
        s.actual.append(self.tot[1])
        s.slack.append(self.tot[2])
        s.held.append(self.tot[3])
        s.kills.append(self.kills)
        self.next_sample += self.sample_every

    # ---- the ledger, with the cluster's sums kept by the differences it makes ------------

    def _figures(self, h: str) -> tuple[int, int, int, int]:
        """A host's Σ reserved, Σ actual, Σ slack, and the memory held but unused:
        min(capacity, Σ charged) - Σ actual (a borrower fills a lender's slack without a second hold)."""
        t = self.live.ledger.totals.get(h)  # the ledger's own delta-kept host totals, read only
        if t is None:
            return 0, 0, 0, 0
        return (t.mem_reserved, t.mem_actual, t.mem_slack,
                max(0, min(self.m.mem, t.mem_reserved + t.mem_overage) - t.mem_actual))

    def _changing(self, hosts: list[str], change: Callable[[], None]) -> None:
        before = [self._figures(h) for h in hosts]
        change()
        tot, cap, over = self.tot, self.m.mem, self.over
        for h, old in zip(hosts, before):
            new = self._figures(h)
            for k in range(4):
                tot[k] += new[k] - old[k]
            if new[1] > cap:
                over.add(h)
            else:
                over.discard(h)
        self.touched.update(hosts)

    # ---- job life -----------------------------------------------------------------------

    def _req(self, per_slot: int) -> ResReq:
        req = self.reqs.get(per_slot)
        if req is None:
            kb = -(-per_slot // 1024)
            req = self.reqs[per_slot] = parse_resreq(f"rusage[mem={kb}K/task]") if per_slot else ResReq()
        return req

    def _submit(self, sj: SimJob) -> None:
        self.events += 1
        lent = self.accepts_reclaim(sj)
        spec = JobSpec(command=["trace", str(sj.trace_id)], user=sj.user, queue=sj.queue, slots=sj.slots,
                       name=f"exe{sj.exe}" if sj.exe >= 0 else "", reclaim=lent,
                       run_limit=sj.req_time if sj.req_time > 0 else None)
        req = self._req(sj.reserve_slot)
        if self.history is not None:
            probe = Job(id=0, spec=spec, req=req)
            req = self.history.request(probe, req)
        (jid,) = self.cs.apply(Submit(time=sj.submit, specs=[spec], reqs=[req]))
        job = self.cs.jobs[jid]
        self.sim[jid] = sj
        rec = self.records[jid] = JobRecord(sj.submit, None, None, sj.run, sj.slots, sj.user, lent=lent,
                                            sized=bool(req.mem_basis))
        if not self._admit(job, rec):
            return
        self.pending[jid] = job
        self._pend(job)

    def _admit(self, job: Job, rec: JobRecord) -> bool:
        """False, with the job refused, when no host could ever run it (the controller's check)."""
        key = (job.spec.slots, job.req)
        if key not in self.never:  # pure, on the fixed empty hosts: once per shape
            self.never[key] = never_fits(job_demand(job, reclaim_queues=self.live.reclaim_queues),
                                         self.empty.values())
        why = self.never[key]
        if why is None:
            return True
        rec.rejected = why
        rec.end = None
        self.ended += 1
        self.cs.apply(Kill(time=self.now, job_ids=[job.id], reason=why))
        return False

    def _pend(self, job: Job) -> None:
        """``job`` (in self.pending) waits: the round's bookkeeping."""
        self.new.append(job)
        if reclaiming(job.spec, self.live.reclaim_queues):
            self.pending_lent[job.id] = job
        if self.fair is not None:
            self.pend_keys.setdefault(key_of(job), {})[job.id] = job

    def _round(self) -> None:
        if self.profile is not None:
            self._profile_round()
            return
        if not self.new and not self.freed and not self.settled:
            return
        if self.touched:
            self.caps.update(self._caps(self.touched))
            self.touched = set()
        free = self.m.slots_total - self.slots_used
        # With reservations a round's answer also moves with the clock (a window closes,
        # an overrun comes due): only greedy rounds may be cut short.  A job's settling
        # helps only the reclaiming jobs.
        full = self.freed or self.policy.backfill.reservations > 0
        todo: object = self.pending.values() if full else self.new
        if not full and self.settled:
            todo = sorted({**self.pending_lent, **{j.id: j for j in self.new}}.values(), key=lambda j: j.id)
        self.new, self.freed, self.settled = [], False, False
        if free <= 0 or not self.pending:
            return  # every slot is taken: nothing can start (the daemon skips such rounds too)
        self.rounds += 1
        # Ids follow submit order and the queue holds only PEND jobs (a requeued job goes back
        # to its place: see _requeued): with one priority for every queue (SWF has none), the
        # queue in hand is pending_order's answer already.
        if self.fair is not None:
            got = self.fair.round_inputs(self.ended_since, [next(iter(p.values())) for p in self.pend_keys.values()],
                                         self.running.values(), self.live.ledger, self.prio, self.now)
            self.ended_since = []
            ordered = got.ordering.order(todo)  # type: ignore[arg-type]
        else:
            ordered = list(todo) if self.one_priority else pending_order(todo, self.prio)  # type: ignore[arg-type]
        plan = self.plan(ordered)
        for jid, allocs in plan.placements:
            self._place(self.cs.jobs[jid], allocs)

    def _profile_round(self) -> None:
        """Conservative backfill on the kept profile: a round after arrivals, ends, memory given
        back, or a reservation's start; the profile compresses, reserves, and starts what is due."""
        prof = self.profile
        assert prof is not None
        if not self.new and not self.freed and not self.woken:
            return
        if self.touched:
            self.caps.update(self._caps(self.touched))
            prof.touched(self.touched)
            self.touched = set()
        arrivals, freed = self.new, self.freed
        self.new, self.freed, self.woken, self.settled = [], False, False, False
        self.rounds += 1
        got = prof.round(arrivals, self.now, self.live.ledger, freed=freed and self.m.mem > 0)
        for jid, allocs in got.placements:
            self._place(self.cs.jobs[jid], allocs)
        nxt = prof.next_start(self.now)
        if nxt is not None and nxt not in self.wakes:
            self.wakes.add(nxt)
            self._push(nxt, WAKE, 0)

    def plan(self, ordered: list[Job]) -> Plan:
        """One round of the daemons' placement over the current host views (an overlay)."""
        rules = self.policy.backfill
        rel = self.releases.current(self.live.ledger) if self.releases is not None else ()
        return schedule(self.caps, ordered, self.now, backfill=rules, releases=rel, explain=False,
                        reclaim_queues=self.live.reclaim_queues)

    def _place(self, job: Job, allocs: list[Alloc]) -> None:
        now = self.now
        attempt = self.cs.apply(Place(time=now, job_id=job.id, attempt=job.attempt, allocs=allocs))
        del self.pending[job.id]
        self.pending_lent.pop(job.id, None)
        if self.fair is not None:
            same = self.pend_keys[key := key_of(job)]
            del same[job.id]
            if not same:
                del self.pend_keys[key]
        self.running[job.id] = job
        self._changing(job.hosts, lambda: self.live.sync_job(job, now))
        if self.releases is not None:
            self.releases.started(job)
        if self.profile is not None:
            self.profile.started(job)
        self.slots_used += job.spec.slots
        sj = self.sim[job.id]
        self.records[job.id].start = now
        self.last_use[job.id] = (now, 0)
        self.peak_slot[job.id] = 0
        limit = job.spec.run_limit
        if self.run_limits and limit is not None and sj.run > limit:  # the worker's rule: past -W, killed
            self._push(now + min(sj.run, limit + self.kill_grace), RUNLIMIT, job.id, attempt << 16)
        else:
            self._push(now + sj.run, END, job.id, attempt << 16)
        reports = self.reports.setdefault(job.id, self.usage.reports(sj))
        for k, (dt, _) in enumerate(reports):
            if dt < sj.run:
                self._push(now + dt, STEP, job.id, attempt << 16 | k)
        if self.policy.reclaim:
            self._settling(job, attempt, reports, sj.run)
        if self.policy.shrink:
            self._shrinking(job, attempt, reports, sj.run)

    def _settling(self, job: Job, attempt: int, reports: list[tuple[float, int]], run: float) -> None:
        """The moments the job may settle (accounting.settled): a report's rise held still for the
        window, past the minimum run -- where the next report does not come first.  A superset:
        a settled job's rise that is not large (accounting.large_rise) leaves its window as it
        was, and its moment then changes nothing (the ledger decides, as in the daemons)."""
        rules = self.rules
        for k, (dt, _) in enumerate(reports):
            at = max(rules.min_run, dt + rules.window)
            nxt = reports[k + 1][0] if k + 1 < len(reports) else float("inf")
            if at < run and at < nxt:
                self._push(self.now + at, SETTLE, job.id, attempt << 16)

    def _shrinking(self, job: Job, attempt: int, reports: list[tuple[float, int]], run: float) -> None:
        """The moments the job may be shrink-settled (accounting.shrink_moment after each report's
        rise), where the next report does not come first: a superset, as in ``_settling``."""
        now = self.now
        for k, (dt, _) in enumerate(reports):
            at = shrink_moment(now, now + dt, self.rules) - now
            nxt = reports[k + 1][0] if k + 1 < len(reports) else float("inf")
            if at < run and at < nxt:
                self._push(now + at, SHRINK, job.id, attempt << 16)

    def _shrink(self, job: Job) -> None:
        """A shrink-settled job's reservation in force lowered (xce/core/shrink.py, the daemons' rule): a charge change."""
        ledger, now, rules = self.live.ledger, self.now, self.rules
        for a in job.allocs:
            new = shrink_to(ledger, job.id, a.host, a.mem, now, rules)
            if new is not None:
                self._changing([a.host], lambda h=a.host, n=new: ledger.set_reserved(job.id, h, n))
                self.freed = True
                self.shrinks += 1

    def _restore(self, job: Job) -> None:
        """A shrunk job whose use passed its reservation in force has it raised back (xce/core/shrink.py),
        counting the reclaiming jobs' charges as room: they go first (``_reclaim`` sends them away)."""
        ledger = self.live.ledger
        for a in job.allocs:
            new = restore_to(ledger, job.id, a.host, a.mem, self.os_available(a.host))
            if new is not None:
                self._changing([a.host], lambda h=a.host, n=new: ledger.set_reserved(job.id, h, n))
                self.restores += 1

    def _use(self, job: Job, total: int) -> None:
        """Integrate the job's actual memory up to now, then hold ``total`` from here."""
        since, held = self.last_use[job.id]
        self.records[job.id].mem_seconds += held * (self.now - since)
        self.last_use[job.id] = (self.now, total)

    def _report(self, job: Job, k: int) -> None:
        reports = self.reports[job.id]
        per_slot = reports[k][1]
        observe = self.live.ledger.observe_host
        now = self.now

        def change() -> None:
            for a in job.allocs:  # one report per host: actual = peak, no CPU time in the model
                actual = per_slot * a.slots
                observe(a.host, [job.id], None, [actual], [actual], [0.0], now)

        hosts = job.hosts
        self._changing(hosts, change)
        if self.releases is not None:
            self.releases.changed(job)  # its actual and slack: what its end gives back
        if self.profile is not None:
            self.profile.changed(job)
        self._use(job, per_slot * job.spec.slots)
        self.peak_slot[job.id] = max(self.peak_slot[job.id], per_slot)
        # Less memory than the job's previous report (they arrive in order) may let a job start.
        self.freed = self.freed or (k > 0 and reports[k - 1][1] > per_slot)
        if self.policy.shrink:
            self._restore(job)
        for h in hosts:
            self._pressure(h)
        if self.policy.reclaim:
            for h in hosts:
                self._reclaim(h)

    def _pressure(self, host: str) -> None:
        """The worker's MEMPRESSURE rule: below the floor, kill a reclaiming job first, else the
        largest overage, one at a time (accounting.pressure_victim)."""
        if self.os_available(host) >= self.mem_floor:
            return
        book = self.live.ledger.books.get(host)
        if book is None:
            return
        victim = pressure_victim(zip(book.ids, (a - r for a, r in zip(book.actual, book.reserved))), book.reclaiming)
        if victim is None or victim in self.dying:
            return
        self.dying.add(victim)
        job = self.cs.jobs[victim]
        lent = LENT if victim in book.reclaiming else 0
        if self.kill_grace > 0:
            self._push(self.now + self.kill_grace, KILL, victim, job.attempt << 16 | lent)
        else:
            self._killed(job, RECLAIMED if lent else "MEMPRESSURE")

    def _reclaim(self, host: str) -> None:
        """The controller's reclaim rule (xce/core/reclaim.decide) on ``host``, its decisions applied
        at once (the controller makes one a heartbeat: seconds, where runs take hours)."""
        ledger = self.live.ledger
        while True:
            lent = ledger.reclaiming(host)
            if not lent:
                return
            jobs = [self.cs.jobs[jid] for jid in sorted(lent)]
            got = reclaim.decide(ledger, host, jobs, self.os_available(host),
                                 ledger.reclaimable(host, self.now, self.rules), self.mem_floor, self.now,
                                 lambda j: self.cs.queues[j.spec.queue].reclaim_policy)
            if got is None:
                return
            cmd, job = got
            self.cs.apply(cmd)  # Requeue or Kill of a running job: kill_requested, its end to come
            self.dying.add(job.id)
            self._push(self.now + self.kill_grace, EVICT, job.id, job.attempt << 16)

    def _killed(self, job: Job, reason: str) -> None:
        if job.requeue_requested:  # reclaim had already sent it away: the kill is that requeue's
            self._evicted(job)
            return
        rec = self.records[job.id]
        self.kills += 1
        rec.kills += 1
        rec.kill_mem_s += self._run_mem_s(job)
        rec.kill_slot_s += (self.now - job.start_time) * job.spec.slots  # type: ignore[operator]
        self._finish(job, reason)

    def _evicted(self, job: Job) -> None:
        rec = self.records[job.id]
        rec.evictions += 1
        rec.evict_mem_s += self._run_mem_s(job)
        rec.evict_slot_s += (self.now - job.start_time) * job.spec.slots  # type: ignore[operator]
        self._finish(job, job.reason.removeprefix("requeue requested: "))

    def _run_mem_s(self, job: Job) -> float:
        """The byte-seconds of the job's current run up to now."""
        since, held = self.last_use[job.id]
        return self.records[job.id].mem_seconds + held * (self.now - since)

    def _finish(self, job: Job, reason: str) -> None:
        now, hosts = self.now, job.hosts
        rec = self.records[job.id]
        self._use(job, 0)
        del self.last_use[job.id]
        self.dying.discard(job.id)
        del self.running[job.id]
        if self.releases is not None:
            self.releases.ended(job.id)
        if self.profile is not None:
            self.profile.ended(job, now)
        tries = job.mem_tries
        reserved_slot = job.allocs[0].mem // max(1, job.allocs[0].slots) if job.allocs else 0

        def change() -> None:
            for h in hosts:
                self.cs.apply(Finish(time=now, job_id=job.id, attempt=job.attempt, host=h,
                                     exit_code=None if reason else 0, signal=9 if reason else None,
                                     reason=reason))
            self.live.sync_job(job, now)

        self._changing(hosts, change)
        self.slots_used -= job.spec.slots
        self.reports.pop(job.id, None)
        self.freed = True
        peak = self.peak_slot.pop(job.id, 0)
        if job.state == JobState.PEND:  # requeued by reclaim, or retried larger by memretry
            rec.retries += job.mem_tries - tries
            self._requeued(job, rec)
        else:
            rec.end = now
            rec.killed = mem_kill(reason) is not None
            self.ended += 1
            if self.fair is not None:
                self.ended_since.append(job)
            if self.history is not None:
                self.history.ended(job, reserved_slot, peak)
        if reason:
            for h in hosts:
                self._pressure(h)  # the victim's memory is back: is the host still below its floor?

    def _requeued(self, job: Job, rec: JobRecord) -> None:
        """Back in the queue, at its old place (its submit time), unless its new request never fits."""
        rec.start = None
        rec.mem_seconds = 0.0
        if not self._admit(job, rec):
            rec.killed = True
            return
        self.pending[job.id] = job
        self.pending = dict(sorted(self.pending.items()))  # ids are submit order: the order's last stage
        self._pend(job)
        if job.id in self.pending_lent:
            self.pending_lent = dict(sorted(self.pending_lent.items()))
