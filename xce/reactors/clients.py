"""Reactors of the client door: submit, read, kill, modify, administer (CLI, REST, scripts, console).

Each is ``on_x(ctx, req, body, out)``: it reads ``ctx`` and records its answer, or the
command to commit with the continuation that answers, in ``out``.  A refusal is an
XceError raised here; ``serve`` turns it into ``out.error``.
"""

from __future__ import annotations

import itertools
from collections import ChainMap
from typing import Any

import msgspec

from xce.core.arrays import (SHIFT, element, element_text, followed, is_unmaterialised, pending_tail, split_id,
                              unmaterialised)
from xce.core.autosize import sized, wants_sizing
from xce.core.jobspec.arrays import size_error
from xce.core.errors import Infeasible, InvalidRequest, LimitReached, NotFound, XceError
from xce.core.limits import KILL_REASON, check_text
from xce.core import reclaim
from xce.core.model import ACTIVE, TERMINAL, Job, JobSpec, check_mem_limit, check_spec, reclaim_queues, spec_bytes
from xce.core.placement import demand_of, host_caps, never_fits
from xce.core.recommend import history_key
from xce.core.resreq import ResReq
from xce.core.result import Ok, Result
from xce.core.sched.holds import stage_reasons
from xce.core.sched.limits import LimitBook
from xce.core.sched.site import PolicyState, RoundInputs
from xce.core.state import PENDING, Kill, Modify, RemoveHosts, SetHostAdmin, Submit
from xce.core.views import array_view, row_fields_problem
from xce.proto import schema as S
from xce.reactors.access import key_owner
from xce.reactors.after_apply import on_applied, publish_soft, public
from xce.reactors.context import Context
from xce.reactors.jobrun import on_signal
from xce.reactors.orders import dispatch
from xce.reactors.outbox import Outbox, Request, Then
from xce.replica.mirror import placeable

ROLES = {0: "follower", 1: "candidate", 2: "leader"}


def replier(req: Request, build: Any) -> Then:
    """The continuation that answers ``req`` once its command committed (or failed to).

    The request's log entry goes with it, so the log records the answer the client got,
    not that the command was handed to Raft.
    """
    def then(result: Result, out: Outbox) -> None:
        if isinstance(result, Ok):
            try:
                body = build(result.value)
            except XceError as e:
                out.error(req, e)
                return
            out.reply(req, body)
        else:
            out.error(req, result.error)
    return then


def on_ping(ctx: Context, req: Request, body: S.Empty, out: Outbox) -> None:
    out.reply(req, S.Empty())


def on_submit(ctx: Context, req: Request, body: S.SubmitRequest, out: Outbox) -> None:
    if not body.jobs:
        raise InvalidRequest("submit: no jobs given")
    admit = _admitter(ctx)
    capped = limit_book(ctx) if any(lim.pending is not None for lim in ctx.site.limits) else None
    specs, reqs = [], []
    for i, spec in enumerate(body.jobs):
        try:
            spec, parsed = admit(spec)
            if capped is not None:  # lsb.resources PEND_JOBS: refused at the door, as bsub is
                n = spec.array.count if spec.array is not None else 1
                over = capped.pending_reason(spec, n)
                if over:
                    raise LimitReached(over)
                capped.add_pending(spec, n)
        except XceError as e:  # named by its place in the batch only when there is a batch
            raise type(e)((f"job {i}: " if len(body.jobs) > 1 else "") + e.message) from None
        specs.append(spec)
        reqs.append(parsed)
    if body.dry_run:
        out.reply(req, S.SubmitReply(ids=[], queues=[s.queue for s in specs]))
        return
    out.commit(Submit(time=req.now, specs=specs, reqs=reqs, key=body.key, by=key_owner(req)),
               replier(req, lambda ids: S.SubmitReply(ids=ids, queues=[s.queue for s in specs])))


