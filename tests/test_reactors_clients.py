"""The client door's reactors with a recording Outbox: answers, commits, and every refusal."""

from __future__ import annotations

import pytest
from builders import T0, host, queue, spec
from reactor_kit import FakeRequestLog, key, kit

from xce.core.errors import Infeasible, InvalidRequest, NotFound, NotLeader, ProtocolError, XceError
from xce.core.model import JobState
from xce.core.state import Kill, Modify, SetHostAdmin, Submit
from xce.proto import schema as S
from xce.proto.opcodes import Op


def only_error(out) -> XceError:
    assert not out.replies and not out.commits
    ((_, e),) = out.errors
    return e


def only_reply(out):
    assert not out.errors
    ((_, body),) = out.replies
    return body


# ---- PING, STATUS: any role ------------------------------------------------------------------

def test_ping_is_answered_even_by_a_follower() -> None:
    k = kit(leading=False)
    assert only_reply(k.call(Op.PING, S.Empty())) == S.Empty()


def test_status_counts_hosts_jobs_and_memory_and_names_the_leader() -> None:
    k = kit(host("node1", mem="8G"), host("node2", mem="4G"))
    k.worker("node1")
    k.run_job("node1", mem="1G")
    k.pend_job()
    st = only_reply(k.call(Op.STATUS, S.Empty()))
    assert st.jobs_by_state == {"RUN": 1, "PEND": 1}
    assert st.hosts_by_state == {"ok": 2}
    assert st.mem["capacity"] == 12 << 30 and st.mem["reserved"] == 1 << 30
    me, peer = st.controllers
    assert (me.role, me.term, me.pid, me.leader) == ("leader", 3, 4242, "tcp://127.0.0.1:7700")
    assert peer.address == "tcp://127.0.0.1:7710" and peer.role == "peer"


def test_status_on_a_follower_says_follower() -> None:
    k = kit(leading=False)
    k.raft.info = {"state": 0, "commit_idx": 4, "last_applied": 3}
    (me, _) = only_reply(k.call(Op.STATUS, S.Empty())).controllers
    assert (me.role, me.commit_index, me.applied_index) == ("follower", 4, 3)


# ---- not leader ------------------------------------------------------------------------------

@pytest.mark.parametrize("op,body", [
    (Op.SUBMIT, S.SubmitRequest(jobs=[spec()], key="k-000001")),
    (Op.KILL, S.KillRequest(ids=[1], key="k-000001")),
    (Op.QUEUES, S.Empty()),
    (Op.SNAPSHOT, S.Empty()),
    (Op.JOBS, S.JobsRequest()),
    (Op.HOSTS, S.HostsRequest()),
])
def test_a_follower_refuses_with_the_leaders_address(op: Op, body) -> None:
    k = kit(leading=False)
    k.raft.leader_address = "tcp://127.0.0.1:7710"
    e = only_error(k.call(op, body))
    assert isinstance(e, NotLeader) and e.leader == "tcp://127.0.0.1:7710"


def test_a_follower_serves_stale_reads_with_their_staleness() -> None:
    k = kit(leading=False)
    k.raft.info = {"state": 0, "leader_commit_idx": 12, "last_applied": 9}
    k.pend_job()
    jobs = only_reply(k.call(Op.JOBS, S.JobsRequest(stale_ok=True)))
    assert [j.id for j in jobs.jobs] == [1]
    assert jobs.stale is not None and (jobs.stale.role, jobs.stale.lag_entries) == ("follower", 3)
    hosts = only_reply(k.call(Op.HOSTS, S.HostsRequest(stale_ok=True)))
    assert [h.name for h in hosts.hosts] == ["node1"] and hosts.stale.served_by == "tcp://127.0.0.1:7700"


def test_an_opcode_the_controller_does_not_serve_is_a_protocol_error() -> None:
    e = only_error(kit().call(Op.RUN_JOB, S.Empty()))
    assert isinstance(e, ProtocolError) and "RUN_JOB is not served" in e.message


# ---- SUBMIT ----------------------------------------------------------------------------------

def test_submit_commits_one_command_and_answers_only_after_commit() -> None:
    k = kit()
    out = k.call(Op.SUBMIT, S.SubmitRequest(jobs=[spec(queue=""), spec(mem="2G")], key="k-000001"))
    assert not out.replies and not out.errors
    ((cmd, _),) = out.commits
    assert isinstance(cmd, Submit) and [s.queue for s in cmd.specs] == ["normal", "normal"]
    assert cmd.time == k.now and cmd.key == "k-000001" and cmd.by == ""
    reply = only_reply(k.commit_all(out))
    assert reply == S.SubmitReply(ids=[1, 2], queues=["normal", "normal"])


