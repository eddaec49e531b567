"""LSF's dependency language (``bsub -w``): grammar, AST, canonical text, references.

The AST is msgspec tagged structs, so a parsed expression is hard state: it travels
on the wire and in Raft as data and is never parsed again.  Evaluation over other
jobs' states is xce/core/jobspec/depeval.py.

Grammar (``!`` binds tightest, then ``&&``, then ``||``, as in C)::

    expr   := and ('||' and)*
    and    := unary ('&&' unary)*
    unary  := '!' unary | '(' expr ')' | cond
    cond   := STATE '(' ref ')' | 'exit' '(' ref [',' [op] N] ')'
            | COUNT '(' ref ',' (op N | '*') ')' | ref           # a bare ref means done(ref)
    ref    := ID | ID[index_list] | "name" | 'name' | name       # quote names starting with a digit
    STATE  := done | ended | started          COUNT := numdone | numended | numexit
    op     := == | != | > | < | >= | <=                 | numrun | numpend | numhold | numstart

A name may end in ``*`` (every one of the user's jobs whose name starts so) and may
carry an index list (``"arr[1-3]"``).  ``post_done``, ``post_err`` and ``external``
are refused by name.  Errors quote the expression with a caret under the bad part.
"""

from __future__ import annotations

import re
from typing import Literal, NoReturn

import msgspec

from xce.core.jobspec.arrays import ArraySpec, parse_index_list
from xce.core.jobspec.errors import ArraySpecError, DependError

Op = Literal["==", "!=", ">", "<", ">=", "<="]
StateCond = Literal["done", "ended", "started", "exit"]
CountCond = Literal["numdone", "numended", "numexit", "numrun", "numpend", "numhold", "numstart"]
_STATES: tuple[str, ...] = ("done", "ended", "started", "exit")
_COUNTS: tuple[str, ...] = ("numdone", "numended", "numexit", "numrun", "numpend", "numhold", "numstart")
_OPS: tuple[str, ...] = ("==", "!=", ">=", "<=", ">", "<")
_REFUSED = {"post_done": "post-execution conditions are not supported",
            "post_err": "post-execution conditions are not supported",
            "external": "external dependency conditions are not supported"}


class JobRef(msgspec.Struct, frozen=True, gc=False, tag="job"):
    """A job by id; with ``indices``, those elements of an array."""

    id: int
    indices: ArraySpec | None = None


class NameRef(msgspec.Struct, frozen=True, gc=False, tag="name"):
    """The submitting user's jobs named ``pattern`` (a trailing ``*`` matches any tail)."""

    pattern: str
    indices: ArraySpec | None = None


Ref = JobRef | NameRef


class State(msgspec.Struct, frozen=True, gc=False, tag="state"):
    """``done`` / ``ended`` / ``started`` / ``exit`` of every job the ref covers."""

    cond: StateCond
    ref: Ref
    op: Op | None = None  # exit(ref, op code); None: any exit code
    code: int | None = None


class Count(msgspec.Struct, frozen=True, gc=False, tag="count"):
    """How many of the ref's jobs/elements are in a state, compared with ``value``."""

    cond: CountCond
    ref: Ref
    op: Op = "=="
    value: int | None = None  # None: ``*``, every element


class Not(msgspec.Struct, frozen=True, gc=False, tag="not"):
    arg: Expr


class And(msgspec.Struct, frozen=True, gc=False, tag="and"):
    args: tuple[Expr, ...]


class Or(msgspec.Struct, frozen=True, gc=False, tag="or"):
    args: tuple[Expr, ...]


Expr = State | Count | Not | And | Or

_TOKEN_RE = re.compile(r"""(?P<ws>\s+)
    | (?P<op>&&|\|\||==|!=|>=|<=|[<>!(),*])
    | (?P<str>"[^"]*"|'[^']*')
    | (?P<word>(?:[^\s()!,&|<>="'\[\]*]+|\[[^\]]*\])+\*?)""", re.VERBOSE)


