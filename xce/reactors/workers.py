"""Reactors of the daemon door: the scheduler's placements, workers' registrations, heartbeats and ends.

Who may send these (a daemon key, the scheduler's for PLACE) is checked before they run
(xce/reactors/access.py).
"""

from __future__ import annotations

from xce.core.errors import InvalidRequest
from xce.core.limits import HOST_NAME, check_text
from xce.core.model import ACTIVE, TERMINAL, Host, JobState, reclaiming
from xce.core.placement import (build_allocs, check_placement, cluster_free, cluster_short, demand_of, host_caps,
                                job_hosts, queue_host_sets)
from xce.core.resources import WIRE_NAMES
from xce.core.result import Err, Result
from xce.core.sched.limits import LimitBook
from xce.core.sched.preempt import credit_suspended
from xce.core.state import Finish, Kill, Place, RegisterHost, Requeue, SysResume, SysSuspend
from xce.proto import schema as S
from xce.reactors.clients import replier
from xce.reactors import reclaim, shrink
from xce.reactors.context import Context
from xce.reactors.orders import dispatch, end_share, orders, tell_reservation
from xce.reactors.outbox import Outbox, Request
from xce.reactors.signals import converge
from xce.replica.live import host_mem

# The usage column that carries `mem`: named through the one wire-name table.
MEM_WIRE = next(w for w, r in WIRE_NAMES.items() if r == "mem")
assert MEM_WIRE in S.UsageColumns.__struct_fields__, "UsageColumns lacks the worker's mem column"
STALE_PLACEMENT = "job is no longer pending at that attempt"


def _checked(ctx: Context, body: S.PlaceRequest, now: float, rejected: dict[int, str]) -> list[Place]:
    """The placements that still fit the leader's own Ledger and the site's limits, checked
    with the scheduler's rules (placement.check_placement, cluster_short, LimitBook.check)."""
    st = ctx.state
    caps = host_caps(st.hosts.values(), ctx.live.ledger, ctx.live.os_available, reclaim=(now, ctx.live.rules),
                     jobs=st.jobs)
    if ctx.site.preemption.on:  # a preempted (SSUSP) job's slots are free, as the round sees them
        credit_suspended(caps, st.jobs.values())
    cfree = cluster_free(st.jobs.values(), ctx.cluster_totals) if ctx.cluster_totals else {}
    limits = ctx.site.limits
    book = LimitBook.build(limits, (j for j in st.jobs.values() if j.state in ACTIVE), (), ctx.live.ledger) \
        if limits else None  # the round's book, from the leader's own jobs and ledger
    sets = queue_host_sets(st.queues.values())
    cmds: list[Place] = []
    for p in body.placements:
        job = st.jobs.get(p.job_id)
        if job is None or job.state != JobState.PEND or job.attempt != p.attempt:
            rejected[p.job_id] = STALE_PLACEMENT
            continue
        d = demand_of(job.spec.slots, job.req, ctx.cluster_totals, reclaiming(job.spec, ctx.live.reclaim_queues),
                      job.spec.exclusive, job_hosts(job, sets), job.spec.cpus_per_task)
        why = check_placement(d, p.allocs, caps) or (cluster_short(d, cfree) if d.cluster else None)
        if why is not None:
            rejected[p.job_id] = why
            continue
        # Built from the job's own request, never taken as sent (they are equal once checked).
        allocs = build_allocs(d, [(a.host, a.slots) for a in p.allocs])
        over = book.check(job, allocs) if book is not None else None
        if over is not None:
            rejected[p.job_id] = over
            continue
        if book is not None:
            book.charge(job, allocs)
        for a in allocs:
            caps[a.host].charge(a.slots, a.mem, a.virtual.items(), d.exclusive)
        for name, n in d.cluster:
            cfree[name] -= n
        cmds.append(Place(time=now, job_id=p.job_id, attempt=p.attempt, allocs=allocs))
    return cmds


