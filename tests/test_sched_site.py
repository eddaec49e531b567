"""The site policy from config, its errors, and a round's inputs from a cluster's jobs."""

from __future__ import annotations

import pytest
from builders import T0, alloc, cap, caps, job

from xce.core.errors import ConfigError
from xce.core.model import HostUsage, JobState
from xce.core.placement import schedule
from xce.core.sched.backfill import BackfillRules
from xce.core.sched.fairshare import EQUAL_SHARES
from xce.core.sched.site import PolicyState, SitePolicy
from xce.site.config import Config, from_dict

BAD = [
    ({"fairshare": {"half_life": 0}}, "key fairshare.half_life: must be > 0 seconds"),
    ({"fairshare": {"slot_weight": 0, "mem_weight": 0}}, "key fairshare.slot_weight: slot_weight and mem_weight"),
    ({"fairshare": {"mem_weight": -1}}, "key fairshare.mem_weight: must be >= 0"),
    ({"fairshare": {"tree": {"members": {"a": 0}}}}, "key fairshare.tree.members.a: shares must be >= 1"),
    ({"fairshare": {"tree": {"members": {"g": {"by": "team"}}}}}, "key fairshare.tree.members.g.by: must be"),
    ({"fairshare": {"queues": {"nope": {}}}}, "key fairshare.queues.nope: no such queue (queues: normal, reclaim)"),
    ({"fairshare": {"tree": {"colour": 1}}}, "key fairshare.tree: Object contains unknown field `colour`"),
    ({"backfill": {"mode": "aggressive"}}, "key backfill.mode: must be one of 'off', 'easy', 'conservative', 'fcfs', got 'aggressive'"),
    ({"backfill": {"depth": 0}}, "key backfill.depth: must be >= 1"),
    ({"backfill": {"queue_run_limit": {"normal": -5}}}, "key backfill.queue_run_limit.normal: must be > 0"),
    ({"limits": [{"name": "a", "per": "user"}]}, "key limits[0]: limit 'a' caps nothing"),
    ({"limits": [{"name": "a", "per": "user", "jobs": 1}, {"name": "a", "per": "host", "jobs": 1}]},
     "key limits[1].name: limit 'a' is defined twice"),
    ({"limits": [{"name": "a", "per": "team", "jobs": 1}]}, "key limits[0].per: must be user, group"),
    ({"limits": [{"name": "a", "per": "user", "mem": "lots"}]}, "key limits[0].mem: bad memory size 'lots'"),
    ({"limits": [{"name": "a", "per": "host", "pending": 3}]}, "key limits[0].pending: a host has no pending"),
    ({"limits": [{"per": "user", "jobs": 1}]}, "key limits[0]: Object missing required field `name`"),
]


@pytest.mark.parametrize("data,why", BAD, ids=[w[:40] for _, w in BAD])
def test_bad_policy_config_names_the_key(data: dict, why: str) -> None:
    with pytest.raises(ConfigError) as e:
        from_dict(data, "site.toml")
    assert e.value.message.startswith("site.toml: ") and why in e.value.message, e.value.message


def test_defaults_are_equal_shares_and_easy_backfill() -> None:
    p = SitePolicy.from_config(Config())
    assert p.fairshare and p.trees == {None: EQUAL_SHARES}
    assert p.backfill == BackfillRules() and p.backfill.reservations == 1 and p.limits == ()


def test_site_policy_from_config() -> None:
    cfg = from_dict({"queues": {"short": {}}, "fairshare": {"queues": {"short": {"by": "project"}}},
                     "backfill": {"mode": "conservative", "depth": 3, "default_run_limit": 60,
                                  "queue_run_limit": {"short": 600}},
                     "limits": [{"name": "u", "per": "user", "slots": 4}]})
    p = SitePolicy.from_config(cfg)
    assert set(p.trees) == {None, "short"} and p.trees["short"].by == "project"
    assert p.backfill == BackfillRules("conservative", 3, 60.0, {"short": 600.0})
    assert [lim.name for lim in p.limits] == ["u"]


def test_round_inputs_from_the_clusters_jobs() -> None:
    """alice's finished work puts bob's job first; her running job's limit gives a release;
    the limit book counts her running slots."""
    cfg = from_dict({"limits": [{"name": "u", "per": "user", "slots": 3}]})
    st = PolicyState(SitePolicy.from_config(cfg))
    ended = job(1, user="alice", state=JobState.DONE, start_time=T0 - 7200, end_time=T0 - 3600,
                allocs=[alloc("n1", 4)], usage=[HostUsage(host="n1", reserved=1 << 30, peak=1 << 30)])
    run = job(2, user="alice", state=JobState.RUN, start_time=T0 - 60, run_limit=600.0, allocs=[alloc("n1", 2)])
    pend = [job(3, user="alice"), job(4, user="bob"), job(5, user="alice")]
    got = st.round_inputs([ended, run, *pend], pend, [run], None, {"normal": 30}, T0)
    assert [j.id for j in got.ordering.order(pend)] == [4, 3, 5]
    assert "fairshare: alice's priority" in got.ordering.explain(pend[0], pend[1])
    assert [(r.host, r.end) for r in got.releases] == [("n1", T0 + 540)]
    plan = schedule(caps(cap("n1", slots=8)), got.ordering.order(pend), T0, releases=got.releases, limits=got.limits)
    assert sorted(j for j, _ in plan.placements) == [3, 4]
    assert plan.reasons[5] == "limit u: alice uses 3 of 3 slots"
    assert st.book.folded == {1: 1}  # job id -> its ended runs folded


