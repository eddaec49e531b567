"""Stop and continue converge to the state: lost orders re-sent, a new leader corrects what its
workers say at registration, SSUSP stops too, JOB_SIGNALLED answers compared with the state."""

from __future__ import annotations

import signal

from builders import T0, host
from reactor_kit import kit

from xce.core.model import JobState
from xce.core.state import Requeue, SysResume, SysSuspend
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.reactors.orders import RESEND_AFTER
from xce.reactors.timers import on_tick

STOP, CONT = int(signal.SIGSTOP), int(signal.SIGCONT)


def signals(out) -> list[tuple[str, int, int]]:
    return sorted((o.host, o.body.job_id, o.body.signal) for o in out.orders if o.op == Op.SIGNAL_JOB)


def tick(k, dt: float):
    k.now += dt
    for name in list(k.ctx.book.workers):
        k.worker(name)  # the workers keep answering heartbeats
    k.ctx.next_check = 0
    out = k.call(Op.PING, S.Empty())
    on_tick(k.ctx, k.now, out)
    return out


def answered(k, job, sig: int, suspended: bool, name: str = "node1", detail: str = ""):
    return k.call(Op.JOB_SIGNALLED, S.JobSignalled(host=name, job_id=job.id, attempt=job.attempt, signal=sig,
                                                   suspended=suspended, time=k.now, detail=detail))


def control(k, op: Op, job, n: int):
    """STOP or RESUME committed; the orders of its continuation and of what follows the apply."""
    after = k.commit_all(k.call(op, S.ControlRequest(ids=[job.id], key=f"k-{n:06d}")))
    after.orders += k.applied().orders
    return after


def register(k, name: str, *tasks: S.RunningTask):
    return k.commit_all(k.call(Op.REGISTER, S.RegisterRequest(host=name, slots=4, ncpus=4, mem_total=8 << 30,
                                                              os_available=8 << 30, version="t",
                                                              running=list(tasks))))


def test_a_stop_whose_order_is_lost_is_sent_again_until_a_worker_confirms_it() -> None:
    k = kit()
    k.worker("node1")
    job = k.run_job("node1")
    assert signals(control(k, Op.STOP, job, 1)) == [("node1", job.id, STOP)]  # lost on the way
    assert not signals(tick(k, RESEND_AFTER / 2))
    assert signals(tick(k, RESEND_AFTER)) == [("node1", job.id, STOP)]
    answered(k, job, STOP, True)
    assert not signals(tick(k, RESEND_AFTER + 1))  # confirmed: no more


def test_a_resume_whose_stop_answer_comes_late_is_still_sent_again_if_lost() -> None:
    """A stale answer (the stop's, after the resume) does not confirm the resume."""
    k = kit()
    k.worker("node1")
    job = k.run_job("node1")
    control(k, Op.STOP, job, 1)
    assert signals(control(k, Op.RESUME, job, 2)) == [("node1", job.id, CONT)]
    assert not signals(answered(k, job, STOP, True))  # no order back at once: no ping-pong
    assert signals(tick(k, RESEND_AFTER + 0.5)) == [("node1", job.id, CONT)]
    answered(k, job, CONT, False)
    assert not signals(tick(k, RESEND_AFTER + 1))


def test_a_new_leader_corrects_what_a_registering_worker_says_against_the_state() -> None:
    """After a failover the SIGSTOP of a USUSP job and the SIGCONT of a RUN job may both be lost."""
    k = kit(host("node1"))
    stopped, resumed, fine = k.run_job("node1"), k.run_job("node1"), k.run_job("node1")
    k.commit_all(k.call(Op.STOP, S.ControlRequest(ids=[stopped.id], key="k-000001")))
    assert stopped.state == JobState.USUSP
    k.ctx.was_leader = False  # the new leader: it knows nothing of its workers
    k.applied()
    after = register(k, "node1", S.RunningTask(stopped.id, stopped.attempt, 4, suspended=False),
                     S.RunningTask(resumed.id, resumed.attempt, 5, suspended=True),
                     S.RunningTask(fine.id, fine.attempt, 6, suspended=False))
    assert signals(after) == sorted([("node1", stopped.id, STOP), ("node1", resumed.id, CONT)])


def test_a_system_suspension_stops_the_processes_and_its_end_continues_them() -> None:
    k = kit(host("node1"), host("node2"))
    k.worker("node1")
    k.worker("node2")
    job = k.run_job("node1", "node2")
    k.ctx.book.confirmed.update({(job.id, "node1"): job.attempt, (job.id, "node2"): job.attempt})  # started
    k.state.apply(SysSuspend(time=T0 + 3, job_ids=[job.id]), k.raft.changes)
    assert job.state == JobState.SSUSP
    assert signals(k.applied()) == [("node1", job.id, STOP), ("node2", job.id, STOP)]
    answered(k, job, STOP, True, "node1")
    answered(k, job, STOP, True, "node2")
    k.state.apply(SysResume(time=T0 + 4, job_ids=[job.id]), k.raft.changes)
    assert signals(k.applied()) == [("node1", job.id, CONT), ("node2", job.id, CONT)]


def test_a_raw_kill_s_stop_is_the_workers_word_and_is_not_undone() -> None:
    k = kit()
    k.worker("node1")
    job = k.run_job("node1")
    k.call(Op.KILL, S.KillRequest(ids=[job.id], signal=STOP, key="k-000001"))
    assert not signals(answered(k, job, STOP, True))
    assert k.ctx.book.suspended[(job.id, "node1")] is True
    assert not signals(tick(k, RESEND_AFTER + 1))


def test_a_share_with_no_process_ends_the_intent_and_a_requeued_job_is_not_signalled() -> None:
    k = kit()
    k.worker("node1")
    job = k.run_job("node1")
    control(k, Op.STOP, job, 1)
    answered(k, job, STOP, False, detail=f"job {job.id} runs no process on node1")
    assert not signals(tick(k, RESEND_AFTER + 1))
    other = k.run_job("node1")
    control(k, Op.STOP, other, 2)
    k.state.apply(Requeue(time=T0 + 5, job_ids=[other.id]), k.raft.changes)  # killed first: no stop
    k.applied()
    assert not signals(tick(k, RESEND_AFTER + 1))
