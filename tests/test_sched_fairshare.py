"""Fairshare alone: decayed usage folded from records, share trees, the priority formula."""

from __future__ import annotations

import math

import pytest
from builders import T0, alloc, b, job
from hypothesis import given, settings
from hypothesis import strategies as st

from xce.core.accounting import Ledger
from xce.core.model import HostUsage, JobState, PastRun
from xce.core.sched.fairshare import (
    EQUAL_SHARES,
    Fairshare,
    ShareNode,
    UsageBook,
    Weights,
    decayed,
    fairshare_of,
    job_rates,
    tree_of,
)

H = 3600.0
G = b("1G")


def done(id: int, user: str, start: float, end: float, slots: int = 1, reserved: str = "1G", peak: str = "1G",
         **kw) -> object:
    return job(id, user=user, state=JobState.DONE, start_time=start, end_time=end,
               allocs=[alloc("n1", slots, reserved)],
               usage=[HostUsage(host="n1", reserved=b(reserved), peak=b(peak))], **kw)


# ---- usage -----------------------------------------------------------------------------------

def test_decay_is_the_exact_integral() -> None:
    # One slot for one half-life, seen at its end: h/ln2 * (1 - 1/2).
    assert decayed(1.0, 0.0, H, H, H) == pytest.approx(H / math.log(2) / 2)
    # Seen one half-life later: half of that.
    assert decayed(1.0, 0.0, H, 2 * H, H) == pytest.approx(H / math.log(2) / 4)
    assert decayed(1.0, 5.0, 5.0, 9.0, H) == 0.0


def test_memory_is_charged_max_reserved_actual_at_peak() -> None:
    """accounting.charge(reserved, peak): above the reservation the peak counts, under it the reservation."""
    over = done(1, "a", T0, T0 + 10, reserved="1G", peak="3G")
    under = done(2, "a", T0, T0 + 10, reserved="2G", peak="500M")
    assert job_rates(over) == (1.0, 3 * G)
    assert job_rates(under) == (1.0, 2 * G)


def test_a_running_job_is_charged_from_its_ledger_account() -> None:
    led = Ledger()
    j = job(1, user="a", state=JobState.RUN, start_time=T0, allocs=[alloc("n1", 2, "1G")])
    assert job_rates(j, led) == (2.0, G)  # no account: the reservation
    led.open(1, "n1", G, {"slots": 2})
    led.report(1, "n1", 4 * G, 4 * G)
    assert job_rates(j, led) == (2.0, 4 * G)


def test_fold_is_incremental_and_order_free() -> None:
    a, c = done(1, "alice", T0, T0 + H), done(2, "bob", T0 + H, T0 + 2 * H, slots=2)
    once = UsageBook(H)
    once.fold([a, c], T0 + 3 * H)
    step = UsageBook(H)
    step.fold([a], T0 + 1.5 * H)
    step.fold([a, c], T0 + 3 * H)  # alice's job is not counted twice
    assert step.usage.keys() == once.usage.keys()
    for k in once.usage:
        assert step.usage[k] == pytest.approx(once.usage[k])


def test_usage_is_re_derived_from_records_after_failover() -> None:
    """A fresh book (a new scheduler) folding the same records at the same time agrees."""
    recs = [done(i, f"u{i % 3}", T0 + i * 60, T0 + i * 60 + 600, slots=1 + i % 4) for i in range(30)]
    old = UsageBook(H)
    for k in range(0, 30, 7):
        old.fold(recs[:k], T0 + k * 60 + 600)
    old.fold(recs, T0 + 5 * H)
    new = UsageBook(H)
    new.fold(recs, T0 + 5 * H)
    assert {k: pytest.approx(v) for k, v in new.usage.items()} == old.usage


def test_a_requeued_run_counts_in_the_queue_it_ran_in_once() -> None:
    """A job's earlier runs (kept on it at a requeue) are folded once each, pending or ended,
    keyed on the queue each ran in (a bswitch after a run moves only later runs)."""
    again = job(1, user="a", state=JobState.PEND, queue="normal",
                runs=[PastRun(T0, T0 + H, 2.0, float(G), "short")])
    book = UsageBook(H)
    assert book.fold([again], T0 + 2 * H) == 1 and book.fold([again], T0 + 2 * H) == 0
    assert book.usage == {("a", "", "", "short"): [pytest.approx(decayed(2.0, T0, T0 + H, T0 + 2 * H, H)),
                                                   pytest.approx(decayed(float(G), T0, T0 + H, T0 + 2 * H, H))]}
    ended = done(1, "a", T0 + 2 * H, T0 + 3 * H, runs=again.runs)
    assert book.fold([ended], T0 + 3 * H) == 1  # only its last run is new
    fresh = UsageBook(H)
    fresh.fold([ended], T0 + 3 * H)
    assert {k: pytest.approx(v) for k, v in fresh.usage.items()} == book.usage


