"""`xce launch` (blaunch, srun inside a job): tasks of a running job started on its hosts.

A LAUNCH shows the job's launch token (XCE_LAUNCH_TOKEN, xce/security/launch.py), and the
leader checks, in order: the token is this cluster's; the job exists, runs (RUN) its
current attempt, and holds a share on the host that has not ended there; that host's worker
is connected.  It then forwards the start to that worker (LAUNCH_TASK) under a ticket and
answers when the worker's TASK_STATE comes back.  LAUNCH_POLL is checked the same way and
forwarded as POLL_TASK: it brings the task's new output (from the offsets the caller
already has) and, once the task ended, its exit code.  A poll naming several tasks (``more``:
the caller's one poll a round) is forwarded as a POLL_TASK per task and answered once, when
all are back (``Gather``), or with the first error.  A poll that only reads is forwarded
also once the share ended, or the job left RUN, for the same attempt: the worker keeps an
ended share's task output for a while, so the end of it still reaches the caller.

Why relayed through the leader, polled, like peek: a worker has no socket a client can
reach (it only dials the controllers), and the leader is where the token, the job's
state and its hosts are known; a poll is an idempotent read, so the request connection's
retries and leader changes need nothing more.  A start carries the caller's idempotency
key, which the worker keeps per task: a retried LAUNCH starts nothing twice.  Nothing here
changes replicated state.  Waiting clients expire after LAUNCH_WAIT (``expire_launches``).
"""

from __future__ import annotations

from xce.core.errors import InvalidRequest, LaunchDenied, NoShare, NotFound, NotRunning, Unavailable, XceError
from xce.core.model import Job, JobState
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.reactors.context import Context, Gather, Peek, Slot
from xce.reactors.outbox import Outbox, Request
from xce.reactors.orders import array_element
from xce.reactors.relay import expire, settle
from xce.security.launch import make_token, verify_token

LAUNCH_WAIT = 10.0         # seconds a client waits for the worker's answer
POLL_MAX = 1 << 20         # bytes of each stream a poll may ask for
POLL_TASKS_MAX = 4096      # tasks one poll may read (srun of a big step polls each of its tasks)


def launch_target(ctx: Context, token: str, host: str, reading: bool = False) -> Job:
    """The job ``token`` vouches for, if it may run a task on ``host`` now; a specific refusal if not.
    ``reading``: a poll that only reads may follow a share that ended (the worker keeps its tasks'
    output a while, xce/worker/tasks.py ``keep``), and a job no longer RUN, of the same attempt."""
    job_id, attempt = verify_token(ctx.launch_key, token)
    job = ctx.state.jobs.get(job_id)
    if job is None:
        raise NotFound(f"job {job_id} not found")
    if attempt != job.attempt:
        raise LaunchDenied(f"the launch token is for attempt {attempt} of job {job_id}, "
                           f"which now runs attempt {job.attempt}")
    if job.state != JobState.RUN and not (reading and job.allocs):
        raise NotRunning(f"job {job_id} is {job.state.value}: tasks are launched only while it runs (RUN)")
    if host not in job.hosts:
        raise NoShare(f"job {job_id} has no share on {host}: its hosts are {' '.join(job.hosts)}")
    if host in job.finished_hosts and not reading:
        raise NoShare(f"job {job_id}'s share on {host} has ended")
    if host not in ctx.book.workers:
        raise Unavailable(f"job {job_id}: the worker of {host} is not connected")
    return job


def on_launch(ctx: Context, req: Request, body: S.LaunchRequest, out: Outbox) -> None:
    if not body.command or not body.command[0]:
        raise InvalidRequest("launch: no command given")
    if any("\0" in a for a in body.command):
        raise InvalidRequest("launch: the command holds a NUL byte")
    expire_launches(ctx, req.now, out)
    job = launch_target(ctx, body.token, body.host)
    ticket = _wait(ctx, req, job, req.now)
    out.order(body.host, Op.LAUNCH_TASK, S.LaunchTask(job_id=job.id, attempt=job.attempt, ticket=ticket,
                                                      key=body.key, command=body.command, cwd=body.cwd,
                                                      env=body.env, run=share_order(ctx, job, body.host)))


