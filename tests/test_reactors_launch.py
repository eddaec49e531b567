"""xce launch (blaunch) at the leader: the token, every refusal, the forward and the relay."""

from __future__ import annotations

import pytest
from builders import T0, host
from reactor_kit import Kit, kit

from xce.core.errors import (
    InvalidRequest,
    LaunchDenied,
    NoShare,
    NotFound,
    NotRunning,
    Unavailable,
)
from xce.core.model import Job
from xce.core.state import Finish, Stop
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.reactors.launch import LAUNCH_WAIT
from xce.reactors.orders import dispatch
from xce.reactors.outbox import Outbox
from xce.reactors.timers import on_tick
from xce.security.launch import derive_key, make_token


def two_host_job() -> tuple[Kit, Job, str]:
    k = kit(host("node1"), host("node2"), host("node3"))
    for h in ("node1", "node2", "node3"):
        k.worker(h)
    job = k.run_job("node1", "node2")
    return k, job, make_token(k.ctx.launch_key, job.id, job.attempt)


def launch(k: Kit, token: str, hostname: str = "node2", command: tuple[str, ...] = ("memhog",),
           peer: bytes = b"client") -> Outbox:
    return k.call(Op.LAUNCH, S.LaunchRequest(token=token, host=hostname, command=list(command), key="lk-1",
                                             env={"SLURM_PROCID": "1"}), peer=peer)


def refusal(out: Outbox) -> Exception:
    assert not out.orders and not out.replies and not out.commits
    ((_, e),) = out.errors
    return e


def test_the_job_gets_its_token_in_run_job() -> None:
    k, job, token = two_host_job()
    out = Outbox()
    dispatch(k.ctx, job, "node2", k.now, out)
    (order,) = out.orders
    assert order.body.launch_token == token == f"{job.id}.{job.attempt}.{token.split('.')[2]}"


def test_a_launch_is_forwarded_to_the_hosts_worker_and_answered_when_it_started() -> None:
    k, job, token = two_host_job()
    out = launch(k, token)
    assert not out.replies and not out.errors
    ((where, op, order, _),) = out.orders
    assert (where, op) == ("node2", Op.LAUNCH_TASK)
    assert (order.job_id, order.attempt, order.command, order.key, order.env) == \
        (job.id, job.attempt, ["memhog"], "lk-1", {"SLURM_PROCID": "1"})
    back = k.call(Op.TASK_STATE, S.TaskState(host="node2", ticket=order.ticket, job_id=job.id, task=1),
                  peer=b"worker")
    (ack, answer) = back.replies
    assert ack == (ack[0], S.Ack()) and ack[0].peer == b"worker"
    assert answer[0].peer == b"client" and answer[1] == S.LaunchReply(job_id=job.id, host="node2", task=1)
    late = k.call(Op.TASK_STATE, S.TaskState(host="node2", ticket=order.ticket, job_id=job.id, task=1))
    assert len(late.replies) == 1  # answered once


def test_a_poll_is_forwarded_and_its_output_and_exit_relayed() -> None:
    k, job, token = two_host_job()
    out = k.call(Op.LAUNCH_POLL, S.LaunchPoll(token=token, host="node1", task=2, stdout_offset=5, signal=15),
                 peer=b"client")
    ((where, op, order, _),) = out.orders
    assert (where, op, order.task, order.stdout_offset, order.signal) == ("node1", Op.POLL_TASK, 2, 5, 15)
    back = k.call(Op.TASK_STATE, S.TaskState(host="node1", ticket=order.ticket, job_id=job.id, task=2,
                                             stdout=b"hi\n", ended=True, exit_code=3))
    reply = back.replies[1][1]
    assert (reply.stdout, reply.ended, reply.exit_code) == (b"hi\n", True, 3)


def test_the_workers_refusal_comes_back_as_its_own_error_class() -> None:
    k, job, token = two_host_job()
    order = launch(k, token).orders[0].body
    back = k.call(Op.TASK_STATE, S.TaskState(host="node2", ticket=order.ticket, job_id=job.id,
                                             error="command not found: memhog", code="invalid"))
    ((client, e),) = back.errors
    assert client.peer == b"client" and isinstance(e, InvalidRequest) and e.message == "command not found: memhog"


def test_a_forged_token_is_refused() -> None:
    k, job, _ = two_host_job()
    forged = make_token(derive_key(b"another cluster"), job.id, job.attempt)
    e = refusal(launch(k, forged))
    assert isinstance(e, LaunchDenied) and e.message == \
        f"the launch token is not valid for job {job.id}: it was not issued by this cluster"


@pytest.mark.parametrize("token", ["", "12", "a.b.c", "12.1."])
def test_what_is_no_token_is_refused_by_name(token: str) -> None:
    e = refusal(launch(kit(), token))
    assert isinstance(e, InvalidRequest) and "not a launch token" in e.message


