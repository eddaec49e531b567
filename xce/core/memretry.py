"""Retry with more memory: a job killed for its memory runs again with a larger reservation.

HTCondor's ``retry_request_memory``, per queue.  A job whose run ends EXIT for one of
MEM_KILLS goes back to PEND instead, when its queue allows another try
(``Queue.mem_retries`` above the job's ``mem_tries``), with every memory reservation of its
request (``rusage[mem=...]``, each method) and its ``-M`` limit multiplied by
``Queue.mem_retry_factor``, each capped at ``Queue.mem_retry_max`` (0: no cap).  A job with
nothing to grow (no memory reserved, no limit), or already at the cap, ends EXIT as before.
The state machine asks ``grown`` when a run ends (xce/core/state.py); the history keeps
each try's words (``detail``).  Pure: no I/O, no clock.
"""

from __future__ import annotations

import msgspec

from xce.core.model import Job, JobSpec, Queue
from xce.core.resreq import ResReq
from xce.core.units import fmt_bytes

MEM_KILLS = ("MEMLIMIT", "MEMPRESSURE", "RECLAIMED")


def mem_kill(reason: str) -> str | None:
    """The memory kill a job's end reason names ("RECLAIMED: host ..." names RECLAIMED), or None."""
    head = reason.split(":", 1)[0].strip()
    return head if head in MEM_KILLS else None


def grow(amount: int, queue: Queue) -> int:
    """One try's larger figure: ``amount`` x the factor, at most the queue's cap."""
    new = int(amount * queue.mem_retry_factor)
    return min(new, queue.mem_retry_max) if queue.mem_retry_max else new


def grown(job: Job, queue: Queue) -> tuple[ResReq, JobSpec, str] | None:
    """The request and spec of the job's next try, and the words for its history; None: no retry."""
    kill = mem_kill(job.reason)
    if kill is None or job.mem_tries >= queue.mem_retries:
        return None
    items = tuple(msgspec.structs.replace(i, amount=grow(i.amount, queue)) if i.name == "mem" else i
                  for i in job.req.rusage)
    limit = grow(job.spec.mem_limit, queue) if job.spec.mem_limit else None
    if items == job.req.rusage and limit == job.spec.mem_limit:
        return None  # nothing to grow, or already at the cap
    mems = [fmt_bytes(i.amount) for i in items if i.name == "mem"]
    words = [f"rusage mem {', '.join(mems)}"] if mems else []
    words += [f"-M {fmt_bytes(limit)}"] if limit else []
    detail = f"{kill}: try {job.mem_tries + 2} of {queue.mem_retries + 1} with {' and '.join(words)}"
    return (msgspec.structs.replace(job.req, rusage=items),
            msgspec.structs.replace(job.spec, mem_limit=limit), detail)
