"""Evaluating a dependency: SATISFIED, WAITING (on what) or NEVER (and why).

``evaluate(expr, lookup)`` is pure.  ``lookup(ref)`` gives the ``Counts`` of the jobs a
reference covers (one job: a single 1; an array: its elements by state; a name: every
matching job of the user), or None when nothing matches, which is NEVER: ids are
never reused, and LSF refuses a dependency on a job it cannot find.

Each node yields three facts: true now; can be true now or later (``can_true``); can
be false now or later (``can_false``).  Both "can" facts over-approximate, so NEVER
(false now and not ``can_true``) is only said when it is certain:

    ===========  ================  =========================  ===================
    node         true now          can_true                   can_false
    ===========  ================  =========================  ===================
    done         all DONE          none EXIT                  not all DONE
    exit [op c]  all EXIT [op c]   none DONE, no EXIT off c   not true now
    ended        all ended         yes                        not true now
    started      none pending      yes                        not true now
    numX op N    count op N        op holds somewhere in the  op fails somewhere
                                   count's reachable range    in that range
    !a           not a             a.can_false                a.can_true
    a && b       both              both can_true              either can_false
    a || b       either            either can_true            both can_false
    ===========  ================  =========================  ===================

Reachable ranges assume jobs only move forward (pending -> started -> ended): done,
exit and ended counts only grow (up to ``+ unended``); pending, held, running and
started counts can fall to 0.  A requeue moves a job back; the controller then
re-evaluates its dependents, and a NEVER may become WAITING again.  ``started``
holds for ended jobs too (LSF counts DONE and EXIT as started).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Literal, NamedTuple

import msgspec

from xce.core.jobspec.depend import (
    And,
    Count,
    Expr,
    JobRef,
    Not,
    Op,
    Or,
    Ref,
    State,
    format_expr,
    format_ref,
)

_OPS: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq, "!=": operator.ne, ">": operator.gt, "<": operator.lt, ">=": operator.ge,
    "<=": operator.le,
}
_NEGATED: dict[str, Op] = {"==": "!=", "!=": "==", ">": "<=", "<=": ">", "<": ">=", ">=": "<"}
_STATE_FIELDS = ("pend", "psusp", "run", "ususp", "ssusp", "unkwn", "done", "exit")


class Counts(msgspec.Struct, frozen=True, gc=False):
    """How many of a reference's jobs (or array elements) are in each state."""

    pend: int = 0
    psusp: int = 0
    run: int = 0
    ususp: int = 0
    ssusp: int = 0
    unkwn: int = 0
    done: int = 0
    exit: int = 0
    exit_codes: tuple[tuple[int, int], ...] = ()  # (exit code, how many EXIT with it), sorted

    @classmethod
    def of(cls, state: str, exit_code: int | None = None) -> Counts:
        """One job in ``state`` (a JobState value: "RUN", "EXIT", ...)."""
        codes = ((exit_code, 1),) if state == "EXIT" and exit_code is not None else ()
        return cls(**{state.lower(): 1}, exit_codes=codes)

    def __add__(self, other: Counts) -> Counts:
        codes = dict(self.exit_codes)
        for code, n in other.exit_codes:
            codes[code] = codes.get(code, 0) + n
        fields = {f: getattr(self, f) + getattr(other, f) for f in _STATE_FIELDS}
        return Counts(**fields, exit_codes=tuple(sorted(codes.items())))

    @property
    def total(self) -> int:  # spelled out: evaluation calls it for every leaf, on every change
        return self.pend + self.psusp + self.run + self.ususp + self.ssusp + self.unkwn + self.done + self.exit

    @property
    def ended(self) -> int:
        return self.done + self.exit

    @property
    def waiting(self) -> int:
        return self.pend + self.psusp

    @property
    def started(self) -> int:
        """Started and not ended (numstart's count)."""
        return self.run + self.ususp + self.ssusp + self.unkwn


Lookup = Callable[[Ref], Counts | None]


class Verdict(msgspec.Struct, frozen=True, gc=False):
    status: Literal["SATISFIED", "WAITING", "NEVER"]
    reason: str = ""  # "waiting for done(12): job 12 is RUN", "never satisfied: ..."


class _Tri(NamedTuple):
    now: bool
    can_true: bool
    can_false: bool
    why: str  # the part that holds the node false, for reasons


def evaluate(expr: Expr, lookup: Lookup) -> Verdict:
    """The dependency's status over the referenced jobs' current counts."""
    t = _eval(expr, lookup)
    if t.now:
        return Verdict("SATISFIED")
    if not t.can_true:
        return Verdict("NEVER", f"never satisfied: {t.why}")
    return Verdict("WAITING", f"waiting for {t.why}")


