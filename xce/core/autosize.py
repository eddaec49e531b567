"""Right-sizing at submit: ``rusage[mem=auto]``, or a queue's ``mem_default``, made a reservation.

The leader sizes a job as it admits it (xce/reactors/clients.py), from the finished jobs of the
same (user, job name or command, queue) that its hard state holds, through ``recommend`` (the
function and the key ``xce recommend`` reports with: no second copy of the rule).  The sized
request and the words saying why (``ResReq.mem_basis``) travel in the Submit command, so the
decision is replicated with the job and `xce jobs -l` shows it.

    auto, history     p95 of the runs' peaks x (1 + queue.mem_auto_margin), method /job,
                      once there are queue.mem_auto_min_runs runs (``enough_history``)
    auto, fewer runs  queue.mem_auto_fallback (the queue's, else the cluster's); 0: no reservation
    no mem named      queue.mem_default_auto: as auto; queue.mem_default > 0: that amount, /host
    mem named         as given (nothing to size)

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from xce.core.model import Queue
from xce.core.recommend import recommend
from xce.core.resreq import ResReq, RusageItem, rusage_amount
from xce.core.units import fmt_bytes
from xce.core.views import JobView


def wants_sizing(req: ResReq, queue: Queue) -> bool:
    """Whether the leader must size this request in ``queue`` (else it stands as parsed)."""
    if req.mem_auto:
        return True
    return rusage_amount(req, "mem") is None and (queue.mem_default_auto or queue.mem_default > 0)


def sized(req: ResReq, who: str, queue: Queue, history: Iterable[JobView]) -> ResReq:
    """``req`` with its memory reservation chosen and the basis stated; ``who`` is "user/job".

    ``history``: the finished jobs of the same (user, job, queue); only auto reads it.
    """
    if not req.mem_auto and not queue.mem_default_auto:
        return with_mem(req, queue.mem_default, "host", f"queue {queue.name}'s default {fmt_bytes(queue.mem_default)}")
    rows = recommend(history, queue.mem_auto_margin)
    runs = rows[0].runs if rows else 0
    if enough_history(runs, queue):
        r = rows[0]
        return with_mem(req, r.mem_recommended, "job",
                        f"auto: p95 of {r.runs} run{'s' * (r.runs != 1)} of {who} in {queue.name}, "
                        f"{fmt_bytes(r.mem_peak_p95)} + {queue.mem_auto_margin * 100:g} % = {fmt_bytes(r.mem_recommended)}")
    fallback = queue.mem_auto_fallback
    few = (f"only {runs} run{'s' * (runs != 1)} of {who} in {queue.name} (auto needs {queue.mem_auto_min_runs})"
           if runs else f"no history of {who} in {queue.name}")
    return with_mem(req, fallback, "job", f"auto: {few}, " +
                    (f"fallback {fmt_bytes(fallback)}" if fallback else "no reservation"))


def enough_history(runs: int, queue: Queue) -> bool:
    """Whether ``runs`` finished runs are enough for auto to size from (the queue's minimum)."""
    return runs >= max(1, queue.mem_auto_min_runs)


def with_mem(req: ResReq, amount: int, method: str, basis: str) -> ResReq:
    """The request reserving ``amount`` of mem (the auto placeholder's duration and decay kept);
    0 reserves none.  ``method`` applies where the request named no mem."""
    given = rusage_amount(req, "mem")
    others = tuple(i for i in req.rusage if i.name != "mem")
    item = (msgspec.structs.replace(given, amount=amount) if given is not None
            else RusageItem("mem", amount, method))  # type: ignore[arg-type]
    rusage = others + (item,) if amount > 0 else others
    return msgspec.structs.replace(req, rusage=rusage, mem_auto=False, mem_basis=basis)
