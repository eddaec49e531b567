"""Dependencies: the -w grammar, Slurm --dependency, and the three-valued evaluator."""

from __future__ import annotations

import itertools

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from xce.core.jobspec.arrays import ArraySpec
from xce.core.jobspec.depend import (
    And,
    Count,
    Expr,
    JobRef,
    NameRef,
    Not,
    Or,
    Ref,
    State,
    format_expr,
    job_ids,
    parse_depend,
    refs,
)
from xce.core.jobspec.depeval import Counts, Verdict, evaluate
from xce.core.jobspec.errors import DependError
from xce.core.jobspec.slurm import parse_slurm_dependency

J12, J13 = JobRef(12), JobRef(13)


@pytest.mark.parametrize("text, expr", [
    ("done(312)", State("done", JobRef(312))),
    ('done("job_name")', State("done", NameRef("job_name"))),
    ("done('job_name')", State("done", NameRef("job_name"))),
    ("done(myjob)", State("done", NameRef("myjob"))),
    ('done("99Job")', State("done", NameRef("99Job"))),
    ("312", State("done", JobRef(312))),
    ('"myjob"', State("done", NameRef("myjob"))),
    ("ended(12)", State("ended", J12)),
    ("started(12)", State("started", J12)),
    ("exit(12)", State("exit", J12)),
    ("exit(12, 3)", State("exit", J12, "==", 3)),
    ("exit(12,!=0)", State("exit", J12, "!=", 0)),
    ("exit(12, >= 2)", State("exit", J12, ">=", 2)),
    ("exit(12, <1)", State("exit", J12, "<", 1)),
    ("numdone(12, >= 5)", Count("numdone", J12, ">=", 5)),
    ("numended(12, *)", Count("numended", J12, "==", None)),
    ("numexit(12, == 0)", Count("numexit", J12, "==", 0)),
    ("numrun(12, > 2)", Count("numrun", J12, ">", 2)),
    ("numpend(12, <= 3)", Count("numpend", J12, "<=", 3)),
    ("numhold(12, != 1)", Count("numhold", J12, "!=", 1)),
    ("numstart(12, < 4)", Count("numstart", J12, "<", 4)),
    ('done("pre*")', State("done", NameRef("pre*"))),
    ("done(pre*)", State("done", NameRef("pre*"))),
    ("done(12[3])", State("done", JobRef(12, ArraySpec(((3, 3, 1),))))),
    ('done("12[1-3]")', State("done", JobRef(12, ArraySpec(((1, 3, 1),))))),
    ('done("arr[2]")', State("done", NameRef("arr", ArraySpec(((2, 2, 1),))))),
    ("done(12) && done(13)", And((State("done", J12), State("done", J13)))),
    ("done(12) || done(13)", Or((State("done", J12), State("done", J13)))),
    ("!done(12)", Not(State("done", J12))),
    ("done(12) || done(13) && !exit(14)",
     Or((State("done", J12), And((State("done", J13), Not(State("exit", JobRef(14)))))))),
    ("(done(12) || done(13)) && ended(14)",
     And((Or((State("done", J12), State("done", J13))), State("ended", JobRef(14))))),
    ("(done(12) && done(13)) && ended(14)",
     And((State("done", J12), State("done", J13), State("ended", JobRef(14))))),
    ('done(312) && (started(Job2)||exit("99Job"))',
     And((State("done", JobRef(312)), Or((State("started", NameRef("Job2")), State("exit", NameRef("99Job"))))))),
])
def test_lsf_forms(text: str, expr: Expr) -> None:
    got = parse_depend(text)
    assert got == expr
    assert parse_depend(format_expr(got)) == got
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(got), type=Expr) == got  # hard state on the wire