def _admitter(ctx: Context) -> Any:
    """One job's checks at the door -> (the spec in its queue, its parsed request), or an XceError.

    A batch repeats itself, so each distinct spec (by its bytes: ``spec_bytes``) is checked
    once per submit, and each (slots, request) pair tried against the hosts once:
    the same checks, not once per job (5,000 copies of one spec cost 5,000 checks before).
    The pending-jobs limit counts every job, so on_submit applies it to each.  A request to
    size (``rusage[mem=auto]``, a queue's ``mem_default``) is sized here, by the leader, so the
    choice is replicated with the job (xce/core/autosize.py).
    """
    st = ctx.state
    queues, default = st.queues, st.default_queue
    caps = all_hosts(ctx)
    verdicts: dict[tuple[int, ResReq], str | None] = {}
    admitted: dict[bytes, tuple[Any, Any]] = {}
    history = _history(ctx)
    reclaimables = reclaim_queues(queues.values())

    def admit(spec: Any) -> tuple[Any, Any]:
        shape = spec_bytes(spec)
        seen = admitted.get(shape)
        if seen is None:
            seen = admitted[shape] = check(spec, shape)
        return seen

    def check(spec: Any, shape: bytes) -> tuple[Any, Any]:
        check_spec(spec, shape)
        q = spec.queue or default
        if q not in queues:
            raise InvalidRequest(f"queue {q!r} does not exist (queues: {', '.join(sorted(queues))})")
        spec = msgspec.structs.replace(spec, queue=q) if spec.queue != q else spec
        parsed = ctx.parse(spec.resreq)
        if wants_sizing(parsed, queues[q]):
            parsed = sized(parsed, "/".join(history_key(spec.user, spec.name, spec.command, q)[:2]),
                           queues[q], history(spec))
        unreserved = reclaim.unreserved(spec, parsed, reclaimables)
        if unreserved:
            raise InvalidRequest(unreserved)
        key = (spec.slots, parsed, spec.cpus_per_task)
        if key not in verdicts:
            verdicts[key] = never_reason(ctx, spec.slots, parsed, caps, spec.cpus_per_task)
        never = verdicts[key]
        if never:
            raise Infeasible(f"{never} ({parsed.mem_basis})" if parsed.mem_basis else never)
        if spec.array is not None:
            _check_array_size(spec, ctx.cfg.controller.max_array_size, "")
        return spec, parsed

    return admit


def _history(ctx: Context) -> Any:
    """spec -> the views of the finished jobs of its (user, job, queue), for right-sizing.

    The finished jobs are grouped at the first spec that asks, once per submit: a submit
    that sizes nothing costs nothing, and a batch scans the jobs once.
    """
    groups: dict[tuple[str, str, str], list[Job]] | None = None

    def history(spec: JobSpec) -> list[Any]:
        nonlocal groups
        if groups is None:
            groups = {}
            for j in ctx.state.jobs.values():
                if j.state in TERMINAL:
                    s = j.spec
                    groups.setdefault(history_key(s.user, s.name, s.command, s.queue), []).append(j)
        found = groups.get(history_key(spec.user, spec.name, spec.command, spec.queue), [])
        return [ctx.live.job_view(j) for j in found]

    return history


def _selected(jobs: dict[int, Job], arrays: dict[int, Any], body: S.JobsRequest) -> Any:
    if not body.ids and not arrays:
        return (j for j in jobs.values() if j.id > body.after)
    if not body.ids:  # every array's every element, by the rule of JOBS ARRAY, in id order (``after`` pages)
        by_array: dict[int, list[Job]] = {}
        for j in jobs.values():
            if j.id >> SHIFT:
                by_array.setdefault(j.id >> SHIFT, []).append(j)
        plain = (j for j in jobs.values() if not j.id >> SHIFT)  # submitted in id order
        listed = (j for a in sorted(arrays) for j in _elements(arrays[a], by_array.get(a, [])))
        return (j for j in itertools.chain(plain, listed) if j.id > body.after)
    selected = [_named(jobs, arrays, i) for i in body.ids]
    missing = [i for i, got in zip(body.ids, selected, strict=True) if got is None]
    if missing and len(body.ids) == 1:
        raise NotFound(f"job {element_text(missing[0])} is not known")
    return [j for got in selected if got for j in got]