def _eval(expr: Expr, lookup: Lookup) -> _Tri:
    match expr:
        case State() | Count():
            counts = lookup(expr.ref)
            if counts is None or counts.total == 0:
                return _Tri(False, False, True, f"{format_expr(expr)}: {_missing(expr.ref)}")
            tri = _state(expr, counts) if isinstance(expr, State) else _count(expr, counts)
            return tri._replace(why=f"{format_expr(expr)}: {_describe(expr.ref, counts)}")
        case Not(arg=arg):
            t = _eval(arg, lookup)
            why = f"!{t.why}" if isinstance(arg, (State, Count)) else f"!({t.why})"
            return _Tri(not t.now, t.can_false, t.can_true, why)
        case And(args=args):
            return _and([_eval(a, lookup) for a in args])
        case Or(args=args):
            return _or([_eval(a, lookup) for a in args])
    raise TypeError(f"not a dependency expression: {expr!r}")


def _and(parts: list[_Tri]) -> _Tri:
    blocking = [p for p in parts if not p.can_true] or [p for p in parts if not p.now]
    return _Tri(all(p.now for p in parts), all(p.can_true for p in parts),
                any(p.can_false for p in parts), blocking[0].why if blocking else "")


def _or(parts: list[_Tri]) -> _Tri:
    hopeful = [p for p in parts if not p.now and p.can_true]
    whys = [p.why for p in hopeful or parts]  # a WAITING names only the sides that can still hold
    why = ", or ".join(whys[:3]) + (f", or {len(whys) - 3} more" if len(whys) > 3 else "")
    return _Tri(any(p.now for p in parts), any(p.can_true for p in parts),
                all(p.can_false for p in parts), why)


def _state(cond: State, c: Counts) -> _Tri:
    if cond.cond == "done":
        return _Tri(c.done == c.total, c.exit == 0, c.done < c.total, "")
    if cond.cond == "exit":
        matching = c.exit if cond.code is None else sum(
            n for code, n in c.exit_codes if _OPS[cond.op or "=="](code, cond.code))
        now = matching == c.total
        return _Tri(now, c.done == 0 and matching == c.exit, not now, "")
    now = c.ended == c.total if cond.cond == "ended" else c.waiting == 0
    return _Tri(now, True, not now, "")


def _count(cond: Count, c: Counts) -> _Tri:
    """``numX(ref, op N)``: now, and whether op can hold / fail within the count's reachable range."""
    value, lo, hi = _reachable(cond.cond, c)
    target = c.total if cond.value is None else cond.value
    return _Tri(_OPS[cond.op](value, target), _holds_in(cond.op, target, lo, hi),
                _holds_in(_NEGATED[cond.op], target, lo, hi), "")


def _reachable(cond: str, c: Counts) -> tuple[int, int, int]:
    """(count now, lowest and highest it can reach) when jobs only move forward."""
    unended = c.total - c.ended
    match cond:
        case "numdone":
            return c.done, c.done, c.done + unended
        case "numexit":
            return c.exit, c.exit, c.exit + unended
        case "numended":
            return c.ended, c.ended, c.total
        case "numpend":
            return c.pend, 0, c.waiting
        case "numhold":
            return c.psusp, 0, c.waiting
        case "numrun":
            return c.run, 0, unended
        case _:  # numstart
            return c.started, 0, unended


def _holds_in(op: str, n: int, lo: int, hi: int) -> bool:
    """Whether ``x op n`` holds for some integer x in [lo, hi]."""
    match op:
        case "==":
            return lo <= n <= hi
        case "!=":
            return not lo == hi == n
        case ">":
            return hi > n
        case ">=":
            return hi >= n
        case "<":
            return lo < n
        case _:  # <=
            return lo <= n


def _label(ref: Ref) -> str:
    return f"job {format_ref(ref)}" if isinstance(ref, JobRef) else f"jobs named {format_ref(ref)}"


def _missing(ref: Ref) -> str:
    return f"job {format_ref(ref)} not found" if isinstance(ref, JobRef) else f"no job named {format_ref(ref)}"


def _describe(ref: Ref, c: Counts) -> str:
    """``job 12 is RUN``, ``job 12 ended EXIT``, or a state summary for many jobs."""
    states = [(f.upper(), getattr(c, f)) for f in _STATE_FIELDS if getattr(c, f)]
    if c.total == 1 and isinstance(ref, JobRef):
        state = states[0][0]
        return f"{_label(ref)} {'ended' if state in ('DONE', 'EXIT') else 'is'} {state}"
    return f"{_label(ref)}: " + ", ".join(f"{n} {s}" for s, n in states)
