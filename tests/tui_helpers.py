"""Shared helpers of the xce-top tests: replay apps and polling with a deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xce.tui.actions import Actions
from xce.tui.app import XceTop
from xce.tui.model import ConsoleModel
from xce.tui.record import read
from xce.tui.replay import Player

FIXTURE = Path(__file__).parent / "fixtures" / "demo.xcerec"


def replay_app(actions: Actions | None = None, to_end: bool = True, view: str = "hosts") -> XceTop:
    m = ConsoleModel()
    p = Player(read(FIXTURE), m)
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
    t = app.screen.query_one(f"#{table_id}")
    return "".join(seg.text for seg in t._row(key))


def run(coro: Any) -> Any:
    return asyncio.run(coro)