def on_launch_poll(ctx: Context, req: Request, body: S.LaunchPoll, out: Outbox) -> None:
    if not 0 < body.max_bytes <= POLL_MAX:
        raise InvalidRequest(f"launch poll: max_bytes must be 1-{POLL_MAX}, got {body.max_bytes}")
    tasks = [S.TaskAt(body.host, body.task, body.stdout_offset, body.stderr_offset), *body.more]
    if any(t.stdout_offset < 0 or t.stderr_offset < 0 or t.task < 1 for t in tasks):
        raise InvalidRequest("launch poll: offsets must be >= 0 and the task number >= 1")
    if not 0 <= body.signal < 65:
        raise InvalidRequest(f"signal must be 1-64, got {body.signal}")
    if body.more and body.signal:
        raise InvalidRequest("launch poll: a poll of several tasks only reads; signal one task at a time")
    if len(tasks) > POLL_TASKS_MAX:
        raise InvalidRequest(f"launch poll: at most {POLL_TASKS_MAX} tasks a poll, got {len(tasks)}")
    expire_launches(ctx, req.now, out)
    job = [launch_target(ctx, body.token, h, reading=not body.signal) for h in dict.fromkeys(t.host for t in tasks)][0]
    gather = Gather(req, [None] * len(tasks)) if body.more else None
    for i, t in enumerate(tasks):
        ticket = _wait(ctx, Slot(gather, i) if gather is not None else req, job, req.now)
        out.order(t.host, Op.POLL_TASK, S.PollTask(
            job_id=job.id, attempt=job.attempt, ticket=ticket, task=t.task, stdout_offset=t.stdout_offset,
            stderr_offset=t.stderr_offset, max_bytes=body.max_bytes, signal=body.signal))


def share_order(ctx: Context, job: Job, host: str) -> S.RunJob:
    """The facts of the job's share on ``host`` that its environment is made of (as its RUN_JOB's)."""
    alloc = next(a for a in job.allocs if a.host == host)
    return S.RunJob(job_id=job.id, attempt=job.attempt, spec=job.spec, alloc=alloc, hosts=job.hosts,
                    slots=[a.slots for a in job.allocs], element=array_element(job),
                    launch_token=make_token(ctx.launch_key, job.id, job.attempt))


def _wait(ctx: Context, client: Request | Slot, job: Job, now: float) -> int:
    ticket = ctx.book.ticket()
    ctx.book.launches[ticket] = Peek(client, job.id, job.state.value, now)
    return ticket


def on_task_state(ctx: Context, req: Request, body: S.TaskState, out: Outbox) -> None:
    out.reply(req, S.Ack())
    waiting = settle(ctx.book.launches, body.ticket, body.job_id)
    if waiting is None:
        return  # expired, or not ours
    if isinstance(waiting.client, Slot):
        _gathered(waiting.client, body, out)
        return
    if body.error:
        out.error(waiting.client, XceError.from_wire(body.code or "unavailable", body.error, {}))
        return
    out.reply(waiting.client, _reply(body))


def _gathered(slot: Slot, body: S.TaskState, out: Outbox) -> None:
    """One task of a poll of several came back: the error at once, or the answer once all are in."""
    g = slot.gather
    if body.error:
        client = g.claim()
        if client is not None:
            out.error(client, XceError.from_wire(body.code or "unavailable", body.error, {}))
        return
    g.answers[slot.index] = body
    if all(a is not None for a in g.answers) and (client := g.claim()) is not None:
        first, *rest = (_reply(a) for a in g.answers)
        first.more = rest
        out.reply(client, first)


def _reply(body: S.TaskState) -> S.LaunchReply:
    return S.LaunchReply(job_id=body.job_id, host=body.host, task=body.task, stdout=body.stdout,
                         stderr=body.stderr, ended=body.ended, exit_code=body.exit_code, signal=body.signal)


def expire_launches(ctx: Context, now: float, out: Outbox) -> None:
    expire(ctx.book.launches, now, LAUNCH_WAIT, "launch", out)
