"""Reactors of job control: STOP, RESUME, REQUEUE, SWITCH, MOVE, MODIFY_SPEC, HIST.

The transitions are xce/core/state.py's; these only check what the door can, commit the
command and answer.  The processes of a job STOP made USUSP, or RESUME made RUN again, are
stopped or continued after the apply, as the state says (xce/reactors/signals.py).
"""

from __future__ import annotations

from typing import Any

import msgspec

from xce.core import reclaim
from xce.core.arrays import element_text, split_id
from xce.core.errors import Infeasible, InvalidRequest, NotFound
from xce.core.jobspec.depend import parse_depend
from xce.core.limits import KILL_REASON, check_text
from xce.core.model import reclaim_queues
from xce.core.resreq import ResReq
from xce.core.model import ACTIVE, HistEvent
from xce.core.state import Cmd, ModifySpec, Move, Requeue, Resume, SpecPatch, Stop, Switch, with_event
from xce.proto import schema as S
from xce.reactors.access import key_owner
from xce.reactors.clients import all_hosts, never_reason, replier
from xce.reactors.context import Context
from xce.reactors.outbox import Outbox, Request


def _ids(ids: list[int], action: str) -> list[int]:
    if not ids:
        raise InvalidRequest(f"{action}: no job ids given")
    return ids


def on_stop(ctx: Context, req: Request, body: S.ControlRequest, out: Outbox) -> None:
    _control(ctx, req, Stop(time=req.now, job_ids=_ids(body.ids, "stop"), key=body.key, by=key_owner(req)), out)


def on_resume(ctx: Context, req: Request, body: S.ControlRequest, out: Outbox) -> None:
    _control(ctx, req, Resume(time=req.now, job_ids=_ids(body.ids, "resume"), key=body.key, by=key_owner(req)),
             out)


def on_requeue(ctx: Context, req: Request, body: S.ControlRequest, out: Outbox) -> None:
    too_long = check_text(KILL_REASON, body.reason)
    if too_long is not None:
        raise InvalidRequest(too_long)
    _control(ctx, req, Requeue(time=req.now, job_ids=_ids(body.ids, "requeue"), reason=body.reason,
                               key=body.key, by=key_owner(req)), out)


def on_switch(ctx: Context, req: Request, body: S.SwitchRequest, out: Outbox) -> None:
    ids = _ids(body.ids, "switch")
    for jid in ids:
        _check_reserves(ctx, jid, body.queue, None)
    _control(ctx, req, Switch(time=req.now, job_ids=ids, queue=body.queue, key=body.key, by=key_owner(req)), out)


def _control(ctx: Context, req: Request, cmd: Cmd, out: Outbox) -> None:
    out.commit(cmd, replier(req, lambda res: S.ControlReply(results=res)))


def on_move(ctx: Context, req: Request, body: S.MoveRequest, out: Outbox) -> None:
    if body.to not in ("top", "bottom"):
        raise InvalidRequest(f"move: 'to' must be 'top' or 'bottom', got {body.to!r}")
    out.commit(Move(time=req.now, job_id=body.id, to=body.to, key=body.key, by=key_owner(req)),
               replier(req, lambda prio: S.Ack(True, f"priority {prio}")))


def on_modify_spec(ctx: Context, req: Request, body: S.ModifySpecRequest, out: Outbox) -> None:
    changes: dict[str, Any] = {f: getattr(body, f) for f in SpecPatch.__struct_fields__
                               if getattr(body, f) is not msgspec.UNSET}
    parsed = ctx.parse(changes["resreq"]) if "resreq" in changes else None
    if parsed is not None and parsed.mem_auto:  # the history is read at submit (xce/core/autosize.py)
        raise InvalidRequest("modify: rusage[mem=auto] is sized at submit only; give the reservation an amount "
                             "(xce recommend shows what the history suggests)")
    if parsed is not None or "slots" in changes:
        _check_capacity(ctx, body.id, changes.get("slots"), parsed)
    if parsed is not None or "queue" in changes:
        _check_reserves(ctx, body.id, changes.get("queue"), parsed)
    if "depend" in changes:  # parsed once, here; the state keeps the tree
        changes["depend"] = parse_depend(changes["depend"]) if changes["depend"].strip() else None
    out.commit(ModifySpec(time=req.now, job_id=body.id, patch=SpecPatch(**changes), req=parsed, key=body.key,
                          by=key_owner(req)),
               replier(req, lambda r: S.Ack(True, r)))


def _check_capacity(ctx: Context, job_id: int, slots: int | None, req: ResReq | None) -> None:
    """A new -n or -R is refused if no host could ever run it, as submit refuses it."""
    st = ctx.state
    job, arr = st.jobs.get(job_id), st.arrays.get(split_id(job_id)[0])  # an element, or the whole array
    spec = job.spec if job is not None else arr.spec if arr is not None else None
    if spec is None:
        return  # the state machine names the unknown job
    known = (job.req if job is not None else arr.req)  # type: ignore[union-attr]
    never = never_reason(ctx, slots if slots is not None else spec.slots, req or known, all_hosts(ctx),
                         spec.cpus_per_task)
    if never:
        raise Infeasible(f"job {element_text(job_id)}: {never}")


def _check_reserves(ctx: Context, job_id: int, queue: str | None, req: ResReq | None) -> None:
    """A job moved into a reclaimable queue, or given a new -R, must still reserve memory if it
    runs on reclaimable memory (reclaim.unreserved), as submit requires."""
    st = ctx.state
    job, arr = st.jobs.get(job_id), st.arrays.get(split_id(job_id)[0])
    known = (job.spec, job.req) if job is not None else (arr.spec, arr.req) if arr is not None else None
    if known is None:
        return  # the state machine names the unknown job
    spec = msgspec.structs.replace(known[0], queue=queue) if queue else known[0]
    why = reclaim.unreserved(spec, req or known[1], reclaim_queues(st.queues.values()))
    if why:
        raise InvalidRequest(f"job {element_text(job_id)}: {why}")


def on_hist(ctx: Context, req: Request, body: S.HistRequest, out: Outbox) -> None:
    if body.id not in ctx.state.jobs and body.id not in ctx.state.arrays:  # an array's own: submitted, killed, ...
        raise NotFound(f"job {element_text(body.id)} is not known")
    events = list(ctx.state.history.get(body.id, ()))
    job, started = ctx.state.jobs.get(body.id), ctx.book.started.get(body.id)
    if job is not None and job.state in ACTIVE and started is not None and started[0] == job.attempt:
        events = with_event(events, HistEvent(started[1], "started", started[2]))  # not committed until it ends
    out.reply(req, S.HistReply(id=body.id, events=events))
