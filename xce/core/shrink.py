"""Shrinking a settled reservation, and growing it back: which account's reservation in force moves.

The one rule that the controller applies after a heartbeat (xce/reactors/shrink.py, which
commits each move as a ``state.Reserve``) and the simulator at its shrink moments and after a
usage report (xce/sim/engine.py).  The figures are accounting's (``shrink_settled``,
``shrunk``, ``restored``, docs/accounting.md "Shrinking a settled reservation"); this module
only says which accounts they apply to::

    shrink_to(account)   = shrunk(asked, peak)    if reported, not reclaiming, reserves something,
                                                  shrink-settled now, and that is below its reservation in force
    restore_to(account)  = restored(asked, actual, room)   if its reservation in force is below what it
                                                  asked and its actual passed it, and that is a large
                                                  rise above it (accounting.large_rise) or all it asked
    room(host)           = available_for_scheduling(host) + the reclaiming jobs' charges there (they go first)

``asked``: the reservation the job was placed with on that host (``Alloc.mem``); a reservation
in force never passes it, so the sum of the promises on a host never passes what placement
allowed.  The daemons shrink only RUN jobs that are not on their way out and have no
``duration=`` of their own (``shrinkable``: a decaying reservation already follows its own
schedule), and restore any active one.

``in_force`` is the reservation in force of a job's share as hard state says: the last
``Reserve`` committed for it, else the placement's (decayed, for ``duration=``).  Every ledger
(the leader's, the scheduler's, the console's) opens and moves its accounts with it.  Pure: no
clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from xce.core import accounting
from xce.core.accounting import Ledger, ReclaimRules
from xce.core.model import ACTIVE, Alloc, Job, JobState
from xce.core.resreq import rusage_amount
from xce.core.state import Reserve
from xce.core.units import fmt_bytes

SHRUNK, RESTORED = "shrunk", "restored"  # Reserve.event, and the history's "reservation shrunk" / "... restored"


def never(rules: ReclaimRules) -> bool:
    """A ``shrink_age`` of 1 or more shrinks nothing (accounting.shrink_moment): the daemons' default."""
    return rules.shrink_age >= 1.0


def in_force(job: Job, alloc: Alloc, now: float) -> int:
    """The reservation in force of ``job``'s share ``alloc`` at ``now``: a committed shrink or restore's,
    else the placement's as ``duration=``/``decay=`` make it (accounting.reserved_in_force)."""
    moved = job.mem_in_force.get(alloc.host)
    if moved is not None:
        return moved
    item = rusage_amount(job.req, "mem")
    if item is None:
        return alloc.mem
    return accounting.reserved_in_force(alloc.mem, item.duration_s, item.decay, job.start_time, now)


def shrinkable(job: Job) -> bool:
    """Whether the daemons may lower the job's reservation now: it runs, is not on its way out, and
    its reservation follows no ``duration=`` of its own."""
    if job.state != JobState.RUN or job.kill_requested:
        return False
    item = rusage_amount(job.req, "mem")
    return item is None or item.duration_s is None


def shrink_to(ledger: Ledger, job_id: int, host: str, asked: int, now: float, rules: ReclaimRules) -> int | None:
    """The lower reservation in force of the job's account on ``host``, if it is shrink-settled now; else None."""
    b = ledger.books.get(host)
    i = b.index.get(job_id) if b is not None else None
    if b is None or i is None or job_id in b.reclaiming or job_id in b.unreported or not b.reserved[i]:
        return None
    if not accounting.shrink_settled(b.since[i], b.peak_at[i], now, rules):
        return None
    new = accounting.shrunk(asked, b.peak[i], rules)
    return new if new < b.reserved[i] else None


def room(ledger: Ledger, host: str, os_available: int) -> int:
    """What a restore may take on ``host``: its memory available for scheduling, with the reclaiming
    jobs' charges, which go first (xce/core/reclaim.py sends them away once the room is below 0)."""
    lent = sum(c.charged for jid in ledger.reclaiming(host) if (c := ledger.accounts.get((jid, host))) is not None)
    return accounting.available_mem(os_available, ledger.host_totals(host)) + lent


def restore_to(ledger: Ledger, job_id: int, host: str, asked: int, os_available: int) -> int | None:
    """The higher reservation in force of a shrunk account whose use passed it; else None."""
    acc = ledger.accounts.get((job_id, host))
    if acc is None or acc.reserved >= asked or (acc.actual or 0) <= acc.reserved:
        return None
    new = accounting.restored(asked, acc.actual or 0, room(ledger, host, os_available))
    # Only a rise past a steady job's noise: on a full host a job creeping up would otherwise be
    # restored (a Raft commit, a history line) at every heartbeat, for a charge that does not
    # move (its charge is its actual either way).
    return new if accounting.large_rise(acc.reserved, new, asked) or new == asked > acc.reserved else None


def decide(ledger: Ledger, host: str, jobs: Sequence[Job], os_available: int, now: float,
           rules: ReclaimRules) -> list[Reserve]:
    """Every move of a reservation in force due on ``host`` now, as the commands that commit them:
    restores first (a grown job's promise comes before a lower one's), then shrinks."""
    if never(rules):
        return []
    out: list[Reserve] = []
    for job in jobs:
        a = next((a for a in job.allocs if a.host == host), None)
        if a is None or job.state not in ACTIVE or host in job.finished_hosts or job.kill_requested:
            continue
        new = restore_to(ledger, job.id, host, a.mem, os_available)
        if new is not None:
            acc = ledger.accounts[(job.id, host)]
            out.append(Reserve(time=now, job_id=job.id, attempt=job.attempt, host=host, mem=new, event=RESTORED,
                               detail=f"uses {fmt_bytes(acc.actual or 0)}, over its {fmt_bytes(acc.reserved)}; "
                                      f"raised towards the {fmt_bytes(a.mem)} asked as far as the host's room reaches"))
    for job in jobs:
        a = next((a for a in job.allocs if a.host == host), None)
        if a is None or not shrinkable(job) or host in job.finished_hosts:
            continue
        new = shrink_to(ledger, job.id, host, a.mem, now, rules)
        if new is not None:
            out.append(Reserve(time=now, job_id=job.id, attempt=job.attempt, host=host, mem=new, event=SHRUNK,
                               detail=shrink_detail(ledger, job.id, host, now, rules)))
    return out


def shrink_detail(ledger: Ledger, job_id: int, host: str, now: float, rules: ReclaimRules) -> str:
    """Why: its peak, and how long it has held still of how long the job has run."""
    b = ledger.books[host]
    i = b.index[job_id]
    return (f"peak {fmt_bytes(b.peak[i])} held still {now - b.peak_at[i]:.0f} s of a {now - b.since[i]:.0f} s run "
            f"(shrink_age {rules.shrink_age:g}): in force its peak + {rules.margin:.0%}")

