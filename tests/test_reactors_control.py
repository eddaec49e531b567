"""Job control and host removal through the reactors, with a recording Outbox."""

from __future__ import annotations

import signal

import pytest
from builders import host
from reactor_kit import kit

from xce.core.errors import Conflict, IllegalTransition, Infeasible, InvalidRequest, NotFound
from xce.core.state import ModifySpec, Move, RemoveHosts, Requeue, Stop, Switch
from xce.proto import schema as S
from xce.proto.opcodes import Op


def only_error(out):
    assert not out.replies and not out.commits
    ((_, e),) = out.errors
    return e


def test_stop_of_a_running_job_commits_then_sigstops_its_shares_and_resume_sigconts() -> None:
    k = kit()
    k.worker("node1")
    job = k.run_job("node1")
    out = k.call(Op.STOP, S.ControlRequest(ids=[job.id], key="k-000001"))
    ((cmd, _),) = out.commits
    assert isinstance(cmd, Stop) and not out.orders  # nothing is signalled before the commit
    after = k.commit_all(out)
    assert after.replies[0][1] == S.ControlReply(results={job.id: "USUSP"})
    ((host_, op, order, _),) = k.applied().orders  # after the apply, as the state says
    assert (host_, op, order.signal) == ("node1", Op.SIGNAL_JOB, signal.SIGSTOP)
    after = k.commit_all(k.call(Op.RESUME, S.ControlRequest(ids=[job.id], key="k-000002")))
    assert after.replies[0][1].results == {job.id: "RUN"}
    assert [o.body.signal for o in k.applied().orders if o.op == Op.SIGNAL_JOB] == [signal.SIGCONT]


def test_stop_of_a_pending_job_holds_it_and_signals_nothing() -> None:
    k = kit()
    pend = k.pend_job()
    after = k.commit_all(k.call(Op.STOP, S.ControlRequest(ids=[pend.id], key="k-000001")))
    assert after.replies[0][1].results == {pend.id: "PSUSP"} and not after.orders and not k.applied().orders


@pytest.mark.parametrize("op", [Op.STOP, Op.RESUME, Op.REQUEUE])
def test_control_without_ids_is_refused(op: Op) -> None:
    e = only_error(kit().call(op, S.ControlRequest(ids=[], key="k-000001")))
    assert isinstance(e, InvalidRequest) and "no job ids given" in e.message


def test_a_control_the_state_machine_refuses_is_the_answer() -> None:
    k = kit()
    pend = k.pend_job()
    ((_, e),) = k.commit_all(k.call(Op.RESUME, S.ControlRequest(ids=[pend.id], key="k-000001"))).errors
    assert isinstance(e, (IllegalTransition, Conflict, InvalidRequest)) and str(pend.id) in e.message


def test_requeue_checks_its_reason_and_commits() -> None:
    k = kit()
    e = only_error(k.call(Op.REQUEUE, S.ControlRequest(ids=[1], reason="x" * 2000, key="k-000001")))
    assert isinstance(e, InvalidRequest) and "kill reason" in e.message
    ((cmd, _),) = k.call(Op.REQUEUE, S.ControlRequest(ids=[1], reason="again", key="k-000002")).commits
    assert isinstance(cmd, Requeue) and cmd.reason == "again"


def test_switch_move_and_their_refusals() -> None:
    k = kit()
    ((cmd, _),) = k.call(Op.SWITCH, S.SwitchRequest(ids=[1], queue="normal", key="k-000001")).commits
    assert isinstance(cmd, Switch) and cmd.queue == "normal"
    assert "switch: no job ids given" in only_error(k.call(Op.SWITCH, S.SwitchRequest(ids=[], queue="q",
                                                                                    key="k-000002"))).message
    pend = k.pend_job()
    out = k.call(Op.MOVE, S.MoveRequest(id=pend.id, to="top", key="k-000003"))
    ((cmd, _),) = out.commits
    assert isinstance(cmd, Move)
    assert k.commit_all(out).replies[0][1].detail.startswith("priority ")
    e = only_error(k.call(Op.MOVE, S.MoveRequest(id=pend.id, to="middle", key="k-000004")))
    assert "'top' or 'bottom', got 'middle'" in e.message