def test_fairshare_off_is_queue_job_priority_and_submit() -> None:
    st = PolicyState(SitePolicy.from_config(from_dict({"fairshare": {"enabled": False}})))
    pend = [job(1, user="a"), job(2, user="b", priority=2)]
    got = st.round_inputs(pend, pend, [], None, {"normal": 30}, T0)
    assert [j.id for j in got.ordering.order(pend)] == [2, 1] and got.ordering.figures(pend[0])["fairshare"] == 1.0


def test_a_round_that_reads_no_shares_still_folds_the_ended_jobs() -> None:
    """One fairshare key pending (shares=False): no tree is built, but alice's ended job is
    folded all the same, so the next round with two keys orders as if none had been skipped."""
    ended = job(1, user="alice", state=JobState.DONE, start_time=T0 - 7200, end_time=T0 - 3600,
                allocs=[alloc("n1", 4)], usage=[HostUsage(host="n1", reserved=1 << 30, peak=1 << 30)])
    pend = [job(3, user="alice"), job(4, user="bob")]
    skipped, every = (PolicyState(SitePolicy.from_config(Config())) for _ in range(2))
    got = skipped.round_inputs([ended], pend[:1], [], None, {"normal": 30}, T0, shares=False)
    assert got.ordering.fairshare == {} and skipped.book.folded == {1: 1}
    every.round_inputs([ended], pend[:1], [], None, {"normal": 30}, T0)
    a, b = (ps.round_inputs([], pend, [], None, {"normal": 30}, T0 + 60).ordering for ps in (skipped, every))
    assert [j.id for j in a.order(pend)] == [j.id for j in b.order(pend)] == [4, 3]
    assert a.figures(pend[0]) == b.figures(pend[0])


def test_placements_in_flight_hold_their_share_of_a_limit() -> None:
    """A job the scheduler placed that the cluster still shows pending counts against the limit,
    so the next round does not place past it; once it shows running it counts once."""
    st = PolicyState(SitePolicy.from_config(from_dict({"limits": [{"name": "u", "per": "user", "jobs": 1}]})))
    placed, nxt = job(1, user="ann"), job(2, user="ann")
    got = st.round_inputs([placed, nxt], [placed, nxt], [], None, {"normal": 30}, T0, [(placed, [alloc("n1")])])
    assert got.limits.job_reason(nxt, 1, 0) == "limit u: ann uses 1 of 1 running jobs"
    without = st.round_inputs([placed, nxt], [placed, nxt], [], None, {"normal": 30}, T0)
    assert without.limits.job_reason(nxt, 1, 0) is None
    ran = job(1, user="ann", state=JobState.RUN, start_time=T0, allocs=[alloc("n1")])
    got = st.round_inputs([ran, nxt], [nxt], [ran], None, {"normal": 30}, T0, [(ran, [alloc("n1")])])
    assert got.limits.used[("user", "ann")][0] == 1


def test_a_restarted_scheduler_still_counts_jobs_the_cluster_forgot() -> None:
    """Cleanup drops alice's finished job and folds its usage into the hard state; a scheduler
    that starts from the snapshot afterwards orders as the one that saw the job end."""
    from builders import cluster_state, host, spec, submit

    from xce.core.state import Cleanup, Finish, Place
    from xce.proto.schema import Snapshot, past_usage
    from xce.replica.mirror import Mirror

    cs = cluster_state(hosts=(host("n1"),))
    (done,) = submit(cs, spec(user="alice"))
    cs.apply(Place(time=T0, job_id=done, attempt=0, allocs=[alloc("n1", 1)]))
    cs.apply(Finish(time=T0 + 3600, job_id=done, attempt=1, host="n1", exit_code=0,
                    usage=HostUsage(host="n1", reserved=1 << 30, peak=1 << 30)))
    a, b = submit(cs, spec(user="alice"), spec(user="bob"), time=T0 + 3700)
    policy = SitePolicy.from_config(Config())
    seen = PolicyState(policy)  # the scheduler that saw the job end
    now = T0 + 7200

    def alice_first(ps: PolicyState) -> float:
        got = ps.round_inputs(cs.jobs.values(), [cs.jobs[a], cs.jobs[b]], [], None, {"normal": 30}, now)
        assert [j.id for j in got.ordering.order([cs.jobs[a], cs.jobs[b]])] == [b, a]
        return got.ordering.figures(cs.jobs[a])["fairshare"]

    before = alice_first(seen)
    cs.apply(Cleanup(time=T0 + 5000, keep_finished=0))
    assert done not in cs.jobs
    m = Mirror()
    m.apply_snapshot(Snapshot(seq=1, epoch="e", time=now, jobs=list(cs.jobs.values()), hosts=list(cs.hosts.values()),
                              queues=list(cs.queues.values()), default_queue="normal", live=[], samples=[],
                              reasons={}, usage_past=past_usage(cs.usage_past), usage_as_of=cs.usage_as_of))
    restarted = PolicyState(policy)
    restarted.reseed(m.usage_past, m.usage_as_of)
    assert alice_first(restarted) == pytest.approx(before) and before < 1
    assert alice_first(seen) == pytest.approx(before)  # the one that kept running: no double count


