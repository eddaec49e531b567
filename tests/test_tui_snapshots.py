"""Snapshots of every xce-top view on the recorded demo stream, at 120x40 and 80x24.

Deterministic: the replay's clock is the recording's, played to its end, so
ages and run times are the same on every run; animations are off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pytest_textual_snapshot import SVGImageExtension

from xce.tui.testing import replay_app as _replay_app

FIXTURE = Path(__file__).parent / "fixtures" / "demo.xcerec"


def replay_app(view: str):  # noqa: ANN201
    return _replay_app(FIXTURE, view=view)


@pytest.fixture(autouse=True)
def _snapshots_in_tests_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep these SVGs under tests/snapshots/ (the console's own folder), not __snapshots__."""
    def dirname(cls: Any, *, test_location: Any) -> str:
        return str(Path(test_location.filepath).parent / "snapshots" / test_location.basename)
    monkeypatch.setattr(SVGImageExtension, "dirname", classmethod(dirname))

SIZES = [(120, 40), (80, 24)]
VIEWS = {
    "hosts": ("hosts", []),
    "jobs": ("jobs", []),
    "job_detail": ("jobs", ["down", "down", "down", "down", "enter"]),   # job 5: the decaying reservation
    "host_detail": ("hosts", ["enter"]),
    "help": ("hosts", ["question_mark"]),
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("view", list(VIEWS))
def test_view(snap_compare, view: str, size: tuple[int, int]) -> None:
    start, keys = VIEWS[view]

    async def settle(pilot) -> None:  # noqa: ANN001
        await pilot.pause(0.3)

    assert snap_compare(replay_app(view=start), press=keys, terminal_size=size, run_before=settle)
