"""Signals, observed suspensions and peeks, with a recording Outbox."""

from __future__ import annotations

import pytest
from builders import T0, host
from reactor_kit import kit

from xce.core.errors import InvalidRequest, NotFound, Unavailable
from xce.core.state import Finish
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.reactors.jobrun import PEEK_MAX, PEEK_WAIT, release_order
from xce.reactors.orders import orders
from xce.reactors.timers import on_tick


def test_kill_with_a_signal_orders_it_to_running_shares_and_commits_nothing() -> None:
    k = kit(host("node1"), host("node2"))
    k.worker("node1")
    k.worker("node2")
    job = k.run_job("node1", "node2")
    pend = k.pend_job()
    out = k.call(Op.KILL, S.KillRequest(ids=[job.id, pend.id, 9], signal=19, key="k-000001"))
    assert not out.commits
    assert sorted((o.host, o.op, o.body.signal) for o in out.orders) == \
        [("node1", Op.SIGNAL_JOB, 19), ("node2", Op.SIGNAL_JOB, 19)]
    assert out.replies[0][1].results == {job.id: "signal 19 sent", pend.id: "not running: PEND", 9: "not found"}


@pytest.mark.parametrize("sig", [0, 65])
def test_a_signal_out_of_range_is_refused(sig: int) -> None:
    (( _, e),) = kit().call(Op.KILL, S.KillRequest(ids=[1], signal=sig, key="k-000001")).errors
    assert isinstance(e, InvalidRequest) and f"signal must be 1-64, got {sig}" in e.message


def test_a_signal_carries_whom_it_goes_to_and_a_bad_whom_is_refused_by_name() -> None:
    k = kit(host("node1"))
    k.worker("node1")
    job = k.run_job("node1")
    out = k.call(Op.KILL, S.KillRequest(ids=[job.id], signal=10, to="steps", key="k-000001"))
    assert [(o.op, o.body.signal, o.body.to) for o in out.orders] == [(Op.SIGNAL_JOB, 10, "steps")]
    (( _, e),) = k.call(Op.KILL, S.KillRequest(ids=[job.id], signal=10, to="shell", key="k-000002")).errors
    assert isinstance(e, InvalidRequest) and "kill: to must be one of '', 'batch', 'steps'" in e.message \
        and "got 'shell'" in e.message
    (( _, e),) = k.call(Op.KILL, S.KillRequest(ids=[job.id], to="batch", key="k-000003")).errors
    assert isinstance(e, InvalidRequest) and "to='batch' says whom a signal goes to; give the signal too" in e.message


def test_job_signalled_keeps_the_workers_word_on_suspension() -> None:
    k = kit()
    out = k.call(Op.JOB_SIGNALLED, S.JobSignalled(host="node1", job_id=1, attempt=1, signal=19, suspended=True,
                                                  time=T0))
    assert out.replies[0][1] == S.Ack() and k.ctx.book.suspended == {(1, "node1"): True}


def test_a_peek_is_forwarded_to_the_first_host_and_answered_when_its_output_comes() -> None:
    k = kit(host("node1"), host("node2"))
    k.worker("node1")
    job = k.run_job("node1", "node2")
    out = k.call(Op.PEEK, S.PeekRequest(id=job.id), peer=b"client")
    assert not out.replies
    ((host_, op, order, _),) = out.orders
    assert (host_, op, order.job_id) == ("node1", Op.PEEK_JOB, job.id)
    back = k.call(Op.JOB_OUTPUT, S.JobOutput(host="node1", ticket=order.ticket, job_id=job.id, stdout="hi"),
                  peer=b"worker")
    (ack, answer) = back.replies
    assert ack[0].peer == b"worker" and ack[1] == S.Ack()
    assert answer[0].peer == b"client" and answer[1].stdout == "hi" and answer[1].state == "RUN"
    again = k.call(Op.JOB_OUTPUT, S.JobOutput(host="node1", ticket=order.ticket, job_id=job.id), peer=b"worker")
    assert len(again.replies) == 1  # answered once: a late copy is only acknowledged


def test_a_peek_the_worker_cannot_serve_is_an_error_to_the_client() -> None:
    k = kit()
    k.worker("node1")
    job = k.run_job("node1")
    ((_, _, order, _),) = k.call(Op.PEEK, S.PeekRequest(id=job.id), peer=b"client").orders
    out = k.call(Op.JOB_OUTPUT, S.JobOutput(host="node1", ticket=order.ticket, job_id=job.id, error="gone"))
    ((req, e),) = out.errors
    assert req.peer == b"client" and isinstance(e, Unavailable) and e.message == "peek: gone"


def test_an_unanswered_peek_expires_with_an_error() -> None:
    k = kit()
    k.worker("node1")
    job = k.run_job("node1")
    k.call(Op.PEEK, S.PeekRequest(id=job.id), peer=b"client")
    k.now += PEEK_WAIT + 1
    k.worker("node1")
    out = k.call(Op.PING, S.Empty())
    on_tick(k.ctx, k.now, out)
    ((req, e),) = out.errors
    assert req.peer == b"client" and "did not answer within 5 s" in e.message and not k.ctx.book.peeks


def test_peek_refusals_and_jobs_that_run_nowhere() -> None:
    k = kit()
    (( _, e),) = k.call(Op.PEEK, S.PeekRequest(id=1, max_bytes=PEEK_MAX + 1)).errors
    assert isinstance(e, InvalidRequest) and "max_bytes must be" in e.message
    (( _, e),) = k.call(Op.PEEK, S.PeekRequest(id=9)).errors
    assert isinstance(e, NotFound)
    pend = k.pend_job()
    assert "is PEND: it has no output yet" in k.call(Op.PEEK, S.PeekRequest(id=pend.id)).replies[0][1].note
    job = k.run_job("node1")   # no worker connected
    (( _, e),) = k.call(Op.PEEK, S.PeekRequest(id=job.id)).errors
    assert isinstance(e, Unavailable) and "node1 is not connected" in e.message


def test_when_the_first_hosts_command_ends_the_other_shares_are_killed() -> None:
    k = kit(host("node1"), host("node2"))
    k.worker("node1")
    k.worker("node2")
    job = k.run_job("node1", "node2")
    k.state.apply(Finish(time=T0 + 3, job_id=job.id, attempt=job.attempt, host="node1", exit_code=0))
    assert release_order(job)
    out = k.call(Op.PING, S.Empty())
    orders(k.ctx, job, k.now, out)
    ((host_, op, order, _),) = out.orders
    assert (host_, op) == ("node2", Op.KILL_JOB) and order.reason == "the job's command ended on node1"
