"""The order of pending work: a pipeline of named stages, each giving a figure.

    queue priority  (higher first)       the queue's ``priority``
      -> fairshare  (higher first)       xce/core/sched/fairshare.py: the job's user/group/project
      -> job        (higher first)       the job's own ``priority`` (-sp; btop/bbot move it)
      -> submit     (earlier first)      submit time, then job id

A job's sort key is its stages' figures in that order; ``explain`` names the first stage
that tells two jobs apart, in words an operator reads ("fairshare: alice's priority 0.12 is
below bob's 0.71").  Pure: no I/O, no clock.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

import msgspec

from xce.core.model import Job, JobState
from xce.core.sched.fairshare import SPEC_KEY, Fairshare, Key


@dataclass(frozen=True, slots=True)
class Stage:
    name: str
    higher_first: bool
    says: Callable[[Job, float, Job, float], str]  # why the first job goes before the second


STAGES = (
    Stage("queue", True, lambda a, x, b, y: f"queue: {a.spec.queue or '-'} has priority {x:g}, "
                                            f"{b.spec.queue or '-'} {y:g}"),
    Stage("fairshare", True, lambda a, x, b, y: _says_fairshare(_who(a), x, _who(b), y)),
    Stage("job", True, lambda a, x, b, y: f"job priority: job {a.id} has {x:g}, job {b.id} {y:g}"),
    Stage("submit", False, lambda a, x, b, y: f"submit: job {a.id} was submitted before job {b.id}"),
)


class _Shares(dict[Key, float]):
    """Each fairshare key's priority, asked once a round: its queue's own tree, else the cluster's."""

    __slots__ = ("trees", "cluster")

    def __init__(self, trees: Mapping[str | None, Fairshare]) -> None:
        super().__init__()
        self.trees = trees
        self.cluster = trees.get(None)

    def __missing__(self, k: Key) -> float:
        fs = self.trees.get(k[3]) or self.cluster
        got = self[k] = fs.priority(k) if fs is not None else 1.0
        return got


class Ordering:
    """The stages in force for one round: queue priorities and the fairshare trees.

    ``key`` is the one definition of every stage's figure (negated where higher goes
    first, so one ascending sort orders by all of them); ``figures`` and ``explain`` read it.
    """

    def __init__(self, queue_priority: Mapping[str, int],
                 fairshare: Mapping[str | None, Fairshare] | None = None) -> None:
        self.queue_priority = queue_priority
        self.fairshare = fairshare or {}
        self.key, self.group_key = self._key_functions()

    def _key_functions(self) -> tuple[Callable[[Job], tuple], Callable[[Key], tuple[int, float]]]:
        """``key``, and ``group_key``: its first two figures (queue, fairshare) for a job of
        fairshare key ``k``, what a ``PendingIndex`` group shares.  ``key`` spells the stages
        out inline because the simulator sorts by it every round (a call per job for the group
        part costs it seconds); tests/test_sched_round.py holds the two to one another."""
        qp = self.queue_priority
        trees = self.fairshare
        if not trees:
            return (lambda j: (-qp.get(j.spec.queue, 0), -1.0, -j.spec.priority, j.submit_time, j.id),
                    lambda k: (-qp.get(k[3], 0), -1.0))
        share = _Shares(trees)
        return (lambda j: (-qp.get(j.spec.queue, 0), -share[SPEC_KEY(j.spec)], -j.spec.priority, j.submit_time, j.id),
                lambda k: (-qp.get(k[3], 0), -share[k]))

    def figures(self, j: Job) -> dict[str, float]:
        """Each stage's figure for one job (what `xce jobs -l` shows)."""
        k = self.key(j)
        return {s.name: (-k[i] if s.higher_first else k[i]) for i, s in enumerate(STAGES)}

    def order(self, jobs: Iterable[Job]) -> list[Job]:
        pend = [j for j in jobs if j.state == JobState.PEND]
        pend.sort(key=self.key)
        return pend

    def explain(self, a: Job, b: Job) -> str:
        """Why ``a`` goes before ``b`` (or after): the first stage whose figures differ."""
        if self.key(b) < self.key(a):
            a, b = b, a
        fa, fb = self.figures(a), self.figures(b)
        for s in STAGES:
            if fa[s.name] != fb[s.name]:
                if s.name == "fairshare":  # named by the share tree's node, not the user
                    return _says_fairshare(self.share_name(a), fa[s.name], self.share_name(b), fb[s.name])
                return s.says(a, fa[s.name], b, fb[s.name])
        return f"submit: job {a.id} has the lower id"


    def share_name(self, j: Job) -> str:
        """The share tree node whose priority the job's fairshare figure is ("phys/alice"), else its user."""
        k = SPEC_KEY(j.spec)
        fs = self.fairshare.get(k[3]) or self.fairshare.get(None)
        return (fs.leaf(k) if fs is not None else None) or _who(j)

    def places(self, jobs: Iterable[Job]) -> dict[int, OrderView]:
        """Each pending job's place in the order: its stages' figures, and what puts the job
        just ahead of it first (``xce jobs -l``)."""
        ordered = self.order(jobs)
        out: dict[int, OrderView] = {}
        for i, j in enumerate(ordered):
            ahead = ordered[i - 1] if i else None
            out[j.id] = OrderView(figures=self.figures(j), position=i + 1, pending=len(ordered),
                                  ahead=ahead.id if ahead else None, why=self.explain(ahead, j) if ahead else "")
        return out


