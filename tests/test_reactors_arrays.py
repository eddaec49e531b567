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


# ---- arrays on the event stream: one summary per moved array, however many elements moved ----

def committed(k, *cmds) -> None:
    _, ch = k.state.apply_batch(list(cmds))
    k.raft.changes.merge(ch)


def submitted_array(k, text: str, **kw) -> int:
    name, arr = parse_lsf_job_name(text, max_size=1_000_000)
    s = spec(mem="10M", name=name, array=arr, **kw)
    _, ch = k.state.apply_batch([Submit(time=T0, specs=[s], reqs=[parse_resreq(s.resreq)])])
    k.raft.changes.merge(ch)
    return max(k.state.arrays)


def test_an_arrays_submit_and_moves_publish_one_summary_each() -> None:
    from xce.core.state import Finish

    k = kit()
    k.ctx.stream.subscribers = 1
    k.worker("node1")
    aid = submitted_array(k, "big[1-1000]%50")
    (ev,) = k.applied().events
    (a,) = ev.arrays
    assert (a.id, a.elements, a.counts, a.limit) == (aid, 1000, {"PEND": 1000}, 50)
    assert len(ev.jobs) == 50  # the window under %50: the rest are counted, not sent
    e1, e2 = A.element_id(aid, 1), A.element_id(aid, 2)
    committed(k, Place(time=T0, job_id=e1, attempt=0, allocs=[alloc("node1", 1, "10M")]),
              Place(time=T0, job_id=e2, attempt=0, allocs=[alloc("node1", 1, "10M")]))
    (ev,) = k.applied().events
    assert [v.counts for v in ev.arrays] == [{"RUN": 2, "PEND": 998}]  # one summary for two elements moved
    committed(k, Finish(time=T0 + 1, job_id=e1, attempt=1, host="node1", exit_code=0))
    (ev,) = k.applied().events
    assert [v.counts for v in ev.arrays] == [{"RUN": 1, "PEND": 998, "DONE": 1}]
    assert len(ev.jobs) == 2  # the element that ended, and the one that took its place in the window


def test_a_plain_job_moves_no_summary_and_an_arrays_tail_killed_alone_does() -> None:
    from xce.core.state import Kill, Stop

    k = kit()
    k.ctx.stream.subscribers = 1
    k.pend_job()
    k.raft.changes.jobs.add(1)
    (ev,) = k.applied().events
    assert ev.arrays == []
    aid = submitted_array(k, "a[1-100]")
    k.applied()
    committed(k, Stop(time=T0, job_ids=[aid]))
    (ev,) = k.applied().events
    assert [(v.counts, v.held) for v in ev.arrays] == [({"PSUSP": 100}, True)]
    committed(k, Kill(time=T0, job_ids=[aid]))
    (ev,) = k.applied().events
    assert [v.counts for v in ev.arrays] == [{"EXIT": 100}]


def test_the_snapshot_carries_the_arrays_a_follower_can_show() -> None:
    from xce.core.state import Cleanup, Kill

    k = kit()
    live, gone = submitted_array(k, "live[1-3000]"), submitted_array(k, "gone[1-2]")
    committed(k, Kill(time=T0, job_ids=[gone]))
    committed(k, Cleanup(time=T0 + 1, keep_finished=0))
    snap = k.call(Op.SNAPSHOT, S.Empty()).replies[0][1]
    assert [(a.id, a.counts) for a in snap.arrays] == [(live, {"PEND": 3000})]  # the ended, forgotten one: not
    assert sum(1 for j in snap.jobs if j.id >> A.SHIFT == live) == A.WINDOW


def test_jobs_lists_every_element_of_an_array_also_those_not_materialised() -> None:
    """bjobs ID lists every element, bjobs ID[7] one still pending without a record: the old code
    listed the materialised ones only, and said element 7 was not known."""
    k = kit()
    aid = submit_array(k, "a[1-10]%2")
    body = k.call(Op.JOBS, S.JobsRequest(ids=[aid])).replies[0][1]
    assert [(v.id & 0xFFFFFFFF, v.state) for v in body.jobs] == [(i, "PEND") for i in range(1, 11)]
    assert sum(1 for j in k.state.jobs if j >> A.SHIFT == aid) == 2  # nothing materialised by asking
    (v,) = k.call(Op.JOBS, S.JobsRequest(ids=[A.element_id(aid, 7)])).replies[0][1].jobs
    assert (v.id, v.state, v.name) == (A.element_id(aid, 7), "PEND", "a")
    ((_, e),) = k.call(Op.JOBS, S.JobsRequest(ids=[A.element_id(aid, 11)])).errors
    assert "11" in str(e)


def test_a_signal_to_an_arrays_id_goes_to_each_running_element() -> None:
    """bkill -s SIG ID of an array signals its running elements: the old code said "not found"."""
    from reactor_kit import key

    k = kit()
    k.worker("node1")
    aid = submit_array(k, "s[1-5]")
    e1, e2 = A.element_id(aid, 1), A.element_id(aid, 2)
    k.state.apply_batch([Place(time=T0, job_id=e, attempt=0, allocs=[alloc("node1", 1, "10M")]) for e in (e1, e2)])
    out = k.call(Op.KILL, S.KillRequest(ids=[aid], signal=10, key=key()))
    assert out.replies[0][1].results == {aid: "signal 10 sent to 2 running elements"}
    assert sorted((h, o.job_id, o.signal) for h, op, o, _ in out.orders if op == Op.SIGNAL_JOB) == \
        [("node1", e1, 10), ("node1", e2, 10)]
    idle = submit_array(k, "t[1-2]")
    out = k.call(Op.KILL, S.KillRequest(ids=[idle], signal=10, key=key()))
    assert out.replies[0][1].results == {idle: "not running: no element of array runs"} and not out.orders


