"""Job arrays in the console: elements grouped under their array, a row per array.

Owns: ``ArrayIndex``, the elements the Mirror holds grouped by array id
(xce.core.arrays.split_id), with their counts by state kept as events move them,
and ``ArrayRow``, the row an array shows in the jobs table.  An array row's key is
the array's own id (a plain job id, never an element's nor another job's), so the
jobs table's keys stay ints.

The elements the console holds are those the controller has materialised (xce/core/arrays.py
keeps at most a window of pending ones as Jobs) and keeps (ended ones until retention forgets
them).  Its counts are the controller's: each event that moves an array carries the array's
summary (``ArrayView``: every element by state, the unmaterialised as PEND), as the snapshot
does, and the Mirror keeps them (``Mirror.arrays``).  Only a group no summary has reached yet (a
recording made before arrays were on the stream) counts the elements it holds, the rest of its
indices ``unseen``.  Memory figures of a row are its elements' JobView figures added up
(xce.core.views.summed), never derived here.  Pure: no Textual, no sockets, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xce.core.arrays import split_id
from xce.core.model import Job, JobSpec
from xce.core.views import ArrayView, Figures, array_title, efficiency, summed

# The state an array row shows: its elements' first state in this order (what needs an eye first).
ROW_STATE_ORDER = ("RUN", "SSUSP", "USUSP", "UNKWN", "PSUSP", "PEND", "EXIT", "DONE")
# The counts in a row's reason, in the same order: what needs an eye first survives a narrow REASON column.
COUNT_ORDER = ROW_STATE_ORDER


def array_of(jid: int) -> int | None:
    """The array id of an element; None for any other job."""
    array_id, index = split_id(jid)
    return None if index is None else array_id


@dataclass(slots=True)
class ArrayGroup:
    id: int
    spec: JobSpec                      # an element's (name, user, queue, indices and %limit are the array's)
    elements: set[int] = field(default_factory=set)
    seen: dict[str, int] = field(default_factory=dict)  # the elements held, by state
    summary: ArrayView | None = None                    # the controller's, from the stream

    @property
    def counts(self) -> dict[str, int]:
        """Every element by state: the controller's summary; the elements held while none has come."""
        return self.summary.counts if self.summary is not None else self.seen

    @property
    def total(self) -> int:
        return self.spec.array.count if self.spec.array is not None else len(self.elements)

    @property
    def unseen(self) -> int:
        """Indices counted nowhere: without a summary, those the console holds no element of."""
        return 0 if self.summary is not None else max(0, self.total - len(self.elements))

    @property
    def state(self) -> str:
        return next((s for s in ROW_STATE_ORDER if self.counts.get(s)), "PEND")

    @property
    def ended(self) -> bool:
        """Every element DONE or EXIT (as far as the console can tell without a summary)."""
        c = self.counts
        return not self.unseen and c.get("DONE", 0) + c.get("EXIT", 0) >= self.total

    def states(self) -> tuple[str, ...]:
        return tuple(s for s, n in self.counts.items() if n)

    def title(self) -> str:
        """``name[1-1000]%50``: the array as bsub -J names it."""
        return array_title(self.spec) or self.spec.name

    def counts_text(self) -> str:
        """``3 RUN 5 PEND 990 DONE +2 unseen of 1,000``: bjobs -A's counts in a line, active states first."""
        counts = self.counts
        parts = [f"{counts[s]} {s}" for s in COUNT_ORDER if counts.get(s)]
        if self.summary is not None and self.summary.held:
            parts.append("held")
        if self.unseen:
            parts.append(f"+{self.unseen:,} unseen")
        return " ".join(parts) + f" of {self.total:,}"


class ArrayIndex:
    """The arrays the Mirror's elements belong to, kept with every hard change."""

    def __init__(self) -> None:
        self.groups: dict[int, ArrayGroup] = {}
        self.summaries: dict[int, ArrayView] = {}  # the Mirror's (Mirror.arrays), read as groups form

    def __len__(self) -> int:
        return len(self.groups)

    def __contains__(self, key: object) -> bool:
        return key in self.groups

    def get(self, array_id: int) -> ArrayGroup | None:
        return self.groups.get(array_id)

    def rebuild(self, jobs: dict[int, Job], summaries: dict[int, ArrayView] | None = None) -> None:
        self.groups = {}
        self.summaries = {} if summaries is None else summaries
        for jid, job in jobs.items():
            array_id = array_of(jid)
            if array_id is not None:
                self.moved(array_id, jid, None, job)

    def summarised(self, views: list[ArrayView]) -> None:
        """The controller's new summaries of these arrays (the Mirror keeps them in ``summaries``)."""
        for a in views:
            g = self.groups.get(a.id)
            if g is not None:
                g.summary = a

    def elements(self) -> int:
        return sum(len(g.elements) for g in self.groups.values())

    def moved(self, array_id: int, jid: int, old: str | None, job: Job | None) -> None:
        """Element ``jid`` of array ``array_id`` went from state ``old`` (None: new) to ``job``'s
        (None: forgotten)."""
        g = self.groups.get(array_id)
        if g is None:
            if job is None:
                return
            g = self.groups[array_id] = ArrayGroup(array_id, job.spec, summary=self.summaries.get(array_id))
        if old is not None and jid in g.elements:
            g.seen[old] -= 1
        if job is None:
            g.elements.discard(jid)
            if not g.elements:
                del self.groups[array_id]
            return
        g.elements.add(jid)
        new = job.state.value
        g.seen[new] = g.seen.get(new, 0) + 1


@dataclass(slots=True)
class ArrayRow:
    """What an array's row shows: the attributes the job columns read of a JobView."""

    id: int
    name: str
    user: str
    queue: str
    state: str
    hosts: list[str]
    slots: int
    mem_reserved: int
    mem_actual: int | None
    mem_peak: int
    mem_charged: int
    efficiency: float | None
    start_time: float | None
    end_time: float | None
    reason: str
    group: ArrayGroup


def array_row(g: ArrayGroup, jobs: dict[int, Job], figures: list[Figures]) -> ArrayRow:
    """The row of ``g``.  ``figures``: the (reserved, actual, peak, charged) of its active elements
    (RUN, suspended, UNKWN: what the array holds now), read from their views."""
    members = [jobs[j] for j in g.elements if j in jobs]
    running = [j for j in members if j.allocs and j.end_time is None]
    hosts = sorted({a.host for j in running for a in j.allocs})
    starts = [j.start_time for j in members if j.start_time is not None]
    ended = bool(members) and g.ended
    reserved, actual, peak, charged = summed(figures)
    return ArrayRow(id=g.id, name=g.title(), user=g.spec.user, queue=g.spec.queue, state=g.state, hosts=hosts,
                    slots=sum(j.spec.slots for j in running), mem_reserved=reserved, mem_actual=actual,
                    mem_peak=peak, mem_charged=charged, efficiency=efficiency(peak, reserved),
                    start_time=min(starts) if starts else None,
                    end_time=max(j.end_time or 0.0 for j in members) if ended else None,
                    reason=g.counts_text(), group=g)
