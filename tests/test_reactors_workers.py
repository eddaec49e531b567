"""The daemon door's reactors and the orders to workers, with a recording Outbox."""

from __future__ import annotations

from builders import T0, alloc, host
from reactor_kit import kit

from xce.core.errors import InvalidRequest, Unavailable
from xce.core.model import HostUsage, JobState
from xce.core.state import Finish, Kill, Place, RegisterHost
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.reactors.outbox import Outbox
from xce.reactors.timers import on_tick

G = 1 << 30


def register(name: str = "node1", running: list[S.RunningTask] | None = None, **kw) -> S.RegisterRequest:
    kw.setdefault("mem_total", 8 * G)
    return S.RegisterRequest(host=name, slots=4, ncpus=4, os_available=kw.pop("os_available", 7 * G),
                             version="t", running=running or [], **kw)


def placement(jid: int, host: str = "node1", slots: int = 1, attempt: int = 0, mem: str = "1G") -> S.Placement:
    return S.Placement(jid, attempt, [alloc(host, slots, mem)])


# ---- PLACE -----------------------------------------------------------------------------------

def test_place_re_checks_commits_what_fits_and_answers_once_all_committed() -> None:
    k = kit(host("node1", mem="8G"))
    a, b = k.pend_job(mem="6G"), k.pend_job(mem="6G")   # both fit alone, not together
    out = k.call(Op.PLACE, S.PlaceRequest(placements=[placement(a.id, mem="6G"), placement(b.id, mem="6G")],
                                          reasons={7: "waiting"}, round_ms=12.5))
    ((cmd, _),) = out.commits
    assert isinstance(cmd, Place) and cmd.job_id == a.id and cmd.allocs[0].mem == 6 * G
    assert not out.replies  # the answer waits for the commit
    assert k.ctx.last_round_ms == 12.5 and k.ctx.live.reasons == {7: "waiting"}
    assert k.ctx.stream.news["reasons"] == {7: "waiting"}
    reply = k.commit_all(out).replies[0][1]
    assert reply.accepted == [a.id] and "mem" in reply.rejected[b.id]


def test_place_rejects_a_stale_attempt_an_unknown_job_and_a_running_one() -> None:
    k = kit()
    job = k.pend_job()
    running = k.run_job("node1")
    out = k.call(Op.PLACE, S.PlaceRequest(placements=[placement(job.id, attempt=5), placement(99),
                                                      placement(running.id)]))
    assert not out.commits
    ((_, reply),) = out.replies
    assert reply.rejected == {job.id: "job is no longer pending at that attempt",
                              99: "job is no longer pending at that attempt",
                              running.id: "job is no longer pending at that attempt"}


def test_place_rejects_an_allocation_that_is_not_the_jobs_request() -> None:
    k = kit()
    job = k.pend_job(mem="1G")
    out = k.call(Op.PLACE, S.PlaceRequest(placements=[S.Placement(job.id, 0, [alloc("node1", 1, "4G")])]))
    assert not out.commits
    assert out.replies[0][1].rejected == {job.id: "allocation on node1: mem 4.0G, the job's request gives 1.0G"}


def test_place_on_an_unknown_host_is_rejected() -> None:
    k = kit()
    job = k.pend_job(mem="1G")
    out = k.call(Op.PLACE, S.PlaceRequest(placements=[placement(job.id, host="nx")]))
    assert not out.commits and "nx" in out.replies[0][1].rejected[job.id]


def test_a_placement_the_state_machine_refuses_is_rejected_with_its_reason() -> None:
    k = kit()
    job = k.pend_job()
    out = k.call(Op.PLACE, S.PlaceRequest(placements=[placement(job.id)]))
    k.state.apply(Place(time=T0, job_id=job.id, attempt=0, allocs=[alloc("node1")]))  # placed meanwhile
    reply = k.commit_all(out).replies[0][1]
    assert reply.accepted == [] and "attempt 0, job is at 1" in reply.rejected[job.id]


# ---- REGISTER --------------------------------------------------------------------------------