def _named(jobs: dict[int, Job], arrays: dict[int, Any], jid: int) -> list[Job] | None:
    """What JOBS lists for one id: the job; an array's every element (those not materialised as the
    PEND Jobs they will be, up to arrays.LISTED_MAX); an element not materialised yet; None: unknown."""
    if jid in jobs:
        return [jobs[jid]]
    if jid in arrays:
        return _elements(arrays[jid], [e for e in jobs.values() if e.id >> SHIFT == jid])
    array_id, index = split_id(jid)
    arr = arrays.get(array_id) if index is not None else None
    return [element(arr, index)] if arr is not None and is_unmaterialised(arr, index) else None


def _elements(arr: Any, materialised: list[Job]) -> list[Job]:
    """An array's elements as JOBS lists them: its Jobs and, up to arrays.LISTED_MAX, those still
    pending without one (as the PEND Jobs they will be), in index order."""
    return sorted([*materialised, *pending_tail(arr)], key=lambda j: j.id)


def _matching(ctx: Context, body: S.JobsRequest) -> Any:
    """The jobs a JOBS request selects, in id order, up to its limit."""
    states = set(body.states)
    st = ctx.state
    n = 0
    for job in _selected(st.jobs, st.arrays, body):
        if body.user and job.spec.user != body.user:
            continue
        if body.queue and job.spec.queue != body.queue:
            continue
        if states and job.state.value not in states:
            continue
        if not body.ids and not body.all and not states and job.state in TERMINAL:
            continue
        yield job
        n += 1
        if body.limit and n >= body.limit:
            return


def on_jobs(ctx: Context, req: Request, body: S.JobsRequest, out: Outbox) -> None:
    if body.arrays_only:
        _on_array_summaries(ctx, req, body, out)
        return
    if body.fields:
        _on_job_rows(ctx, req, body, out)
        return
    st = ctx.state
    found = [ctx.live.job_view(job) for job in _matching(ctx, body)]
    more = body.limit and len(found) >= body.limit
    if body.order and any(v.state == "PEND" for v in found):
        ordering = policy_now(ctx, req.now).ordering
        ordered = ordering.order(j for j in st.jobs.values() if placeable(j))
        places = ordering.places(ordered)
        shown = {v.id: v.reason for v in found if v.state == "PEND"}
        held = stage_reasons(ordering, ordered, ChainMap(shown, ctx.live.reasons), shown)
        for v in found:
            v.order = places.get(v.id)
            v.reason = held.get(v.id, v.reason)  # the order stage, where it is what holds the job
    out.reply(req, S.JobsReply(jobs=found, next_after=found[-1].id if more else None, stale=staleness(ctx),
                               arrays=_summaries(ctx, body) if body.arrays else []))


def _summaries(ctx: Context, body: S.JobsRequest) -> list[Any]:
    """Each array's summary under the request's filters: its counts, never its elements."""
    arrays = ctx.state.arrays
    named = (arrays[i] for i in sorted(set(body.ids)) if i in arrays) if body.ids else arrays.values()  # id order
    return [array_view(a) for a in named if (not body.user or a.spec.user == body.user)
            and (not body.queue or a.spec.queue == body.queue)]


def _on_array_summaries(ctx: Context, req: Request, body: S.JobsRequest, out: Outbox) -> None:
    """JOBS for the arrays' summaries alone: no job is selected, viewed or sorted (an array of a
    million elements costs what one of ten does)."""
    if body.fields or body.order or body.states or body.all or body.after or body.limit:
        raise InvalidRequest("jobs: arrays_only asks for the arrays' summaries alone; it takes ids, user and "
                             "queue, not fields, order, states, all, after or limit")
    out.reply(req, S.JobsReply(jobs=[], stale=staleness(ctx), arrays=_summaries(ctx, body)))


