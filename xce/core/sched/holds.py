"""Which stage holds a pending job: the room it waits for, or the order that puts another first.

Issue 16's rule, as Slurm's pending reasons ``Resources`` and ``Priority``: of the jobs that wait
for room (slots, memory, a reservation, a preemption), the first in the order is held by the
room, and each one behind it by the order: when room comes, the one ahead takes it.  So such a
job's reason leads with the stage that puts the nearest job ahead of it first::

    fairshare: alice's priority 0.12 is below bob's 0.71 (job 12 goes first); slots: needs 1; ...

A job ahead that waits on no room a job behind it could take (its own limit, no host it may
ever use) holds nobody, and a job held by its own limit keeps that reason.  Pure.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence

from xce.core.model import Job
from xce.core.sched.limits import HELD
from xce.core.sched.order import Ordering

# How the reasons of a wait on no shared room start: a limit of the job's own; no host its
# select[] matches; none of its queue's hosts; none that could ever run it (placement.py).
NOT_ROOM = (HELD, "select: no host matches", "queue ", "no host could ever run it")


def waits_for_room(reason: str) -> bool:
    """Whether a pending job's reason is a wait for room a job behind it would also take."""
    return bool(reason) and not reason.startswith(NOT_ROOM)


def stage_reasons(ordering: Ordering, ordered: Sequence[Job], reasons: Mapping[int, str],
                  want: Container[int]) -> dict[int, str]:
    """The reasons of the jobs of ``want`` that the order holds (see the docstring), walking
    ``ordered`` (the pending jobs in ``ordering``'s order) once."""
    out: dict[int, str] = {}
    first: Job | None = None  # the nearest job so far that waits for room
    for j in ordered:
        own = reasons.get(j.id, "")
        if not waits_for_room(own):
            continue
        if first is not None and j.id in want:
            out[j.id] = f"{ordering.explain(first, j)} (job {first.id} goes first); {own}"
        first = j
    return out
