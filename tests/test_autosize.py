"""Right-sizing at submit (xce/core/autosize.py): rusage[mem=auto] and a queue's mem_default.

Pure-core tests with builders, then the leader's submit through the recording outbox
(tests/reactor_kit.py): the reservation is chosen from the finished jobs the hard state holds,
by the function `xce recommend` uses, and the choice and its basis are replicated with the job.
"""

from __future__ import annotations

import pytest
from builders import T0, host, queue, spec
from reactor_kit import kit
from test_recommend import view

from xce.cli.fmt import job_long
from xce.core.autosize import sized, wants_sizing
from xce.core.errors import ConfigError, Infeasible, InvalidRequest, ResReqError
from xce.core.model import HostUsage, JobState
from xce.core.recommend import recommend
from xce.core.resreq import RusageItem, parse_resreq, rusage_amount
from xce.core.state import Finish
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.reactors.after_apply import queue_sizing
from xce.site.config import QueueConf, load

G = 1 << 30


# ---- the grammar: mem=auto only where it means right-sizing ----------------------------------

def test_mem_auto_parses_to_a_placeholder_the_leader_sizes() -> None:
    req = parse_resreq("rusage[mem=auto:duration=10] span[hosts=1]")
    assert req.mem_auto and rusage_amount(req, "mem") == RusageItem("mem", 0, "job", 600, False)  # duration: minutes
    assert not parse_resreq("rusage[mem=2G]").mem_auto


@pytest.mark.parametrize("text, words", [
    ("rusage[slots=auto]", "only mem can be auto"),
    ("rusage[mem=auto/task]", "mem=auto takes no method"),
    ("select[mem>auto]", "auto"),
])
def test_auto_anywhere_else_is_refused_naming_the_problem(text: str, words: str) -> None:
    with pytest.raises(ResReqError, match=words):
        parse_resreq(text)


# ---- the rule (pure) -------------------------------------------------------------------------