def test_a_token_of_another_attempt_is_refused() -> None:
    k, job, _ = two_host_job()
    old = make_token(k.ctx.launch_key, job.id, job.attempt + 1)
    e = refusal(launch(k, old))
    assert isinstance(e, LaunchDenied) and e.message == \
        f"the launch token is for attempt {job.attempt + 1} of job {job.id}, which now runs attempt {job.attempt}"


def test_a_job_that_is_gone_is_not_found() -> None:
    k = kit()
    e = refusal(launch(k, make_token(k.ctx.launch_key, 99, 1)))
    assert isinstance(e, NotFound) and e.message == "job 99 not found"


def test_a_job_not_running_is_refused() -> None:
    k = kit()
    job = k.pend_job()
    e = refusal(launch(k, make_token(k.ctx.launch_key, job.id, job.attempt)))
    assert isinstance(e, NotRunning) and e.message.startswith(f"job {job.id} is PEND")


def test_a_suspended_job_is_refused() -> None:
    k, job, token = two_host_job()
    k.state.apply(Stop(time=T0 + 2, key="stop-1", job_ids=[job.id]))
    e = refusal(launch(k, token))
    assert isinstance(e, NotRunning) and e.message.startswith(f"job {job.id} is USUSP")


def test_a_host_outside_the_job_is_refused_by_name() -> None:
    k, job, token = two_host_job()
    e = refusal(launch(k, token, "node3"))
    assert isinstance(e, NoShare) and e.message == f"job {job.id} has no share on node3: its hosts are node1 node2"


def test_a_host_whose_share_ended_is_refused() -> None:
    k = kit(host("node1"), host("node2"), host("node3"))
    for h in ("node1", "node2", "node3"):
        k.worker(h)
    job = k.run_job("node1", "node2", "node3")
    k.state.apply(Finish(time=T0 + 2, job_id=job.id, attempt=job.attempt, host="node2", exit_code=0))
    assert k.state.jobs[job.id].state.value == "RUN"
    e = refusal(launch(k, make_token(k.ctx.launch_key, job.id, job.attempt)))
    assert isinstance(e, NoShare) and e.message == f"job {job.id}'s share on node2 has ended"



def test_a_poll_that_only_reads_follows_a_share_and_a_job_that_ended() -> None:
    """The worker keeps an ended share's task output a while: the leader must let the reads through
    (they were refused, and what the caller had not relayed yet was lost); a signal is not sent."""
    k = kit(host("node1"), host("node2"), host("node3"))
    for h in ("node1", "node2", "node3"):
        k.worker(h)
    job = k.run_job("node1", "node2")
    token = make_token(k.ctx.launch_key, job.id, job.attempt)
    k.state.apply(Finish(time=T0 + 2, job_id=job.id, attempt=job.attempt, host="node2", exit_code=0))
    read = S.LaunchPoll(token=token, host="node2", task=1, stdout_offset=3)
    ((where, op, order, _),) = k.call(Op.LAUNCH_POLL, read).orders
    assert (where, op, order.attempt, order.stdout_offset) == ("node2", Op.POLL_TASK, job.attempt, 3)
    e = refusal(k.call(Op.LAUNCH_POLL, S.LaunchPoll(token=token, host="node2", task=1, signal=15)))
    assert isinstance(e, NoShare)
    k.state.apply(Finish(time=T0 + 3, job_id=job.id, attempt=job.attempt, host="node1", exit_code=0))
    assert k.state.jobs[job.id].state.value == "DONE"
    assert k.call(Op.LAUNCH_POLL, read).orders  # the job ended: its last output still comes
    assert isinstance(refusal(launch(k, token)), NotRunning)  # but nothing new starts


def test_a_host_whose_worker_is_away_is_unavailable() -> None:
    k, job, token = two_host_job()
    del k.ctx.book.workers["node2"]
    e = refusal(launch(k, token))
    assert isinstance(e, Unavailable) and e.message == f"job {job.id}: the worker of node2 is not connected"


@pytest.mark.parametrize("command,why", [([], "launch: no command given"), ([""], "launch: no command given"),
                                         (["a\0b"], "launch: the command holds a NUL byte")])
def test_a_bad_command_is_refused(command: list[str], why: str) -> None:
    k, _, token = two_host_job()
    e = refusal(launch(k, token, command=tuple(command)))
    assert isinstance(e, InvalidRequest) and e.message == why


@pytest.mark.parametrize("field,value,why", [
    ("max_bytes", 0, "max_bytes must be 1-"), ("stdout_offset", -1, "offsets must be >= 0"),
    ("task", 0, "the task number >= 1"), ("signal", 65, "signal must be 1-64"),
])
def test_a_bad_poll_is_refused(field: str, value: int, why: str) -> None:
    k, _, token = two_host_job()
    body = S.LaunchPoll(token=token, host="node2", **{"task": 1, field: value})
    e = refusal(k.call(Op.LAUNCH_POLL, body))
    assert isinstance(e, InvalidRequest) and why in e.message