@pytest.mark.parametrize("text, message, pos", [
    ("done(12", "expected ')' to close done(, found the end", 7),
    ("post_done(12)", "post_done() is not supported", 0),
    ("post_err(12)", "post_err() is not supported", 0),
    ("external(12, \"x\")", "external() is not supported", 0),
    ("finished(12)", "unknown condition finished()", 0),
    ("99job", "job name '99job' starts with a digit: quote it", 0),
    ("done(12) &&", "expected a condition, found the end", 11),
    ("numdone(12, 5)", "expected a comparison (==, !=, >, <, >=, <=) or *", 12),
    ("numdone(12)", "expected ',' after the job in numdone(ID, op N)", 10),
    ("exit(12, >= x)", "expected an exit code (a whole number)", 12),
    ("done(12[5-1])", "array range 5-1 ends before it starts", 5),
    ("", "the dependency expression is empty", 0),
    ("done(12) done(13)", "unexpected 'done' (expected && or || between conditions)", 9),
    ("done(12) & done(13)", "unexpected character '&'", 9),
    ('done("a*b")', "bad job name 'a*b' (a wildcard '*' may only end it)", 5),
    ("(done(12)", "expected ')' to close '('", 9),
])
def test_lsf_errors_point_at_the_bad_part(text: str, message: str, pos: int | None) -> None:
    with pytest.raises(DependError) as e:
        parse_depend(text)
    assert e.value.message.startswith(f"-w '{text}': {message}")
    assert e.value.pos == pos


def test_refs_and_job_ids() -> None:
    expr = parse_depend('done(12) && (numdone(13, >= 2) || !started("pre*")) && ended(12)')
    assert refs(expr) == {J12, J13, NameRef("pre*")}
    assert job_ids(expr) == {12, 13}


@pytest.mark.parametrize("text, expr", [
    ("afterok:12", State("done", J12)),
    ("afterok:12:13", And((State("done", J12), State("done", J13)))),
    ("afterany:12", State("ended", J12)),
    ("afternotok:12", State("exit", J12)),
    ("after:12", State("started", J12)),
    ("afterok:12,afterany:13", And((State("done", J12), State("ended", J13)))),
    ("afterok:12?afternotok:13", Or((State("done", J12), State("exit", J13)))),
    ("afterok:12_3", State("done", JobRef(12, ArraySpec(((3, 3, 1),))))),
    ("singleton", State("ended", NameRef("myname"))),
])
def test_slurm_dependency_forms(text: str, expr: Expr) -> None:
    assert parse_slurm_dependency(text, job_name="myname") == expr


@pytest.mark.parametrize("text, message", [
    ("afterok:12,afterok:13?afterok:14", "',' (all) and '?' (any) cannot be mixed"),
    ("aftercorr:12", "aftercorr is not supported (element-by-element dependencies)"),
    ("afterburstbuffer:12", "afterburstbuffer is not supported"),
    ("after:12+5", "a delay after a dependency (+5) is not supported"),
    ("afterwards:12", "unknown dependency type 'afterwards'"),
    ("afterok", "afterok needs at least one job id"),
    ("afterok:x", "bad job id 'x' (expected ID or ID_INDEX)"),
    ("singleton", "singleton needs the job's name"),
])
def test_slurm_dependency_errors(text: str, message: str) -> None:
    with pytest.raises(DependError) as e:
        parse_slurm_dependency(text)
    assert e.value.message.startswith(f"--dependency={text}: {message}")


FACTS = {12: Counts.of("EXIT", 3), 13: Counts.of("RUN"), 14: Counts(done=3, run=2, pend=5),
         15: Counts.of("DONE"), 16: Counts.of("PEND")}


def _lookup(ref: Ref) -> Counts | None:
    return FACTS.get(ref.id) if isinstance(ref, JobRef) else None


