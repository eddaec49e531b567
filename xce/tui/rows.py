"""Ordered, filtered row keys for one table, maintained incrementally.

A ``RowSet`` holds which jobs (or hosts) pass the filter and in what order.
Per frame it takes the model's Changes: only changed rows are re-filtered, and
rows that joined, left or moved are taken out and placed again by their new
sort keys in a ``SortedRows`` (blocks: a move costs a block, not the table);
the others keep the keys they were sorted by.  The whole set is re-sorted when
many rows moved, when the sort column changed, or (for usage columns) at most
every ``resort_every`` seconds, so 20,000 jobs re-sort at a steady pace rather
than on every sample.

Arrays (arrays.py): a jobs RowSet that ``group``s shows a row per array (its key the
array's id) in place of the array's elements, unless a filter names an ``array:``; the
hosts view's jobs (a host detail) list elements as they are placed.
"""

from __future__ import annotations

from typing import Any

from xce.core.arrays import SHIFT, element_text
from xce.tui.columns import HOST_COLUMNS, JOB_COLUMNS, Column
from xce.tui.filters import Filter, parse
from xce.tui.model import Changes, ConsoleModel
from xce.tui.ordered import SortedRows

FIXED = frozenset({"id", "name", "user", "queue", "slots"})  # never change once a job exists


class RowSet:
    def __init__(self, kind: str, sort: str, reverse: bool = False, base: str = "",
                 resort_every: float = 2.0, group: bool = True) -> None:
        self.kind = kind
        self.group = group and kind == "jobs"
        self.columns: tuple[Column, ...] = JOB_COLUMNS if kind == "jobs" else HOST_COLUMNS
        self.sort_col = self.column(sort)
        self.reverse = reverse
        self.base = parse(base)
        self.filter = Filter()
        self.resort_every = resort_every
        self.keys = SortedRows(reverse=reverse)  # shown order (changed in place between sorts)
        self.matches: set[Any] = set()
        self.total = 0
        self._full = True
        self._last_sort = float("-inf")
        self._stale_order = False

    def column(self, key: str) -> Column:
        return next(c for c in self.columns if c.key == key)

    def set_sort(self, key: str, reverse: bool | None = None) -> None:
        col = self.column(key)
        self.reverse = (not self.reverse if col is self.sort_col else False) if reverse is None else reverse
        self.sort_col = col
        self._stale_order = True
        self._last_sort = float("-inf")

    def set_filter(self, text: str) -> None:
        self.filter = parse(text)
        self._full = True

    @property
    def grouped(self) -> bool:
        """Arrays show as one row each: grouping is on and no filter picks an array's elements."""
        return self.group and not any(t.field == "array" for t in (*self.base.terms, *self.filter.terms))

    def set_group(self, group: bool) -> None:
        self.group = group and self.kind == "jobs"
        self._full = True

    def _rows(self, m: ConsoleModel) -> Any:
        """The keys this set chooses from: hosts, jobs, or jobs with arrays in place of their elements."""
        if self.kind == "hosts":
            return m.mirror.hosts
        if not (m.arrays and self.grouped):
            return m.mirror.jobs
        return [*(k for k in m.mirror.jobs if not k >> SHIFT), *m.arrays.groups]

    def _exists(self, m: ConsoleModel, k: Any) -> bool:
        """Whether ``k`` is a row of a grouped jobs set: a plain job, or an array with elements."""
        if k in m.mirror.jobs:
            return not k >> SHIFT
        return k in m.arrays

    def invalidate(self) -> None:
        """Changes are not being followed: re-read every row at the next update."""
        self._full = True

    def update(self, m: ConsoleModel, ch: Changes, now: float) -> bool:
        """Apply one frame's changes; True if ``keys`` (order or membership) changed."""
        entities = m.mirror.jobs if self.kind == "jobs" else m.mirror.hosts
        grouping = self.kind == "jobs" and bool(m.arrays) and self.grouped
        self.total = len(entities) - (m.arrays.elements() - len(m.arrays) if grouping else 0)
        col = self.sort_col
        if self._full or ch.reset:
            self.matches = {k for k in self._rows(m) if self._match(m, k)}
            self._full = False
            return self._sort(m, now)
        changed = ch.hard if self.kind == "jobs" else ch.hosts
        moved: set[Any] = set()  # rows that joined, left, or may have moved
        filtered = self.base.active or self.filter.active
        for k in changed:
            hit = (self._exists(m, k) if grouping else k in entities) and (not filtered or self._match(m, k))
            if hit != (k in self.matches):
                moved.add(k)
                (self.matches.add if hit else self.matches.discard)(k)
            elif hit and self.kind == "jobs" and col.key not in FIXED:
                moved.add(k)
        if col.live and (ch.usage if self.kind == "jobs" else ch.hosts):
            self._stale_order = True
        # usage columns re-sort at a steady pace: every resort_every s, slower for huge tables
        every = max(self.resort_every, len(self.matches) / 4000)
        due = now - self._last_sort >= every or len(self.matches) < 2000
        if self._stale_order and (due or not col.live):
            return self._sort(m, now)
        if not moved:
            return False
        if len(moved) > len(self.keys) // 8:
            return self._sort(m, now)
        self._place(m, moved)
        return True

    def _sort(self, m: ConsoleModel, now: float) -> bool:
        key = self.sort_col.sort
        if self.sort_col.live:
            m.kept.settle()  # every row's figures are read: one pass per host, not a check per row
        self.keys = SortedRows(((key(m, k), k) for k in self.matches), self.reverse)
        self._last_sort, self._stale_order = now, False
        return True

    def _place(self, m: ConsoleModel, moved: set[Any]) -> None:
        """Take out the rows that joined, left or moved, and put back those that match where they sort.

        The others keep the keys they were sorted by (a usage column's move on at its
        own pace), so the order stays consistent for the bisection.
        """
        key, keys = self.sort_col.sort, self.keys
        for k in moved:
            keys.discard(k)
            if k in self.matches:
                keys.add((key(m, k), k))

    def _match(self, m: ConsoleModel, k: Any) -> bool:
        if not (self.base.active or self.filter.active):
            return True
        fields, hay = job_fields(m, k) if self.kind == "jobs" else host_fields(m, k, self._needs_jobs())
        return self.base.match(fields, hay) and self.filter.match(fields, hay)

    def _needs_jobs(self) -> bool:
        return any(t.field in ("user", "queue") for t in (*self.base.terms, *self.filter.terms))


