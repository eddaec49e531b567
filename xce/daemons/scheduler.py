"""xce-scheduler: keeps a mirror of the controller and runs placement rounds.

The mirror is a snapshot plus the sequenced event stream (re-snapshotted on
any gap or leader change).  A round runs when an event could help a pending
job (a submit, an end, a host change) — debounced — and at least every
``scheduler.interval`` seconds.  The round itself is the pure
``placement.schedule``; this shell only sends the plan to the controller, which
re-checks each placement with the same fit rule and commits what still fits.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import zmq

from xce.client import Connection, endpoints_of
from xce.client.follow import EventFollower, Sync
from xce.core.errors import XceError
from xce.core.model import TERMINAL, Alloc, Job, JobState, reclaim_suspended
from xce.core.placement import HostCap, Plan, cluster_free, host_caps, queue_host_sets, room_reason, schedule
from xce.core.sched.limits import HELD
from xce.core.sched.order import PendingIndex
from xce.core.sched.preempt import (
    blocked_preemptors,
    credit_suspended,
    fitter,
    preempt,
    reservation_guard,
    resumable,
)
from xce.core.sched.site import PolicyState, RoundInputs, SitePolicy
from xce.daemons.heap import HeapUpkeep
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.replica.mirror import Mirror
from xce.security.auth import daemon_token
from xce.security.curve import SCHEDULER_KEY, daemon_keys
from xce.site.config import Config, load

log = logging.getLogger("xce.scheduler")


def round_caps(m: Mirror, now: float | None = None) -> dict[str, HostCap]:
    """What a round places against: host totals re-derived from the job accounts (where
    each reconciled figure lives), not deltas carried over from earlier rounds; and each
    host's reclaimable memory as of ``now`` (None: none)."""
    m.live.ledger.rederive()
    reclaim = (now, m.live.rules) if now is not None else None
    return host_caps(m.hosts.values(), m.live.ledger, m.live.os_available, reclaim=reclaim, jobs=m.jobs)