def _on_job_rows(ctx: Context, req: Request, body: S.JobsRequest, out: Outbox) -> None:
    """JOBS naming its fields: rows of those fields, no views (bjobs -o, squeue -o)."""
    problem = row_fields_problem(body.fields)
    if problem is not None:
        raise InvalidRequest(problem)
    if body.order or body.arrays:
        raise InvalidRequest("jobs: fields (rows) cannot be combined with order or arrays (full views only)")
    jobs = list(_matching(ctx, body))
    more = body.limit and len(jobs) >= body.limit
    out.reply(req, S.JobsReply(jobs=[], rows=ctx.live.job_rows(jobs, body.fields),
                               next_after=jobs[-1].id if more else None, stale=staleness(ctx)))


def all_hosts(ctx: Context) -> dict[str, Any]:
    """Every registered host at its capacity, for 'could any host ever run it'."""
    return host_caps(ctx.state.hosts.values(), ctx.live.ledger, {})


def never_reason(ctx: Context, slots: int, req: ResReq, caps: dict[str, Any], task: int = 1) -> str | None:
    """Why no host could ever run ``slots`` of ``req`` in whole tasks of ``task`` slots (submit and
    modify alike); None: some could, or no host has registered yet (nothing to judge by)."""
    return never_fits(demand_of(slots, req, ctx.cluster_totals, task=task), caps.values()) if caps else None


def _check_array_size(spec: JobSpec, max_size: int, where: str) -> None:
    assert spec.array is not None
    why = size_error(spec.array, max_size)
    if why is not None:
        raise InvalidRequest(f'{where}array "{spec.name}[{spec.array.text()}]": {why} (controller.max_array_size)')


def policy_now(ctx: Context, now: float) -> RoundInputs:
    """The scheduler's round inputs, computed here from the hard state (the finished jobs the
    cluster keeps, its usage of those it forgot, running jobs' allocations) and the leader's
    ledger, by the same PolicyState the scheduler keeps: the figures of `xce fairshare`,
    `xce limits` and `jobs -l` are the round's."""
    st = ctx.state
    running = [j for j in st.jobs.values() if j.state in ACTIVE]
    pending = [j for j in st.jobs.values() if placeable(j)]
    prio = {q.name: q.priority for q in st.queues.values()}
    return PolicyState(ctx.site, st.usage_past, st.usage_as_of).round_inputs(
        st.jobs.values(), pending, running, ctx.live.ledger, prio, now)


def on_fairshare(ctx: Context, req: Request, body: S.Empty, out: Outbox) -> None:
    site = ctx.site
    trees = policy_now(ctx, req.now).ordering.fairshare if site.fairshare else {}
    rows = [r for q, fs in trees.items() for r in fs.rows(q or "")]
    out.reply(req, S.FairshareReply(enabled=site.fairshare, half_life=site.half_life,
                                    slot_weight=site.weights.slots, mem_weight=site.weights.mem,
                                    time=req.now, rows=rows))


def limit_book(ctx: Context) -> LimitBook:
    """The limits' use now, as the round's book counts it (running jobs charged from the ledger),
    with every pending job counted: held ones too, and an array's unmaterialised elements."""
    st = ctx.state
    book = LimitBook.build(ctx.site.limits, (j for j in st.jobs.values() if j.state in ACTIVE),
                           (j for j in st.jobs.values() if j.state in PENDING), ctx.live.ledger)
    for arr in st.arrays.values():
        book.add_pending(arr.spec, unmaterialised(arr))
    return book


def on_limits(ctx: Context, req: Request, body: S.Empty, out: Outbox) -> None:
    rows = limit_book(ctx).rows(ctx.live.reasons) if ctx.site.limits else []
    out.reply(req, S.LimitsReply(rows=rows))