def test_register_commits_the_host_and_answers_with_the_heartbeat_and_term() -> None:
    k = kit()
    out = k.call(Op.REGISTER, register("node2", os_available=5 * G, attrs={"rack": "r1"}), peer=b"w2")
    ((cmd, _),) = out.commits
    assert isinstance(cmd, RegisterHost) and cmd.host.name == "node2"
    assert cmd.host.attrs == {"rack": "r1", "measure": "proc"}
    assert k.ctx.book.workers["node2"] == b"w2" and k.ctx.live.os_available["node2"] == 5 * G
    assert k.ctx.stream.news["live"][0].host == "node2"
    reply = k.commit_all(out).replies[0][1]
    assert reply == S.RegisterReply(heartbeat_interval=1.0, term=3, kill=[])
    assert k.ctx.book.registered_at["node2"] == k.now


def test_register_refuses_an_oversized_host_name() -> None:
    out = kit().call(Op.REGISTER, register("h" * 300))
    ((_, e),) = out.errors
    assert isinstance(e, InvalidRequest) and "host name" in e.message and not out.commits


def test_register_reconciles_the_workers_tasks_with_the_hard_state() -> None:
    k = kit(host("node1"), host("node2"))
    mine = k.run_job("node1")          # the worker still runs it: confirmed
    gone = k.run_job("node1")          # confirmed before, and the worker no longer has it: lost
    unstarted = k.run_job("node1")     # never confirmed: dispatched again
    killed = k.run_job("node1")        # killed before any worker confirmed it: its share ends
    k.state.apply(Kill(time=T0, job_ids=[killed.id]))
    k.ctx.book.confirmed[(gone.id, "node1")] = gone.attempt
    stale = S.RunningTask(job_id=999, attempt=1, pid=5)              # unknown: kill it
    old = S.RunningTask(job_id=mine.id, attempt=mine.attempt - 1, pid=6)  # an older attempt: kill it
    out = k.call(Op.REGISTER, register("node1", running=[S.RunningTask(mine.id, mine.attempt, 4), stale, old]))
    after = k.commit_all(out)
    reply = after.replies[0][1]
    assert reply.kill == [stale, old]
    assert k.ctx.book.confirmed[(mine.id, "node1")] == mine.attempt
    finishes = {c.job_id: c for c, _ in after.commits if isinstance(c, Finish)}
    assert finishes[gone.id].reason == "lost: the worker no longer has the job"
    assert "killed before it started" in finishes[killed.id].reason
    assert [(o.host, o.op, o.body.job_id) for o in after.orders] == [("node1", Op.RUN_JOB, unstarted.id)]


class NoScan(dict):  # type: ignore[type-arg]
    """A jobs table that refuses to be walked whole."""

    def values(self):  # type: ignore[no-untyped-def]
        raise AssertionError("a registration walked every job of the cluster")

    def __iter__(self):  # type: ignore[no-untyped-def]
        raise AssertionError("a registration walked every job of the cluster")


def test_a_registration_reads_only_its_hosts_jobs() -> None:
    """A failover makes every host register again: each registration must cost its own jobs,
    not the cluster's (1,000 hosts x 20,000 jobs held the Raft lock long enough to lose the
    leadership again: bench/fleet_bench.py)."""
    k = kit(host("node1"), host("node2"))
    unstarted = k.run_job("node1")
    for _ in range(3):
        k.run_job("node2")
    k.state.jobs = NoScan(k.state.jobs)
    out = k.call(Op.REGISTER, register("node1"))
    after = k.commit_all(out)
    assert [(o.host, o.op, o.body.job_id) for o in after.orders] == [("node1", Op.RUN_JOB, unstarted.id)]


# ---- HEARTBEAT -------------------------------------------------------------------------------

def test_a_heartbeat_from_an_unknown_or_unregistered_host_says_register_again() -> None:
    k = kit()
    body = S.Heartbeat(host="nx", time=T0, os_available=G)
    assert kit().call(Op.HEARTBEAT, body).replies[0][1] == S.HeartbeatReply(known=False)
    body = S.Heartbeat(host="node1", time=T0, os_available=G)   # known host, no worker registered here
    assert k.call(Op.HEARTBEAT, body).replies[0][1] == S.HeartbeatReply(known=False)
    k.worker("node1")
    k.state.hosts["node1"].unavail = True
    assert k.call(Op.HEARTBEAT, body).replies[0][1] == S.HeartbeatReply(known=False)