def test_running_jobs_count_until_now() -> None:
    book = UsageBook(H)
    r = job(1, user="a", state=JobState.RUN, start_time=T0, allocs=[alloc("n1", 1, "1G")])
    got = book.with_running([r], T0 + H)
    assert got[("a", "", "", "normal")][0] == pytest.approx(decayed(1.0, T0, T0 + H, T0 + H, H))
    assert book.usage == {}  # the book holds ended jobs only


# ---- priority --------------------------------------------------------------------------------

def key(user: str, group: str = "", project: str = "", queue: str = "normal") -> tuple[str, str, str, str]:
    return (user, group, project, queue)


PRIORITY_CASES = [
    # tree, usage {key: (slot_s, mem_s)}, pending keys, who, expected priority
    (EQUAL_SHARES, {}, [key("a"), key("b")], key("a"), 1.0),
    # two equal users, a used everything: UE(a) = 1, S = 1/2 -> 2^-2; b has none -> 1
    (EQUAL_SHARES, {key("a"): (10.0, 10.0)}, [key("b")], key("a"), 0.25),
    (EQUAL_SHARES, {key("a"): (10.0, 10.0)}, [key("b")], key("b"), 1.0),
    # a named user with 3 shares and the default for others: S(a) = 3/4, UE = 1/2 -> 2^-(2/3)
    (ShareNode(members={"a": ShareNode(shares=3), "default": ShareNode()}),
     {key("a"): (5.0, 5.0), key("b"): (5.0, 5.0)}, [], key("a"), 2 ** (-(0.5 / 0.75))),
    # no default: a user the tree does not name has no share
    (ShareNode(members={"a": ShareNode()}), {}, [key("a"), key("z")], key("z"), 0.0),
]


@pytest.mark.parametrize("tree,usage,pending,who,expect", PRIORITY_CASES)
def test_priority(tree, usage, pending, who, expect: float) -> None:
    assert Fairshare(tree, usage, pending).priority(who) == pytest.approx(expect)


def test_a_group_tree_inherits_the_groups_usage() -> None:
    """bio used everything through alice; bob in bio ranks below carol in an idle group."""
    tree = ShareNode(by="group", members={
        "bio": ShareNode(by="user", members={"default": ShareNode()}),
        "chem": ShareNode(by="user", members={"default": ShareNode()})})
    fs = Fairshare(tree, {key("alice", "bio"): (10.0, 0.0)}, [key("bob", "bio"), key("carol", "chem")])
    assert fs.priority(key("carol", "chem")) == 1.0
    assert fs.priority(key("alice", "bio")) < fs.priority(key("bob", "bio")) < 1.0


def test_weights_choose_what_counts() -> None:
    usage = {key("a"): (10.0, 0.0), key("b"): (0.0, 10.0)}
    slots_only = Fairshare(EQUAL_SHARES, usage, [], Weights(slots=1.0, mem=0.0))
    assert slots_only.priority(key("a")) < slots_only.priority(key("b")) == 1.0
    mem_only = Fairshare(EQUAL_SHARES, usage, [], Weights(slots=0.0, mem=1.0))
    assert mem_only.priority(key("b")) < mem_only.priority(key("a")) == 1.0


def test_a_queue_tree_counts_only_its_queue() -> None:
    usage = {key("a", queue="short"): (10.0, 10.0), key("b", queue="long"): (10.0, 10.0)}
    fs = fairshare_of({None: EQUAL_SHARES, "short": EQUAL_SHARES}, usage,
                      [job(1, user="a", queue="short"), job(2, user="b", queue="short")])
    assert fs["short"].priority(key("b", queue="short")) == 1.0
    assert fs["short"].priority(key("a", queue="short")) < 1.0
    assert fs[None].priority(key("a")) == fs[None].priority(key("b"))


def test_tree_from_config() -> None:
    from xce.site.config import from_dict

    cfg = from_dict({"fairshare": {"tree": {"by": "project", "members": {
        "climate": 3, "genomics": {"shares": 2, "members": {"alice": 1, "default": 1}}}}}})
    t = tree_of(cfg.fairshare.tree)
    assert t.by == "project" and t.members["climate"] == ShareNode(shares=3)
    assert t.members["genomics"].shares == 2 and set(t.members["genomics"].members) == {"alice", "default"}


