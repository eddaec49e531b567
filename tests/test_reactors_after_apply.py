"""After an apply and on the timer: events, ledger sync, orders, leadership, host loss, re-dispatch."""

from __future__ import annotations

from builders import T0, alloc, cluster_state, host, spec
from reactor_kit import kit

from xce.core.model import JobState, Queue
from xce.core.resreq import parse_resreq
from xce.core.state import Cleanup, Finish, HostLost, HostUnknown, Kill, Place, SetQueues, Submit
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.reactors.after_apply import SOFT_PERIOD, publish_soft
from xce.reactors.orders import RESEND_AFTER
from xce.reactors.timers import on_tick
from xce.site.config import Config, ControllerConf, QueueConf


def committed(k, *cmds) -> None:
    """Apply commands as Raft would, their changes left for on_applied."""
    _, ch = k.state.apply_batch(list(cmds))
    k.raft.changes.merge(ch)


def placed(k, host_: str = "node1", **kw):
    s = spec(**kw)
    (jid,) = k.state.apply(Submit(time=T0, specs=[s], reqs=[parse_resreq(s.resreq)]))
    committed(k, Place(time=T0 + 1, job_id=jid, attempt=0, allocs=[alloc(host_)]))
    return k.state.jobs[jid]


# ---- on_applied ------------------------------------------------------------------------------

def test_a_placement_is_synced_published_without_its_env_and_dispatched() -> None:
    k = kit()
    k.ctx.stream.subscribers = 1
    k.worker("node1")
    job = placed(k, env={"TOKEN": "secret"})
    out = k.applied()
    (ev,) = out.events
    assert ev.seq == 1 and ev.epoch == "epoch0" and [j.id for j in ev.jobs] == [job.id]
    assert ev.jobs[0].spec.env == {}
    ((host_, op, order, data),) = out.orders
    assert (host_, op, order.attempt) == ("node1", Op.RUN_JOB, 1) and order.spec.env == {"TOKEN": "secret"}
    assert data is not None
    assert (job.id, "node1") in k.ctx.live.ledger.accounts
    assert k.ctx.book.unconfirmed[(job.id, "node1")] == (1, k.now)
    assert not k.applied()  # nothing more to do


def test_with_nobody_listening_no_event_is_built_but_the_seq_moves() -> None:
    k = kit()
    placed(k)
    out = k.applied()
    assert not out.events and k.ctx.stream.seq == 1


def test_an_order_to_a_host_with_no_worker_waits_for_its_registration() -> None:
    k = kit()
    job = placed(k)
    out = k.applied()
    assert not out.orders and k.ctx.book.unconfirmed == {(job.id, "node1"): (1, k.now)}


def test_an_order_over_the_size_limit_ends_the_share_instead() -> None:
    k = kit()
    k.worker("node1")
    placed(k, env={"HUGE": "x" * (8 << 20)})  # past any limit: submit would refuse it, apply does not check
    out = k.applied()
    assert not out.orders
    ((cmd, _),) = out.commits
    assert isinstance(cmd, Finish) and "over the limit" in cmd.reason


def test_a_follower_publishes_but_neither_syncs_its_ledger_nor_orders() -> None:
    k = kit(leading=False)
    k.ctx.was_leader = False
    k.ctx.stream.subscribers = 1
    k.worker("node1")
    job = placed(k)
    out = k.applied()
    assert len(out.events) == 1 and not out.orders and (job.id, "node1") not in k.ctx.live.ledger.accounts


def test_a_kill_of_a_running_job_orders_its_workers_to_kill() -> None:
    k = kit()
    k.worker("node1")
    job = placed(k)
    k.applied()
    committed(k, Kill(time=T0 + 2, job_ids=[job.id]))
    out = k.applied()
    ((host_, op, order, _),) = out.orders
    assert (host_, op, order.job_id) == ("node1", Op.KILL_JOB, job.id)


def test_forgotten_jobs_leave_the_ledger_and_the_stream() -> None:
    k = kit()
    k.ctx.stream.subscribers = 1
    k.pend_job()
    k.state.apply(Kill(time=T0, job_ids=[1]))
    committed(k, Cleanup(time=T0, keep_finished=0))
    (ev,) = k.applied().events
    assert ev.forget == [1] and ev.jobs == []