def on_hosts(ctx: Context, req: Request, body: S.HostsRequest, out: Outbox) -> None:
    hosts = ctx.state.hosts
    for n in body.names:
        if n not in hosts:
            raise NotFound(f"host {n} is not known")
    names = body.names or sorted(hosts)
    out.reply(req, S.HostsReply(hosts=[ctx.live.host_view(hosts[n], req.now) for n in names], stale=staleness(ctx)))


def staleness(ctx: Context) -> S.Staleness | None:
    """None on the leader (fresh); on a follower, how far behind its answer may be."""
    if ctx.raft.is_leader():
        return None
    st = ctx.raft.status()
    lag = max(0, int(st.get("leader_commit_idx") or 0) - int(st.get("last_applied", 0)))
    return S.Staleness(served_by=ctx.cfg.controller.address, role=ROLES.get(st.get("state", 0), "unknown"),
                       as_of=ctx.state.last_time, lag_entries=lag)


def on_queues(ctx: Context, req: Request, body: S.Empty, out: Outbox) -> None:
    st = ctx.state
    counts: dict[str, dict[str, int]] = {q: {} for q in st.queues}
    slots: dict[str, dict[str, int]] = {q: {} for q in st.queues}

    def add(queue: str, state: str, jobs: int, each: int) -> None:
        c, n = counts.setdefault(queue, {}), slots.setdefault(queue, {})
        c[state], n[state] = c.get(state, 0) + jobs, n.get(state, 0) + jobs * each

    for job in st.jobs.values():
        add(job.spec.queue, job.state.value, 1, job.spec.slots)
    for arr in st.arrays.values():  # its pending elements that are no Job yet pend all the same
        if unmaterialised(arr):
            add(arr.spec.queue, "PEND", unmaterialised(arr), arr.spec.slots)
    out.reply(req, S.QueuesReply(queues=sorted(st.queues.values(), key=lambda q: -q.priority),
                                 default=st.default_queue, counts=counts, slots=slots))


def on_kill(ctx: Context, req: Request, body: S.KillRequest, out: Outbox) -> None:
    if not body.ids:
        raise InvalidRequest("kill: no job ids given")
    too_long = check_text(KILL_REASON, body.reason)
    if too_long is not None:
        raise InvalidRequest(too_long)
    if body.signal is not None:
        on_signal(ctx, req, body, out)
        return
    if body.to:
        raise InvalidRequest(f"kill: to={body.to!r} says whom a signal goes to; give the signal too")
    out.commit(Kill(time=req.now, job_ids=body.ids, reason=body.reason or "killed by user",
                    key=body.key, by=key_owner(req)),
               replier(req, lambda res: S.KillReply(results=res)))


def on_modify(ctx: Context, req: Request, body: S.ModifyRequest, out: Outbox) -> None:
    check_mem_limit(body.mem_limit)
    reply = replier(req, lambda r: S.Ack(True, r))

    def modified(result: Result, out: Outbox) -> None:
        if isinstance(result, Ok):  # running: the workers enforce the new limit from now on
            st = ctx.state
            jobs = [st.jobs[body.id]] if body.id in st.jobs else \
                [j for j in st.jobs.values() if j.id >> SHIFT == body.id] if body.id in st.arrays else []
            for job in (j for j in jobs if j.state in ACTIVE):  # an array's: each running element
                for host in job.hosts:
                    if host not in job.finished_hosts:
                        dispatch(ctx, job, host, req.now, out)
        reply(result, out)

    out.commit(Modify(time=req.now, job_id=body.id, mem_limit=body.mem_limit, key=body.key,
                      by=key_owner(req)), modified)


def on_host_admin(ctx: Context, req: Request, body: S.HostAdminRequest, out: Outbox) -> None:
    if body.action not in ("open", "close", "remove"):
        raise InvalidRequest(f"host action must be 'open', 'close' or 'remove', got {body.action!r}")
    if not body.names:
        raise InvalidRequest(f"host {body.action}: no host names given")
    by = key_owner(req)
    cmd = RemoveHosts(time=req.now, names=body.names, key=body.key, by=by) if body.action == "remove" else \
        SetHostAdmin(time=req.now, names=body.names, closed=body.action == "close", key=body.key, by=by)
    out.commit(cmd, replier(req, lambda r: S.Ack(True, r)))