def test_auto_is_recommends_p95_plus_the_queues_margin_and_says_so() -> None:
    runs = [view(i, peak=(i + 1) * G // 10) for i in range(20)]  # 0.1G .. 2.0G: p95 1.9G
    q = queue(mem_auto_margin=0.1)
    req = sized(parse_resreq("rusage[mem=auto]"), "ann/align", q, runs)
    (rec,) = recommend(runs, 0.1)
    assert rusage_amount(req, "mem") == RusageItem("mem", rec.mem_recommended, "job")
    assert not req.mem_auto
    assert req.mem_basis == "auto: p95 of 20 runs of ann/align in normal, 1.9G + 10 % = 2.1G"


def test_with_no_history_auto_falls_back_to_the_queue_or_reserves_nothing() -> None:
    req = sized(parse_resreq("rusage[mem=auto]"), "ann/align", queue(mem_auto_fallback=3 * G), [])
    assert rusage_amount(req, "mem").amount == 3 * G
    assert req.mem_basis == "auto: no history of ann/align in normal, fallback 3.0G"
    none = sized(parse_resreq("rusage[mem=auto]"), "ann/align", queue(), [view(1, peak=G, state="RUN")])
    assert rusage_amount(none, "mem") is None and none.mem_basis == "auto: no history of ann/align in normal, no reservation"


def test_auto_needs_the_queues_minimum_of_runs_before_history_sizes_a_job() -> None:
    q = queue(mem_auto_fallback=3 * G, mem_auto_min_runs=3)
    two = [view(i, peak=G) for i in range(2)]
    req = sized(parse_resreq("rusage[mem=auto]"), "ann/align", q, two)
    assert rusage_amount(req, "mem").amount == 3 * G   # two runs: the fallback
    assert req.mem_basis == "auto: only 2 runs of ann/align in normal (auto needs 3), fallback 3.0G"
    three = sized(parse_resreq("rusage[mem=auto]"), "ann/align", q, two + [view(2, peak=G)])
    assert rusage_amount(three, "mem").amount == int(G * 1.1) and three.mem_basis.startswith("auto: p95 of 3 runs")
    assert queue().mem_auto_min_runs == 3              # the default
    one = sized(parse_resreq("rusage[mem=auto]"), "ann/align", queue(mem_auto_min_runs=1), two[:1])
    assert one.mem_basis.startswith("auto: p95 of 1 run of ann/align")


def test_a_queues_default_sizes_only_jobs_that_name_no_memory() -> None:
    auto_q, fixed_q = queue(mem_default_auto=True), queue(mem_default=2 * G)
    assert not wants_sizing(parse_resreq("rusage[mem=1G]"), auto_q)
    assert not wants_sizing(parse_resreq(""), queue())
    assert wants_sizing(parse_resreq("span[hosts=1]"), auto_q) and wants_sizing(parse_resreq(""), fixed_q)
    req = sized(parse_resreq("rusage[slots=1]"), "ann/align", fixed_q, [])
    assert rusage_amount(req, "mem") == RusageItem("mem", 2 * G, "host")
    assert rusage_amount(req, "slots") is not None and req.mem_basis == "queue normal's default 2.0G"


# ---- the leader at submit (recording outbox) -------------------------------------------------

def finished(k, peak: int, name: str = "align", user: str = "alice", q: str = "normal") -> None:
    job = k.run_job("node1", mem="4G", name=name, user=user, queue=q)
    k.state.apply(Finish(time=T0 + 5, job_id=job.id, attempt=job.attempt, host="node1", exit_code=0,
                         usage=HostUsage(host="node1", reserved=4 * G, actual=peak, peak=peak)))
    assert k.state.jobs[job.id].state == JobState.DONE


def submit(k, *jobs, key: str = "k-000001"):
    out = k.commit_all(k.call(Op.SUBMIT, S.SubmitRequest(jobs=list(jobs), key=key)))
    assert not out.errors, out.errors
    ((_, reply),) = out.replies
    return [k.state.jobs[i] for i in reply.ids]


def test_submit_sizes_mem_auto_from_the_same_users_jobs_history_and_replicates_the_basis() -> None:
    k = kit(host("node1", mem="16G"), queues=(queue(mem_auto_margin=0.25),))
    for peak in (G, G, 2 * G):
        finished(k, peak)
    finished(k, 8 * G, user="bob")             # another user's runs are not alice's history
    finished(k, 8 * G, name="other")           # nor another job's
    (job, cold) = submit(k, spec(mem=None, resreq="rusage[mem=auto]", name="align", user="alice"),
                         spec(mem=None, resreq="rusage[mem=auto]", name="new", user="alice"))
    assert rusage_amount(job.req, "mem").amount == int(2 * G * 1.25)
    assert job.req.mem_basis == "auto: p95 of 3 runs of alice/align in normal, 2.0G + 25 % = 2.5G"
    assert job.spec.resreq == "rusage[mem=auto]"   # what the user asked stays as asked
    v = k.ctx.live.job_view(job)
    assert v.mem_reserved == int(2 * G * 1.25) and v.mem_basis == job.req.mem_basis
    assert "Reservation sized: auto: p95 of 3 runs of alice/align" in job_long(v, T0)
    assert rusage_amount(cold.req, "mem") is None and "no history of alice/new" in cold.req.mem_basis


def test_submit_with_fewer_runs_than_the_queues_minimum_takes_the_fallback_and_says_why() -> None:
    k = kit(host("node1", mem="16G"), queues=(queue(mem_auto_fallback=G, mem_auto_min_runs=3),))
    finished(k, 2 * G)
    finished(k, 2 * G)
    (job,) = submit(k, spec(mem=None, resreq="rusage[mem=auto]", name="align", user="alice"))
    assert rusage_amount(job.req, "mem").amount == G
    assert ("Reservation sized: auto: only 2 runs of alice/align in normal (auto needs 3), fallback 1.0G"
            in job_long(k.ctx.live.job_view(job), T0))
    finished(k, 2 * G)
    (job,) = submit(k, spec(mem=None, resreq="rusage[mem=auto]", name="align", user="alice"), key="k-000002")
    assert rusage_amount(job.req, "mem").amount == int(2 * G * 1.1)   # the third run: history sizes it


def test_a_queue_default_of_auto_sizes_a_job_that_names_no_memory() -> None:
    k = kit(host("node1", mem="16G"), queues=(queue(mem_default_auto=True, mem_auto_fallback=G // 2,
                                                    mem_auto_min_runs=1),))
    finished(k, 2 * G)
    (sized_, given, cold) = submit(k, spec(mem=None, name="align", user="alice"),
                                   spec(mem="1G", name="align", user="alice"),
                                   spec(mem=None, name="new", user="alice"))
    assert rusage_amount(sized_.req, "mem").amount == int(2 * G * 1.1)
    assert rusage_amount(given.req, "mem").amount == G and given.req.mem_basis == ""
    assert rusage_amount(cold.req, "mem").amount == G // 2 and "fallback 512.0M" in cold.req.mem_basis


def test_a_size_no_host_could_hold_is_refused_with_its_basis() -> None:
    k = kit(host("node1", mem="16G"), queues=(queue(mem_auto_min_runs=1),))
    finished(k, 15 * G)
    out = k.call(Op.SUBMIT, S.SubmitRequest(jobs=[spec(mem=None, resreq="rusage[mem=auto]", name="align",
                                                       user="alice")], key="k-000001"))
    ((_, e),) = out.errors
    assert isinstance(e, Infeasible) and "auto: p95 of 1 run of alice/align in normal" in e.message


def test_modify_to_mem_auto_is_refused_as_submit_only() -> None:
    k = kit()
    job = k.pend_job()
    out = k.call(Op.MODIFY_SPEC, S.ModifySpecRequest(id=job.id, resreq="rusage[mem=auto]", key="k-000002"))
    ((_, e),) = out.errors
    assert isinstance(e, InvalidRequest) and "sized at submit only" in e.message


# ---- configuration -------------------------------------------------------------------------

def test_queue_config_maps_to_the_queues_sizing_fields_with_the_clusters_fallback() -> None:
    assert queue_sizing(QueueConf(mem_default="auto"), "1G") == {
        "mem_default_auto": True, "mem_default": 0, "mem_auto_fallback": G, "mem_auto_margin": 0.1,
        "mem_auto_min_runs": 3}
    assert queue_sizing(QueueConf(mem_default="2G", mem_auto_fallback="3G"), "1G")["mem_auto_fallback"] == 3 * G


@pytest.mark.parametrize("toml, key", [
    ('[queues.normal]\ndefault = true\nmem_default = "lots"\n', "queues.normal.mem_default"),
    ('[queues.normal]\ndefault = true\nmem_auto_margin = -1\n', "queues.normal.mem_auto_margin"),
    ('[cluster]\nmem_auto_fallback = "x"\n', "cluster.mem_auto_fallback"),
    ('[queues.normal]\ndefault = true\nmem_auto_min_runs = 0\n', "queues.normal.mem_auto_min_runs"),
])
def test_bad_sizing_config_is_refused_naming_the_key(tmp_path, toml: str, key: str) -> None:
    p = tmp_path / "xce.toml"
    p.write_text(toml)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load(p)