def test_submit_records_the_principal_as_the_keys_owner() -> None:
    k = kit(tokens=True)
    out = k.call(Op.SUBMIT, S.SubmitRequest(jobs=[spec()], key="k-000001"), token="tok-alice")
    ((cmd, _),) = out.commits
    assert cmd.by == "alice" and cmd.specs[0].user == "alice"


def test_a_dry_run_answers_at_once_and_commits_nothing() -> None:
    k = kit(queues=(queue("normal"), queue("short")), default="short")
    out = k.call(Op.SUBMIT, S.SubmitRequest(jobs=[spec(queue="")], key="k-000001", dry_run=True))
    assert only_reply(out) == S.SubmitReply(ids=[], queues=["short"])


@pytest.mark.parametrize("jobs,error,words", [
    ([], InvalidRequest, "submit: no jobs given"),
    ([spec(command=[])], InvalidRequest, "no command given"),
    ([spec(), spec(slots=0)], InvalidRequest, "job 1: slots must be >= 1"),
    ([spec(queue="nope")], InvalidRequest, "queue 'nope' does not exist (queues: normal)"),
    ([spec(resreq="rusage[bogus=1]")], XceError, "bogus"),
    ([spec(mem="64G")], Infeasible, "no host could ever run it: needs 1 slot(s) and 64.0G per host"),
    ([spec(slots=9)], Infeasible, "slots"),
    ([spec(env={"X": "y" * (130 * 1024)})], InvalidRequest, "env"),
    ([spec(mem_limit=1)], InvalidRequest, "mem_limit must be at least"),
])
def test_submit_refusals_name_the_problem(jobs, error, words: str) -> None:
    k = kit()
    e = only_error(k.call(Op.SUBMIT, S.SubmitRequest(jobs=jobs, key="k-000001")))
    assert isinstance(e, error) and words in e.message


def test_a_batch_of_one_spec_repeated_is_checked_as_a_whole_and_each_copy_named() -> None:
    """Each distinct spec is checked once per submit (by its bytes); a different spec later in
    the batch is still checked, and named by its place; the repeats all land in the queue."""
    big = spec(env={"X": "y" * (130 * 1024)})
    e = only_error(kit().call(Op.SUBMIT, S.SubmitRequest(jobs=[spec()] * 3 + [big], key="k-000001")))
    assert isinstance(e, InvalidRequest) and e.message.startswith("job 3: env: ")
    e = only_error(kit().call(Op.SUBMIT, S.SubmitRequest(jobs=[spec()] * 2 + [spec(slots=9)], key="k-000002")))
    assert isinstance(e, Infeasible) and e.message.startswith("job 2: ")
    out = kit().call(Op.SUBMIT, S.SubmitRequest(jobs=[spec(queue="")] * 4, key="k-000003"))
    ((cmd, _),) = out.commits
    assert [s.queue for s in cmd.specs] == ["normal"] * 4 and len(cmd.reqs) == 4


def test_submit_with_no_host_registered_is_not_refused_as_never_fitting() -> None:
    k = kit()
    k.state.hosts.clear()
    out = k.call(Op.SUBMIT, S.SubmitRequest(jobs=[spec(mem="64G")], key="k-000001"))
    assert len(out.commits) == 1


def test_a_refused_commit_is_the_answer() -> None:
    k = kit()
    out = k.call(Op.SUBMIT, S.SubmitRequest(jobs=[spec()], key="k-000001"))
    k.state.queues.clear()  # the state machine refuses the queue when it applies
    e = only_error(k.commit_all(out))
    assert isinstance(e, InvalidRequest) and "does not exist" in e.message


# ---- JOBS, HOSTS, QUEUES ---------------------------------------------------------------------

def test_jobs_filters_and_pages() -> None:
    k = kit()
    for u in ("alice", "bob", "alice"):
        k.pend_job(user=u)
    k.state.apply(Kill(time=T0, job_ids=[3]))
    body = only_reply(k.call(Op.JOBS, S.JobsRequest()))
    assert [j.id for j in body.jobs] == [1, 2] and body.stale is None  # finished hidden by default
    assert [j.id for j in only_reply(k.call(Op.JOBS, S.JobsRequest(all=True, user="alice"))).jobs] == [1, 3]
    page = only_reply(k.call(Op.JOBS, S.JobsRequest(all=True, limit=2)))
    assert [j.id for j in page.jobs] == [1, 2] and page.next_after == 2
    rest = only_reply(k.call(Op.JOBS, S.JobsRequest(all=True, after=2, limit=2)))
    assert [j.id for j in rest.jobs] == [3] and rest.next_after is None
    assert [j.id for j in only_reply(k.call(Op.JOBS, S.JobsRequest(states=["EXIT"]))).jobs] == [3]