def test_a_heartbeat_lands_usage_in_the_ledger_and_queues_its_news() -> None:
    k = kit()
    k.worker("node1", seen=T0)
    job = k.run_job("node1", mem="1G")
    usage = S.UsageColumns(job_id=[job.id], attempt=[job.attempt], memory_rss=[3 * G], memory_peak=[3 * G],
                           cpu_time=[1.5])
    out = k.call(Op.HEARTBEAT, S.Heartbeat(host="node1", time=k.now, os_available=4 * G, usage=usage,
                                           ack=False), peer=b"new-ident")
    assert not out  # no ack asked: nothing to send now
    acc = k.ctx.live.ledger.accounts[(job.id, "node1")]
    assert acc.actual == 3 * G
    assert k.ctx.live.last_seen["node1"] == k.now and k.ctx.book.workers["node1"] == b"new-ident"
    (samples,) = k.ctx.stream.news["samples"]
    (live,) = k.ctx.stream.news["live"]
    assert samples.job_id == [job.id] and live.mem.mem_overage == 2 * G
    acked = k.call(Op.HEARTBEAT, S.Heartbeat(host="node1", time=k.now, os_available=4 * G))
    assert acked.replies[0][1] == S.HeartbeatReply(known=True)


# ---- JOB_STARTED, JOB_FINISHED ---------------------------------------------------------------

def test_job_started_confirms_only_the_attempt_that_was_ordered() -> None:
    k = kit()
    k.ctx.book.unconfirmed[(1, "node1")] = (2, T0)
    k.call(Op.JOB_STARTED, S.JobStarted(host="node1", job_id=1, attempt=1, pid=3, time=T0))
    assert (1, "node1") in k.ctx.book.unconfirmed and not k.ctx.book.confirmed   # stale attempt
    out = k.call(Op.JOB_STARTED, S.JobStarted(host="node1", job_id=1, attempt=2, pid=3, time=T0))
    assert out.replies[0][1] == S.Ack() and k.ctx.book.confirmed == {(1, "node1"): 2}
    assert not k.ctx.book.unconfirmed


def test_job_finished_commits_the_finish_and_acknowledges_after_commit() -> None:
    k = kit()
    job = k.run_job("node1")
    k.ctx.book.unconfirmed[(job.id, "node1")] = (job.attempt, T0)
    body = S.JobFinished(host="node1", job_id=job.id, attempt=job.attempt, time=T0 + 5, exit_code=0,
                         signal=None, reason="", usage=HostUsage(host="node1", reserved=G))
    out = k.call(Op.JOB_FINISHED, body)
    ((cmd, _),) = out.commits
    assert isinstance(cmd, Finish) and cmd.time == T0 + 5 and not k.ctx.book.unconfirmed
    assert k.commit_all(out).replies[0][1] == S.Ack(True, "ok")
    assert k.state.jobs[job.id].state == JobState.DONE


def test_a_stale_finish_is_acknowledged_as_stale() -> None:
    k = kit()
    job = k.run_job("node1")
    body = S.JobFinished(host="node1", job_id=job.id, attempt=job.attempt - 1, time=T0, exit_code=0,
                         signal=None, reason="", usage=HostUsage(host="node1"))
    assert k.commit_all(k.call(Op.JOB_FINISHED, body)).replies[0][1] == S.Ack(True, "stale")


def test_a_finish_of_an_unknown_job_is_refused_after_commit() -> None:
    k = kit()
    body = S.JobFinished(host="node1", job_id=42, attempt=1, time=T0, exit_code=0, signal=None, reason="",
                         usage=HostUsage(host="node1"))
    (( _, e),) = k.commit_all(k.call(Op.JOB_FINISHED, body)).errors
    assert e.code == "not_found"