def test_peek_of_an_array_asks_for_an_element_by_name() -> None:
    """bpeek ID of an array: an error naming the way out (it said the job was not found)."""
    k = kit()
    aid = submit_array(k, "p[1-3]")
    ((_, e),) = k.call(Op.PEEK, S.PeekRequest(id=aid)).errors
    assert f"job {aid} is an array: peek at one of its elements, {aid}[INDEX]" in str(e)
    ((_, e),) = k.call(Op.PEEK, S.PeekRequest(id=A.element_id(aid + 1, 2))).errors
    assert f"job {aid + 1}[2] not found" in str(e)


def test_jobs_without_ids_lists_every_element_as_jobs_of_the_array_does_in_id_order() -> None:
    """One rule for both: an array's elements not materialised yet (past the window) are listed
    too, up to arrays.LISTED_MAX, and the listing is in id order so ``after`` pages through it."""
    k = kit()
    before = k.state.apply(Submit(time=T0, specs=[spec(mem="10M")], reqs=[parse_resreq("rusage[mem=10M]")]))[0]
    aid = submit_array(k, "a[1-3]")
    big = submit_array(k, "b[1-1000]%2")  # %2: two materialised, 998 not
    after = k.state.apply(Submit(time=T0, specs=[spec(mem="10M")], reqs=[parse_resreq("rusage[mem=10M]")]))[0]
    ids = [j.id for j in k.call(Op.JOBS, S.JobsRequest()).replies[0][1].jobs]
    elements = [A.element_id(aid, i) for i in range(1, 4)] + [A.element_id(big, i) for i in range(1, 1001)]
    assert ids == [before, after, *elements]
    by_id = [j.id for j in k.call(Op.JOBS, S.JobsRequest(ids=[big])).replies[0][1].jobs]
    assert by_id == elements[3:]
    page = k.call(Op.JOBS, S.JobsRequest(after=A.element_id(big, 500), limit=3)).replies[0][1]
    assert [j.id for j in page.jobs] == [A.element_id(big, i) for i in (501, 502, 503)]
    assert page.next_after == A.element_id(big, 503)


def test_an_array_summary_shows_its_indices_as_submitted() -> None:
    k = kit()
    aid = submit_array(k, "odd[1-100:2]%5")
    (summary,) = k.call(Op.JOBS, S.JobsRequest(ids=[aid], arrays=True)).replies[0][1].arrays
    assert (summary.name, summary.indices, summary.limit, summary.elements) == ("odd", "1-100:2", 5, 50)
    job = k.call(Op.JOBS, S.JobsRequest(ids=[A.element_id(aid, 99)])).replies[0][1].jobs[0]
    assert job.array == "odd[1-100:2]%5"


class _Untouchable(dict):
    """The state's jobs, for a request that must not read any of them."""

    def _no(self, *a: object) -> None:
        raise AssertionError("the summary path read the jobs")

    values = items = keys = __iter__ = __getitem__ = get = __contains__ = _no  # type: ignore[assignment]


def test_summaries_alone_read_no_element_of_the_array() -> None:
    """Client.arrays and `xce wait` on an array ask arrays_only: the controller answers from the
    arrays' counts, without walking, viewing or sorting any job (before, limit=1 still walked and
    sorted the whole array for the one view it built)."""
    k = kit()
    aid = submit_array(k, "a[1-50]", user="alice")
    other = submit_array(k, "b[1-5]", user="bob")
    for i in (1, 2):
        k.state.apply(Place(time=T0 + 1, job_id=A.element_id(aid, i), attempt=0, allocs=[alloc("node1", 1, "10M")]))
    want = k.call(Op.JOBS, S.JobsRequest(ids=[aid], arrays=True)).replies[0][1].arrays
    jobs, k.state.jobs = k.state.jobs, _Untouchable(k.state.jobs)
    try:
        body = k.call(Op.JOBS, S.JobsRequest(ids=[other, aid, 99], arrays_only=True)).replies[0][1]
        mine = k.call(Op.JOBS, S.JobsRequest(arrays_only=True, user=k.state.arrays[aid].spec.user)).replies[0][1]
    finally:
        k.state.jobs = jobs
    assert body.jobs == [] and [a.id for a in body.arrays] == [aid, other]
    assert body.arrays[0] == want[0] and body.arrays[0].counts == {"RUN": 2, "PEND": 48}
    assert [a.id for a in mine.arrays] == [aid]


def test_summaries_alone_refuse_what_only_a_listing_takes() -> None:
    from xce.core.errors import InvalidRequest

    ((_, e),) = kit().call(Op.JOBS, S.JobsRequest(arrays_only=True, limit=1)).errors
    assert isinstance(e, InvalidRequest) and "arrays_only asks for the arrays' summaries alone" in e.message \
        and "not fields, order, states, all, after or limit" in e.message