@pytest.mark.parametrize("text, verdict", [
    ("done(12)", Verdict("NEVER", "never satisfied: done(12): job 12 ended EXIT")),
    ("done(13)", Verdict("WAITING", "waiting for done(13): job 13 is RUN")),
    ("done(15)", Verdict("SATISFIED")),
    ("exit(12)", Verdict("SATISFIED")),
    ("exit(12, 3)", Verdict("SATISFIED")),
    ("exit(12, != 3)", Verdict("NEVER", "never satisfied: exit(12, != 3): job 12 ended EXIT")),
    ("exit(15)", Verdict("NEVER", "never satisfied: exit(15): job 15 ended DONE")),
    ("ended(13)", Verdict("WAITING", "waiting for ended(13): job 13 is RUN")),
    ("started(13)", Verdict("SATISFIED")),
    ("started(12)", Verdict("SATISFIED")),
    ("started(16)", Verdict("WAITING", "waiting for started(16): job 16 is PEND")),
    ("!done(12)", Verdict("SATISFIED")),  # ! of a never-true condition holds
    ("!done(15)", Verdict("NEVER", "never satisfied: !done(15): job 15 ended DONE")),
    ("!done(13)", Verdict("SATISFIED")),
    ("done(12) || done(13)", Verdict("WAITING", "waiting for done(13): job 13 is RUN")),
    ("done(12) || exit(15)",
     Verdict("NEVER", "never satisfied: done(12): job 12 ended EXIT, or exit(15): job 15 ended DONE")),
    ("done(13) && done(12)", Verdict("NEVER", "never satisfied: done(12): job 12 ended EXIT")),
    ("done(15) && ended(13)", Verdict("WAITING", "waiting for ended(13): job 13 is RUN")),
    ("numdone(14, >= 3)", Verdict("SATISFIED")),
    ("numdone(14, >= 5)", Verdict("WAITING", "waiting for numdone(14, >= 5): job 14: 5 PEND, 2 RUN, 3 DONE")),
    ("numdone(14, < 3)", Verdict("NEVER", "never satisfied: numdone(14, < 3): job 14: 5 PEND, 2 RUN, 3 DONE")),
    ("numdone(14, *)", Verdict("WAITING", "waiting for numdone(14, *): job 14: 5 PEND, 2 RUN, 3 DONE")),
    ("numrun(14, > 10)", Verdict("NEVER", "never satisfied: numrun(14, > 10): job 14: 5 PEND, 2 RUN, 3 DONE")),
    ("numpend(14, == 0)", Verdict("WAITING", "waiting for numpend(14, == 0): job 14: 5 PEND, 2 RUN, 3 DONE")),
    ("numstart(14, == 2)", Verdict("SATISFIED")),
    ("numended(14, <= 2)",
     Verdict("NEVER", "never satisfied: numended(14, <= 2): job 14: 5 PEND, 2 RUN, 3 DONE")),
    ("done(99)", Verdict("NEVER", "never satisfied: done(99): job 99 not found")),
    ('done("x*")', Verdict("NEVER", 'never satisfied: done("x*"): no job named "x*"')),
])
def test_evaluation(text: str, verdict: Verdict) -> None:
    assert evaluate(parse_depend(text), _lookup) == verdict


# --- properties ---------------------------------------------------------------------------------

_IDS = (1, 2, 3)
_FORWARD = {"PEND": ("PEND", "PSUSP", "RUN", "EXIT"), "PSUSP": ("PSUSP", "PEND", "EXIT"),
            "RUN": ("RUN", "USUSP", "SSUSP", "DONE", "EXIT"), "USUSP": ("USUSP", "RUN", "EXIT"),
            "SSUSP": ("SSUSP", "RUN", "EXIT"), "DONE": ("DONE",), "EXIT": ("EXIT",)}
_ref = st.sampled_from(_IDS).map(JobRef)
_op = st.sampled_from(["==", "!=", ">", "<", ">=", "<="])
_atom = st.one_of(
    st.builds(State, st.sampled_from(["done", "ended", "started", "exit"]), _ref),
    st.builds(State, st.just("exit"), _ref, _op, st.integers(0, 2)),
    st.builds(Count, st.sampled_from(["numdone", "numended", "numexit", "numrun", "numpend", "numhold",
                                      "numstart"]), _ref, _op, st.one_of(st.none(), st.integers(0, 3))),
)
_expr = st.recursive(_atom, lambda inner: st.one_of(
    st.builds(Not, inner),
    st.lists(inner, min_size=2, max_size=3).map(lambda a: And(tuple(a))),
    st.lists(inner, min_size=2, max_size=3).map(lambda a: Or(tuple(a)))), max_leaves=6)
