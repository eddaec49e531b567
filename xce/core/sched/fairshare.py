"""Fairshare: a share tree, decayed usage folded from hard state, and each job's priority.

Pure: no I/O, no clock (``now`` is a parameter).  What it owns:

Usage.  A job charges, per host it ran on, ``slots`` slot-seconds and
``accounting.charge(reserved, peak)`` byte-seconds (memory as XCE charges it,
``max(reserved, actual)``, at the job's peak on that host: never less than it held).
Usage decays with a half-life ``h``: a rate ``r`` held over ``[s, e]`` counts, at ``T >= e``::

    r * h / ln 2 * (2^-((T - e) / h) - 2^-((T - s) / h))        # the exact integral of r * 2^-((T - t) / h)

so a record folded late counts exactly as one folded at once, and a book is re-derived
from finished-job records (hard state) plus running jobs' allocations and start times:
after a failover the new scheduler folds the same records to the same figures.

Priority.  A job's place in a share tree is a path root -> ... -> leaf, each level keyed on
the job's ``user``, ``group`` or ``project`` (the node's ``by``); ``default`` stands for each
principal the level does not name (equal shares per user: ``{default = 1}``, the default tree).
For a node n under parent p, with raw shares ``s(n)`` and siblings ``sib(n)`` (principals
seen: with usage or pending work)::

    S(n)  = S(p) * s(n) / sum(s(sib(n)))                            # normalised shares, S(root) = 1
    UN(n) = w_slots * slot_s(n) / slot_s(root) + w_mem * mem_s(n) / mem_s(root)   # w summed to 1
    UE(n) = UN(n)                                                   # at the top level
    UE(n) = UN(n) + (UE(p) - UN(n)) * s(n) / sum(s(sib(n)))         # below: a share of the parent's
    priority(leaf) = 2^-(UE(leaf) / S(leaf))                        # 1: no usage; towards 0: over-served

Each term rises with the leaf's own usage, so more usage never raises a priority
(tests/test_sched_fairshare.py checks it with hypothesis).  A principal no node names, under
a node with no ``default``, has no share: priority 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter

import msgspec

from xce.core import accounting
from xce.core.model import TERMINAL, Job, PastRun

BY = ("user", "group", "project")
# A job's usage key: who ran it and where (per-queue trees count only their queue's jobs).
Key = tuple[str, str, str, str]  # (user, group, project, queue)


SPEC_KEY = attrgetter("user", "group", "project", "queue")  # a JobSpec's Key, built at C speed


def key_of(job: Job) -> Key:
    return SPEC_KEY(job.spec)  # type: ignore[no-any-return]


# ---- the share tree --------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ShareNode:
    """A node of a share tree: its shares among its siblings, and children keyed on ``by``."""

    shares: int = 1
    by: str = "user"
    members: Mapping[str, ShareNode] = field(default_factory=dict)

    def child(self, name: str) -> tuple[str, ShareNode] | None:
        """The member a principal falls under: itself by name, else ``default``, else none."""
        n = self.members.get(name)
        if n is not None:
            return name, n
        d = self.members.get("default")
        return (name, d) if d is not None else None


EQUAL_SHARES = ShareNode(by="user", members={"default": ShareNode(shares=1)})


def tree_of(conf: object) -> ShareNode:
    """A ShareNode from config (xce.site.config.ShareConf: shares, by, members of int | ShareConf)."""
    if isinstance(conf, int):
        return ShareNode(shares=conf)
    members = {name: tree_of(m) for name, m in conf.members.items()}  # type: ignore[attr-defined]
    return ShareNode(shares=conf.shares, by=conf.by, members=members)  # type: ignore[attr-defined]


# ---- usage -----------------------------------------------------------------------------------

def decayed(rate: float, start: float, end: float, at: float, half_life: float) -> float:
    """The integral of ``rate`` over [start, end], each instant decayed to ``at`` (see the docstring)."""
    if end <= start:
        return 0.0
    k = math.log(2) / half_life
    return rate / k * (math.exp(-k * (at - end)) - math.exp(-k * (at - start)))


def job_rates(job: Job, ledger: accounting.Ledger | None = None) -> tuple[float, float]:
    """A job's slots and charged bytes over all its hosts: usage records once it ended, the
    ledger's accounts while it runs (the allocation's reservation where neither says more)."""
    by_host = {u.host: u for u in job.usage}
    accs = {a.host: a for a in ledger.by_job.get(job.id, [])} if ledger is not None else {}
    slots = mem = 0
    for a in job.allocs:
        slots += a.slots
        u, acc = by_host.get(a.host), accs.get(a.host)
        if u is not None:
            mem += accounting.charge(u.reserved, u.peak)
        elif acc is not None:
            mem += accounting.charge(acc.reserved, acc.peak)
        else:
            mem += accounting.charge(a.mem, None)
    return float(slots), float(mem)


def past_run(job: Job, now: float) -> PastRun:
    """The run a requeue ends, as this module charges it: kept on the job (hard state), so
    every run's usage counts, not only the last one's."""
    slots, mem = job_rates(job)
    assert job.start_time is not None
    return PastRun(job.start_time, job.end_time if job.end_time is not None else now, slots, mem, job.spec.queue)


def ended_runs(job: Job) -> int:
    """How many of a job's runs have ended: its requeued ones, and its last once it ended."""
    last = job.state in TERMINAL and job.start_time is not None and job.end_time is not None
    return len(job.runs) + last