def on_status(ctx: Context, req: Request, body: S.Empty, out: Outbox) -> None:
    c, raft = ctx.cfg.controller, ctx.raft
    st = raft.status()
    me = S.ControllerInfo(address=c.address, role=ROLES.get(st.get("state", 0), "unknown"), term=raft.term(),
                          commit_index=int(st.get("commit_idx", 0)),
                          applied_index=int(st.get("last_applied", 0)), leader=raft.leader(), pid=ctx.pid)
    others = [S.ControllerInfo(address=a, role="peer", term=0, commit_index=0) for a in c.peer_addresses]
    hosts: dict[str, int] = {}
    mem = {"capacity": 0, "reserved": 0, "actual": 0, "slack": 0, "overage": 0}
    for h in ctx.state.hosts.values():
        v = ctx.live.host_view(h)
        hosts[v.state] = hosts.get(v.state, 0) + 1
        if h.unavail:
            continue  # its memory is not there to use; the host still counts as unavail
        mem["capacity"] += v.mem_total
        mem["reserved"] += v.mem_reserved
        mem["actual"] += v.mem_actual
        mem["slack"] += v.mem_slack
        mem["overage"] += v.mem_overage
    jobs: dict[str, int] = {}
    for j in ctx.state.jobs.values():
        jobs[j.state.value] = jobs.get(j.state.value, 0) + 1
    out.reply(req, S.StatusReply(
        cluster=ctx.cfg.cluster.name, controllers=[me, *others], leader=raft.leader(), term=raft.term(),
        hosts_by_state=hosts, jobs_by_state=jobs,
        endpoints={"controller": c.address, "events": c.pub_address},
        rest_url=ctx.cfg.rest_url or None, mem=mem, last_round_ms=ctx.last_round_ms))


def on_snapshot(ctx: Context, req: Request, body: S.Empty, out: Outbox) -> None:
    publish_soft(ctx, req.now, out, force=True)
    if ctx.raft.pending_changes():  # applied-but-unpublished changes go out before the snapshot claims their seq
        on_applied(ctx, req.now, out)
    st, live = ctx.state, ctx.live
    out.reply(req, S.Snapshot(
        seq=ctx.stream.seq, epoch=ctx.stream.epoch, time=req.now, jobs=[public(j) for j in st.jobs.values()],
        hosts=list(st.hosts.values()), queues=list(st.queues.values()), default_queue=st.default_queue,
        live=live.lives(), samples=live.samples(), reasons=dict(live.reasons), leader=ctx.raft.leader(),
        term=ctx.raft.term(), usage_past=S.past_usage(st.usage_past), usage_as_of=st.usage_as_of,
        arrays=[array_view(a) for a in followed(st.arrays, st.jobs)]))


def on_audit(ctx: Context, req: Request, body: S.Empty, out: Outbox) -> None:
    from xce.replica.audit import Dispatch, audit  # only `xce admin audit` needs it

    book = ctx.book
    dispatched = Dispatch(started=book.confirmed, registered=book.registered_at, now=req.now,
                          grace=ctx.cfg.worker.heartbeat)
    problems, checked = audit(ctx.state, ctx.live, ctx.cluster_totals, dispatched)
    out.reply(req, S.AuditReply(problems=problems, checked=checked))


def on_request_log(ctx: Context, req: Request, body: S.RequestLogQuery, out: Outbox) -> None:
    records = ctx.requests.query(user=body.user, since=body.since, after=body.after,
                                 limit=max(0, min(body.limit, 10_000))) if ctx.requests else []
    out.reply(req, S.RequestLogReply(records=records))
