"""Job arrays: index lists, running limits and element references, kept compact.

An ``ArraySpec`` is a sorted tuple of disjoint ``(first, last, step)`` ranges (``last``
is always a member) plus the running limit, so a 1,000,000-element array is one
small value: count, membership, iteration, index -> position and position -> index
are computed from the ranges, never by expanding them.  The same struct selects
elements in control commands (``12[1-5,7]``) and in dependencies (``done(12[3])``).

Forms accepted::

    LSF   -J "name[1-1000]"  "name[1-100:2]"  "name[1,5,7-9]"  "name[1-1000]%50"
          indices >= 1, each <= max_size (MAX_JOB_ARRAY_SIZE: LSF's default 1000; the doors parse
          up to ARRAY_SIZE_CAP and the leader applies controller.max_array_size, size_error)
    Slurm --array=0-15  0,6,16-32  1-7:2  0-15%4
          indices >= 0, each < max_size (MaxArraySize)
    ids   12  12[3]  12[1-5,7]   (LSF)      12_3 (Slurm element)

Ranges may be given in any order but may not overlap (``[1-10,5]`` is refused,
naming both parts): an index is an element at most once.  At most ``max_size``
elements.  ``LSB_JOBINDEX_END`` is the largest index; ``LSB_JOBINDEX_STEP`` the
step of the range an index belongs to (1 for a single index).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator

import msgspec

from xce.core.jobspec.errors import ArraySpecError

from xce.core.jobspec.plain import ARRAY_SIZE_CAP, LSF_MAX_ARRAY_SIZE, SLURM_MAX_ARRAY_SIZE

__all__ = ["ARRAY_SIZE_CAP", "LSF_MAX_ARRAY_SIZE", "SLURM_MAX_ARRAY_SIZE", "ArraySpec", "JobTarget",
           "parse_index_list", "parse_job_target", "parse_lsf_job_name", "parse_slurm_array"]
_RANGE_RE = re.compile(r"^\s*(\d{1,10})(?:\s*-\s*(\d{1,10})(?:\s*:\s*(\d{1,10}))?)?\s*$")
_NAME_RE = re.compile(r"^[A-Za-z0-9._-]*$")
_LSF_JOB_RE = re.compile(r"^(?P<name>[^\[\]]*)\[(?P<list>[^\[\]]*)\](?:%(?P<limit>\d{1,10}))?$")
_REF_RE = re.compile(r"^(?P<id>\d{1,18})(?:\[(?P<list>[^\[\]]*)\]|_(?P<elem>\d{1,10}))?$")

Range = tuple[int, int, int]


class ArraySpec(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """The indices of an array (or a selection of them) and its running limit."""

    ranges: tuple[Range, ...]  # sorted by first, disjoint; (first, last, step), last a member, step 1 if alone
    limit: int | None = None  # at most this many elements running at once
    # The index list as submitted ("1-100:2"; "" for a selection): what bjobs -A shows, where the
    # canonical text() says 1-99:2.  Not re-parsed: the ranges are the indices.
    given: str = ""

    @property
    def count(self) -> int:
        return sum((last - first) // step + 1 for first, last, step in self.ranges)

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[int]:
        for first, last, step in self.ranges:
            yield from range(first, last + 1, step)

    def _range_of(self, index: int) -> Range | None:
        i = bisect_right(self.ranges, index, key=lambda r: r[0]) - 1
        if i < 0:
            return None
        first, last, step = self.ranges[i]
        return self.ranges[i] if index <= last and (index - first) % step == 0 else None

    def __contains__(self, index: object) -> bool:
        return isinstance(index, int) and self._range_of(index) is not None

    def position(self, index: int) -> int:
        """0-based place of ``index`` in iteration order; KeyError if not a member."""
        pos = 0
        for first, last, step in self.ranges:
            if first <= index <= last and (index - first) % step == 0:
                return pos + (index - first) // step
            pos += (last - first) // step + 1
        raise KeyError(index)

    def index_at(self, position: int) -> int:
        """The index at 0-based ``position``; IndexError past the end."""
        if position >= 0:
            for first, last, step in self.ranges:
                n = (last - first) // step + 1
                if position < n:
                    return first + position * step
                position -= n
        raise IndexError(position)

    @property
    def end(self) -> int:
        """The largest index (LSB_JOBINDEX_END)."""
        return self.ranges[-1][1]

    def step_of(self, index: int) -> int:
        """The step of the range holding ``index`` (LSB_JOBINDEX_STEP)."""
        r = self._range_of(index)
        if r is None:
            raise KeyError(index)
        return r[2]

    def text(self) -> str:
        """Canonical index list, re-parseable: ``1-9:2,12``."""
        return ",".join(_range_text(r) for r in self.ranges)

    def shown(self) -> str:
        """The index list as submitted (LSF shows it so: ``1-100:2``), else the canonical one."""
        return self.given or self.text()

    def tail(self, position: int, without: Iterable[int] = ()) -> ArraySpec:
        """The indices from 0-based ``position`` on, but ``without``'s, as ranges (no limit)."""
        ranges: list[Range] = []
        for first, last, step in self.ranges:
            n = (last - first) // step + 1
            if position >= n:
                position -= n
                continue
            ranges.append((first + position * step, last, step))
            position = 0
        for index in sorted(set(without)):
            ranges = [part for r in ranges for part in _cut(r, index)]
        return ArraySpec(tuple(_canonical(r) for r in ranges))


def _cut(r: Range, index: int) -> list[Range]:
    """Range ``r`` less ``index``: itself, or the one or two parts around it."""
    first, last, step = r
    if not (first <= index <= last and (index - first) % step == 0):
        return [r]
    return [p for p in ((first, index - step, step), (index + step, last, step)) if p[0] <= p[1]]