BAD_SITE = [
    ("[controller]\naddress = 'tcp://127.0.0.1:1'\n", "key controller: not a site policy key; `xce up --config` "
     "merges only queues, host_groups, resources, fairshare, backfill, limits, preemption, hosts, worker"),
    ("[worker]\nheartbeat = 5.0\n", "key worker.heartbeat: not a site setting of the workers; `xce up --config` "
     "takes only worker.type, worker.model, worker.attrs"),
    ("[hosts.node2]\nattrs = { gpu = 'a100' }\n", 'key hosts.node2.attrs.gpu: not a declared attribute'),
    ("[queues.low]\npriority = 50\n[queues.top]\npriority = 40\npreempt = ['low']\n[queues.normal]\ndefault = true\n",
     "key queues.top.preempt: queue 'low' has priority 50, not below top's 40"),
    ("[queues.q]\ndefault = true\npreempt = ['nope']\n", "key queues.q.preempt: no such queue 'nope'"),
    ("[queues.q]\ndefault = true\npreempt_action = 'pause'\n", "key queues.q.preempt_action: must be 'suspend'"),
    ("[preemption]\nmin_run_time = -1\n", "key preemption.min_run_time: must be >= 0 seconds"),
]


@pytest.mark.parametrize("text,why", BAD_SITE)
def test_a_bad_site_file_is_refused_naming_the_key(tmp_path, text: str, why: str) -> None:
    from xce.cli.up import check_site
    from xce.site.config import site_overlay

    f = tmp_path / "site.toml"
    f.write_text(text)
    with pytest.raises(ConfigError) as e:
        check_site(site_overlay(f))
    assert why in e.value.message, e.value.message


def test_a_site_file_replaces_the_local_policy_tables() -> None:
    from xce.cli.up import check_site

    check_site({"queues": {"a": {"priority": 10, "default": True}, "b": {"priority": 60, "preempt": ["a"]}},
                "limits": [{"name": "u", "per": "user", "jobs": 2}], "preemption": {"min_run_time": 5.0}})
    cfg = from_dict({"queues": {"a": {"priority": 10, "default": True, "preempt_action": "requeue"},
                                "b": {"priority": 60, "preempt": ["a"]}}, "preemption": {"min_run_time": 5.0}})
    rules = SitePolicy.from_config(cfg).preemption
    assert rules.on and rules.preempts["b"] == {"a"} and rules.action["a"] == "requeue" and rules.min_run_time == 5


def test_a_site_file_carries_the_workers_type_model_and_attributes_per_host(tmp_path) -> None:
    """`xce up --config` takes [worker] type/model/attrs for every local worker and
    [hosts.NAME] for one of them (LSF lsf.cluster's Host section): each worker reports its
    own, and the rest of the local [worker] table (heartbeat, slots, mem) stays."""
    from xce.cli.up import write_cluster_file
    from xce.site.config import load, site_overlay

    f = tmp_path / "site.toml"
    f.write_text('[resources.cores]\nkind = "attribute"\ntype = "numeric"\n'
                 '[resources.arch]\nkind = "attribute"\n'
                 '[worker]\ntype = "X86_64"\nattrs = { arch = "zen3", cores = 8 }\n'
                 '[hosts.node2]\nmodel = "EPYC"\nattrs = { arch = "zen4", cores = 32 }\n')
    write_cluster_file(tmp_path / "sd", 1, "1G", 2, 0.5, site=site_overlay(f))
    cfg = load(tmp_path / "sd" / "cluster.toml")
    assert (cfg.worker.heartbeat, cfg.worker.slots) == (0.5, 2)
    assert cfg.host_attrs("node1") == {"type": "X86_64", "arch": "zen3", "cores": 8}
    assert cfg.host_attrs("node2") == {"type": "X86_64", "model": "EPYC", "arch": "zen4", "cores": 32}
