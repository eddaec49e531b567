"""The scheduler daemon's loop takes a round in the turn that brought the news: with
``scheduler.debounce = 0`` (the default) nothing gives the CPU away between the event and
the round.  ``time.sleep(0)`` did, on every job's path: the scheduler then waited its turn
for a CPU, 0.08-9 ms on a loaded machine (docs/benchmarks.md, "Session 10: idle latency").

The shell's loop runs for real; its look at the stream and its round are recorded."""

from __future__ import annotations

import time

import pytest

from xce.daemons.scheduler import Scheduler
from xce.site.config import load


def _loop_once(s: Scheduler, monkeypatch: pytest.MonkeyPatch) -> tuple[list[float], list[str]]:
    """One turn of ``Scheduler.run`` with news in the stream: (the sleeps, the steps in order)."""
    slept: list[float] = []
    steps: list[str] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    monkeypatch.setattr(Scheduler, "synced", property(lambda self: True))

    def drain(wait_ms: int) -> None:
        steps.append(f"drain {wait_ms}")
        s.dirty = True  # a new job in every look

    def round_(now: float) -> None:
        steps.append("round")
        s.stopping = True

    monkeypatch.setattr(s, "drain", drain)
    monkeypatch.setattr(s, "round", round_)
    s.run()
    return slept, steps


def test_news_is_placed_in_the_same_turn_without_giving_the_cpu_away(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Scheduler(load(None))
    assert s.cfg.scheduler.debounce == 0.0
    slept, steps = _loop_once(s, monkeypatch)
    assert slept == []
    assert steps == ["drain 0", "round"]


def test_a_debounce_still_coalesces_a_burst_before_the_round(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = load(None)
    cfg.scheduler.debounce = 0.05
    slept, steps = _loop_once(Scheduler(cfg), monkeypatch)
    assert slept == [0.05]
    assert steps == ["drain 0", "drain 0", "round"]