def _canonical(r: Range) -> Range:
    first, last, step = r
    return (first, first, 1) if first == last else r


def _range_text(r: Range) -> str:
    first, last, step = r
    if first == last:
        return str(first)
    return f"{first}-{last}" if step == 1 else f"{first}-{last}:{step}"


def parse_index_list(text: str, *, where: str, min_index: int = 1,
                     max_size: int = LSF_MAX_ARRAY_SIZE, max_index: int | None = None) -> ArraySpec:
    """Parse ``1-10:2,15`` into an ArraySpec (no limit); ``where`` starts each error."""
    ranges = sorted(_parse_range(part, where, min_index) for part in text.split(","))
    for prev, cur in zip(ranges, ranges[1:]):
        if cur[0] <= prev[1]:
            raise ArraySpecError(f"{where}: index range {_range_text(cur)} overlaps {_range_text(prev)}")
    spec = ArraySpec(tuple(ranges))
    why = size_error(spec, max_size, max_index)
    if why is not None:
        raise ArraySpecError(f"{where}: {why}")
    return spec


def size_error(spec: ArraySpec, max_size: int, max_index: int | None = None) -> str | None:
    """Why ``spec`` is past a maximum array size, or None: LSF bounds both the number of elements
    and the largest index by MAX_JOB_ARRAY_SIZE (Slurm's MaxArraySize: indices below it)."""
    top = max_size if max_index is None else max_index
    if spec.end > top:
        return f"index {spec.end} is above the largest index {top}"
    if spec.count > max_size:
        return f"{spec.count} elements is more than the maximum array size {max_size}"
    return None


def _parse_range(part: str, where: str, min_index: int) -> Range:
    m = _RANGE_RE.match(part)
    if not m:
        what = "an empty index" if not part.strip() else f"bad index range {part.strip()!r}"
        raise ArraySpecError(f"{where}: {what} (expected start[-end[:step]])")
    first = int(m.group(1))
    last = int(m.group(2)) if m.group(2) else first
    step = int(m.group(3)) if m.group(3) else 1
    shown = part.strip()
    if last < first:
        raise ArraySpecError(f"{where}: array range {first}-{last} ends before it starts")
    if step < 1:
        raise ArraySpecError(f"{where}: array range {shown} has step 0 (the step must be 1 or more)")
    if first < min_index:
        raise ArraySpecError(f"{where}: index {first} is below the smallest index {min_index}")
    last -= (last - first) % step
    return (first, last, step if last > first else 1)  # one index: one canonical form


def _parse_limit(text: str | None, where: str) -> int | None:
    if text is None:
        return None
    if int(text) < 1:
        raise ArraySpecError(f"{where}: running limit %{text} must be 1 or more")
    return int(text)


def parse_lsf_job_name(text: str, *, max_size: int = LSF_MAX_ARRAY_SIZE) -> tuple[str, ArraySpec | None]:
    """``-J`` value -> (name, array or None): ``"sim[1-100]%10"`` -> ("sim", ...)."""
    where = f'-J "{text}"'
    if "[" not in text and "]" not in text:
        return text, None
    m = _LSF_JOB_RE.match(text)
    if not m:
        raise ArraySpecError(f"{where}: expected name[index_list] with an optional %limit after it")
    if not _NAME_RE.match(m["name"]):
        raise ArraySpecError(f"{where}: array name {m['name']!r} may hold only letters, digits, '.', '-' and '_'")
    spec = parse_index_list(m["list"], where=where, min_index=1, max_size=max_size)
    return m["name"], ArraySpec(spec.ranges, _parse_limit(m["limit"], where), _given(m["list"], spec))


def parse_slurm_array(text: str, *, max_size: int = SLURM_MAX_ARRAY_SIZE) -> ArraySpec:
    """``--array`` value -> ArraySpec: ``0-15%4``, ``1,3,5-7:2``."""
    where = f"--array={text}"
    body, pct, limit = text.partition("%")
    if pct and not limit.isdigit():
        raise ArraySpecError(f"{where}: running limit %{limit} is not a whole number")
    spec = parse_index_list(body, where=where, min_index=0, max_size=max_size, max_index=max_size - 1)
    return ArraySpec(spec.ranges, _parse_limit(limit if pct else None, where), _given(body, spec))


def _given(text: str, spec: ArraySpec) -> str:
    """An index list as typed, its spaces dropped (``1, 5`` is ``1,5``); "" when that is the canonical
    text (most arrays: ``1-1000``), which costs no bytes on the wire."""
    given = "".join(text.split())
    return "" if given == spec.text() else given


class JobTarget(msgspec.Struct, frozen=True, gc=False):
    """A job, or some elements of an array: ``12``, ``12[3]``, ``12[1-5,7]``."""

    job_id: int
    indices: ArraySpec | None = None  # None: the whole job (every element of an array)

    def text(self) -> str:
        return f"{self.job_id}[{self.indices.text()}]" if self.indices else str(self.job_id)


def parse_job_target(text: str, *, max_size: int = 2**31 - 2) -> JobTarget:
    """A job id in a control command or a dependency; ``12_3`` is Slurm's ``12[3]``."""
    where = f'job "{text}"'
    m = _REF_RE.match(text.strip())
    if not m:
        raise ArraySpecError(f"{where}: expected a job id, ID[INDEX] or ID[INDEX_LIST]")
    if m["elem"] is not None:
        index = int(m["elem"])
        return JobTarget(int(m["id"]), ArraySpec(((index, index, 1),)))
    if m["list"] is None:
        return JobTarget(int(m["id"]))
    return JobTarget(int(m["id"]), parse_index_list(m["list"], where=where, min_index=0, max_size=max_size))
