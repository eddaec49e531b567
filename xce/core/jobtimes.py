"""A job's times: how long it waited, ran and took, and how long it spent in each state.

``state_times`` folds a job's history (the events `xce hist` shows, oldest first) through the
state machine's own table (xce/core/state.py ``TRANSITIONS``): each state event moves the job
from the state it is in to the next, and the time between two events is the first state's.
An unfinished job's last state runs to ``now``.  This is LSF's "time in seconds spent in various
states" (bhist's summary table and bhist -l's last lines).  A history cut short (state.HIST_KEPT:
the first event and the latest are kept) loses the time of the events dropped: an event that
cannot follow the state the fold is in moves it all the same when it leads to one state from
any (an end, a dispatch, a requeue), and is skipped when it does not (a suspend, a resume).

``finished_times`` is a finished job's wait, turnaround and run time, from its view's times,
as LSF's bacct reports them: wait from submit to its (last) dispatch, turnaround from submit
to end, run from dispatch to end; a job that never ran waited until it ended and ran 0 s.

Pure: no I/O, no clock (``now`` is a parameter).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple, Protocol

from xce.core.model import JobState
from xce.core.state import HIST_EVENTS, TRANSITIONS

STATES = ("PEND", "PSUSP", "RUN", "USUSP", "SSUSP", "UNKWN")  # LSF's columns, in its order


def _only_targets() -> dict[str, JobState]:
    """The events that lead to one state whatever the state before (an end, a dispatch, a requeue):
    the fold follows them even from a state a cut history put it in by mistake."""
    targets: dict[str, set[JobState]] = {}
    for (_, event), new in TRANSITIONS.items():
        targets.setdefault(event, set()).add(new)
    return {event: next(iter(new)) for event, new in targets.items() if len(new) == 1}


_ONLY_TARGET = _only_targets()


class Event(Protocol):
    @property
    def time(self) -> float: ...

    @property
    def event(self) -> str: ...


class StateTimes(NamedTuple):
    """Seconds in each state, and the time they are counted up to (the end, or ``now``)."""

    pend: float
    psusp: float
    run: float
    ususp: float
    ssusp: float
    unkwn: float
    as_of: float

    @property
    def total(self) -> float:
        return self.pend + self.psusp + self.run + self.ususp + self.ssusp + self.unkwn


def state_times(events: Iterable[Event], now: float) -> StateTimes:
    spent = dict.fromkeys(STATES, 0.0)
    state: JobState | None = None
    since = now
    for e in events:
        if e.event == "submitted":
            state, since = JobState.PEND, e.time
            continue
        move = HIST_EVENTS.get(e.event)
        if state is None or move is None:
            continue  # not a change of state (modified, switched, ...)
        new = TRANSITIONS.get((state, move)) or _ONLY_TARGET.get(move)
        if new is None:
            continue  # a suspend or resume a cut history cannot place (from PEND or from RUN?)
        _add(spent, state, e.time - since)
        state, since = new, e.time
    ended = state in (JobState.DONE, JobState.EXIT)
    if state is not None and not ended:
        _add(spent, state, now - since)
    return StateTimes(*spent.values(), as_of=since if ended else now)


def _add(spent: dict[str, float], state: JobState | None, seconds: float) -> None:
    if state is not None and state.value in spent:
        spent[state.value] += max(0.0, seconds)  # a clock step back between two events counts 0


class Finished(NamedTuple):
    wait: float
    turnaround: float
    run: float


def finished_times(submit: float, start: float | None, end: float) -> Finished:
    dispatched = end if start is None else start
    return Finished(wait=max(0.0, dispatched - submit), turnaround=max(0.0, end - submit),
                    run=max(0.0, end - dispatched))