def test_a_poll_is_refused_as_a_launch_is() -> None:
    k, job, token = two_host_job()
    e = refusal(k.call(Op.LAUNCH_POLL, S.LaunchPoll(token=token, host="node3", task=1)))
    assert isinstance(e, NoShare)


def test_a_launch_nobody_answers_expires_with_an_error() -> None:
    k, job, token = two_host_job()
    launch(k, token)
    assert k.ctx.book.launches
    out = Outbox()
    k.ctx.next_check = 0.0
    on_tick(k.ctx, k.now + LAUNCH_WAIT + 1, out)
    ((client, e),) = [(r, e) for r, e in out.errors]
    assert client.peer == b"client" and isinstance(e, Unavailable) and "did not answer" in e.message
    assert not k.ctx.book.launches


def test_launch_needs_no_user_token_but_task_state_needs_a_daemon() -> None:
    k = kit(host("node1"), host("node2"), tokens=True)
    k.worker("node1")
    k.worker("node2")
    job = k.run_job("node1", "node2")
    out = launch(k, make_token(k.ctx.launch_key, job.id, job.attempt))
    assert out.orders and not out.errors
    denied = k.call(Op.TASK_STATE, S.TaskState(host="node2", ticket=1, job_id=job.id), token="tok-alice")
    assert denied.errors and denied.errors[0][1].code == "forbidden"


def test_one_poll_reads_every_task_of_the_caller_and_is_answered_once_all_came_back() -> None:
    """One LAUNCH_POLL a round for all the caller's tasks (it was one per task): a POLL_TASK each,
    one LaunchReply with the others in ``more``, in the order asked."""
    k, job, token = two_host_job()
    body = S.LaunchPoll(token=token, host="node1", task=1, stdout_offset=4,
                        more=[S.TaskAt("node2", 1, 2, 0), S.TaskAt("node2", 2)])
    out = k.call(Op.LAUNCH_POLL, body, peer=b"client")
    orders = [(where, o.task, o.stdout_offset) for where, op, o, _ in out.orders if op == Op.POLL_TASK]
    assert orders == [("node1", 1, 4), ("node2", 1, 2), ("node2", 2, 0)]
    tickets = [o.ticket for _, _, o, _ in out.orders]
    answers = [S.TaskState(host="node2", ticket=tickets[2], job_id=job.id, task=2, stdout=b"c"),
               S.TaskState(host="node1", ticket=tickets[0], job_id=job.id, task=1, stdout=b"a", ended=True,
                           exit_code=0)]
    for a in answers:  # not all back yet: no answer to the client
        assert [r for r in k.call(Op.TASK_STATE, a).replies if isinstance(r[1], S.LaunchReply)] == []
    last = k.call(Op.TASK_STATE, S.TaskState(host="node2", ticket=tickets[1], job_id=job.id, task=1, stdout=b"b"))
    (reply,) = [r for _, r in last.replies if isinstance(r, S.LaunchReply)]
    assert [(r.host, r.task, r.stdout) for r in [reply, *reply.more]] == [("node1", 1, b"a"), ("node2", 1, b"b"),
                                                                          ("node2", 2, b"c")]
    assert reply.ended and reply.exit_code == 0 and not k.ctx.book.launches


def test_a_gathered_poll_errs_once_and_expires_once() -> None:
    k, job, token = two_host_job()
    out = k.call(Op.LAUNCH_POLL, S.LaunchPoll(token=token, host="node1", task=1, more=[S.TaskAt("node2", 1)]))
    t1, t2 = (o.ticket for _, _, o, _ in out.orders)
    err = k.call(Op.TASK_STATE, S.TaskState(host="node1", ticket=t1, job_id=job.id, task=1, error="no task 1",
                                            code="not_found"))
    assert len(err.errors) == 1 and isinstance(err.errors[0][1], NotFound)
    late = k.call(Op.TASK_STATE, S.TaskState(host="node2", ticket=t2, job_id=job.id, task=1, stdout=b"x"))
    assert not late.errors and [r for _, r in late.replies if isinstance(r, S.LaunchReply)] == []
    out = k.call(Op.LAUNCH_POLL, S.LaunchPoll(token=token, host="node1", task=1, more=[S.TaskAt("node2", 1)]))
    timed_out = Outbox()
    on_tick(k.ctx, T0 + 1000, timed_out)
    assert len([e for _, e in timed_out.errors if isinstance(e, Unavailable)]) == 1 and not k.ctx.book.launches
    e = refusal(k.call(Op.LAUNCH_POLL, S.LaunchPoll(token=token, host="node1", task=1, signal=15,
                                                    more=[S.TaskAt("node2", 1)])))
    assert isinstance(e, InvalidRequest) and "a poll of several tasks only reads" in e.message
