"""Dependencies in the state machine: the reverse index, and what a reference counts now.

The parsed ``-w`` expression lives in ``JobSpec.depend`` (hard state); evaluation is
``xce.core.jobspec.depeval.evaluate``.  This module owns the rest:

- ``DepIndex``: referenced job id -> the pending jobs whose expression names it, and
  (user, name pattern) -> dependents.  Derived from hard state (the pending jobs' specs),
  so a restored or newly elected controller rebuilds it (``DepIndex.build``).  A state
  change of job J re-evaluates only ``dependents(J)``: the jobs naming J's id and those
  whose name patterns match J's name.
- ``Facts``: a finished job's ``Counts`` kept after cleanup forgets the job, while some
  dependent still names it (otherwise a later evaluation would see "not found": NEVER).

A dependent leaves the index when it leaves the pending states (placed, killed): LSF
decides a dependency once, at dispatch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from xce.core.jobspec.depend import JobRef, NameRef, Ref, refs
from xce.core.jobspec.depeval import Counts
from xce.core.model import Job, JobState


def name_matches(pattern: str, name: str) -> bool:
    """LSF's job-name wildcard: a trailing ``*`` matches any tail; otherwise the exact name."""
    return name.startswith(pattern[:-1]) if pattern.endswith("*") else name == pattern


class DepIndex:
    def __init__(self) -> None:
        self.by_id: dict[int, set[int]] = {}
        self.by_name: dict[str, dict[str, set[int]]] = {}  # user -> pattern -> dependents

    @classmethod
    def build(cls, jobs: Iterable[Job]) -> DepIndex:
        index = cls()
        for job in jobs:
            if job.spec.depend is not None and job.state in (JobState.PEND, JobState.PSUSP):
                index.add(job)
        return index

    def add(self, job: Job) -> None:
        assert job.spec.depend is not None
        for ref in refs(job.spec.depend):
            if isinstance(ref, JobRef):
                self.by_id.setdefault(ref.id, set()).add(job.id)
            else:
                self.by_name.setdefault(job.spec.user, {}).setdefault(ref.pattern, set()).add(job.id)

    def remove(self, job: Job) -> list[int]:
        """Drop ``job`` as a dependent; returns the ids nobody depends on any more."""
        freed = []
        for ref in refs(job.spec.depend) if job.spec.depend is not None else ():
            if isinstance(ref, JobRef):
                deps = self.by_id.get(ref.id)
                if deps is not None:
                    deps.discard(job.id)
                    if not deps:
                        del self.by_id[ref.id]
                        freed.append(ref.id)
            else:
                patterns = self.by_name.get(job.spec.user, {})
                patterns.get(ref.pattern, set()).discard(job.id)
                if not patterns.get(ref.pattern, True):
                    del patterns[ref.pattern]
        return freed

    def empty(self) -> bool:
        """No job waits on anything: no change can re-evaluate a dependent (the common case)."""
        return not self.by_id and not self.by_name

    def dependents(self, job: Job) -> set[int]:
        """The jobs whose verdict may change when ``job`` changes."""
        out = set(self.by_id.get(job.id, ()))
        for pattern, deps in self.by_name.get(job.spec.user, {}).items():
            if name_matches(pattern, job.spec.name):
                out |= deps
        return out

    def named(self, job_id: int) -> bool:
        return job_id in self.by_id


_ONE: dict[tuple[str, int | None], Counts] = {}  # Counts are frozen: one per (state, exit code)


def job_counts(job: Job) -> Counts:
    key = (job.state.value, job.exit_code if job.state == JobState.EXIT else None)
    counts = _ONE.get(key)
    if counts is None:
        counts = _ONE[key] = Counts.of(*key)
    return counts


def lookup_for(jobs: dict[int, Job], facts: dict[int, Counts], names: Callable[[str, str], Iterable[Job]],
               array_counts: Callable[[int, object], Counts | None], user: str) -> Callable[[Ref], Counts | None]:
    """The ``lookup`` that ``evaluate`` calls, for a dependent submitted by ``user``."""

    def lookup(ref: Ref) -> Counts | None:
        if isinstance(ref, NameRef):
            total = None
            for job in names(user, ref.pattern):
                total = job_counts(job) if total is None else total + job_counts(job)
            return total
        counted = array_counts(ref.id, ref.indices)
        if counted is not None:
            return counted
        job = jobs.get(ref.id)
        if job is not None:
            return job_counts(job)
        return facts.get(ref.id)

    return lookup