def test_place_re_checks_cluster_wide_resources_as_the_scheduler_does() -> None:
    """Two jobs each asking the cluster's only license: the leader commits one, refuses the other."""
    from xce.core.state import Submit
    from xce.site.config import Config, ControllerConf, ResourceConf

    cfg = Config(controller=ControllerConf(peers=["127.0.0.1:7712"], peer_addresses=["tcp://127.0.0.1:7710"]),
                 resources={"lic": ResourceConf(kind="virtual", scope="cluster", total=1)})
    k = kit(host("node1", mem="8G"), config=cfg)
    req = k.ctx.parse("rusage[lic=1]")
    s = k.pend_job().spec
    ids = k.state.apply(Submit(time=T0, specs=[s, s], reqs=[req, req]))
    out = k.call(Op.PLACE, S.PlaceRequest(placements=[S.Placement(j, 0, [alloc("node1", 1, "0")]) for j in ids]))
    assert [c.job_id for c, _ in out.commits] == [ids[0]]
    reply = k.commit_all(out).replies[0][1]
    assert reply.accepted == [ids[0]] and reply.rejected == {ids[1]: "lic: needs 1; the cluster has 0 free"}
    # and once the first holds it, a later round's placement of the other is refused too
    out = k.call(Op.PLACE, S.PlaceRequest(placements=[S.Placement(ids[1], 0, [alloc("node1", 1, "0")])]))
    assert not out.commits and out.replies[0][1].rejected == {ids[1]: "lic: needs 1; the cluster has 0 free"}


def test_place_re_checks_limits_as_the_scheduler_does() -> None:
    """A per-user slot limit of 1: alice runs one job; the leader refuses a placement of her
    next one (a stale scheduler, or two rounds in flight) with the limit's own reason, and
    charges each placement it accepts against the next in the same request."""
    from xce.site.config import Config, ControllerConf, LimitConf

    cfg = Config(controller=ControllerConf(peers=["127.0.0.1:7712"], peer_addresses=["tcp://127.0.0.1:7710"]),
                 limits=[LimitConf(name="user_slots", per="user", slots=1),
                         LimitConf(name="node1_jobs", per="host", members=["node1"], jobs=2)])
    k = kit(host("node1", mem="8G"), host("node2", mem="8G"), config=cfg)
    k.run_job("node1", user="alice")
    late = k.pend_job(user="alice")
    out = k.call(Op.PLACE, S.PlaceRequest(placements=[S.Placement(late.id, 0, [alloc("node2", 1, "1G")])]))
    assert not out.commits
    assert out.replies[0][1].rejected == {late.id: "limit user_slots: alice uses 1 of 1 slots"}
    # Within one request: bob's two jobs on node1 pass his user limit one at a time, the second
    # is over node1's host limit once the first is charged.
    b1, b2, c1 = k.pend_job(user="bob"), k.pend_job(user="bob"), k.pend_job(user="carol")
    out = k.call(Op.PLACE, S.PlaceRequest(placements=[S.Placement(j.id, 0, [alloc("node1", 1, "1G")])
                                                      for j in (b1, b2, c1)]))
    assert [c.job_id for c, _ in out.commits] == [b1.id]
    reply = k.commit_all(out).replies[0][1]
    assert reply.rejected == {b2.id: "limit user_slots: bob uses 1 of 1 slots",
                              c1.id: "limit node1_jobs: node1 uses 2 of 2 running jobs"}


def test_hist_shows_a_running_jobs_start_from_soft_state_and_its_finish_commits_it() -> None:
    """No commit per start (issue 19): the leader keeps the first host's JOB_STARTED time and
    HIST shows it while the job runs; the Finish carries the worker's start time into the log."""
    k = kit()
    job = k.run_job("node1")
    k.ctx.book.unconfirmed[(job.id, "node1")] = (job.attempt, T0)
    assert not k.call(Op.JOB_STARTED, S.JobStarted(host="node1", job_id=job.id, attempt=job.attempt, pid=3,
                                                   time=T0 + 1.5)).commits
    events = k.call(Op.HIST, S.HistRequest(id=job.id)).replies[0][1].events
    assert [(e.event, e.by) for e in events][-2:] == [("dispatched", "scheduler"), ("started", "node1")]
    assert "started" not in [e.event for e in k.state.history[job.id]]  # soft: nothing committed for it
    body = S.JobFinished(host="node1", job_id=job.id, attempt=job.attempt, time=T0 + 5, exit_code=0,
                         signal=None, reason="", usage=HostUsage(host="node1", reserved=G), started=T0 + 1.5)
    k.commit_all(k.call(Op.JOB_FINISHED, body))
    assert job.id not in k.ctx.book.started
    kept = [(e.event, e.time) for e in k.state.history[job.id]]
    assert kept[-2:] == [("started", T0 + 1.5), ("ended DONE", T0 + 5)]
    assert [e.event for e in k.call(Op.HIST, S.HistRequest(id=job.id)).replies[0][1].events].count("started") == 1


