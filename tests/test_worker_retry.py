"""A worker's registration retries: spread out, and slower while the controller does not answer."""

from __future__ import annotations

import random

from xce.daemons.worker import register_delay


def test_retries_double_up_to_a_cap_and_are_drawn_around_their_step() -> None:
    steps = [1, 2, 4, 8, 8, 8]
    for failures, step in enumerate(steps):
        assert register_delay(failures, 0.0) == step * 0.5
        assert step * 1.49 < register_delay(failures, 0.999) < step * 1.5


def test_workers_that_lost_the_controller_together_do_not_retry_together() -> None:
    rng = random.Random(7)
    first = sorted(register_delay(0, rng.random()) for _ in range(5000))
    # Spread over the whole second between 0.5 s and 1.5 s: no 50 ms holds more than a tenth.
    assert first[0] < 0.55 and first[-1] > 1.45
    busiest = max(sum(1 for d in first if lo <= d < lo + 0.05) for lo in (0.5 + i * 0.05 for i in range(20)))
    assert busiest < 500
