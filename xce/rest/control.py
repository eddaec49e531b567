"""/v1/jobs/{id}/...: job control as sub-resources (bstop, bresume, brequeue, bswitch, btop, bbot)
and the job's history (bhist).

Each is one route in the table (xce/rest/routes.py: a permission, its shapes, OpenAPI), one
controller request, the controller's answer as the body.  Ownership as for kill and modify: a
caller with only an ``own`` grant of jobs.modify (jobs.read for the history) may act on its own
jobs only, so the job is loaded first.  The transitions and their refusals are the state
table's (xce/core/state.py): a job in a state the action does not apply to is a 409.
"""

from __future__ import annotations

from typing import Any

from xce.core.errors import Conflict, NotFound
from xce.core.jobids import element_text
from xce.core.jobspec.signals import parse_signal
from xce.core.model import HistEvent
from xce.core.views import ArrayView
from xce.proto import schema as S
from xce.proto import writes
from xce.proto.opcodes import Op
from xce.rest.backend import Services, idempotency_key
from xce.rest.resources import JOB, owned_job
from xce.rest.routes import route
from xce.rest.schema import MoveResult, SignalBody, SwitchBody


async def _control(svc: Services, req: Any, job_id: int, op: Op, body: Any) -> S.ControlReply:
    await owned_job(svc, req, job_id, "jobs.modify")
    r = await svc.call(req, op, body)
    req.context.audit_result = f"job {job_id}: {r.results.get(job_id, '?')}"
    return r


@route("POST", JOB + "/stop", "jobs.modify", summary="Stop a job (bstop): PEND -> PSUSP, RUN -> USUSP (SIGSTOP)",
       tag="jobs", reply=S.ControlReply, errors=(404, 409))
async def stop_job(svc: Services, req: Any, job_id: int) -> S.ControlReply:
    return await _control(svc, req, job_id, Op.STOP, writes.control([job_id], key=idempotency_key(req)))


@route("POST", JOB + "/resume", "jobs.modify", summary="Resume a stopped job (bresume): PSUSP -> PEND, "
       "USUSP -> RUN (SIGCONT)", tag="jobs", reply=S.ControlReply, errors=(404, 409))
async def resume_job(svc: Services, req: Any, job_id: int) -> S.ControlReply:
    return await _control(svc, req, job_id, Op.RESUME, writes.control([job_id], key=idempotency_key(req)))


@route("POST", JOB + "/requeue", "jobs.modify", summary="Requeue a job (brequeue): a running one is killed "
       "first, then PEND with a new attempt", tag="jobs", reply=S.ControlReply, errors=(404, 409))
async def requeue_job(svc: Services, req: Any, job_id: int) -> S.ControlReply:
    return await _control(svc, req, job_id, Op.REQUEUE, writes.control([job_id], key=idempotency_key(req)))


@route("POST", JOB + "/switch", "jobs.modify", summary="Move a job to another queue (bswitch)", tag="jobs",
       body=SwitchBody, reply=S.ControlReply, errors=(404, 409))
async def switch_job(svc: Services, req: Any, job_id: int, body: SwitchBody) -> S.ControlReply:
    return await _control(svc, req, job_id, Op.SWITCH, writes.switch([job_id], body.queue, key=idempotency_key(req)))


async def _move(svc: Services, req: Any, job_id: int, to: str) -> MoveResult:
    await owned_job(svc, req, job_id, "jobs.modify")
    r = await svc.call(req, Op.MOVE, writes.move(job_id, to, key=idempotency_key(req)))
    req.context.audit_result = f"job {job_id}: moved to {to} ({r.detail})"
    return MoveResult(job_id, to, r.detail)


@route("POST", JOB + "/top", "jobs.modify", summary="First among its queue's pending jobs (btop)", tag="jobs",
       reply=MoveResult, errors=(404, 409))
async def top_job(svc: Services, req: Any, job_id: int) -> MoveResult:
    return await _move(svc, req, job_id, "top")


@route("POST", JOB + "/bottom", "jobs.modify", summary="Last among its queue's pending jobs (bbot)", tag="jobs",
       reply=MoveResult, errors=(404, 409))
async def bottom_job(svc: Services, req: Any, job_id: int) -> MoveResult:
    return await _move(svc, req, job_id, "bottom")


@route("GET", JOB + "/history", "jobs.read", summary="Every event of a job, with its time and who caused it "
       "(bhist): [time, event, by, detail]", tag="jobs", reply=list[HistEvent], errors=(404,))
async def job_history(svc: Services, req: Any, job_id: int) -> list[HistEvent]:
    await owned_job(svc, req, job_id, "jobs.read")
    return (await svc.call(req, Op.HIST, S.HistRequest(id=job_id))).events


@route("POST", JOB + "/signal", "jobs.kill", summary="Send a signal to a running job's processes on every host it "
       "runs on (bkill -s); nothing is committed", tag="jobs", body=SignalBody, reply=S.KillReply, errors=(404, 409))
async def signal_job(svc: Services, req: Any, job_id: int, body: SignalBody) -> S.KillReply:
    sig = parse_signal(body.signal, "signal")
    await owned_job(svc, req, job_id, "jobs.kill")
    r = await svc.call(req, Op.KILL, writes.kill([job_id], key=idempotency_key(req), signal=sig, to=body.to))
    what = r.results.get(job_id, "not found")
    req.context.audit_result = f"job {element_text(job_id)}: {what}"
    if not what.startswith("signal "):
        raise Conflict(f"job {element_text(job_id)}: {what}")
    return r


@route("GET", JOB + "/array", "jobs.read", summary="A job array's summary (bjobs -A): its elements by state, "
       "those not yet materialised as PEND", tag="jobs", reply=ArrayView, errors=(404,))
async def job_array(svc: Services, req: Any, job_id: int) -> ArrayView:
    await owned_job(svc, req, job_id, "jobs.read")
    r = await svc.call(req, Op.JOBS, S.JobsRequest(ids=[job_id], arrays=True, arrays_only=True))
    if not r.arrays:
        raise NotFound(f"job {element_text(job_id)} is not an array")
    return r.arrays[0]