# ---- a new leader that has not applied the log it inherited ----------------------------------

def test_a_leader_still_applying_its_inherited_log_decides_nothing_from_it() -> None:
    """Raft (Ongaro, sec. 8): a new leader knows which entries are committed only once an entry of
    its own term is; until it has applied that far, its state may lack what the old leader had
    already acted on.  A job the old leader placed and dispatched is still PEND here: a worker
    registering with it listed as running must not be told to kill it, nor any other request be
    answered from that state.  The leader says so (Unavailable: clients and workers retry), and
    its timers and orders wait too."""
    k = kit(host("node1"), host("node2"))
    placed = k.pend_job()                 # placed and started by the old leader: the PLACE is not applied here yet
    k.raft.inherited = False
    out = k.call(Op.REGISTER, register("node1", running=[S.RunningTask(placed.id, placed.attempt, 4)]))
    assert not out.commits and not out.orders and not out.replies
    ((_, err),) = out.errors
    assert isinstance(err, Unavailable) and "still applying" in str(err)
    assert isinstance(k.call(Op.JOBS, S.JobsRequest(ids=[placed.id])).errors[0][1], Unavailable)
    # Its timers: a host silent for ever is not timed out from a state that may be behind.
    k.ctx.live.last_seen["node2"] = T0 - 10_000
    ticked = Outbox()
    on_tick(k.ctx, T0 + 10_000, ticked)
    assert not ticked.commits and not ticked.orders
    # Once it has applied through its own term's first entry it serves, and the job is there.
    k.state.apply(Place(time=T0 + 1, job_id=placed.id, attempt=0, allocs=[alloc("node1", 1, "1G")]))
    k.raft.inherited = True
    after = k.commit_all(k.call(Op.REGISTER, register("node1", running=[S.RunningTask(placed.id, placed.attempt, 4)])))
    assert after.replies[0][1].kill == []
    assert k.ctx.book.confirmed[(placed.id, "node1")] == placed.attempt


def test_a_start_confirmed_while_a_registration_commits_is_not_taken_for_a_lost_job() -> None:
    """A worker's registration lists what it ran when it sent it; the leader reconciles once its
    RegisterHost commits.  A RUN_JOB that reached the worker after it sent the registration
    starts the job, and its JOB_STARTED can be read while that commit is under way: the list
    then lacks a job the leader has just heard start.  It is not lost (it was seen at
    `xce sim-fleet`'s 5,000 hosts: hundreds of running jobs ended EXIT "lost: the worker no
    longer has the job" after a failover's re-registrations)."""
    k = kit(host("node1"))
    job = k.run_job("node1")                      # dispatched; the worker had not started it when it registered
    k.ctx.book.unconfirmed[(job.id, "node1")] = (job.attempt, T0)
    registering = k.call(Op.REGISTER, register("node1", running=[]))
    assert [type(c) for c, _ in registering.commits] == [RegisterHost]
    k.call(Op.JOB_STARTED, S.JobStarted(host="node1", job_id=job.id, attempt=job.attempt, pid=3, time=T0 + 5))
    after = k.commit_all(registering)
    assert not [c for c, _ in after.commits if isinstance(c, Finish)], "a job that just started, ended as lost"
    assert k.ctx.book.confirmed[(job.id, "node1")] == job.attempt
    assert after.replies[0][1].kill == []
    # A job confirmed before the registration came, and missing from it, is still lost.
    gone = k.run_job("node1")
    k.ctx.book.confirmed[(gone.id, "node1")] = gone.attempt
    after = k.commit_all(k.call(Op.REGISTER, register("node1", running=[S.RunningTask(job.id, job.attempt, 3)])))
    finishes = {c.job_id: c for c, _ in after.commits if isinstance(c, Finish)}
    assert list(finishes) == [gone.id] and finishes[gone.id].reason == "lost: the worker no longer has the job"