def test_a_snapshot_install_rebuilds_everything_under_a_new_epoch() -> None:
    k = kit()
    k.ctx.stream.subscribers = 1
    new = cluster_state(hosts=(host(),))
    new.apply(Submit(time=T0, specs=[spec()], reqs=[parse_resreq("rusage[mem=1G]")]))
    new.apply(Place(time=T0, job_id=1, attempt=0, allocs=[alloc()]))
    k.raft.state = new
    committed(k, Kill(time=T0, job_ids=[1]))  # changes of the batch are in the rebuild
    out = k.applied()
    assert not out.events and k.ctx.stream.epoch == "epoch1" and k.ctx.known_state is new
    assert (1, "node1") in k.ctx.live.ledger.accounts


def test_becoming_leader_rebuilds_gives_grace_and_commits_the_configured_queues() -> None:
    cfg = Config(queues={"normal": QueueConf(default=True), "long": QueueConf(priority=10)})
    k = kit(leading=True, config=cfg)
    k.ctx.was_leader = False
    k.ctx.book.confirmed[(1, "node1")] = 1
    out = k.applied()
    ((cmd, _),) = out.commits
    assert isinstance(cmd, SetQueues) and sorted(q.name for q in cmd.queues) == ["long", "normal"]
    assert k.ctx.stream.epoch == "epoch1" and not k.ctx.book.confirmed and k.ctx.was_leader
    assert k.ctx.live.last_seen["node1"] > k.now + k.ctx.kill_wait


def test_a_new_leader_whose_queues_match_the_config_commits_nothing() -> None:
    k = kit()
    k.ctx.was_leader = False
    same = [Queue(name=n, priority=q.priority, rerunnable=q.rerunnable, description=q.description,
                  reclaimable=q.reclaimable, reclaim_policy=q.reclaim_policy, mem_retries=q.mem_retries,
                  mem_retry_factor=q.mem_retry_factor)
            for n, q in k.ctx.cfg.queues.items()]
    k.state.apply(SetQueues(time=T0, queues=same, default_queue="normal"))
    assert not k.applied().commits and k.ctx.was_leader


# ---- soft news -------------------------------------------------------------------------------

def test_soft_news_goes_out_at_most_every_soft_period() -> None:
    k = kit()
    k.ctx.stream.subscribers = 1
    k.ctx.stream.news["live"].append(S.HostLive("node1", 1, T0))
    out = k.applied()
    publish_soft(k.ctx, T0, out)
    (ev,) = out.events
    assert ev.live[0].host == "node1" and not k.ctx.stream.news["live"]
    k.ctx.stream.news["live"].append(S.HostLive("node1", 2, T0))
    publish_soft(k.ctx, T0 + SOFT_PERIOD / 2, out)
    assert len(out.events) == 1
    publish_soft(k.ctx, T0 + SOFT_PERIOD / 2, out, force=True)
    assert len(out.events) == 2


# ---- on_tick ---------------------------------------------------------------------------------

def tick(k, dt: float = 0.0):
    """One timer pass ``dt`` seconds on."""
    k.now += dt
    k.ctx.next_check = 0
    out = k.call(Op.PING, S.Empty())
    on_tick(k.ctx, k.now, out)
    return out


def test_a_silent_host_goes_unknown_once_then_its_worker_brings_its_jobs_back() -> None:
    k = kit(host("node1"), host("node2"))
    k.worker("node1")
    k.worker("node2")
    job = k.run_job("node1")
    k.now += k.ctx.cfg.unknown_after() + 0.5
    k.worker("node2")  # node2 keeps answering
    out = tick(k)
    ((cmd, _),) = out.commits
    assert isinstance(cmd, HostUnknown) and cmd.name == "node1"
    assert not tick(k).commits  # in flight
    k.commit_all(out)
    assert job.state == JobState.UNKWN and k.state.hosts["node1"].unavail
    assert "node1" in k.ctx.book.undecided and "node1" not in k.ctx.book.lost_sent
    assert not tick(k).commits  # unknown, not yet lost
    task = S.RunningTask(job.id, job.attempt, 4)
    k.commit_all(k.call(Op.REGISTER, S.RegisterRequest(host="node1", slots=4, ncpus=4, mem_total=8 << 30,
                                                       os_available=8 << 30, version="t", running=[task])))
    assert job.state == JobState.RUN and not k.state.hosts["node1"].unavail
    assert "node1" not in k.ctx.book.undecided
    k.now += k.ctx.cfg.lost_after()
    k.worker("node1")
    k.worker("node2")
    assert not tick(k).commits  # it answers: nothing to decide


