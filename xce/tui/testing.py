"""Helpers for xce-top's tests and benchmark: replay apps and polling with a deadline.

Nothing here sleeps a fixed time: ``until`` polls a condition (letting the
App's event loop run) until it holds or a deadline passes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xce.core.model import HistEvent
from xce.core.views import ArrayView
from xce.tui.actions import Actions
from xce.tui.app import XceTop
from xce.tui.model import ConsoleModel
from xce.tui.record import read
from xce.tui.replay import Player


def replay_app(path: str | Path, actions: Actions | None = None, to_end: bool = True,
               view: str = "hosts") -> XceTop:
    """A deterministic App on a recording, played to its end unless ``to_end`` is False."""
    m = ConsoleModel()
    p = Player(read(path), m)
    if to_end:
        p.to_end()
    return XceTop(m, player=p, actions=actions, view=view, deterministic=True)


async def until(pilot: Any, cond: Callable[[], Any], timeout: float = 5.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        await pilot.pause(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


async def ready(pilot: Any, app: XceTop) -> None:
    """Wait for the first frames to be rendered and laid out."""
    await until(pilot, lambda: app.frames >= 2, what="the first frames")
    await pilot.pause(0.05)


def row_text(app: XceTop, table_id: str, key: Any) -> str:
    """The text of one rendered row of a table on the current screen."""
    t = app.screen.query_one(f"#{table_id}")
    return "".join(seg.text for seg in t._row(key))


class FakeActions:
    """Stands in for the controller's doors: kill answers every id with ``answer`` (or raises it);
    hist and arrays give ``history`` and ``summaries`` (or raise ``answer`` if it is an error)."""

    def __init__(self, answer: str | Exception, history: list[HistEvent] | None = None,
                 summaries: list[ArrayView] | None = None) -> None:
        self.answer, self.calls = answer, []
        self.history, self.summaries = history or [], summaries or []

    def hist(self, job_id: int) -> list[HistEvent]:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.history

    def arrays(self, ids: list[int]) -> list[ArrayView]:
        return [a for a in self.summaries if a.id in ids]

    def kill(self, ids: list[int]) -> dict[int, str]:
        self.calls.append(ids)
        if isinstance(self.answer, Exception):
            raise self.answer
        return {i: self.answer for i in ids}