def _preempt(ctx: Context, body: S.PlaceRequest, now: float, out: Outbox) -> None:
    """The scheduler's preemption orders, carried out by the job-control commands: SSUSP
    (SysSuspend; the processes get SIGSTOP as the state wants, reactors/signals.py), requeue or
    kill; its resumes (SysResume; SIGCONT likewise).  An
    order for a job no longer in that state at that attempt is stale, and dropped."""
    st = ctx.state
    for p in body.preempt:
        job, by = st.jobs.get(p.job_id), st.jobs.get(p.for_job)
        if job is None or job.state != JobState.RUN or job.attempt != p.attempt or job.kill_requested:
            continue
        why = f"preempted by job {p.for_job} of queue {by.spec.queue if by else '?'}"
        if p.action == "suspend":
            out.commit(SysSuspend(time=now, job_ids=[job.id], reason=why))  # SIGSTOP: reactors/signals.py
        elif p.action == "requeue":
            out.commit(Requeue(time=now, job_ids=[job.id], reason=why, by="scheduler", evict=True))
        elif p.action == "kill":
            out.commit(Kill(time=now, job_ids=[job.id], reason=why, by="scheduler", evict=True))
    back = [j for j in body.resume if (job := st.jobs.get(j)) is not None and job.state == JobState.SSUSP]
    if back:
        out.commit(SysResume(time=now, job_ids=back))  # SIGCONT: reactors/signals.py


def on_place(ctx: Context, req: Request, body: S.PlaceRequest, out: Outbox) -> None:
    rejected: dict[int, str] = {}
    _preempt(ctx, body, req.now, out)
    cmds = _checked(ctx, body, req.now, rejected)
    reasons = ctx.live.reasons
    ctx.stream.news["reasons"].update({j: r for j, r in body.reasons.items() if reasons.get(j) != r})
    reasons.update(body.reasons)
    ctx.last_round_ms = body.round_ms
    if not cmds:
        out.reply(req, S.PlaceReply(accepted=[], rejected=rejected))
        return
    accepted: list[int] = []
    last = cmds[-1]
    for cmd in cmds:
        def placed(result: Result, out: Outbox, cmd: Place = cmd) -> None:
            if isinstance(result, Err):
                rejected[cmd.job_id] = result.error.message
            else:
                accepted.append(cmd.job_id)
            if cmd is last:  # one batch: the last command's answer comes last
                out.reply(req, S.PlaceReply(accepted=accepted, rejected=rejected))
        out.commit(cmd, placed)


def on_register(ctx: Context, req: Request, body: S.RegisterRequest, out: Outbox) -> None:
    why = check_text(HOST_NAME, body.host)
    if why is not None:
        raise InvalidRequest(why)
    now, book, live = req.now, ctx.book, ctx.live
    book.workers[body.host] = req.peer
    live.os_available[body.host] = body.os_available
    live.last_seen[body.host] = now
    book.wave = now
    book.lost_sent.discard(body.host)
    book.undecided.discard(body.host)  # RegisterHost brings its UNKWN jobs back
    host = Host(name=body.host, slots_total=body.slots, mem_total=body.mem_total, ncpus=body.ncpus,
                registered_time=now, version=body.version,
                attrs={**body.attrs, "measure": body.measure}, virtual=body.virtual)

    # What this leader had heard start on the host when the list came: the list is the worker's
    # as it sent it, and a start heard while RegisterHost commits is newer than the list.
    heard = {j: a for j in ctx.live.ledger.jobs_on(body.host) if (a := book.confirmed.get((j, body.host))) is not None}

    def registered(result: Result, out: Outbox) -> None:
        kill = reconcile(ctx, body, now, out, heard)
        out.reply(req, S.RegisterReply(heartbeat_interval=ctx.cfg.worker.heartbeat, term=ctx.raft.term(),
                                       kill=kill))
    out.commit(RegisterHost(time=now, host=host), registered)
    ctx.stream.news["live"].append(S.HostLive(body.host, body.os_available, now))