class UsageBook:
    """Decayed usage per key, as of ``as_of``: finished jobs folded once each, incrementally."""

    def __init__(self, half_life: float) -> None:
        self.half_life = half_life
        self.as_of = 0.0
        self.usage: dict[Key, list[float]] = {}  # key -> [slot-seconds, byte-seconds]
        self.folded: dict[int, int] = {}  # job id -> its ended runs folded so far

    def decay_to(self, now: float) -> None:
        if now <= self.as_of:
            return
        f = 0.5 ** ((now - self.as_of) / self.half_life)
        for u in self.usage.values():
            u[0] *= f
            u[1] *= f
        self.as_of = now

    @classmethod
    def seeded(cls, half_life: float, usage: Mapping[Key, Iterable[float]], as_of: float) -> UsageBook:
        """A book that starts from ``usage`` as of ``as_of`` (the state's usage of forgotten jobs)."""
        book = cls(half_life)
        book.usage = {k: list(v) for k, v in usage.items()}
        book.as_of = as_of
        return book

    def add_ended(self, jobs: Iterable[Job], now: float) -> None:
        """Fold every ended run of these jobs, with no memory of which were folded (the
        state's fold at Cleanup)."""
        self.decay_to(now)
        for j in jobs:
            self._add_runs(j, 0, ended_runs(j))

    def fold(self, jobs: Iterable[Job], now: float) -> int:
        """Fold the ended runs of ``jobs`` not folded yet: the runs of requeued jobs, and the
        last run of each ended job (one that never started adds nothing); returns how many.

        ``jobs`` may be every job the cluster keeps, or only those that ended or were
        requeued since the last call (the scheduler's): the book remembers, per job, how many
        of its runs it folded until ``forget`` lets the id go (Cleanup dropped the job; its
        usage stays).  A requeue moves an ended job's last run into its ``runs`` unchanged,
        so the count of its ended runs, and what was folded of them, stays the same.
        """
        self.decay_to(now)
        n = 0
        folded = self.folded
        for j in jobs:
            if not j.runs and j.state not in TERMINAL:
                continue
            ended = ended_runs(j)
            done = folded.get(j.id, 0)
            if ended > done:
                n += ended - done
                self._add_runs(j, done, ended)
                folded[j.id] = ended
        return n

    def forget(self, ids: Iterable[int]) -> None:
        """Let go of jobs the cluster dropped: their usage stays, their fold counts go."""
        for i in ids:
            self.folded.pop(i, None)

    def _add_runs(self, j: Job, first: int, end: int) -> None:
        """Add runs ``first`` .. ``end - 1`` of ``j`` (its requeued runs, then its last)."""
        u = j.spec
        for r in j.runs[first:end]:
            self._add((u.user, u.group, u.project, r.queue), (r.slots, r.mem), r.start, r.end, self.as_of)
        if end > len(j.runs) and j.start_time is not None and j.end_time is not None:
            self._add(key_of(j), job_rates(j), j.start_time, j.end_time, self.as_of)

    def _add(self, key: Key, rates: tuple[float, float], start: float, end: float, at: float,
             into: dict[Key, list[float]] | None = None) -> None:
        into = self.usage if into is None else into
        u = into.setdefault(key, [0.0, 0.0])
        u[0] += decayed(rates[0], start, end, at, self.half_life)
        u[1] += decayed(rates[1], start, end, at, self.half_life)

    def with_running(self, running: Iterable[Job], now: float,
                     ledger: accounting.Ledger | None = None) -> dict[Key, tuple[float, float]]:
        """The book at ``now`` plus what running jobs have used so far (recomputed each round)."""
        self.decay_to(now)
        out = {k: list(v) for k, v in self.usage.items()}
        for j in running:
            if j.start_time is not None:
                self._add(key_of(j), job_rates(j, ledger), j.start_time, now, now, out)
        return {k: (v[0], v[1]) for k, v in out.items()}


# ---- priority --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Weights:
    slots: float = 1.0
    mem: float = 1.0


class _Node:
    __slots__ = ("conf", "slot_s", "mem_s", "kids")

    def __init__(self, conf: ShareNode) -> None:
        self.conf = conf
        self.slot_s = 0.0
        self.mem_s = 0.0
        self.kids: dict[str, _Node] = {}


