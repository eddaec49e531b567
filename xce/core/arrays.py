"""Job arrays in the state machine: one entity, elements materialised lazily.

Ids.  The array has an ordinary job id A.  Element ``A[INDEX]`` has the int job id
``A << 32 | INDEX`` (``element_id``): an int, so every part that carries job ids (allocations,
dispatch's (job, attempt), usage reports, records) carries elements unchanged, and
``split_id`` gives (A, INDEX) back.  Plain job ids stay below 2**32, so the two never meet.
``xce jobs`` shows an element as ``A[INDEX]`` (``element_text``).

Materialising.  A pending element costs nothing until it is needed: the array holds a
cursor, and the state machine keeps at most ``window`` elements pending as Jobs (the
running limit ``%N`` lowers it to N less the active ones), topping up as elements leave
PEND.  So the scheduler sees elements as ordinary pending jobs, never more than it may
run under the limit, and a 1,000,000-element array costs its entity plus ``WINDOW`` Jobs
while it waits.  Pure: no I/O, deterministic, as xce/core/state.py requires.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from xce.core.errors import InvalidRequest
from xce.core.jobspec.arrays import ArraySpec, JobTarget
from xce.core.jobspec.depeval import Counts
from xce.core.jobids import SHIFT, element_id, element_text, split_id  # re-exported: the rules are there
from xce.core.model import ACTIVE, ArrayJob, Job, JobState

WINDOW = 1000  # pending elements kept as Jobs per array: a scheduling round's worth
TARGET_MAX = 100_000  # element ids one ID[RANGE] may expand to on the wire
LISTED_MAX = 10_000  # unmaterialised elements JOBS lists per array (each a view built by the leader)


def target_ids(target: JobTarget) -> list[int]:
    """The job ids a control command sends for ``12``, ``12[3]`` or ``12[1-5,7]`` (parse_job_target)."""
    if target.indices is None:
        return [target.job_id]
    if target.indices.count > TARGET_MAX:
        raise InvalidRequest(f"job {target.text()}: {target.indices.count:,} elements is more than {TARGET_MAX:,} "
                             f"at once; name the whole array ({target.job_id}) instead")
    return [element_id(target.job_id, i) for i in target.indices]


def indices(arr: ArrayJob) -> ArraySpec:
    assert arr.spec.array is not None
    return arr.spec.array


def unmaterialised(arr: ArrayJob) -> int:
    """Pending elements that have no Job."""
    return indices(arr).count - arr.cursor - len(arr.ahead)


def unstarted(arr: ArrayJob) -> ArraySpec:
    """The indices of the pending elements that have no Job: from the cursor on, but those ahead."""
    return indices(arr).tail(arr.cursor, arr.ahead)


def active(arr: ArrayJob) -> int:
    return sum(arr.counts.get(s.value, 0) for s in ACTIVE)


def ended(arr: ArrayJob) -> bool:
    """Whether every element is DONE or EXIT."""
    return arr.counts.get(JobState.DONE.value, 0) + arr.counts.get(JobState.EXIT.value, 0) == indices(arr).count


def followed(arrays: dict[int, ArrayJob], jobs: dict[int, Job]) -> list[ArrayJob]:
    """The arrays a snapshot describes: those not ended, and those some kept element belongs to
    (an ended array whose elements are all forgotten shows nowhere; array entities are never dropped)."""
    if not arrays:
        return []
    kept = {jid >> SHIFT for jid in jobs if jid >> SHIFT}
    return [a for a in arrays.values() if a.id in kept or not ended(a)]


def room(arr: ArrayJob, window: int = WINDOW) -> int:
    """How many more elements to materialise now (pending Jobs up to the window and the %limit)."""
    if arr.held:
        return 0
    pend = arr.counts.get(JobState.PEND.value, 0)
    want = window - pend
    limit = indices(arr).limit
    if limit is not None:
        want = min(want, limit - active(arr) - pend)
    return max(0, min(want, unmaterialised(arr)))


def next_indices(arr: ArrayJob, n: int) -> Iterator[int]:
    """Advance the cursor over the next ``n`` unmaterialised indices, yielding each."""
    spec, ahead = indices(arr), set(arr.ahead)
    while n > 0 and arr.cursor < spec.count:
        index = spec.index_at(arr.cursor)
        arr.cursor += 1
        if index in ahead:
            arr.ahead.remove(index)
            continue
        n -= 1
        yield index


def is_unmaterialised(arr: ArrayJob, index: int) -> bool:
    """Whether element ``index`` is pending without a Job (past the cursor, not ahead)."""
    spec = indices(arr)
    return index in spec and spec.position(index) >= arr.cursor and index not in arr.ahead


def pending_tail(arr: ArrayJob, limit: int = LISTED_MAX) -> Iterator[Job]:
    """Up to ``limit`` of the elements that are pending without a Job, as the PEND Jobs they will
    be (bjobs ID lists them); nothing is materialised."""
    spec, ahead = indices(arr), set(arr.ahead)
    for pos in range(arr.cursor, min(spec.count, arr.cursor + limit + len(ahead))):
        index = spec.index_at(pos)
        if index not in ahead:
            yield element(arr, index)


def element(arr: ArrayJob, index: int) -> Job:
    spec = msgspec.structs.replace(arr.spec, index=index)
    return Job(id=element_id(arr.id, index), spec=spec, req=arr.req, submit_time=arr.submit_time)


def counted(arr: ArrayJob, old: JobState | None, new: JobState) -> None:
    """An element moved from ``old`` (None: just materialised) to ``new``."""
    if old is not None:
        arr.counts[old.value] -= 1
    arr.counts[new.value] = arr.counts.get(new.value, 0) + 1


def counts(arr: ArrayJob, jobs: dict[int, Job], selected: ArraySpec | None = None) -> Counts:
    """The array's (or the ``selected`` elements') Counts, as dependencies read them."""
    if selected is None:
        fields = {s.lower(): n for s, n in arr.counts.items() if n}
        fields["pend"] = fields.get("pend", 0) + unmaterialised(arr)
        return Counts(**fields)
    total = Counts()
    pend = 0
    for index in selected:
        if index not in indices(arr):
            continue
        job = jobs.get(element_id(arr.id, index))
        if job is not None:
            total = total + Counts.of(job.state.value, job.exit_code)
        elif indices(arr).position(index) >= arr.cursor:
            pend += 1
        # else: materialised once and forgotten by cleanup; its state is in arr.counts only
    return total + Counts(pend=pend) if pend else total