def job_fields(m: ConsoleModel, jid: int) -> tuple[dict[str, Any], str]:
    j = m.mirror.jobs.get(jid)
    if j is None:
        return array_fields(m, jid)
    s = j.spec
    hosts = [h.lower() for h in j.hosts]
    reason = m.mirror.live.reasons.get(jid) or j.reason
    fields = {"user": (s.user.lower(),), "queue": (s.queue.lower(),), "state": (j.state.value.lower(),),
              "host": hosts, "name": (s.name.lower(),), "id": (str(jid),)}
    array_id = jid >> SHIFT
    if array_id:
        fields["array"] = (str(array_id),)
        fields["id"] = (str(jid), element_text(jid))
    hay = " ".join((element_text(jid), s.name, s.user, s.queue, j.state.value, *j.hosts, reason)).lower()
    return fields, hay


def array_fields(m: ConsoleModel, array_id: int) -> tuple[dict[str, Any], str]:
    """An array's row matches a state any of its elements is in, and a host any of them runs on."""
    g = m.arrays.groups[array_id]
    s = g.spec
    states = tuple(st.lower() for st in g.states())
    v = m.row_view(array_id)
    hosts = [h.lower() for h in v.hosts] if v is not None else []
    fields = {"user": (s.user.lower(),), "queue": (s.queue.lower(),), "state": states, "host": hosts,
              "name": (s.name.lower(),), "id": (str(array_id),)}
    hay = " ".join((str(array_id), g.title(), s.user, s.queue, *g.states(), *hosts)).lower()
    return fields, hay


def host_fields(m: ConsoleModel, name: str, with_jobs: bool) -> tuple[dict[str, Any], str]:
    v = m.host_view(name)
    state = v.state if v else ""
    fields: dict[str, Any] = {"host": (name.lower(),), "name": (name.lower(),), "state": (state,)}
    if with_jobs:  # user:/queue: on hosts: the hosts running such a job
        jobs = [m.mirror.jobs[jid] for (jid, h) in m.mirror.live.ledger.accounts if h == name
                and jid in m.mirror.jobs]
        fields["user"] = {j.spec.user.lower() for j in jobs}
        fields["queue"] = {j.spec.queue.lower() for j in jobs}
    return fields, f"{name} {state}".lower()
