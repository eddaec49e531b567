"""Client.wait's bookkeeping: an array is waited for by its summary, not by the elements that exist."""

from __future__ import annotations

from xce.client.waiting import Waiting
from xce.core.views import ArrayView, JobView


def summary(aid: int, elements: int, **counts: int) -> ArrayView:
    return ArrayView(id=aid, name="a", user="u", queue="normal", indices=f"1-{elements}", limit=None,
                     elements=elements, counts=counts)


def view(jid: int, state: str) -> JobView:
    return JobView(id=jid, name="j", user="u", queue="normal", state=state, slots=1, hosts=[], command=["true"],
                   resreq="", mem_reserved=0, mem_actual=None, mem_peak=0, mem_charged=0, mem_limit=None,
                   efficiency=None, reason="", exit_code=None, signal=None, submit_time=0.0, start_time=None,
                   end_time=None)


def test_an_array_is_finished_only_when_its_summary_counts_every_element_ended() -> None:
    w = Waiting.of([7, 5], [summary(7, 4, PEND=3, RUN=1)])
    assert (w.plain, w.arrays, w.total) == ({5}, {7: 4}, 5)
    w.jobs_seen([view(5, "DONE"), view(7 << 32 | 1, "DONE")])
    w.arrays_seen([summary(7, 4, DONE=1, PEND=3)])  # the other three are not materialised yet
    assert not w.finished and w.done == 2 and w.element_of(7 << 32 | 2) and not w.element_of(5)
    w.arrays_seen([summary(7, 4, DONE=3, EXIT=1)])
    assert w.finished and w.done == 5 and not w.element_of(7 << 32 | 2)


def test_plain_jobs_end_by_their_own_views() -> None:
    w = Waiting.of([1, 2], [])
    w.jobs_seen([view(1, "RUN"), view(2, "EXIT")])
    assert w.plain == {1} and w.done == 1
    w.jobs_seen([view(1, "DONE")])
    assert w.finished


def test_states_seen_takes_id_state_pairs_as_a_rows_reply_gives_them() -> None:
    w = Waiting.of([1, 2, 3], [])
    w.states_seen([(1, "DONE"), (2, "RUN"), (3, "EXIT")])
    assert w.plain == {2} and w.done == 2 and not w.finished
    w.states_seen([(2, "USUSP")])
    assert w.plain == {2}
    w.states_seen([(2, "DONE")])
    assert w.finished