def test_modify_spec_parses_the_requirement_and_dependency_at_the_door() -> None:
    k = kit()
    pend = k.pend_job()
    out = k.call(Op.MODIFY_SPEC, S.ModifySpecRequest(id=pend.id, resreq="rusage[mem=2G]", depend="done(7)",
                                                     key="k-000001"))
    ((cmd, _),) = out.commits
    assert isinstance(cmd, ModifySpec) and cmd.req is not None and cmd.patch.depend is not None
    e = only_error(k.call(Op.MODIFY_SPEC, S.ModifySpecRequest(id=pend.id, resreq="rusage[", key="k-000002")))
    assert "rusage" in e.message


def test_hist_answers_a_jobs_events_and_refuses_an_unknown_job() -> None:
    k = kit()
    pend = k.pend_job()
    body = k.call(Op.HIST, S.HistRequest(id=pend.id)).replies[0][1]
    assert body.id == pend.id
    assert isinstance(only_error(k.call(Op.HIST, S.HistRequest(id=99))), NotFound)


def test_control_requests_are_logged_with_their_targets() -> None:
    k = kit()
    out = k.call(Op.SWITCH, S.SwitchRequest(ids=[1, 2], queue="long", key="k-000001"))
    after = k.commit_all(out)
    ((entry, _),) = after.log
    assert (entry.op, entry.target) == ("SWITCH", "jobs 1 2 to queue long")


def test_host_remove_commits_drops_soft_state_and_starts_a_new_epoch() -> None:
    k = kit(host("node1"), host("node2"))
    k.worker("node2")
    k.ctx.stream.subscribers = 1
    out = k.call(Op.HOST_ADMIN, S.HostAdminRequest(names=["node2"], action="remove", key="k-000001"))
    ((cmd, _),) = out.commits
    assert isinstance(cmd, RemoveHosts)
    assert k.commit_all(out).replies[0][1] == S.Ack(True, "ok")
    applied = k.applied()
    (ev,) = applied.events
    assert ev.epoch == k.ctx.stream.epoch == "epoch1"
    assert "node2" not in k.ctx.book.workers and "node2" not in k.ctx.live.last_seen


def test_host_remove_refusals() -> None:
    k = kit()
    e = only_error(k.call(Op.HOST_ADMIN, S.HostAdminRequest(names=[], action="remove", key="k-000001")))
    assert "host remove: no host names given" in e.message
    k.run_job("node1")
    out = k.call(Op.HOST_ADMIN, S.HostAdminRequest(names=["node1"], action="remove", key="k-000002"))
    ((_, e),) = k.commit_all(out).errors
    assert isinstance(e, Conflict) and "host node1 runs job 1" in e.message


def test_status_leaves_an_unavail_hosts_memory_out() -> None:
    k = kit(host("node1", mem="8G"), host("node2", mem="4G"))
    k.state.hosts["node2"].unavail = True
    st = k.call(Op.STATUS, S.Empty()).replies[0][1]
    assert st.mem["capacity"] == 8 << 30 and st.hosts_by_state.get("unavail") == 1


@pytest.mark.parametrize("change,words", [
    ({"slots": 9}, "no host could ever run it: needs 9 slot(s)"),
    ({"resreq": "rusage[mem=64G]"}, "64.0G per host"),
])
def test_a_modified_request_no_host_could_ever_run_is_refused_as_submit_is(change, words: str) -> None:
    k = kit()  # node1: 4 slots, 8G
    pend = k.pend_job()
    e = only_error(k.call(Op.MODIFY_SPEC, S.ModifySpecRequest(id=pend.id, key="k-000001", **change)))
    assert isinstance(e, Infeasible) and words in e.message
    out = k.call(Op.MODIFY_SPEC, S.ModifySpecRequest(id=pend.id, slots=4, key="k-000002"))
    assert len(out.commits) == 1  # what fits is committed


def test_a_modified_request_of_an_array_element_is_checked_against_capacity_too() -> None:
    from test_reactors_arrays import submit_array

    k = kit()
    aid = submit_array(k, "a[1-3]")
    for target in (aid, aid << 32 | 2):
        e = only_error(k.call(Op.MODIFY_SPEC, S.ModifySpecRequest(id=target, slots=9, key=f"k-{target % 97:06d}")))
        assert isinstance(e, Infeasible) and "9 slot(s)" in e.message
