"""The `/` filter language: ``user:`` ``queue:`` ``state:`` ``host:`` and free text.

Terms are separated by spaces and must all match.  ``array:12`` picks array 12's
elements (the jobs view then lists them rather than the array's one row).  ``field:a,b`` matches either
value (exact, case-insensitive); free text matches a substring of the id, name,
user, queue, state, hosts or reason.  A ``!`` before a term inverts that term;
a lone leading ``!`` inverts the whole filter.  Pure: no model, no widgets.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

FIELDS = ("user", "queue", "state", "host", "name", "id", "array")


@dataclass(frozen=True, slots=True)
class Term:
    field: str | None   # None: free text
    values: tuple[str, ...]
    negate: bool = False


@dataclass(frozen=True, slots=True)
class Filter:
    text: str = ""
    terms: tuple[Term, ...] = ()
    invert: bool = False

    @property
    def active(self) -> bool:
        return bool(self.terms)

    def match(self, fields: dict[str, Iterable[str]], haystack: str) -> bool:
        """``fields`` maps user/queue/state/host/... to the row's values (lower case);
        ``haystack`` is the lower-case text free terms search."""
        ok = all(_term(t, fields, haystack) for t in self.terms)
        return ok != self.invert


def _term(t: Term, fields: dict[str, Iterable[str]], haystack: str) -> bool:
    if t.field is None:
        hit = all(v in haystack for v in t.values)
    else:
        have = fields.get(t.field)
        hit = have is not None and any(v in t.values for v in have)
    return hit != t.negate


def parse(text: str) -> Filter:
    words = text.split()
    invert = False
    if words and words[0] == "!":
        invert, words = True, words[1:]
    terms = []
    for w in words:
        neg = w.startswith("!")
        w = w[1:] if neg else w
        field, sep, value = w.partition(":")
        if sep and field.lower() in FIELDS:
            vals = tuple(v.lower() for v in value.split(",") if v)
            terms.append(Term(field.lower(), vals, neg))
        elif w:
            terms.append(Term(None, (w.lower(),), neg))
    return Filter(text=text.strip(), terms=tuple(terms), invert=invert)