class Scheduler:
    def __init__(self, cfg: Config) -> None:

        self.cfg = cfg
        self.ctx = zmq.Context()

        self.keys = daemon_keys(cfg, SCHEDULER_KEY)
        self.conn = Connection(endpoints_of(cfg), token=daemon_token(cfg.state_dir), timeout=5.0, ctx=self.ctx,
                               curve=self.keys)
        self.mirror = Mirror(index=True)
        self.mirror.live.rules = cfg.reclaim_rules()
        self.follower = EventFollower(self.conn, cfg.controller.pub_address, self.mirror,
                                      silence=max(3.0, 3 * cfg.worker.heartbeat), on_link=self._link)
        self.heap = HeapUpkeep()
        self.dirty = True
        self.next_round = 0.0
        self.stopping = False
        self.in_flight: dict[int, int] = {}  # job -> attempt it was placed at
        self.in_flight_allocs: dict[int, list[Alloc]] = {}  # and where: counted against limits until the mirror runs it
        # Placements the controller accepted, until the mirror shows the job again: its running
        # there is this scheduler's own doing, frees nothing and so wants no round.
        self.placed: dict[int, int] = {}
        self.sent_reasons: dict[int, str] = {}
        # Pending jobs whose sent reason may not be the one a full round gives them
        # (``room_reason(slots, 0)``): new or changed since, or read by the last round's walk.
        # A round that stops when full settles these and passes over the rest.
        self.unsettled: set[int] = set()
        self.ended: dict[int, Job] = {}  # jobs ended (or requeued) since the last round: its fairshare fold
        self.folded: set[int] = set()    # ended jobs folded (a later event of one is no new end)
        self.full_and_told = False       # the last round left no slot, every pending job told so
        self.cluster_totals = cfg.cluster_totals()
        self.policy = PolicyState(SitePolicy.from_config(cfg))

    def drain(self, wait_ms: int) -> None:
        """Follow the stream for up to ``wait_ms``: a new snapshot or hard news wants a round."""
        sync = self.sync
        snaps = sync.snapshots
        for ev in self.follower.step(wait_ms):
            if ev.hosts or ev.forget:
                self.dirty = True  # a changed job wants a round unless it only ran (_take_changes)
        if sync.snapshots != snaps:
            m = self.mirror
            self.sent_reasons = dict(m.live.reasons)
            self.policy.reseed(m.usage_past, m.usage_as_of)  # the forgotten jobs' usage
            self.unsettled = set(m.pending)
            self.ended = {j.id: j for j in m.jobs.values() if j.state in TERMINAL}
            self.folded = set()
            self.placed = {}
            self.full_and_told = False
            self.dirty = True
            log.info("mirror synced at seq %d (%d jobs, %d hosts)", m.seq, len(m.jobs), len(m.hosts))
        self._take_changes()

    def _take_changes(self) -> None:
        """What the jobs changed since the last look: new ends to fold, pending jobs to tell,
        and whether a round is wanted (any change but a placement of this scheduler's that
        now runs: that one frees no room and adds no work)."""
        m = self.mirror
        touched = m.touched
        if not touched:
            return
        for jid in touched:
            j = m.jobs.get(jid)
            placed = self.placed.pop(jid, None)
            if j is not None and j.state == JobState.RUN and placed == j.attempt and not j.finished_hosts:
                continue
            self.dirty = True
            if j is None:  # forgotten
                self.folded.discard(jid)
                self.policy.book.forget((jid,))
                self.sent_reasons.pop(jid, None)
                continue
            if j.state in TERMINAL:
                if jid not in self.folded:
                    self.ended[jid] = j
            else:
                self.folded.discard(jid)
                if j.runs:  # a requeue ended a run: the book folds each run once (fairshare.fold)
                    self.ended[jid] = j
                if jid in m.pending:
                    self.unsettled.add(jid)
                    self.full_and_told = False
        touched.clear()

    def _link(self, state: str, problem: str) -> None:
        if state != "live":
            log.warning("controller unavailable (%s); following again", problem)

    @property
    def sync(self) -> Sync:
        assert self.follower.sync is not None
        return self.follower.sync

    @property
    def synced(self) -> bool:
        return self.sync.state == "LIVE"

    def round(self, now: float) -> None:
        m = self.mirror
        rules = self.policy.policy.preemption
        suspended = [j for j in m.running.values() if j.state == JobState.SSUSP] if rules.on else []
        if not m.pending and not suspended:
            return
        t0 = time.perf_counter()
        caps = round_caps(m, now)
        credit_suspended(caps, suspended)
        full = not any(h.schedulable is None and h.slots_free > 0 for h in caps.values())
        preempting = rules.on and any(rules.preempts.get(q) for _, _, _, q in self._order().groups)
        if full and self.full_and_told and not preempting:
            # Every slot is taken and every pending job already got its reason in a full
            # round: this round would place nothing and say nothing new.  A busy cluster
            # with a deep queue skips most rounds this way (each end asks for one; a placement
            # of its own that starts asks for none, see _take_changes).
            # Not while a job may preempt: its victims may have run long enough since.
            return
        got = self._inputs(now)
        flying = self.in_flight
        ids = self._order().ids(got.ordering)
        pending = (j for i in ids if flying.get(i) != (j := m.pending[i]).attempt)
        if rules.on:  # the preemption walk looks at every blocked job, resumption at their queues
            pending = list(pending)  # type: ignore[assignment]
        # Preempted jobs resume first, unless work of a queue that preempts theirs still waits.
        # (A job the controller's reclaim suspended is its own to resume: docs/accounting.md.)
        preempted = [j for j in suspended if not reclaim_suspended(j)]
        resume = resumable(preempted, caps, rules, {j.spec.queue for j in pending}) if preempted else []  # type: ignore[union-attr]
        cfree = cluster_free(self.mirror.running.values(), self.cluster_totals)
        plan = schedule(caps, pending, now, cfree, self.cluster_totals, backfill=self.policy.policy.backfill,
                        releases=got.releases, limits=got.limits, reclaim_queues=m.live.reclaim_queues,
                        queue_hosts=queue_host_sets(m.queues.values()), stop_when_full=not rules.on)
        preempts = self._preemptions(pending, plan, caps, cfree, now,  # type: ignore[arg-type]
                                     got.ordering.key) if rules.on else []
        ms = (time.perf_counter() - t0) * 1000
        # The plan charged its placements to ``caps``: full now means full once they run.
        full = not any(h.schedulable is None and h.slots_free > 0 for h in caps.values())
        changed = self._changed_reasons(plan)
        # Told only once no job keeps a reason from before the slots ran out: a job walked while
        # a slot was free is told the full cluster's reason by the next round.  (With preemption
        # the walk reads every job each round: as before, a full round is taken as told, or a
        # full cluster would walk its whole queue at every event.)
        self.full_and_told = full and (rules.on or not self.unsettled)
        if not plan.placements and not changed and not preempts and not resume:
            return
        req = S.PlaceRequest(
            placements=[S.Placement(jid, m.jobs[jid].attempt, allocs) for jid, allocs in plan.placements],
            reasons=changed, round_ms=ms, preempt=preempts, resume=resume)
        reply = self.conn.request(Op.PLACE, req, timeout=10)
        self.sent_reasons.update(changed)
        placed = dict(plan.placements)
        for jid in reply.accepted:
            self.in_flight[jid] = self.placed[jid] = m.jobs[jid].attempt
            self.in_flight_allocs[jid] = placed[jid]
        if reply.rejected:
            log.info("controller rejected %d placement(s): %s", len(reply.rejected),
                     next(iter(reply.rejected.values())))
        # Let the mirror catch up with what was just committed before the next round.
        deadline = time.monotonic() + 0.5
        while self.in_flight and time.monotonic() < deadline:
            self.drain(20)
            self.in_flight = {j: a for j, a in self.in_flight.items()
                              if j in m.jobs and m.jobs[j].attempt == a and m.jobs[j].state == JobState.PEND}
            if not self.synced:
                break
        self.in_flight_allocs = {j: al for j, al in self.in_flight_allocs.items() if j in self.in_flight}
        if reply.rejected:
            self.dirty = True
        # The jobs placed run now and want no reason.  Any other job still unsettled on a full
        # cluster is told by one more round: the events of this round's own placements, which
        # asked for that round before, ask for none now (_take_changes).
        self.unsettled = {j for j in self.unsettled if j in m.pending}
        self.full_and_told = full and (rules.on or not self.unsettled)
        if full and not self.full_and_told:
            self.dirty = True

    def _order(self) -> PendingIndex:
        assert self.mirror.order is not None
        return self.mirror.order

    def _inputs(self, now: float) -> RoundInputs:
        """The round's order, releases and limits: the fold takes only the jobs ended since the
        last round, the fairshare and limits one job of each fairshare key with its count."""
        m = self.mirror
        groups = self._order().groups
        reps = [m.pending[g[0][2]] for g in groups.values()]
        counts = {k: len(g) for k, g in groups.items()}
        flying = [(m.pending[j], al) for j, al in self.in_flight_allocs.items()
                  if j in self.in_flight and j in m.pending]
        # One fairshare key pending (an array, one user's stream): the round's order is that
        # key's own (PendingIndex.ids), so no priority is asked of the trees, unless the
        # preemption walk ranks the jobs by the whole key.
        shares = len(groups) > 1 or self.policy.policy.preemption.on
        got = self.policy.round_inputs(self.ended.values(), reps, m.running.values(), m.live.ledger,
                                       {q.name: q.priority for q in m.queues.values()}, now, flying, counts=counts,
                                       shares=shares)
        self.folded.update(self.ended)
        self.ended = {}
        return got

    def _changed_reasons(self, plan: Plan) -> dict[int, str]:
        """The reasons the controller does not have yet: the walked jobs' that changed, and,
        where the walk stopped with no slot left, the unsettled jobs it did not reach."""
        m, sent = self.mirror, self.sent_reasons
        changed = {j: r for j, r in plan.reasons.items() if sent.get(j) != r}
        walked = plan.reasons.keys() | {j for j, _ in plan.placements}
        keep: set[int] = set()
        for jid in self.unsettled:
            job = m.pending.get(jid)
            if job is None:
                continue
            if jid in walked or self.in_flight.get(jid) == job.attempt or not plan.stopped:
                keep.add(jid)
                continue
            why = room_reason(job.spec.slots, 0)
            if sent.get(jid) != why:
                changed[jid] = why
        self.unsettled = keep | walked
        return changed
    def _preemptions(self, pending: list[Job], plan: Plan, caps: dict[str, HostCap], cfree: dict[str, int],
                     now: float, rank: Callable[[Job], Any]) -> list[S.Preempt]:
        """The round's blocked jobs (not held by a limit: preempting would not help) that may
        preempt, and the orders that make room for them; each says so in its reason."""
        placed = {j for j, _ in plan.placements}
        blocked = blocked_preemptors(pending, placed, plan.reasons, self.policy.policy.preemption, HELD)
        fits = fitter(now, cfree, self.cluster_totals, queue_host_sets(self.mirror.queues.values()))
        jobs = self.mirror.jobs  # a preemptor may not take what a reservation ahead of it holds
        guard = reservation_guard(plan.reservations, lambda jid: rank(jobs[jid]), self.policy.policy.backfill, now)
        orders = preempt(blocked, self.mirror.running.values(), caps, self.policy.policy.preemption, now, fits,
                         self.mirror.live.ledger, guard, plan.reasons)  # a job only spent victims would serve says so
        for o in orders:
            plan.reasons[o.for_job] = f"preemption: waiting for job {o.job_id} to be preempted ({o.action})"
        return [S.Preempt(o.job_id, o.attempt, o.action, o.for_job) for o in orders]

    def coalesce(self) -> None:
        """Wait ``scheduler.debounce`` for the rest of a burst of submits before a round.

        At 0 (the default) there is no sleep at all: even ``time.sleep(0)`` gives the CPU
        away, and the scheduler, woken by the event a moment before, then waits its turn to
        get it back: 0.08-9 ms, median 0.7 ms at load 12, on the idle path of every job
        (docs/benchmarks.md, "Session 10: idle latency")."""
        if self.cfg.scheduler.debounce > 0:
            time.sleep(self.cfg.scheduler.debounce)
            self.drain(0)

    def run(self) -> None:
        interval = self.cfg.scheduler.interval
        while not self.stopping:
            try:
                self.drain(int(max(0.0, min(interval, self.next_round - time.time())) * 1000) + 1
                           if not self.dirty else 0)
                now = time.time()
                self.heap.tick(now)
                if self.dirty or now >= self.next_round:
                    if self.dirty:
                        self.coalesce()
                    self.dirty = False
                    self.next_round = now + interval
                    if self.synced:
                        self.round(now)
            except XceError as e:
                log.warning("controller unavailable (%s); retrying", e.message)
                self.follower.resync()
                time.sleep(0.2)
        self.follower.close()
        self.conn.close()
        self.ctx.destroy(linger=0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="xce-scheduler", description="XCE scheduler daemon")
    p.add_argument("--config")
    p.add_argument("--log-level", default="INFO")
    a = p.parse_args(argv)
    logging.basicConfig(level=a.log_level, format="%(asctime)s scheduler %(levelname)s %(message)s")
    try:
        cfg = load(a.config)
    except XceError as e:
        print(f"xce-scheduler: {e.message}", file=sys.stderr)
        return 2
    try:
        s = Scheduler(cfg)
    except XceError as e:  # e.g. its CURVE key is missing
        print(f"xce-scheduler: {e.message}", file=sys.stderr)
        return 2

    def stop(*_: Any) -> None:
        s.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    s.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