class Fairshare:
    """One tree's priorities for a round: built from the usage and the pending keys once."""

    def __init__(self, tree: ShareNode, usage: Mapping[Key, tuple[float, float]], pending: Iterable[Key],
                 weights: Weights = Weights(), queue: str | None = None) -> None:
        self.root = _Node(tree)
        total = weights.slots + weights.mem
        self.w = (weights.slots / total, weights.mem / total) if total > 0 else (0.5, 0.5)
        for key, (slot_s, mem_s) in usage.items():
            if queue is None or key[3] == queue:
                self._walk(key, slot_s, mem_s)
        self.seen: set[Key] = set(pending)
        for key in self.seen:
            self._walk(key, 0.0, 0.0)
        self.cache: dict[Key, float] = {}

    def _walk(self, key: Key, slot_s: float, mem_s: float) -> None:
        node = self.root
        node.slot_s += slot_s
        node.mem_s += mem_s
        while node.conf.members:
            got = node.conf.child(_principal(key, node.conf.by))
            if got is None:
                return
            name, conf = got
            kid = node.kids.get(name)
            if kid is None:
                kid = node.kids[name] = _Node(conf)
            kid.slot_s += slot_s
            kid.mem_s += mem_s
            node = kid

    def _un(self, n: _Node) -> float:
        r = self.root
        return (self.w[0] * (n.slot_s / r.slot_s if r.slot_s else 0.0)
                + self.w[1] * (n.mem_s / r.mem_s if r.mem_s else 0.0))

    def priority(self, key: Key) -> float:
        got = self.cache.get(key)
        if got is None:
            if key not in self.seen:  # a principal new to the tree changes its siblings' sums
                self.seen.add(key)
                self._walk(key, 0.0, 0.0)
                self.cache.clear()
            got = self.cache[key] = self._priority(key)
        return got

    def leaf(self, key: Key) -> str | None:
        """The node whose priority a key's is, as its path ("alice", "phys", "phys/alice"); None
        where the key has no share in this tree (what the order's words name)."""
        self.priority(key)  # a principal new to the tree joins it
        node, path = self.root, []
        while node.conf.members:
            name = _principal(key, node.conf.by)
            node = node.kids.get(name)  # type: ignore[assignment]
            if node is None:
                return None
            path.append(name)
        return "/".join(path)

    def _priority(self, key: Key) -> float:
        node, s_norm, ue, top = self.root, 1.0, 0.0, True
        while node.conf.members:
            kid = node.kids.get(_principal(key, node.conf.by))
            if kid is None:
                return 0.0  # no share in this tree
            part, ue = self._step(node, kid, ue, top)
            s_norm *= part
            node, top = kid, False
        return _priority_of(s_norm, ue)

    def _step(self, parent: _Node, kid: _Node, ue: float, top: bool) -> tuple[float, float]:
        """A child's part of its parent's shares, s(n) / sum(s(sib(n))), and its UE (the docstring's)."""
        sib = sum(k.conf.shares for k in parent.kids.values())
        part = kid.conf.shares / sib if sib else 0.0
        un = self._un(kid)
        return part, (un if top else un + (ue - un) * part)

    def rows(self, tree: str = "") -> list[ShareRow]:
        """Every node the round knows (named, or a principal seen under ``default``), depth first,
        with the figures ``priority`` uses: what `xce fairshare` shows."""
        out: list[ShareRow] = []

        def walk(node: _Node, path: tuple[str, ...], s_p: float, ue_p: float, top: bool) -> None:
            for name in sorted(node.kids):
                kid = node.kids[name]
                part, ue = self._step(node, kid, ue_p, top)
                s = s_p * part
                out.append(ShareRow(tree=tree, path=[*path, name], by=node.conf.by, shares=kid.conf.shares,
                                    share=s, slot_seconds=kid.slot_s, mem_seconds=kid.mem_s, usage=ue,
                                    priority=_priority_of(s, ue), leaf=not kid.conf.members))
                walk(kid, (*path, name), s, ue, False)

        walk(self.root, (), 1.0, 0.0, True)
        return out


class ShareRow(msgspec.Struct, kw_only=True):
    """One node of a share tree as `xce fairshare` and /v1/fairshare show it."""

    tree: str              # "" the cluster-wide tree, else the queue whose own tree it is
    path: list[str]        # root -> this node, e.g. ["physics", "alice"]
    by: str                # what the names at this level are: user, group or project
    shares: int            # raw shares among its siblings
    share: float           # normalised: S(n)
    slot_seconds: float    # decayed usage under this node
    mem_seconds: float     # decayed byte-seconds, memory charged max(reserved, actual)
    usage: float           # effective usage UE(n)
    priority: float        # 2^-(UE / S)
    leaf: bool


def _priority_of(share: float, ue: float) -> float:
    return 2.0 ** (-ue / share) if share > 0.0 else 0.0


def _principal(key: Key, by: str) -> str:
    return key[BY.index(by)]


def fairshare_of(trees: Mapping[str | None, ShareNode], usage: Mapping[Key, tuple[float, float]],
                 pending: Iterable[Job], weights: Weights = Weights()) -> dict[str | None, Fairshare]:
    """A Fairshare per tree in force: ``None`` the cluster-wide one, else a queue's own."""
    pending = list(pending)
    out: dict[str | None, Fairshare] = {}
    for queue, tree in trees.items():
        keys = {key_of(j) for j in pending if queue is None or j.spec.queue == queue}
        out[queue] = Fairshare(tree, usage, keys, weights, queue)
    return out