def test_an_unknown_host_silent_past_lost_after_is_lost_and_its_jobs_follow_queue_policy() -> None:
    k = kit(host("node1"))
    k.worker("node1")
    job = k.run_job("node1")
    k.commit_all(tick(k, k.ctx.cfg.unknown_after() + 0.5))
    assert job.state == JobState.UNKWN
    assert not tick(k, k.ctx.cfg.lost_after() - k.ctx.cfg.unknown_after() - 1).commits
    out = tick(k, 1.5)
    ((cmd, _),) = out.commits
    assert isinstance(cmd, HostLost) and cmd.name == "node1"
    assert not tick(k).commits  # in flight
    k.commit_all(out)
    assert job.state == JobState.EXIT and job.reason == "host node1 lost"
    assert "node1" not in k.ctx.book.lost_sent and not tick(k, 100).commits  # decided once


def test_a_new_leader_still_decides_the_unknown_hosts_of_the_state() -> None:
    k = kit(host("node1"), host("node2"))
    k.run_job("node1")
    k.state.apply(HostUnknown(time=T0 + 2, name="node1"))
    k.state.apply(HostUnknown(time=T0 + 2, name="node2"))  # no UNKWN job: nothing to decide
    k.ctx.was_leader = False
    k.applied()
    assert k.ctx.book.undecided == {"node1"}
    out = tick(k, k.ctx.reregister_grace + k.ctx.cfg.lost_after() + 0.5)
    assert [(type(c), c.name) for c, _ in out.commits] == [(HostLost, "node1")]


def test_host_timeouts_come_from_the_config() -> None:
    assert Config().unknown_after() == 3.0 and Config().lost_after() == 9.0
    cfg = Config(controller=ControllerConf(unknown_after=2, lost_after=60))
    assert (cfg.unknown_after(), cfg.lost_after()) == (2, 60)
    k = kit(config=cfg)
    assert k.ctx.kill_wait == 2


def test_a_host_the_restored_log_adds_after_the_leadership_began_is_still_timed() -> None:
    """A restarted leader may apply its log after it took office: a host it had no heartbeat
    record of when the grace was given must still go lost, a grace later (not never)."""
    k = kit(host("node1"))
    assert "node1" not in k.ctx.live.last_seen
    out = k.call(Op.PING, S.Empty())
    on_tick(k.ctx, k.now, out)
    assert not out.commits  # first seen now: the grace starts
    k.now += k.ctx.reregister_grace + k.ctx.kill_wait + 0.5
    k.ctx.next_check = 0
    out = k.call(Op.PING, S.Empty())
    on_tick(k.ctx, k.now, out)
    ((cmd, _),) = out.commits
    assert isinstance(cmd, HostUnknown) and cmd.name == "node1"


def test_a_follower_does_no_timer_work() -> None:
    k = kit(leading=False)
    k.worker("node1", seen=k.now - 10)
    out = k.call(Op.PING, S.Empty())
    on_tick(k.ctx, k.now, out)
    assert not out.commits


def test_unconfirmed_orders_are_re_sent_and_those_of_ended_jobs_dropped() -> None:
    k = kit()
    k.worker("node1")
    job = placed(k)
    k.applied()
    k.ctx.book.unconfirmed[(999, "node1")] = (1, k.now)
    out = k.call(Op.PING, S.Empty())
    k.now += RESEND_AFTER + 0.5
    k.worker("node1")
    on_tick(k.ctx, k.now, out)
    assert [(o.op, o.body.job_id) for o in out.orders] == [(Op.RUN_JOB, job.id)]
    assert set(k.ctx.book.unconfirmed) == {(job.id, "node1")}


def test_a_kill_no_worker_confirmed_is_chased_then_the_share_ended() -> None:
    k = kit()
    k.worker("node1")
    k.ctx.book.registered_at["node1"] = T0
    job = placed(k)
    k.applied()
    committed(k, Kill(time=T0 + 2, job_ids=[job.id]))
    assert k.applied().orders  # the first KILL_JOB
    k.now += RESEND_AFTER + 0.5
    k.worker("node1")
    out = k.call(Op.PING, S.Empty())
    on_tick(k.ctx, k.now, out)
    assert [o.op for o in out.orders] == [Op.KILL_JOB]
    k.now += k.ctx.kill_wait + 1
    k.worker("node1")
    k.ctx.next_check = 0
    out = k.call(Op.PING, S.Empty())
    on_tick(k.ctx, k.now, out)
    (finish,) = [c for c, _ in out.commits if isinstance(c, Finish)]
    assert "killed before it started" in finish.reason
    k.commit_all(out)
    assert k.state.jobs[job.id].state == JobState.EXIT


