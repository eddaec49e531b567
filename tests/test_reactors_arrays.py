"""Arrays at the controller's door: listing by array id, summaries, ownership, the element in RUN_JOB."""

from __future__ import annotations

from reactor_kit import kit

from xce.core import arrays as A
from xce.core.errors import PermissionDenied
from xce.core.jobspec.arrays import parse_lsf_job_name
from xce.core.resreq import parse_resreq
from xce.core.state import Place, Submit
from xce.proto import schema as S
from xce.proto.opcodes import Op
from builders import T0, alloc, spec


def submit_array(k, text: str, **kw) -> int:
    name, arr = parse_lsf_job_name(text, max_size=1000)
    s = spec(mem="10M", name=name, array=arr, **kw)
    return k.state.apply(Submit(time=T0, specs=[s], reqs=[parse_resreq(s.resreq)]))[0]


def test_jobs_by_an_array_id_lists_its_elements_and_summaries_on_request() -> None:
    k = kit()
    aid = submit_array(k, "a[1-3]")
    body = k.call(Op.JOBS, S.JobsRequest(ids=[aid], arrays=True)).replies[0][1]
    assert [j.id for j in body.jobs] == [A.element_id(aid, i) for i in (1, 2, 3)]
    (summary,) = body.arrays
    assert summary.id == aid
    assert k.call(Op.JOBS, S.JobsRequest(ids=[aid])).replies[0][1].arrays == []


def test_an_own_grant_cannot_kill_someone_elses_array_by_its_id() -> None:
    k = kit(tokens=True)
    aid = submit_array(k, "a[1-3]", user="bob")
    ((_, e),) = k.call(Op.KILL, S.KillRequest(ids=[aid], key="k-000001"), token="tok-alice").errors
    assert isinstance(e, PermissionDenied)
    assert k.call(Op.KILL, S.KillRequest(ids=[aid], key="k-000002"), token="tok-bob").commits


def test_an_elements_order_carries_its_index() -> None:
    k = kit()
    k.worker("node1")
    aid = submit_array(k, "e[1-9:4]")
    jid = A.element_id(aid, 5)
    _, ch = k.state.apply_batch([Place(time=T0, job_id=jid, attempt=0, allocs=[alloc("node1", 1, "10M")])])
    k.raft.changes.merge(ch)
    (order,) = k.applied().orders
    assert (order.body.element.array_id, order.body.element.index, order.body.element.step) == (aid, 5, 4)


def test_an_array_over_the_configured_maximum_is_refused_at_submit_by_name() -> None:
    from builders import host
    from xce.core.errors import InvalidRequest
    from xce.core.jobspec.arrays import parse_index_list
    from xce.site.config import Config, ControllerConf

    k = kit(host(), config=Config(controller=ControllerConf(max_array_size=100)))
    for text, words in (("1-101", "index 101 is above the largest index 100"),
                        ("1,500", "index 500 is above the largest index 100")):
        arr = parse_index_list(text, where="t", min_index=1, max_size=10**6)
        out = k.call(Op.SUBMIT, S.SubmitRequest(jobs=[spec(name="big", array=arr)], key="k-000001"))
        ((_, e),) = out.errors
        assert isinstance(e, InvalidRequest) and words in e.message and "controller.max_array_size" in e.message
        assert 'array "big[' in e.message and not out.commits
    arr = parse_index_list("1-100", where="t", min_index=1, max_size=10**6)
    assert len(k.call(Op.SUBMIT, S.SubmitRequest(jobs=[spec(name="ok", array=arr)], key="k-000002")).commits) == 1
