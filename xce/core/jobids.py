"""Job ids of array elements, and bjobs' state filters: stdlib only.

Element ``A[INDEX]`` of array A has the int job id ``A << 32 | INDEX`` (xce/core/arrays.py
says why).  These few rules live here, apart from the state machine's arrays, because the
front-ends' listings (bjobs, squeue) apply them to 10,000 rows and must start without loading
the model or msgspec; xce/core/arrays.py and xce/core/views.py re-export them.
"""

from __future__ import annotations

SHIFT = 32
MASK = (1 << SHIFT) - 1

# bjobs' state filters, for `xce jobs` and the bjobs front-end alike: -p pending (held too),
# -r running, -s suspended (held too, as LSF lists PSUSP under both), -d done (DONE and EXIT).
STATE_FILTERS: dict[str, frozenset[str]] = {
    "p": frozenset({"PEND", "PSUSP"}), "r": frozenset({"RUN"}),
    "s": frozenset({"USUSP", "SSUSP", "PSUSP"}), "d": frozenset({"DONE", "EXIT"})}


def element_id(array_id: int, index: int) -> int:
    return array_id << SHIFT | index


def split_id(job_id: int) -> tuple[int, int | None]:
    """(array id, index) of an element; (job id, None) of anything else."""
    return (job_id >> SHIFT, job_id & MASK) if job_id >> SHIFT else (job_id, None)


def element_text(job_id: int) -> str:
    array_id, index = split_id(job_id)
    return str(job_id) if index is None else f"{array_id}[{index}]"
