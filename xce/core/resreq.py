"""LSF-style resource requirement strings (``bsub -R``): parsing, validation, matching.

This module owns the ``-R`` grammar and nothing else: it splits a string into
``select[]``, ``order[]``, ``rusage[]`` and ``span[]`` sections, checks names
against the resource catalog, turns amounts into integers (bytes, seconds,
counts), and compiles select expressions into cached predicates over the host
attributes the scheduler supplies.  It is pure: no I/O and no scheduler state.
Every user error is a ResReqError pointing into the original text.  The user
syntax, and what is refused, is documented in docs/resreq.md.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple, NoReturn

import msgspec

from xce.core.errors import ResReqError
from xce.core.resources import BUILTIN, ResourceDef
from xce.core.units import GIB, KIB, MIB, TIB, parse_duration, parse_mem


class RusageItem(msgspec.Struct, frozen=True, gc=False):
    name: str
    amount: int  # bytes for unit == "bytes" resources (bare number = MB), else a count
    method: Literal["task", "host", "job"] = "host"
    duration_s: int | None = None
    decay: bool = False  # the reservation falls linearly to 0 over duration_s


class OrderKey(msgspec.Struct, frozen=True, gc=False):
    name: str
    descending: bool  # sort direction of the value: True = largest first (order[r]); order[-r] is False


class ResReq(msgspec.Struct, frozen=True, gc=False, cache_hash=True):  # a round hashes it per job
    text: str = ""
    rusage: tuple[RusageItem, ...] = ()
    select: str | None = None  # normalised, re-parseable select expression
    order: tuple[OrderKey, ...] = ()
    span_hosts: int | None = None  # span[hosts=1]
    span_ptile: int | None = None  # span[ptile=N]
    # rusage[mem=auto]: the leader sizes it at submit from the job's history (xce/core/autosize.py);
    # parsed, its mem item is a placeholder of 0 bytes.  Appended with defaults.
    mem_auto: bool = False
    mem_basis: str = ""  # once sized: how the leader chose the reservation ("auto: p95 of 12 runs ...")


_MAX_INT = 2**63 - 1
_MAX_DEPTH = 50
_SECTIONS = ("select", "order", "rusage", "span")
_REFUSED = ("same", "cu", "affinity")
_MEM_SUFFIXES = {"", "B", "K", "KB", "M", "MB", "G", "GB", "T", "TB"}
_TOKEN_RE = re.compile(r"""(?P<ws>\s+)
    | (?P<num>\d{1,20}(?:\.\d{1,20})?(?:[A-Za-z_]\w*)?)(?!\d)
    | (?P<name>[A-Za-z_][\w.\-]*)
    | (?P<str>"[^"]*"|'[^']*')
    | (?P<op>&&|\|\||>=|<=|==|!=|[<>=!()/:,\-])""", re.VERBOSE | re.ASCII)
_NUM_RE = re.compile(r"(\d+(?:\.\d+)?)(\w*)", re.ASCII)
_CMP = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
        "==": operator.eq, "!=": operator.ne}


class _Tok(NamedTuple):
    kind: str  # num | name | str | op | end
    text: str
    pos: int


def _tokens(text: str, start: int, end: int, section: str) -> list[_Tok]:
    out: list[_Tok] = []
    i = start
    while i < end:
        m = _TOKEN_RE.match(text, i, end)
        if not m:
            ch = text[i]
            what = ("number too long" if ch.isdigit() else "unterminated string" if ch in "\"'"
                    else f"unexpected character {ch!r}")
            raise ResReqError(f"{section}: {what}", text, i)
        if m.lastgroup != "ws":
            out.append(_Tok(m.lastgroup or "", m.group(), i))
        i = m.end()
    out.append(_Tok("end", "", end))
    return out


class _Cursor:
    def __init__(self, text: str, start: int, end: int, section: str) -> None:
        self.text, self.section, self.i = text, section, 0
        self.toks = _tokens(text, start, end, section)

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def at(self, *texts: str) -> bool:
        return self.tok.kind in ("op", "name") and self.tok.text in texts

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += tok.kind != "end"
        return tok

    def fail(self, message: str, tok: _Tok | None = None) -> NoReturn:
        raise ResReqError(f"{self.section}: {message}", self.text, (tok or self.tok).pos)

    def found(self, tok: _Tok | None = None) -> str:
        tok = tok or self.tok
        return "end of section" if tok.kind == "end" else repr(tok.text)

    def number(self, tok: _Tok, what: str, unit: str = "count") -> int:
        """A positive integer amount: bytes (bare = MB), seconds (bare = minutes) or a count."""
        if tok.kind != "num":
            self.fail(f"expected a number for {what}, found {self.found(tok)}", tok)
        m = _NUM_RE.fullmatch(tok.text)
        assert m is not None
        digits, suffix = m.groups()
        upos = tok.pos + len(digits)
        if unit != "bytes" and "." in digits:
            self.fail(f"{what} must be a whole number, got {tok.text!r}", tok)
        if unit == "bytes":
            if suffix.upper() not in _MEM_SUFFIXES:
                self.fail(f"unknown unit {suffix!r} in {tok.text!r} (use K, M, G or T)", tok._replace(pos=upos))
            value = parse_mem(tok.text)
        elif unit == "seconds":
            if suffix.lower() not in ("", "s", "m", "h"):
                self.fail(f"unknown unit {suffix!r} in {tok.text!r} (use s, m or h)", tok._replace(pos=upos))
            value = parse_duration(tok.text)
        else:
            if suffix:
                self.fail(f"unit {suffix!r} not allowed for {what} in {tok.text!r}", tok._replace(pos=upos))
            value = int(digits)
        if value > _MAX_INT:
            self.fail(f"value {tok.text!r} for {what} is too large", tok)
        return value


# --- select: parse into a small tuple AST, print it normalised, compile it to closures ----------
# node: ("or", nodes) | ("and", nodes) | ("not", node) | ("test", name) | ("cmp", op, operand, operand)
# operand: ("name", str) | ("num", int, is_bytes) | ("str", str) | ("any",)

class _Select(_Cursor):
    def __init__(self, text: str, start: int, end: int, res: Mapping[str, ResourceDef], strict: bool):
        super().__init__(text, start, end, "select")
        self.res, self.strict, self.depth = res, strict, 0

    def parse(self) -> tuple[Any, ...]:
        if self.tok.kind == "end":
            self.fail("empty expression")
        node = self.or_()
        if self.tok.kind != "end":
            self.fail(f"unexpected {self.found()}")
        return node

    def or_(self) -> tuple[Any, ...]:
        items = [self.and_()]
        while self.at("||", "or"):
            self.take()
            items.append(self.and_())
        return items[0] if len(items) == 1 else ("or", tuple(items))

    def and_(self) -> tuple[Any, ...]:
        items = [self.not_()]
        while self.at("&&", "and"):
            self.take()
            items.append(self.not_())
        return items[0] if len(items) == 1 else ("and", tuple(items))

    def not_(self) -> tuple[Any, ...]:
        neg = False
        while self.at("!", "not"):
            self.take()
            neg = not neg
        node = self.primary()
        if not neg:
            return node
        return node[1] if node[0] == "not" else ("not", node)

    def primary(self) -> tuple[Any, ...]:
        if self.at("("):
            self.depth += 1
            if self.depth > _MAX_DEPTH:
                self.fail("expression nested too deeply")
            self.take()
            node = self.or_()
            if not self.at(")"):
                self.fail(f"expected ')', found {self.found()}")
            self.take()
            self.depth -= 1
            return node
        left = self.take()
        if left.kind not in ("name", "num", "str"):
            self.fail(f"expected a resource name, found {self.found(left)}", left)
        if self.tok.kind == "op" and self.tok.text in (*_CMP, "="):
            optok = self.take()
            right = self.take()
            if right.kind not in ("name", "num", "str"):
                self.fail(f"expected a value after {optok.text!r}, found {self.found(right)}", right)
            return self.compare(optok, left, right)
        if left.kind != "name":
            self.fail(f"expected a comparison after {left.text!r}, found {self.found()}")
        self.lookup(left)
        return ("test", left.text)

    def lookup(self, tok: _Tok) -> ResourceDef | None:
        rdef = self.res.get(tok.text)
        if rdef is None and self.strict:
            self.fail(f"unknown resource {tok.text!r}", tok)
        return rdef

    def compare(self, optok: _Tok, left: _Tok, right: _Tok) -> tuple[Any, ...]:
        op = "==" if optok.text == "=" else optok.text
        if left.kind == "name" and right.kind == "name":
            ldef, rdef = self.res.get(left.text), self.res.get(right.text)
            if ldef is not None and ldef.unit == "string":  # type==X86_64: the other side is a literal
                return ("cmp", op, ("name", left.text), self.literal(right, ldef, left.text, optok))
            if rdef is not None and rdef.unit == "string":
                return ("cmp", op, self.literal(left, rdef, right.text, optok), ("name", right.text))
            if ldef is not None and rdef is None:  # cores>=many: a number was meant
                return ("cmp", op, ("name", left.text), self.literal(right, ldef, left.text, optok))
            if rdef is not None and ldef is None:
                return ("cmp", op, self.literal(left, rdef, right.text, optok), ("name", right.text))
            ldef, rdef = self.lookup(left), self.lookup(right)
            if ldef and rdef and ldef.unit != rdef.unit:
                self.fail(f"cannot compare {left.text!r} ({ldef.unit}) with {right.text!r} ({rdef.unit})", optok)
            return ("cmp", op, ("name", left.text), ("name", right.text))
        if left.kind == "name":
            return ("cmp", op, ("name", left.text), self.literal(right, self.lookup(left), left.text, optok))
        if right.kind == "name":
            return ("cmp", op, self.literal(left, self.lookup(right), right.text, optok), ("name", right.text))
        self.fail("a comparison needs a resource name", left)

    def literal(self, tok: _Tok, rdef: ResourceDef | None, name: str, optok: _Tok) -> tuple[Any, ...]:
        if (rdef.unit == "string") if rdef is not None else tok.kind == "str":
            if optok.text not in ("==", "=", "!="):
                self.fail(f"{optok.text!r} cannot compare string attribute {name!r}", optok)
            value = tok.text[1:-1] if tok.kind == "str" else tok.text
            if name in ("type", "model") and value in ("any", "local"):
                if value == "local":
                    self.fail(f"{name}==local is not supported; name the {name}", tok)
                return ("any",)
            return ("str", value)
        if tok.kind != "num":
            self.fail(f"{name!r} is numeric; expected a number, found {tok.text}", tok)
        has_unit = not tok.text[-1].isdigit()
        if (rdef is not None and rdef.unit == "bytes") or (rdef is None and has_unit):
            return ("num", self.number(tok, repr(name), "bytes"), True)
        return ("num", self.number(tok, f"count resource {name!r}"), False)


def _fmt_operand(o: tuple[Any, ...]) -> str:
    if o[0] == "num" and o[2]:
        n = o[1]
        for suffix, size in (("T", TIB), ("G", GIB), ("M", MIB), ("K", KIB)):
            if n and n % size == 0:
                return f"{n // size}{suffix}"
        return f"{n}B"
    if o[0] == "str":
        return f"'{o[1]}'" if '"' in o[1] else f'"{o[1]}"'
    return "any" if o[0] == "any" else str(o[1])


def _fmt(node: tuple[Any, ...], parent: int = 0) -> str:
    kind = node[0]
    if kind in ("or", "and"):
        prec = 1 if kind == "or" else 2
        s = (" || " if kind == "or" else " && ").join(_fmt(c, prec) for c in node[1])
        return f"({s})" if parent > prec else s
    if kind == "not":
        inner = _fmt(node[1])
        return f"!{inner}" if node[1][0] == "test" else f"!({inner})"
    if kind == "test":
        return str(node[1])
    return f"{_fmt_operand(node[2])}{node[1]}{_fmt_operand(node[3])}"


_Pred = Callable[[Mapping[str, Any]], bool]


def _compile(node: tuple[Any, ...]) -> _Pred:
    kind = node[0]
    if kind in ("or", "and"):
        fs = tuple(_compile(c) for c in node[1])
        if kind == "or":
            return lambda a: any(f(a) for f in fs)
        return lambda a: all(f(a) for f in fs)
    if kind == "not":
        f = _compile(node[1])
        return lambda a: not f(a)
    if kind == "test":
        name = node[1]
        return lambda a: bool(a.get(name))
    op, left, right = node[1], node[2], node[3]
    if ("any",) in (left, right):  # type==any matches every host, type!=any none
        return (lambda a: True) if op == "==" else (lambda a: False)
    fn = _CMP[op]
    if left[0] == "name" and right[0] != "name":
        name, const = left[1], right[1]

        def pred(a: Mapping[str, Any]) -> bool:
            v = a.get(name)
            if v is None:
                return False
            try:
                return bool(fn(v, const))
            except TypeError:
                return False
        return pred

    def get(o: tuple[Any, ...]) -> Callable[[Mapping[str, Any]], Any]:
        return (lambda a: a.get(o[1])) if o[0] == "name" else (lambda a: o[1])
    lget, rget = get(left), get(right)

    def pred2(a: Mapping[str, Any]) -> bool:
        lv, rv = lget(a), rget(a)
        if lv is None or rv is None:
            return False
        try:
            return bool(fn(lv, rv))
        except TypeError:
            return False
    return pred2


@functools.lru_cache(maxsize=1024)
def _parsed(expr: str) -> tuple[tuple[Any, ...], _Pred, frozenset[str]]:
    node = _Select(expr, 0, len(expr), BUILTIN, strict=False).parse()
    names: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n[0] in ("or", "and"):
            stack.extend(n[1])
        elif n[0] == "not":
            stack.append(n[1])
        elif n[0] == "test":
            names.add(n[1])
        else:
            names.update(o[1] for o in n[2:] if o[0] == "name")
    return node, _compile(node), frozenset(names)


def select_matches(expr: str | None, attrs: Mapping[str, int | str]) -> bool:
    """Whether a host with ``attrs`` satisfies the (normalised) select expression; None matches all.

    ``attrs["mem"]`` is the host's memory available for scheduling in bytes and
    ``attrs["slots"]`` its free slots.  A comparison naming an attribute the host
    does not report is false.
    """
    return True if expr is None else _parsed(expr)[1](attrs)


def select_names(expr: str | None) -> set[str]:
    """The resource names a select expression uses."""
    return set() if expr is None else set(_parsed(expr)[2])


# --- sections ----------------------------------------------------------------------------------

def _order(text: str, start: int, end: int, res: Mapping[str, ResourceDef]) -> tuple[OrderKey, ...]:
    c = _Cursor(text, start, end, "order")
    keys: list[OrderKey] = []
    while True:
        if c.at("!"):
            c.fail("'!' in order[] is not supported")
        descending = not c.at("-")
        if not descending:
            c.take()
        tok = c.take()
        if tok.kind != "name":
            c.fail(f"expected a resource name, found {c.found(tok)}", tok)
        rdef = res.get(tok.text)
        if rdef is None:
            c.fail(f"unknown resource {tok.text!r}", tok)
        if rdef.unit == "string":
            c.fail(f"{tok.text!r} is a string attribute and cannot be ordered", tok)
        if any(k.name == tok.text for k in keys):
            c.fail(f"{tok.text!r} given twice", tok)
        keys.append(OrderKey(tok.text, descending))
        if c.tok.kind == "end":
            return tuple(keys)
        if not c.at(":"):
            c.fail(f"expected ':' between keys, found {c.found()}")
        c.take()


def _rusage_item(c: _Cursor, tok: _Tok, res: Mapping[str, ResourceDef]) -> tuple[str, int, Any]:
    """One ``name=amount[/method]`` (the ``name=`` already taken): (name, amount, method)."""
    rdef = res.get(tok.text)
    if rdef is None:
        c.fail(f"unknown resource {tok.text!r}", tok)
    if not rdef.consumable:
        c.fail(f"{tok.text!r} is not a consumable resource", tok)
    if c.at("-"):
        c.fail(f"amount for {tok.text!r} must be positive")
    value = c.take()
    if value.text == AUTO:
        return _auto(c, tok, value)
    amount = c.number(value, repr(tok.text), rdef.unit)
    if amount <= 0:
        c.fail(f"amount for {tok.text!r} must be positive, got {value.text!r}", value)
    if not c.at("/"):
        return tok.text, amount, "host"
    c.take()
    method = c.take()
    if method.text not in ("task", "host", "job"):
        c.fail(f"unknown method {c.found(method)} (use task, host or job)", method)
    return tok.text, amount, method.text


AUTO = "auto"


def _auto(c: _Cursor, tok: _Tok, value: _Tok) -> tuple[str, int, Any]:
    """``mem=auto``: a placeholder the leader sizes at submit; it means nothing for another resource."""
    if tok.text != "mem":
        c.fail(f"only mem can be auto (sized from the job's history), not {tok.text!r}", value)
    if c.at("/"):
        c.fail("mem=auto takes no method: it sizes the whole job from its past peaks")
    return tok.text, 0, "job"


def _rusage(text: str, start: int, end: int, res: Mapping[str, ResourceDef]) -> tuple[RusageItem, ...]:
    c = _Cursor(text, start, end, "rusage")
    items: list[RusageItem] = []
    while True:  # one comma-separated block: its duration/decay apply to all of its resources
        block: list[tuple[str, int, Any]] = []
        opts: dict[str, tuple[_Tok, int]] = {}
        while True:
            tok = c.take()
            if tok.kind != "name":
                c.fail(f"expected a resource name, found {c.found(tok)}", tok)
            if not c.at("="):
                c.fail(f"expected '=' after {tok.text!r}, found {c.found()}")
            c.take()
            if c.at("("):
                c.fail("multi-phase rusage is not supported")
            if tok.text in opts or tok.text in [b[0] for b in block] + [i.name for i in items]:
                c.fail(f"{tok.text!r} given twice", tok)
            if tok.text == "duration":
                if c.at("-"):
                    c.fail("duration must be positive")
                value = c.take()
                opts["duration"] = (tok, c.number(value, "duration", "seconds"))
                if opts["duration"][1] <= 0:
                    c.fail("duration must be positive", value)
            elif tok.text == "decay":
                value = c.take()
                if value.text not in ("0", "1"):
                    c.fail(f"decay must be 0 or 1, found {c.found(value)}", value)
                opts["decay"] = (tok, int(value.text))
            else:
                block.append(_rusage_item(c, tok, res))
            if not c.at(":"):
                break
            c.take()
        if c.at("||"):
            c.fail("alternative rusage (||) is not supported")
        if not block:
            c.fail("duration/decay without a resource", next(iter(opts.values()))[0])
        duration = opts["duration"][1] if "duration" in opts else None
        decay = "decay" in opts and opts["decay"][1] == 1
        if decay and duration is None:
            c.fail("decay=1 needs a duration", opts["decay"][0])
        items.extend(RusageItem(n, a, m, duration, decay) for n, a, m in block)
        if c.tok.kind == "end":
            return tuple(items)
        if not c.at(","):
            c.fail(f"expected ':' or ',', found {c.found()}")
        c.take()


def _span(text: str, start: int, end: int) -> dict[str, int]:
    c = _Cursor(text, start, end, "span")
    out: dict[str, int] = {}
    while True:
        tok = c.take()
        if tok.text not in ("hosts", "ptile"):
            c.fail(f"unknown option {c.found(tok)} (use hosts=1 or ptile=N)", tok)
        if ("span_" + tok.text) in out:
            c.fail(f"{tok.text} given twice", tok)
        if out:
            c.fail("hosts and ptile cannot be combined", tok)
        if not c.at("="):
            c.fail(f"expected '=' after {tok.text!r}, found {c.found()}")
        c.take()
        if tok.text == "hosts" and (c.at("-") or c.tok.text != "1"):
            c.fail("only hosts=1 is supported")
        if c.at("-"):
            c.fail("ptile must be a positive whole number")
        value = c.take()
        out["span_" + tok.text] = c.number(value, tok.text)
        if out["span_" + tok.text] < 1:
            c.fail("ptile must be a positive whole number", value)
        if c.tok.kind == "end":
            return out
        if not c.at(":"):
            c.fail(f"expected ':', found {c.found()}")
        c.take()


def _brackets(text: str) -> list[tuple[int, int]]:
    """The (open, close) positions of every top-level [...], skipping quoted text."""
    pairs: list[tuple[int, int]] = []
    opened: int | None = None
    quote: int | None = None
    for i, ch in enumerate(text):
        if quote is not None:
            quote = None if ch == text[quote] else quote
        elif ch in "\"'":
            quote = i
        elif ch == "[":
            if opened is not None:
                break
            opened = i
        elif ch == "]":
            if opened is None:
                raise ResReqError("resreq: unbalanced ']' (no matching '[')", text, i)
            pairs.append((opened, i))
            opened = None
    m = re.search(r"([A-Za-z_]\w*)\s*$", text[:opened], re.ASCII) if opened is not None else None
    section = m.group(1) if m else "select" if opened is None and not pairs else "resreq"
    if quote is not None:
        raise ResReqError(f"{section}: unterminated string", text, quote)
    if opened is not None:
        raise ResReqError(f"{section}: unbalanced '[' (no matching ']')", text, opened)
    return pairs


def _stray(text: str, a: int, b: int) -> None:
    chunk = text[a:b]
    if chunk.strip():
        pos = a + len(chunk) - len(chunk.lstrip())
        raise ResReqError(f"resreq: unexpected text {chunk.strip()!r} outside a section", text, pos)


def parse_resreq(text: str, resources: Mapping[str, ResourceDef] | None = None) -> ResReq:
    """Parse a ``-R`` string; ``resources`` is the catalog names are checked against (default BUILTIN)."""
    res = BUILTIN if resources is None else resources
    pairs = _brackets(text)
    if not pairs:  # bare text is a select expression, as in LSF
        if not text.strip():
            return ResReq(text=text)
        return ResReq(text=text, select=_fmt(_Select(text, 0, len(text), res, strict=True).parse()))
    found: dict[str, tuple[int, int]] = {}
    prev = 0
    for opened, closed in pairs:
        m = re.search(r"([A-Za-z_]\w*)\s*$", text[prev:opened], re.ASCII)
        name_pos = prev + m.start(1) if m else opened
        _stray(text, prev, name_pos)
        if m is None:
            raise ResReqError("resreq: '[' without a section name", text, opened)
        name = m.group(1)
        if name in _REFUSED:
            raise ResReqError(f"{name}: {name}[] sections are not supported", text, name_pos)
        if name not in _SECTIONS:
            raise ResReqError(f"resreq: unknown section '{name}[]'", text, name_pos)
        if name in found:
            raise ResReqError(f"{name}: section given twice", text, name_pos)
        found[name] = (opened + 1, closed)
        prev = closed + 1
    _stray(text, prev, len(text))
    kw: dict[str, Any] = {}
    for name, (start, end) in found.items():
        if not text[start:end].strip():
            raise ResReqError(f"{name}: empty section", text, start - 1)
        if name == "select":
            kw["select"] = _fmt(_Select(text, start, end, res, strict=True).parse())
        elif name == "order":
            kw["order"] = _order(text, start, end, res)
        elif name == "rusage":
            kw["rusage"] = _rusage(text, start, end, res)
        else:
            kw.update(_span(text, start, end))
    auto = any(i.name == "mem" and i.amount == 0 for i in kw.get("rusage", ()))
    return ResReq(text=text, mem_auto=auto, **kw)


def rusage_amount(req: ResReq, name: str) -> RusageItem | None:
    """The rusage item for resource ``name``, or None if the request reserves none of it."""
    return next((item for item in req.rusage if item.name == name), None)