_job = st.tuples(st.sampled_from(sorted(_FORWARD)), st.integers(0, 2))
_world = st.fixed_dictionaries({i: st.lists(_job, min_size=1, max_size=3) for i in _IDS})


def _counts(world: dict[int, list[tuple[str, int]]]) -> dict[int, Counts]:
    out = {}
    for i, jobs in world.items():
        total = Counts()
        for state, code in jobs:
            total = total + Counts.of(state, code)
        out[i] = total
    return out


def _eval(expr: Expr, world: dict[int, list[tuple[str, int]]]) -> Verdict:
    counts = _counts(world)
    return evaluate(expr, lambda ref: counts.get(ref.id) if isinstance(ref, JobRef) else None)


@st.composite
def _progress(draw: st.DrawFn, world: dict[int, list[tuple[str, int]]]) -> dict[int, list[tuple[str, int]]]:
    """The same jobs, each moved forward along the state table (never requeued)."""
    return {i: [(draw(st.sampled_from(_FORWARD[s])), c) if s not in ("DONE", "EXIT") else (s, c)
                for s, c in jobs] for i, jobs in world.items()}


@settings(max_examples=400, deadline=None)
@given(_expr, _world, st.data())
def test_never_is_stable_and_satisfied_is_reachable(expr: Expr, world: dict, data: st.DataObject) -> None:
    before = _eval(expr, world)
    later = data.draw(_progress(world))
    after = _eval(expr, later)
    if before.status == "NEVER":
        assert after.status != "SATISFIED", (format_expr(expr), world, later)
    if after.status == "SATISFIED":
        assert before.status != "NEVER"


@settings(max_examples=400, deadline=None)
@given(_expr, _expr, _world)
def test_connectives_are_consistent(a: Expr, b: Expr, world: dict) -> None:
    va, vb = _eval(a, world), _eval(b, world)
    both, either, neg = _eval(And((a, b)), world), _eval(Or((a, b)), world), _eval(Not(a), world)
    assert (both.status == "SATISFIED") == (va.status == vb.status == "SATISFIED")
    assert (either.status == "SATISFIED") == ("SATISFIED" in (va.status, vb.status))
    assert (neg.status == "SATISFIED") == (va.status != "SATISFIED")
    if "NEVER" in (va.status, vb.status):
        assert both.status == "NEVER"
    if va.status == vb.status == "NEVER":
        assert either.status == "NEVER"
    for v in (va, vb, both, either, neg):
        assert v.status == "SATISFIED" or v.reason.startswith(("waiting for ", "never satisfied: "))


@settings(max_examples=200, deadline=None)
@given(_expr)
def test_text_round_trip(expr: Expr) -> None:
    flat = parse_depend(format_expr(expr))
    assert parse_depend(format_expr(flat)) == flat
    assert refs(flat) == refs(expr)


def _reachable(state: str) -> set[str]:
    seen, todo = {state}, [state]
    while todo:
        for nxt in _FORWARD[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


@settings(max_examples=500, deadline=None)
@given(_atom, _world)
@example(Count("numpend", JobRef(1), ">=", 1), {1: [("PSUSP", 0)], 2: [("RUN", 0)], 3: [("RUN", 0)]})
@example(Count("numrun", JobRef(1), "==", 2), {1: [("PEND", 0), ("USUSP", 0)], 2: [("RUN", 0)], 3: [("RUN", 0)]})
def test_each_condition_never_is_stable(atom: Expr, world: dict) -> None:
    """Per condition, over every future of the jobs it names (each job's states reachable forward)."""
    if _eval(atom, world).status != "NEVER":
        return
    ref_id = next(iter(refs(atom))).id  # type: ignore[union-attr]
    for future in itertools.product(*(sorted(_reachable(s)) for s, _ in world[ref_id])):
        later = {**world, ref_id: [(s, c) for s, (_, c) in zip(future, world[ref_id])]}
        assert _eval(atom, later).status != "SATISFIED", (format_expr(atom), world, later)