class _Tok(msgspec.Struct, frozen=True):
    kind: str  # op, str, word, end
    text: str
    pos: int


def _tokens(text: str) -> list[_Tok]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m:
            raise DependError(f"-w '{text}': unexpected character {text[pos]!r}", text, pos)
        if m.lastgroup != "ws":
            out.append(_Tok(m.lastgroup or "", m.group(), pos))
        pos = m.end()
    out.append(_Tok("end", "", len(text)))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def fail(self, message: str, tok: _Tok | None = None) -> NoReturn:
        raise DependError(f"-w '{self.text}': {message}", self.text, (tok or self.tok).pos)

    def next(self) -> _Tok:
        tok = self.tok
        self.i += 1
        return tok

    def accept(self, text: str) -> bool:
        if self.tok.kind == "op" and self.tok.text == text:
            self.i += 1
            return True
        return False

    def expect(self, text: str, after: str) -> None:
        if not self.accept(text):
            found = f"{self.tok.text!r}" if self.tok.kind != "end" else "the end"
            self.fail(f"expected {text!r} {after}, found {found}")

    def parse(self) -> Expr:
        if self.tok.kind == "end":
            self.fail("the dependency expression is empty")
        expr = self.or_()
        if self.tok.kind != "end":
            self.fail(f"unexpected {self.tok.text!r} (expected && or || between conditions)")
        return expr

    def or_(self) -> Expr:
        args = [self.and_()]
        while self.accept("||"):
            args.append(self.and_())
        return _flat(Or, args)

    def and_(self) -> Expr:
        args = [self.unary()]
        while self.accept("&&"):
            args.append(self.unary())
        return _flat(And, args)

    def unary(self) -> Expr:
        if self.accept("!"):
            return Not(self.unary())
        if self.accept("("):
            inner = self.or_()
            self.expect(")", "to close '('")
            return inner
        return self.cond()

    def cond(self) -> Expr:
        tok = self.tok
        if tok.kind == "word" and self.toks[self.i + 1].text == "(" and self.toks[self.i + 1].kind == "op":
            return self.call(tok)
        if tok.kind in ("word", "str"):
            return State("done", self.ref())
        self.fail("expected a condition such as done(ID)" if tok.kind != "end"
                  else "expected a condition, found the end")

    def call(self, name: _Tok) -> Expr:
        func = name.text
        if func in _REFUSED:
            self.fail(f"{func}() is not supported: {_REFUSED[func]}", name)
        if func not in _STATES and func not in _COUNTS:
            self.fail(f"unknown condition {func}() (done, ended, exit, started, numdone, numended, "
                      "numexit, numrun, numpend, numhold, numstart)", name)
        self.i += 2
        ref = self.ref()
        node: Expr = self.exit_args(ref) if func == "exit" else (
            State(func, ref) if func in _STATES else self.count_args(func, ref))  # type: ignore[arg-type]
        self.expect(")", f"to close {func}(")
        return node

    def exit_args(self, ref: Ref) -> State:
        if not self.accept(","):
            return State("exit", ref)
        op = self.op(default="==")
        return State("exit", ref, op, self.number("an exit code"))

    def count_args(self, func: str, ref: Ref) -> Count:
        self.expect(",", f"after the job in {func}(ID, op N)")
        if self.accept("*"):
            return Count(func, ref, "==", None)  # type: ignore[arg-type]
        op = self.op(default=None)
        return Count(func, ref, op, self.number("a count"))  # type: ignore[arg-type]

    def op(self, default: Op | None) -> Op:
        if self.tok.kind == "op" and self.tok.text in _OPS:
            return self.next().text  # type: ignore[return-value]
        if default is None:
            self.fail("expected a comparison (==, !=, >, <, >=, <=) or *")
        return default

    def number(self, what: str) -> int:
        tok = self.tok
        if tok.kind != "word" or not tok.text.isdigit():
            self.fail(f"expected {what} (a whole number)")
        self.i += 1
        return int(tok.text)

    def ref(self) -> Ref:
        tok = self.next()
        if tok.kind not in ("word", "str"):
            self.i -= 1
            self.fail("expected a job ID or \"job name\"")
        body = tok.text[1:-1] if tok.kind == "str" else tok.text
        return self.make_ref(body, tok, quoted=tok.kind == "str")

    def make_ref(self, body: str, tok: _Tok, quoted: bool) -> Ref:
        name, indices = body, None
        if body.endswith("]") and "[" in body:
            name = body[:body.index("[")]
            try:
                indices = parse_index_list(body[len(name) + 1:-1], where=f"-w '{self.text}'",
                                           min_index=0, max_size=2**31 - 2)
            except ArraySpecError as e:
                raise DependError(e.message, self.text, tok.pos) from None
        if not name:
            self.fail("expected a job ID or name before '['", tok)
        if "*" in name[:-1] or "[" in name or "]" in name:
            self.fail(f"bad job name {name!r} (a wildcard '*' may only end it)", tok)
        if name.isdigit() and not quoted or name.isdigit() and indices is not None:
            return JobRef(int(name), indices)
        if name[0].isdigit() and not quoted:
            self.fail(f"job name {name!r} starts with a digit: quote it (\"{name}\")", tok)
        return NameRef(name, indices)