def test_jobs_by_id_refuses_one_unknown_and_skips_unknowns_among_many() -> None:
    k = kit()
    k.pend_job()
    e = only_error(k.call(Op.JOBS, S.JobsRequest(ids=[9])))
    assert isinstance(e, NotFound) and e.message == "job 9 is not known"
    assert [j.id for j in only_reply(k.call(Op.JOBS, S.JobsRequest(ids=[1, 9]))).jobs] == [1]


def test_jobs_naming_fields_answers_rows_of_those_fields_equal_to_the_views() -> None:
    k = kit(host("node1"))
    k.run_job("node1", user="alice")
    k.pend_job(user="bob")
    k.pend_job(user="alice")
    k.state.apply(Kill(time=T0, job_ids=[3]))
    k.ctx.live.reasons[2] = "waiting for a slot"  # the round's reason, as a view shows it
    for fields in (["id", "state"], ["id", "state", "reason", "user"], ["id", "mem_reserved", "accounts"],
                   ["id", "hosts", "host_slots"]):
        for req in (S.JobsRequest(all=True), S.JobsRequest(user="alice", all=True), S.JobsRequest(ids=[2])):
            views = only_reply(k.call(Op.JOBS, req)).jobs
            rows = only_reply(k.call(Op.JOBS, S.JobsRequest(**{**{f: getattr(req, f) for f in
                                                                      req.__struct_fields__}, "fields": fields})))
            assert rows.jobs == [] and rows.rows == [[getattr(v, f) for f in fields] for v in views]
    rows = only_reply(k.call(Op.JOBS, S.JobsRequest(fields=["id", "state", "reason"]))).rows
    assert rows == [[1, "RUN", ""], [2, "PEND", "waiting for a slot"]]  # finished hidden, as for views
    # the allocation's slots per host (bjobs EXEC_HOST) are the accounts' that a view shows
    run = only_reply(k.call(Op.JOBS, S.JobsRequest(ids=[1]))).jobs[0]
    assert run.host_slots == [a.slots for a in run.accounts] == [1] and run.hosts == [a.host for a in run.accounts]
    page = only_reply(k.call(Op.JOBS, S.JobsRequest(all=True, limit=2, fields=["id"])))
    assert page.rows == [[1], [2]] and page.next_after == 2


@pytest.mark.parametrize("body, words", [
    (S.JobsRequest(fields=["id", "colour"]), "no such job field 'colour'"),
    (S.JobsRequest(fields=["order"]), "no such job field 'order'"),
    (S.JobsRequest(fields=["id"], order=True), "cannot be combined with order or arrays"),
])
def test_jobs_naming_an_unknown_field_is_refused_by_name(body, words: str) -> None:
    k = kit()
    k.pend_job()
    e = only_error(k.call(Op.JOBS, body))
    assert isinstance(e, InvalidRequest) and words in e.message


def test_hosts_lists_all_or_the_named_and_refuses_an_unknown() -> None:
    k = kit(host("node1"), host("node2"))
    assert [h.name for h in only_reply(k.call(Op.HOSTS, S.HostsRequest())).hosts] == ["node1", "node2"]
    assert [h.name for h in only_reply(k.call(Op.HOSTS, S.HostsRequest(names=["node2"]))).hosts] == ["node2"]
    e = only_error(k.call(Op.HOSTS, S.HostsRequest(names=["nx"])))
    assert isinstance(e, NotFound) and "host nx is not known" in e.message


def test_queues_by_priority_with_counts() -> None:
    k = kit(queues=(queue("normal", priority=30), queue("short", priority=50)))
    k.pend_job()
    body = only_reply(k.call(Op.QUEUES, S.Empty()))
    assert [q.name for q in body.queues] == ["short", "normal"]
    assert body.counts == {"normal": {"PEND": 1}, "short": {}} and body.default == "normal"
    k.pend_job(slots=4)
    body = only_reply(k.call(Op.QUEUES, S.Empty()))
    assert body.counts["normal"] == {"PEND": 2} and body.slots["normal"] == {"PEND": 5}  # bqueues counts slots


# ---- KILL, MODIFY, HOST_ADMIN ----------------------------------------------------------------

def test_kill_commits_and_answers_per_job() -> None:
    k = kit()
    k.pend_job()
    out = k.call(Op.KILL, S.KillRequest(ids=[1, 9], key="k-000001"))
    ((cmd, _),) = out.commits
    assert isinstance(cmd, Kill) and cmd.reason == "killed by user"
    assert only_reply(k.commit_all(out)) == S.KillReply(results={1: "killed", 9: "not found"})