def reconcile(ctx: Context, body: S.RegisterRequest, now: float, out: Outbox,
              heard: dict[int, int] | None = None) -> list[S.RunningTask]:
    """The worker's list of tasks against the hard state: what it must kill, what it lost,
    what it must still start.  Returns the tasks to kill.

    ``heard``: job -> attempt this leader had seen start on the host when the registration
    came (None: as now).  Only such a job, missing from the list, is lost; one whose start was
    heard later began after the worker sent its list (a RUN_JOB on its way), and runs."""
    book, jobs, name = ctx.book, ctx.state.jobs, body.host
    kill: list[S.RunningTask] = []
    for t in body.running:
        job = jobs.get(t.job_id)
        if job is None or job.attempt != t.attempt or job.state in TERMINAL \
                or job.state == JobState.PEND or name not in job.hosts:
            kill.append(t)
        else:
            book.unconfirmed.pop((t.job_id, name), None)
            book.confirmed[(t.job_id, name)] = t.attempt
            book.suspended[(t.job_id, name)] = t.suspended
            book.signals.pop((t.job_id, name), None)  # its word now is all that counts
            converge(ctx, job, now, out)  # a stop or continue it missed (a lost order, a failover)
            if name in job.mem_in_force:  # a shrink or restore it may have missed (a lost order, a failover)
                tell_reservation(ctx, job, name, out)
    book.registered_at[name] = now
    known = {(t.job_id, t.attempt) for t in body.running}
    # The host's own jobs, from its ledger book (an account is open for every active job
    # whose share here has not ended): after a failover every host registers at once, and
    # a walk of every job per registration held the Raft lock for hosts x jobs steps.  An
    # ended share's job is not in the book; its kill on other hosts is chased by on_tick.
    mine = (jobs.get(j) for j in ctx.live.ledger.jobs_on(name))
    for job in mine:
        if job is None or job.state not in ACTIVE or name not in job.hosts:
            continue
        if name not in job.finished_hosts and (job.id, job.attempt) not in known:
            confirmed = book.confirmed.get((job.id, name)) == job.attempt
            if confirmed and (heard is None or heard.get(job.id) == job.attempt):
                out.commit(Finish(time=now, job_id=job.id, attempt=job.attempt, host=name,
                                  reason="lost: the worker no longer has the job"))  # it started there, and is gone
            elif confirmed:
                pass  # its start was heard after the worker sent its list: it runs
            elif job.kill_requested:  # killed, and the worker (which lists all it runs) never started it
                end_share(ctx, job, name, now, f"killed before it started on {name}", out)
            else:
                dispatch(ctx, job, name, now, out)
        elif job.kill_requested:
            orders(ctx, job, now, out)
    return kill


def on_heartbeat(ctx: Context, req: Request, body: S.Heartbeat, out: Outbox) -> None:
    now, book, live = req.now, ctx.book, ctx.live
    host = ctx.state.hosts.get(body.host)
    if host is None or host.unavail or book.workers.get(body.host) is None:
        out.reply(req, S.HeartbeatReply(known=False))
        return
    book.workers[body.host] = req.peer
    live.os_available[body.host] = body.os_available
    live.last_seen[body.host] = now
    news = ctx.stream.news
    u = body.usage
    if u.job_id:  # reconciled as one batch (Ledger.observe_host); the samples that moved are published
        moved = live.ledger.observe_host(body.host, u.job_id, u.attempt, getattr(u, MEM_WIRE), u.memory_peak,
                                         u.cpu_time, now)
        if moved is not None:
            news["samples"].append(S.HostSamples(body.host, *moved))
    if live.shrinking:  # before reclaim: a grown job's restore counts the reclaiming jobs' charges as room
        shrink.on_usage(ctx, body.host, now, out)
    if body.host in live.ledger.borrowing:  # also when nothing moved: settling and the floor move with time
        reclaim.on_usage(ctx, body.host, now, out)
    news["live"].append(S.HostLive(body.host, body.os_available, now, host_mem(live.ledger.host_totals(body.host))))
    if body.ack:  # workers ask now and then, to know the controller still listens
        out.reply(req, S.HeartbeatReply(known=True))


def on_job_started(ctx: Context, req: Request, body: S.JobStarted, out: Outbox) -> None:
    book = ctx.book
    key = (body.job_id, body.host)
    u = book.unconfirmed.get(key)
    if u is not None and u[0] == body.attempt:
        del book.unconfirmed[key]
        book.confirmed[key] = body.attempt
    job = ctx.state.jobs.get(body.job_id)
    if job is not None and job.attempt == body.attempt and job.hosts[:1] == [body.host]:
        book.started[body.job_id] = (body.attempt, body.time, body.host)  # hist's "started" until it ends
    out.reply(req, S.Ack())


def on_job_finished(ctx: Context, req: Request, body: S.JobFinished, out: Outbox) -> None:
    # ``confirmed`` keeps the entry (the periodic prune drops it): the share is known to have
    # run until its Finish commits, so the audit does not call it "RUN with no task" meanwhile.
    ctx.book.unconfirmed.pop((body.job_id, body.host), None)
    ctx.book.unstarted_kills.pop((body.job_id, body.host), None)
    if ctx.book.started.get(body.job_id, (0, 0.0, ""))[2] == body.host:  # its Finish carries the start now
        del ctx.book.started[body.job_id]
    out.commit(Finish(time=body.time, job_id=body.job_id, attempt=body.attempt, host=body.host,
                      exit_code=body.exit_code, signal=body.signal, reason=body.reason, usage=body.usage,
                      started=body.started),
               replier(req, lambda r: S.Ack(True, str(r))))
