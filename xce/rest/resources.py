"""/v1/jobs and /v1/accounting: list, read, submit, kill, modify, finished-job records.

Bodies are the CLI's ``--json`` shapes (JobView lists, ``{"id", "queue"}`` for a
submission, KillReply).  Lists page with the controller's cursor: ``after`` (ids
greater than it) and ``limit``; a full page carries ``Link: <...>; rel="next"``.
Ownership: with only an ``own`` grant a listing is narrowed to the caller's jobs,
and a single job is loaded first so its owner can be checked against the policy.
A submission always runs as the caller unless the caller holds jobs.submit_as.
Every write sends the controller an idempotency key: the request's ``Idempotency-Key``
header if it has one (a client re-sending its POST then gets the first answer), else a
fresh one, reused on each of the backend's own retries.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

import msgspec
from falcon.routing import BaseConverter

from xce.core.errors import Conflict, InvalidRequest, NotFound, PermissionDenied
from xce.core.jobspec.arrays import ARRAY_SIZE_CAP, ArraySpec, parse_lsf_job_name
from xce.core.jobids import MASK, element_id, element_text
from xce.core.jobspec.build import STDIN_NAME
from xce.core.jobspec.depend import parse_depend
from xce.core.model import MEM_LIMIT_FLOOR, JobSpec, check_mem_limit
from xce.core.units import fmt_bytes, parse_mem
from xce.core.views import JobView
from xce.proto import schema as S
from xce.proto import writes
from xce.proto.opcodes import Op
from xce.rest.backend import Services, idempotency_key
from xce.rest.routes import Reply, route
from xce.rest.schema import (
    MAX_MEM,
    AccountingQuery,
    JobQuery,
    JobsQuery,
    ModifyBody,
    SubmitBody,
    SubmitResult,
)
from xce.security.policy import denied

JOB = "/v1/jobs/{job_id:jobid}"
MAX_ID = 9007199254740991  # JSON's largest exact integer
_JOB_ID = re.compile(r"([0-9]{1,16})(?:\[([0-9]{1,10})\]|_([0-9]{1,10}))?")
JOB_ID_PATTERN = r"^[0-9]+(\[[0-9]+\]|_[0-9]+)?$"  # the OpenAPI pattern of {job_id}


class JobIdConverter(BaseConverter):
    """``{job_id:jobid}``: ``12``, or an array element as the CLI writes it, ``12[3]`` (or ``12_3``,
    Slurm's), as its int id (xce/core/jobids.py).  Anything else is no route: a 404."""

    def convert(self, value: str) -> int | None:
        m = _JOB_ID.fullmatch(value)
        if m is None:
            return None
        jid, index = int(m[1]), m[2] or m[3]
        if index is None:
            return jid if 1 <= jid <= MAX_ID else None
        if not (1 <= jid <= MASK and 1 <= int(index) <= MASK):
            return None
        return element_id(jid, int(index))


def _own_filter(svc: Services, req: Any, perm: str, user: str | None) -> str | None:
    p = req.context.principal
    if svc.policy.scope(p, perm) == "own":
        svc.policy.check(p, perm, owner=user or p.user)
        return p.user
    return user


def _paged(req: Any, r: S.JobsReply) -> Reply:
    headers = {}
    if r.next_after is not None:
        params = {k: v for k, v in req.params.items() if k != "after"}
        headers["Link"] = f'<{req.path}?{urlencode({**params, "after": r.next_after})}>; rel="next"'
    return Reply(r.jobs, headers=headers)


async def owned_job(svc: Services, req: Any, job_id: int, perm: str, order: bool = False) -> JobView:
    p = req.context.principal
    try:
        r = await svc.call(req, Op.JOBS, S.JobsRequest(ids=[job_id], order=order))
    except PermissionDenied:
        if svc.policy.scope(p, perm) == "own":  # the controller hid another user's job from us
            raise denied(p, perm, f"is granted only for own jobs; job {element_text(job_id)} is not {p.user}'s") \
                from None
        raise
    if not r.jobs:
        raise NotFound(f"job {element_text(job_id)} is not known")
    svc.policy.check(p, perm, owner=r.jobs[0].user)
    return r.jobs[0]


def _bytes(mem: int | str | None) -> int | None:
    value = parse_mem(mem) if isinstance(mem, str) else mem
    if value is not None and value > MAX_MEM:
        raise InvalidRequest(f"mem_limit must be between {fmt_bytes(MEM_LIMIT_FLOOR)} and {MAX_MEM} bytes")
    check_mem_limit(value)  # the floor every door applies
    return value


@route("GET", "/v1/jobs", "jobs.list", summary="List jobs (unfinished unless all=true or state is given)",
       tag="jobs", query=JobsQuery, reply=list[JobView], headers=("Link",))
async def list_jobs(svc: Services, req: Any, query: JobsQuery) -> Reply:
    user = _own_filter(svc, req, "jobs.list", query.user or None)
    r = await svc.call(req, Op.JOBS, S.JobsRequest(
        user=user, queue=query.queue or None, states=query.state.split(",") if query.state else [],
        all=query.all, after=query.after, limit=query.limit))
    return _paged(req, r)


@route("GET", JOB, "jobs.read", summary="One job, with its per-host accounts (?order=true: a pending job's "
       "place in the order of pending work, as `xce jobs -l`)", tag="jobs", query=JobQuery, reply=JobView,
       errors=(404,))
async def get_job(svc: Services, req: Any, job_id: int, query: JobQuery) -> JobView:
    return await owned_job(svc, req, job_id, "jobs.read", order=query.order)


@route("POST", "/v1/jobs", "jobs.submit", summary="Submit a job (the fields of `xce submit`)", tag="jobs",
       body=SubmitBody, reply=SubmitResult, status=201, alt_status=(200,), headers=("Location",),
       errors=(404, 409))  # 404: -w names an unknown job; 409: the idempotency key was used for another submit
async def submit_job(svc: Services, req: Any, body: SubmitBody) -> Reply:
    p = req.context.principal
    if not body.command and not body.script:
        raise InvalidRequest("missing required field `command` (a command of length >= 1, or a `script`)")
    user = body.user or p.user
    if user != p.user:
        svc.policy.check(p, "jobs.submit_as")
    spec = JobSpec(command=body.command or ([STDIN_NAME] if body.script else []), name=body.name, user=user,
                   queue=body.queue, slots=body.slots, resreq=body.resreq, mem_limit=_bytes(body.mem_limit),
                   cwd=body.cwd, env=body.env, stdout=body.stdout, stderr=body.stderr, rerunnable=body.rerunnable,
                   script=body.script, stdout_overwrite=body.stdout_overwrite,
                   stderr_overwrite=body.stderr_overwrite, run_limit=body.run_limit, run_estimate=body.run_estimate,
                   project=body.project, group=body.group, priority=body.priority,
                   depend=parse_depend(body.depend) if body.depend.strip() else None,
                   array=_array(body.name, body.array), reclaim=body.reclaim,
                   exclusive=body.exclusive, pre_exec=body.pre_exec)
    r = await svc.call(req, Op.SUBMIT, writes.submit([spec], key=idempotency_key(req), dry_run=body.dry_run))
    if body.dry_run:
        req.context.audit_result = f"dry run: would go to {r.queues[0]}"
        return Reply(SubmitResult(None, r.queues[0]), 200)
    jid = r.ids[0]
    req.context.audit_result = f"job {jid} submitted to {r.queues[0]}"
    return Reply(SubmitResult(jid, r.queues[0]), 201, {"Location": f"/v1/jobs/{jid}"})


def _array(name: str, indices: str) -> ArraySpec | None:
    """``1-100:2%10`` as -J reads it in ``name[1-100:2]%10`` (arrays.parse_lsf_job_name)."""
    if not indices:
        return None
    body, pct, limit = indices.partition("%")
    text = f"{name or 'array'}[{body}]" + (f"%{limit}" if pct else "")
    return parse_lsf_job_name(text, max_size=ARRAY_SIZE_CAP)[1]  # the leader applies the site's maximum


@route("DELETE", JOB, "jobs.kill", summary="Kill a job (200: killed; 202: kill requested)", tag="jobs",
       reply=S.KillReply, errors=(404, 409), alt_status=(202,))
async def kill_job(svc: Services, req: Any, job_id: int) -> Reply:
    await owned_job(svc, req, job_id, "jobs.kill")
    who = req.context.principal.user
    r = await svc.call(req, Op.KILL, writes.kill([job_id], key=idempotency_key(req), reason=f"killed by {who}"))
    what = r.results.get(job_id, "not found")
    req.context.audit_result = f"job {job_id}: {what}"
    if what == "not found":
        raise NotFound(f"job {element_text(job_id)} is not known")
    if what.startswith("already"):
        raise Conflict(f"job {job_id} has {what.replace('already', 'already ended:')}")
    return Reply(r, 202 if what == "kill requested" else 200)


@route("PATCH", JOB, "jobs.modify", summary="Change a job (bmod): its memory limit (null removes it); of a "
       "pending job also -R -n -q -J -W -sp -w -E", tag="jobs", body=ModifyBody, reply=JobView, errors=(404, 409))
async def modify_job(svc: Services, req: Any, job_id: int, body: ModifyBody) -> JobView:
    changes = {f: getattr(body, f) for f in body.__struct_fields__
               if f != "mem_limit" and getattr(body, f) is not msgspec.UNSET}
    if body.mem_limit is msgspec.UNSET and not changes:
        raise InvalidRequest("modify: the body names nothing to change (mem_limit, resreq, slots, queue, name, "
                             "run_limit, priority, depend, pre_exec)")
    await owned_job(svc, req, job_id, "jobs.modify")
    key = idempotency_key(req)
    said = []
    if body.mem_limit is not msgspec.UNSET:
        limit = _bytes(body.mem_limit)
        await svc.call(req, Op.MODIFY, writes.modify(job_id, limit, key=key))
        said.append(f"mem_limit set to {limit}")
        key = _second_key(key)
    if changes:
        await svc.call(req, Op.MODIFY_SPEC, writes.modify_spec(job_id, key=key, **changes))
        said.append(f"changed {', '.join(sorted(changes))}")
    req.context.audit_result = f"job {element_text(job_id)}: {'; '.join(said)}"
    return (await svc.call(req, Op.JOBS, S.JobsRequest(ids=[job_id]))).jobs[0]


def _second_key(key: str) -> str:
    """The idempotency key of a PATCH's second write (the spec after the memory limit): derived, so a
    retried PATCH repeats neither."""
    return key[:120] + "/spec"


@route("GET", "/v1/accounting", "accounting.read", summary="Finished-job records (DONE and EXIT)",
       tag="accounting", query=AccountingQuery, reply=list[JobView], headers=("Link",))
async def accounting(svc: Services, req: Any, query: AccountingQuery) -> Reply:
    user = _own_filter(svc, req, "accounting.read", query.user or None)
    states = query.state.split(",") if query.state else ["DONE", "EXIT"]
    r = await svc.call(req, Op.JOBS, S.JobsRequest(user=user, queue=query.queue or None, states=states, all=True,
                                                   after=query.after, limit=query.limit))
    return _paged(req, r)