@pytest.mark.parametrize("body,words", [
    (S.KillRequest(ids=[], key="k-000001"), "kill: no job ids given"),
    (S.KillRequest(ids=[1], reason="x" * 2000, key="k-000001"), "kill reason"),
])
def test_kill_refusals(body, words: str) -> None:
    e = only_error(kit().call(Op.KILL, body))
    assert isinstance(e, InvalidRequest) and words in e.message


def test_modify_of_a_running_job_re_sends_its_order_with_the_new_limit() -> None:
    k = kit()
    k.worker("node1")
    job = k.run_job("node1")
    out = k.call(Op.MODIFY, S.ModifyRequest(id=job.id, mem_limit=2 << 30, key="k-000001"))
    ((cmd, _),) = out.commits
    assert isinstance(cmd, Modify)
    after = k.commit_all(out)
    assert only_reply(after) == S.Ack(True, "ok")
    ((host_, op, order, _),) = after.orders
    assert (host_, op, order.spec.mem_limit) == ("node1", Op.RUN_JOB, 2 << 30)


def test_modify_refusals() -> None:
    k = kit()
    e = only_error(k.call(Op.MODIFY, S.ModifyRequest(id=1, mem_limit=1, key="k-000001")))
    assert isinstance(e, InvalidRequest) and "mem_limit must be at least" in e.message
    out = k.call(Op.MODIFY, S.ModifyRequest(id=9, mem_limit=None, key="k-000002"))
    e = only_error(k.commit_all(out))
    assert isinstance(e, NotFound) and not k.commit_all(out).orders


def test_host_admin_commits_and_refuses_a_bad_action_or_unknown_host() -> None:
    k = kit()
    out = k.call(Op.HOST_ADMIN, S.HostAdminRequest(names=["node1"], action="close", key="k-000001"))
    ((cmd, _),) = out.commits
    assert isinstance(cmd, SetHostAdmin) and cmd.closed
    assert only_reply(k.commit_all(out)) == S.Ack(True, "ok") and k.state.hosts["node1"].closed
    e = only_error(k.call(Op.HOST_ADMIN, S.HostAdminRequest(names=["node1"], action="drain", key=key())))
    assert isinstance(e, InvalidRequest) and "'open', 'close' or 'remove', got 'drain'" in e.message
    out = k.call(Op.HOST_ADMIN, S.HostAdminRequest(names=["nx"], action="open", key=key()))
    assert isinstance(only_error(k.commit_all(out)), NotFound)


# ---- SNAPSHOT, AUDIT, REQUEST_LOG ------------------------------------------------------------

def test_snapshot_publishes_what_was_applied_first_and_claims_its_seq() -> None:
    k = kit()
    k.ctx.stream.subscribers = 1
    out = k.call(Op.SUBMIT, S.SubmitRequest(jobs=[spec(env={"SECRET": "x"})], key="k-000001"))
    k.commit_all(out)  # applied, not yet published
    snap_out = k.call(Op.SNAPSHOT, S.Empty())
    (ev,) = snap_out.events
    snap = only_reply(snap_out)
    assert ev.seq == snap.seq == 1 and [j.id for j in ev.jobs] == [1]
    assert snap.jobs[0].spec.env == {} and snap.epoch == "epoch0" and snap.term == 3


def test_audit_reports_a_running_job_no_worker_confirmed() -> None:
    k = kit()
    k.run_job("node1")
    k.ctx.book.registered_at["node1"] = T0
    body = only_reply(k.call(Op.AUDIT, S.Empty()))
    assert body.checked and any("job 1" in p for p in body.problems), body.problems


def test_request_log_query_is_bounded() -> None:
    k = kit()
    log = k.ctx.requests
    assert isinstance(log, FakeRequestLog)
    body = only_reply(k.call(Op.REQUEST_LOG, S.RequestLogQuery(user="alice", limit=50_000)))
    assert body.records == [] and log.asked == [{"user": "alice", "since": 0.0, "after": 0, "limit": 10_000}]


def test_every_state_changing_request_is_logged_with_its_answer() -> None:
    k = kit(tokens=True)
    k.pend_job(user="alice")
    out = k.call(Op.KILL, S.KillRequest(ids=[1], key="k-000001"), token="tok-alice", client="10.0.0.1")
    assert not out.log  # not yet: the answer comes when the kill commits
    after = k.commit_all(out)
    ((entry, result),) = after.log
    assert (entry.user, entry.op, entry.target, entry.client, result) == \
        ("alice", "KILL", "jobs 1", "10.0.0.1", "accepted")
    assert k.state.jobs[1].state == JobState.EXIT
    refused = k.call(Op.HOST_ADMIN, S.HostAdminRequest(names=["node1"], action="close", key=key()),
                     token="tok-alice")
    ((entry, result),) = refused.log
    assert entry.op == "HOST_ADMIN" and result.startswith("refused: forbidden: permission hosts.admin")
