"""A site's scheduling policy, from config, and what one round needs from a cluster's state.

``SitePolicy.from_config`` reads ``[fairshare]``, ``[backfill]``, ``[[limits]]``, ``[preemption]``
and the queues' ``preempt`` settings once.
``PolicyState`` is what a scheduler keeps between rounds (the fairshare usage book, fed
incrementally) and ``round_inputs`` turns the cluster's jobs and ledger into the round's
ordering, releases and limit book.  Everything here is re-derived from hard state
(finished-job records, running jobs' allocations and start times) plus the ledger, so a
new scheduler after a failover computes the same figures.  Pure: ``now`` is a parameter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from xce.core.accounting import Ledger
from xce.core.model import Alloc, Job
from xce.core.sched.backfill import BackfillRules, Release, releases
from xce.core.sched.fairshare import (
    Key,
    ShareNode,
    UsageBook,
    Weights,
    fairshare_of,
    key_of,
    tree_of,
)
from xce.core.sched.limits import Limit, LimitBook, limits_of
from xce.core.sched.order import Ordering
from xce.core.sched.preempt import PreemptRules


@dataclass(frozen=True, slots=True)
class SitePolicy:
    fairshare: bool = True
    trees: Mapping[str | None, ShareNode] = field(default_factory=dict)
    weights: Weights = Weights()
    half_life: float = 18_000.0
    backfill: BackfillRules = BackfillRules()
    limits: tuple[Limit, ...] = ()
    preemption: PreemptRules = PreemptRules()

    @classmethod
    def from_config(cls, cfg: object) -> SitePolicy:
        """From an xce.site.config.Config (already validated)."""
        fs, bf = cfg.fairshare, cfg.backfill  # type: ignore[attr-defined]
        trees: dict[str | None, ShareNode] = {None: tree_of(fs.tree)}
        trees.update({q: tree_of(t) for q, t in fs.queues.items()})
        rules = BackfillRules(mode=bf.mode, depth=bf.depth, default_run_limit=bf.default_run_limit or None,
                              queue_run_limit=dict(bf.queue_run_limit))
        return cls(fairshare=fs.enabled, trees=trees, weights=Weights(fs.slot_weight, fs.mem_weight),
                   half_life=fs.half_life, backfill=rules, limits=limits_of(cfg.limits),  # type: ignore[attr-defined]
                   preemption=PreemptRules.from_config(cfg))


@dataclass(slots=True)
class RoundInputs:
    ordering: Ordering
    releases: list[Release]
    limits: LimitBook | None


class PolicyState:
    """What a scheduler keeps between rounds: decayed usage of the jobs that ended.

    ``past`` is the cluster's own usage of the jobs it forgot (ClusterState.usage_past, as of
    ``as_of``: hard state, folded at Cleanup with this book's rule); the book starts from it.
    The controller builds one per read (`xce fairshare`, `xce limits`, `jobs -l`) and the
    scheduler keeps one, re-seeded at each snapshot: both compute the same figures.
    """

    def __init__(self, policy: SitePolicy, past: Mapping[Key, Iterable[float]] | None = None,
                 as_of: float = 0.0) -> None:
        self.policy = policy
        self.book = UsageBook.seeded(policy.half_life, past or {}, as_of)

    def reseed(self, past: Mapping[Key, Iterable[float]], as_of: float) -> None:
        """Start again from the cluster's usage of forgotten jobs (a new snapshot)."""
        self.book = UsageBook.seeded(self.policy.half_life, past, as_of)

    def round_inputs(self, jobs: Iterable[Job], pending: Iterable[Job], running: Iterable[Job],
                     ledger: Ledger | None, queue_priority: Mapping[str, int], now: float,
                     in_flight: Iterable[tuple[Job, list[Alloc]]] = (), *,
                     counts: Mapping[Key, int] | None = None, shares: bool = True) -> RoundInputs:
        """``jobs``: the ended jobs to fold (each once; those folded by the previous call are
        passed over).  ``pending``: the pending jobs, or, with ``counts``, one job of each
        fairshare key, which stands for ``counts[key]`` of them.  ``in_flight``: placements
        proposed earlier, with their jobs: those the cluster does not show running yet hold
        their share of every limit already.  ``shares`` False: the caller reads no fairshare
        figure this round (one fairshare key pending: the order within it is the job's own),
        so the ended jobs are folded but the trees are not built."""
        p = self.policy
        running = list(running)
        pending = list(pending)
        fs = None
        if p.fairshare:
            self.book.fold(jobs, now)
        if p.fairshare and shares:
            usage = self.book.with_running(running, now, ledger)
            fs = fairshare_of(p.trees, usage, pending, p.weights)
        rel = releases(running, p.backfill, now, ledger) if p.backfill.reservations else []
        book = None
        if p.limits:
            book = LimitBook.build(p.limits, running, () if counts is not None else pending, ledger)
            for j in pending if counts is not None else ():
                book.add_pending(j.spec, counts[key_of(j)])
            ran = {j.id for j in running}
            for j, allocs in in_flight:
                if j.id not in ran:  # it counts as running already
                    book.charge(j, allocs)
        return RoundInputs(Ordering(queue_priority, fs), rel, book)