def within_group(j: Job) -> tuple[int, float, int]:
    """A job's figures after its group's (``Ordering.key`` past ``group_key``): job priority, submit, id."""
    return (-j.spec.priority, j.submit_time, j.id)


class PendingIndex:
    """The placeable pending jobs by fairshare key (user, group, project, queue), each group
    kept sorted by ``within_group`` as jobs come and go.

    Within a group the order never changes from round to round; only the groups' own figures
    (queue priority, fairshare) move.  So a round sorts the groups, not the jobs, and merges
    them lazily (``ids``): it pays for the jobs it reads, not for the whole queue.
    """

    def __init__(self) -> None:
        self.groups: dict[Key, list[tuple[int, float, int]]] = {}
        self.at: dict[int, tuple[Key, tuple[int, float, int]]] = {}

    def __len__(self) -> int:
        return len(self.at)

    def put(self, job: Job) -> None:
        """Add a pending job, or move one whose figures changed."""
        k, e = SPEC_KEY(job.spec), within_group(job)
        old = self.at.get(job.id)
        if old is not None:
            if old == (k, e):
                return
            self.drop(job.id)
        g = self.groups.get(k)
        if g is None:
            g = self.groups[k] = []
        if not g or g[-1] < e:
            g.append(e)  # the usual case: submitted after everything of its group
        else:
            insort(g, e)
        self.at[job.id] = (k, e)

    def drop(self, job_id: int) -> None:
        old = self.at.pop(job_id, None)
        if old is None:
            return
        k, e = old
        g = self.groups[k]
        del g[bisect_left(g, e)]
        if not g:
            del self.groups[k]

    def counts(self) -> dict[Key, int]:
        """How many pending jobs each fairshare key has."""
        return {k: len(g) for k, g in self.groups.items()}

    def ids(self, ordering: Ordering) -> Iterator[int]:
        """The pending jobs' ids in ``ordering``'s order, read lazily (do not change the index meanwhile)."""
        if len(self.groups) == 1:
            return (e[2] for g in self.groups.values() for e in g)
        streams = [_stream(ordering.group_key(k), g) for k, g in self.groups.items()]
        return (t[-1] for t in heapq.merge(*streams))


def _stream(head: tuple, g: list[tuple[int, float, int]]) -> Iterator[tuple]:
    for e in g:
        yield head + e


class OrderView(msgspec.Struct, kw_only=True):
    """A pending job's place in the order of pending work (JobView.order)."""

    figures: dict[str, float]  # stage name -> its figure (queue, fairshare, job, submit)
    position: int              # 1: the first job a round considers
    pending: int               # of this many placeable pending jobs
    ahead: int | None = None   # the job just ahead of it
    why: str = ""              # the stage that puts ``ahead`` first, in words


def _says_fairshare(a: str, x: float, b: str, y: float) -> str:
    return f"fairshare: {b}'s priority {y:.2f} is below {a}'s {x:.2f}"


def _who(j: Job) -> str:
    return j.spec.user or f"job {j.id}"


def pending_order(jobs: Iterable[Job], queue_priority: Mapping[str, int],
                  fairshare: Mapping[str | None, Fairshare] | None = None) -> list[Job]:
    """Pending jobs in the order a round considers them."""
    return Ordering(queue_priority, fairshare).order(jobs)
