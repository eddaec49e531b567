"""Reclaim: when a host's owners want their memory back, which reclaiming job goes, and how.

The one rule that the controller applies after a heartbeat (xce/reactors/reclaim.py) and the
simulator after a usage report (xce/sim/engine.py).  A host that runs reclaiming jobs is
*short* when its reclaim room (accounting.reclaim_room: available for scheduling plus
reclaimable) is below 0 -- an owner's peak rose, so it lends less by the rise (or nothing,
after a large rise: accounting.large_rise), or a reclaiming job outgrew its reservation -- or when its OS-available memory is
under the floor.  Then one reclaiming job goes, the one ``accounting.pressure_victim`` picks
among the running reclaiming jobs, as its queue's ``reclaim_policy`` says:

    requeue -> Requeue (killed, then PEND; its memory comes back)    reason RECLAIMED
    suspend -> SysSuspend (SSUSP; a stopped process keeps its pages)
    kill    -> Kill (EXIT)

A reclaiming job that has outgrown its own reservation is killed whatever its queue's
policy (and so retried larger where its queue allows: xce/core/memretry.py): requeued at
the size it had, it would be placed, grow and be sent away again, for ever.  One that
reserves no memory (none in force) has outgrown it as soon as it uses any: placement lets it
onto any host (it needs no room), so requeued it would come straight back.  One that holds
no memory at all is never sent away: it would give nothing back.  (The leader refuses a
reclaiming job that reserves no memory at submit, bmod and bswitch: ``unreserved``; these
are the ones whose reservation decayed to 0, or whose queue the site's configuration made
reclaimable after they were submitted.)

Jobs already on their way out (``kill_requested``) count as gone (their charge is added back
to the room), so one owner's growth does not send more reclaiming jobs away than it needs.
A job within its reservation is never a candidate: only reclaiming jobs are.  A job suspended
for reclaim resumes (SysResume) once the host is no longer short.  Pure: the caller gives
the OS figure, the reclaimable memory, the floor and the time.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Sequence

from xce.core import accounting
from xce.core.accounting import Ledger
from xce.core.model import RECLAIMED, Job, JobSpec, JobState, reclaim_suspended, reclaiming
from xce.core.resreq import ResReq, rusage_amount
from xce.core.state import Cmd, Kill, Requeue, SysResume, SysSuspend
from xce.core.units import fmt_bytes


def unreserved(spec: JobSpec, req: ResReq, reclaimable_queues: Container[str]) -> str | None:
    """Why the leader refuses this job at submit, or None: it would run on reclaimable memory
    (``model.reclaiming``) but reserves none once sized.  Such a job fits any host, whatever its
    room, and sending it away gives nothing back."""
    if not reclaiming(spec, reclaimable_queues):
        return None
    item = rusage_amount(req, "mem")
    if item is not None and item.amount > 0:
        return None
    how = f"queue {spec.queue}" if spec.queue in reclaimable_queues else "--reclaim"
    basis = f" ({req.mem_basis})" if req.mem_basis else ""
    return (f"reclaim: a job that runs on reclaimable memory ({how}) must reserve memory, and this one "
            f"reserves none{basis}: give it -R 'rusage[mem=SIZE]'")


def shortage(ledger: Ledger, host: str, os_available: int, reclaimable: int, going: Iterable[int],
             floor: int) -> tuple[int, bool]:
    """(the host's reclaim room with the ``going`` jobs' charge given back, whether OS-available is under ``floor``)."""
    room = accounting.reclaim_room(accounting.available_mem(os_available, ledger.host_totals(host)), reclaimable)
    back = sum(acc.charged for jid in going if (acc := ledger.accounts.get((jid, host))) is not None)
    return room + back, floor > 0 and os_available < floor


def pick(ledger: Ledger, host: str, candidates: Iterable[int]) -> int | None:
    """The reclaiming job to go first among ``candidates`` (accounting.pressure_victim, on actual
    less reservation, as the worker does), or None.  A job that holds no memory (reserves none
    and uses none) is never one: sent away, it would give nothing back."""
    overs = [(jid, (acc.actual or 0) - acc.reserved) for jid in candidates
             if (acc := ledger.accounts.get((jid, host))) is not None and (acc.reserved or acc.actual)]
    return accounting.pressure_victim(overs, {jid for jid, _ in overs})


def outgrown(reserved: int, actual: int | None) -> bool:
    """A reclaiming job over its own reservation: one that reserves nothing is, as soon as it uses anything."""
    return (actual or 0) > reserved


def reason(host: str, room: int, under_floor: bool) -> str:
    return (f"{RECLAIMED}: host {host}'s owners want their memory back "
            f"(reclaim room {fmt_bytes(room)}{', OS-available under the floor' if under_floor else ''})")


def send_away(policy: str, job_id: int, why: str, now: float) -> Cmd:
    """The command a queue's ``reclaim_policy`` gives a reclaiming job that must go."""
    if policy == "suspend":
        return SysSuspend(time=now, job_ids=[job_id], reason=why)
    if policy == "kill":
        return Kill(time=now, job_ids=[job_id], reason=why, by="controller", evict=True)
    return Requeue(time=now, job_ids=[job_id], reason=why, by="controller", evict=True)


def decision_key(job: Job, resume: bool) -> tuple[int, int]:
    """What a caller's resend timer is keyed by: a send-away per run, a resume per job."""
    return (job.id, -1) if resume else (job.id, job.attempt)


def decide(ledger: Ledger, host: str, jobs: Sequence[Job], os_available: int, reclaimable: int, floor: int,
           now: float, policy_of: Callable[[Job], str],
           held_back: Container[tuple[int, int]] = frozenset()) -> tuple[Cmd, Job] | None:
    """The one reclaim decision for ``host`` now, given its reclaiming ``jobs``: a send-away, a
    resume, or None.  ``held_back``: decision_keys decided too recently to decide again."""
    going = [j.id for j in jobs if j.kill_requested]
    room, under = shortage(ledger, host, os_available, reclaimable, going, floor)
    if room >= 0 and not under:
        job = next((j for j in jobs if reclaim_suspended(j)), None)
        if job is None or decision_key(job, True) in held_back:
            return None
        return SysResume(time=now, job_ids=[job.id]), job
    cands = {j.id: j for j in jobs if j.state == JobState.RUN and not j.kill_requested
             and decision_key(j, False) not in held_back}
    victim = pick(ledger, host, cands)
    if victim is None:
        return None
    job = cands[victim]
    policy = policy_of(job)
    acc = ledger.accounts[(victim, host)]
    grew = outgrown(acc.reserved, acc.actual)
    why = reason(host, room, under) + (f", the job is over its own reservation (uses {fmt_bytes(acc.actual or 0)} "
                                       f"of {fmt_bytes(acc.reserved)})" if grew else "")
    return send_away("kill" if grew and policy == "requeue" else policy, victim, why, now), job