def test_cleanup_is_committed_past_keep_finished_plus_slack() -> None:
    k = kit(config=Config(controller=ControllerConf(keep_finished=1)))
    k.state.finished_order.extend(range(1, 1003))
    out = k.call(Op.PING, S.Empty())
    on_tick(k.ctx, k.now, out)
    (cmd,) = [c for c, _ in out.commits if isinstance(c, Cleanup)]
    assert cmd.keep_finished == 1


def register(k, name: str, *jobs) -> None:
    """A worker registering with the leader now, listing its running jobs; committed."""
    tasks = [S.RunningTask(j.id, j.attempt, 4) for j in jobs]
    k.commit_all(k.call(Op.REGISTER, S.RegisterRequest(host=name, slots=4, ncpus=4, mem_total=8 << 30,
                                                       os_available=8 << 30, version="t", running=tasks)))


def beating(k, dt: float, hosts: list[str]):
    """``dt`` seconds on, ``hosts`` heartbeating all along: one timer pass."""
    k.now += dt
    for n in hosts:
        k.worker(n)
    return tick(k)


def test_a_new_leader_times_no_host_while_the_others_are_still_registering_again() -> None:
    """After a failover every worker registers again, and a leader takes them at its own pace
    (5,000 hosts: 38 s).  The grace alone timed out the last of them: their hosts were lost and
    their jobs ended EXIT.  Fails on the old code: node5, still to come while the others do,
    went unknown when the grace ran out.  Once nobody has come for unknown_after, a host that
    did not come (node6) is timed as ever."""
    names = [f"node{i}" for i in range(1, 7)]
    k = kit(*(host(n) for n in names))
    jobs = {n: k.run_job(n) for n in names}
    k.ctx.was_leader = False
    k.applied()  # takes office: every host's grace runs from now
    step = k.ctx.cfg.unknown_after() * 0.9  # the wave: a registration a little inside unknown_after
    assert 5 * step > k.ctx.reregister_grace + k.ctx.cfg.unknown_after()  # node5 comes past the grace
    back: list[str] = []
    for name in names[:5]:
        out = beating(k, step, back)
        assert not out.commits, [(type(c).__name__, c.name) for c, _ in out.commits]
        register(k, name, jobs[name])
        back.append(name)
    assert all(jobs[n].state == JobState.RUN for n in back)
    out = beating(k, k.ctx.cfg.unknown_after() + 0.5, back)  # the wave is still: node6 is timed
    assert [(type(c), c.name) for c, _ in out.commits] == [(HostUnknown, "node6")]
    k.commit_all(out)
    out = beating(k, k.ctx.cfg.lost_after() - k.ctx.cfg.unknown_after() + 0.5, back)
    assert [(type(c), c.name) for c, _ in out.commits] == [(HostLost, "node6")]


def test_no_host_is_timed_while_the_loop_has_messages_unread() -> None:
    """After a stall of the leader's loop the heartbeats of the stalled seconds wait unread;
    a pass that came after a turn that read all it may (``behind``) times nobody.  Fails on the
    old code: node1 went unknown with its heartbeat still in the queue."""
    k = kit(host("node1"))
    k.worker("node1")
    k.run_job("node1")
    k.ctx.behind = True
    assert not tick(k, k.ctx.cfg.unknown_after() + 0.5).commits
    k.ctx.behind = False  # caught up, and still silent: timed as ever
    ((cmd, _),) = tick(k).commits
    assert isinstance(cmd, HostUnknown) and cmd.name == "node1"


def test_a_leader_again_in_a_later_term_takes_office_anew_though_its_loop_never_saw_it_lose() -> None:
    """Under load a leader can step down and be elected again between two turns of its loop:
    its hosts went to the other controllers meanwhile.  Fails on the old code: the same
    controller in a new term gave them no grace, and timed their leaderless silence."""
    k = kit(host("node1"))
    k.worker("node1", seen=k.now - 20)  # last heard before the step-down
    k.raft.current_term += 2
    k.applied()
    assert k.ctx.leader_term == k.raft.current_term and k.ctx.stream.epoch == "epoch1"
    assert k.ctx.live.last_seen["node1"] > k.now  # the new leader's grace
    assert not tick(k).commits