def _flat(cls: type[And] | type[Or], args: list[Expr]) -> Expr:
    """``(a && b) && c`` is ``a && b && c``: one node per run of the same operator."""
    if len(args) == 1:
        return args[0]
    flat: list[Expr] = []
    for a in args:
        flat.extend(a.args if isinstance(a, cls) else (a,))
    return cls(tuple(flat))


def parse_depend(text: str) -> Expr:
    """Parse a ``-w`` expression into its AST; DependError points at the bad part."""
    return _Parser(text).parse()


def format_expr(expr: Expr) -> str:
    """Canonical text of ``expr``; ``parse_depend(format_expr(e)) == e``."""
    match expr:
        case State(cond="exit", ref=ref, op=op, code=code) if code is not None:
            return f"exit({format_ref(ref)}, {op} {code})"
        case State(cond=cond, ref=ref):
            return f"{cond}({format_ref(ref)})"
        case Count(cond=cond, ref=ref, op=op, value=value):
            return f"{cond}({format_ref(ref)}, {'*' if value is None else f'{op} {value}'})"
        case Not(arg=arg):
            return f"!{_group(arg)}"
        case And(args=args):
            return " && ".join(_group(a) for a in args)
        case Or(args=args):
            return " || ".join(_group(a) for a in args)
    raise TypeError(f"not a dependency expression: {expr!r}")


def _group(expr: Expr) -> str:
    return f"({format_expr(expr)})" if isinstance(expr, (And, Or)) else format_expr(expr)


def format_ref(ref: Ref) -> str:
    tail = f"[{ref.indices.text()}]" if ref.indices is not None else ""
    return f"{ref.id}{tail}" if isinstance(ref, JobRef) else f'"{ref.pattern}{tail}"'


def refs(expr: Expr) -> frozenset[Ref]:
    """Every job reference in ``expr``: the keys of the controller's reverse index."""
    match expr:
        case State(ref=ref) | Count(ref=ref):
            return frozenset((ref,))
        case Not(arg=arg):
            return refs(arg)
        case And(args=args) | Or(args=args):
            return frozenset().union(*(refs(a) for a in args))
    raise TypeError(f"not a dependency expression: {expr!r}")


def job_ids(expr: Expr) -> frozenset[int]:
    """The job ids ``expr`` names directly (name references resolve at evaluation)."""
    return frozenset(r.id for r in refs(expr) if isinstance(r, JobRef))
