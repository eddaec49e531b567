"""Who may send what, checked before any reactor runs: daemon keys, tokens, the policy."""

from __future__ import annotations

import pytest
from builders import T0, spec
from reactor_kit import kit

from xce.core.errors import PermissionDenied, Unauthenticated
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.reactors.access import DAEMON_GRANT_TTL
from xce.reactors.table import ROUTES
from xce.reactors.timers import on_keys_changed
from xce.security.policy import OP_PERMISSIONS

HB = S.Heartbeat(host="node1", time=T0, os_available=1 << 30)


def error_of(out):
    assert not out.replies and not out.commits
    ((_, e),) = out.errors
    return e


def test_every_served_opcode_has_a_permission_in_the_one_policy_table() -> None:
    assert set(ROUTES) <= set(OP_PERMISSIONS)


# ---- tokens ----------------------------------------------------------------------------------

def test_a_request_without_a_token_is_unauthenticated_but_ping_is_public() -> None:
    k = kit(tokens=True)
    e = error_of(k.call(Op.JOBS, S.JobsRequest()))
    assert isinstance(e, Unauthenticated) and "JOBS needs a token" in e.message
    assert k.call(Op.PING, S.Empty()).replies


def test_a_bad_token_is_refused_and_a_refused_write_is_logged_without_a_user() -> None:
    k = kit(tokens=True)
    out = k.call(Op.SUBMIT, S.SubmitRequest(jobs=[spec()], key="k-000001"), token="forged")
    assert isinstance(error_of(out), Unauthenticated)
    ((entry, result),) = out.log
    assert entry.user is None and entry.target == "1 job(s) to normal" and result.startswith("refused:")


def test_a_role_without_the_permission_is_denied() -> None:
    k = kit(tokens=True)
    e = error_of(k.call(Op.AUDIT, S.Empty(), token="tok-alice"))
    assert isinstance(e, PermissionDenied) and "cluster.audit" in e.message


def test_an_own_grant_cannot_kill_someone_elses_job_and_lists_only_own_jobs() -> None:
    k = kit(tokens=True)
    k.pend_job(user="alice")
    k.pend_job(user="bob")
    e = error_of(k.call(Op.KILL, S.KillRequest(ids=[2], key="k-000001"), token="tok-alice"))
    assert isinstance(e, PermissionDenied)
    jobs = k.call(Op.JOBS, S.JobsRequest(), token="tok-alice").replies[0][1]
    assert [j.user for j in jobs.jobs] == ["alice"]
    assert len(k.call(Op.JOBS, S.JobsRequest(), token="tok-olga").replies[0][1].jobs) == 2


def test_submitting_as_someone_else_needs_submit_as() -> None:
    k = kit(tokens=True)
    e = error_of(k.call(Op.SUBMIT, S.SubmitRequest(jobs=[spec(user="bob")], key="k-000001"), token="tok-alice"))
    assert isinstance(e, PermissionDenied) and "jobs.submit_as" in e.message


def test_a_user_token_cannot_speak_for_a_worker() -> None:
    k = kit(tokens=True)
    e = error_of(k.call(Op.HEARTBEAT, HB, token="tok-alice"))
    assert isinstance(e, PermissionDenied) and "daemon.worker" in e.message


def test_a_daemon_grant_is_reused_for_a_few_seconds_then_verified_again() -> None:
    k = kit(tokens=True)
    calls: list[str] = []
    verify = k.ctx.tokens.verify
    k.ctx.tokens.verify = lambda t: calls.append(t) or verify(t)  # type: ignore[method-assign]
    k.call(Op.HEARTBEAT, HB, token="tok-daemon")
    k.call(Op.HEARTBEAT, HB, token="tok-daemon")
    assert calls == ["tok-daemon"]
    k.now += DAEMON_GRANT_TTL + 0.1
    k.call(Op.HEARTBEAT, HB, token="tok-daemon")
    assert calls == ["tok-daemon", "tok-daemon"]


# ---- CURVE daemon keys -----------------------------------------------------------------------

def test_a_daemon_op_needs_a_key_on_the_allow_list() -> None:
    k = kit(curve=True)
    e = error_of(k.call(Op.HEARTBEAT, HB, key="Zkey", key_name=None))
    assert isinstance(e, Unauthenticated) and "CURVE key Zkey is not in the allow-list" in e.message
    e = error_of(k.call(Op.HEARTBEAT, HB))
    assert "CURVE key (none)" in e.message


def test_place_from_a_non_scheduler_key_is_denied() -> None:
    k = kit(curve=True)
    e = error_of(k.call(Op.PLACE, S.PlaceRequest(placements=[]), key="Z", key_name="node1"))
    assert isinstance(e, PermissionDenied) and "PLACE needs the scheduler's key 'scheduler'" in e.message
    assert k.call(Op.PLACE, S.PlaceRequest(placements=[]), key="Z", key_name="scheduler").replies


def test_the_schedulers_key_does_not_speak_for_a_host() -> None:
    e = error_of(kit(curve=True).call(Op.HEARTBEAT, HB, key="Z", key_name="scheduler"))
    assert isinstance(e, PermissionDenied) and "does not speak for a host" in e.message


def test_a_workers_key_speaks_only_for_its_own_host() -> None:
    k = kit(curve=True)
    e = error_of(k.call(Op.HEARTBEAT, HB, key="Z", key_name="node2"))
    assert isinstance(e, PermissionDenied) and "speaks only for host 'node2'" in e.message


@pytest.mark.parametrize("op", [Op.SUBMIT, Op.JOBS])
def test_client_ops_need_no_daemon_key(op: Op) -> None:
    body = S.SubmitRequest(jobs=[spec()], key="k-000001") if op == Op.SUBMIT else S.JobsRequest()
    out = kit(curve=True).call(op, body)
    assert not out.errors


def test_register_remembers_the_key_and_a_revoked_key_cuts_the_worker_off() -> None:
    k = kit(curve=True)
    reg = S.RegisterRequest(host="node1", slots=4, ncpus=4, mem_total=8 << 30, os_available=1, version="t")
    k.commit_all(k.call(Op.REGISTER, reg, key="Z", key_name="node1", peer=b"w1"))
    assert k.ctx.book.worker_keys == {"node1": "node1"} and k.ctx.book.workers == {"node1": b"w1"}
    on_keys_changed(k.ctx, {"node1", "scheduler"})
    assert k.ctx.book.workers == {"node1": b"w1"}
    on_keys_changed(k.ctx, {"scheduler"})
    assert k.ctx.book.workers == {} and k.ctx.book.worker_keys == {} and "node1" not in k.ctx.book.registered_at