# ---- the property ----------------------------------------------------------------------------

users = st.sampled_from(["a", "b", "c", "d"])
groups = st.sampled_from(["g1", "g2"])
amounts = st.floats(0.0, 1e6, allow_nan=False)
usages = st.dictionaries(st.tuples(users, groups), st.tuples(amounts, amounts), max_size=8)
TREES = [EQUAL_SHARES,
         ShareNode(members={"a": ShareNode(shares=5), "b": ShareNode(shares=2), "default": ShareNode()}),
         ShareNode(by="group", members={"g1": ShareNode(shares=3, members={"a": ShareNode(shares=2),
                                                                           "default": ShareNode()}),
                                        "default": ShareNode(members={"default": ShareNode()})})]


@settings(max_examples=300, deadline=None)
@given(usages, users, groups, st.tuples(amounts, amounts), st.sampled_from(range(len(TREES))),
       st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_more_usage_never_raises_priority(use, user, group, more, tree, ws, wm) -> None:
    usage = {key(u, g): v for (u, g), v in use.items()}
    k = key(user, group)
    pending = [key(u, g) for u in "abcd" for g in ("g1", "g2")]
    w = Weights(ws, wm)
    before = Fairshare(TREES[tree], usage, pending, w).priority(k)
    old = usage.get(k, (0.0, 0.0))
    usage[k] = (old[0] + more[0], old[1] + more[1])
    after = Fairshare(TREES[tree], usage, pending, w).priority(k)
    assert after <= before + 1e-12


def test_the_order_names_the_share_tree_node_that_holds_a_job() -> None:
    """Found from outside: with a tree by group, the order's words named the user ("root's
    priority 0.49 is below root's 0.52", one user in two groups).  They name the node of the
    tree whose priority it is: the group, or group/user below it."""
    from xce.core.sched.order import Ordering

    tree = ShareNode(by="group", members={"phys": ShareNode(shares=3), "default": ShareNode()})
    a, c = job(1, user="root", group="phys"), job(2, user="root", group="chem")
    fs = {None: Fairshare(tree, {key("root", "phys"): (10.0, 10.0)}, [key("root", "chem")])}
    assert Ordering({"normal": 30}, fs).explain(c, a).startswith("fairshare: phys's priority 0.")
    nested = ShareNode(by="group", members={"phys": ShareNode(by="user", members={"default": ShareNode()})})
    fs = {None: Fairshare(nested, {key("alice", "phys"): (10.0, 10.0)}, [key("bob", "phys")])}
    words = Ordering({"normal": 30}, fs).explain(job(3, user="alice", group="phys"), job(4, user="bob", group="phys"))
    assert words.startswith("fairshare: phys/alice's priority 0.") and words.endswith("below phys/bob's 0.50"), words
    assert Fairshare(EQUAL_SHARES, {}, [key("a")]).leaf(key("a")) == "a"
    assert Fairshare(ShareNode(members={"a": ShareNode()}), {}, [key("z")]).leaf(key("z")) is None


def test_an_incremental_book_fed_only_the_jobs_that_changed_counts_each_run_once() -> None:
    """The scheduler feeds its book only the jobs that ended (or were requeued) since its last
    round.  A job that ended, was folded, then requeued and ended again while other rounds
    folded other jobs, counts each of its runs once, as a fresh book over every job does
    (found testing issue 16 from outside: the book forgot what it had folded of a job it was
    not given again, and counted the requeued run twice)."""
    first = done(1, "alice", T0, T0 + H)
    other = done(2, "bob", T0 + H, T0 + 2 * H)
    requeued = job(1, user="alice", state=JobState.PEND, runs=[PastRun(T0, T0 + H, 1.0, float(G), "normal")])
    again = done(1, "alice", T0 + 3 * H, T0 + 4 * H, runs=requeued.runs)
    book = UsageBook(H)
    book.fold([first], T0 + H)
    book.fold([other], T0 + 2 * H)       # a round that saw only bob's end
    book.fold([requeued], T0 + 2.5 * H)  # the requeue: its run was folded at its end already
    book.fold([again], T0 + 4 * H)
    book.forget([2])                     # bob's job dropped by Cleanup: its usage stays
    fresh = UsageBook(H)
    fresh.fold([again, other], T0 + 4 * H)
    assert {k: pytest.approx(v) for k, v in fresh.usage.items()} == book.usage
    assert 2 not in book.folded and book.folded[1] == 2
