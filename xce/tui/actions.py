"""What the console asks of the controller, behind one small injectable port.

Besides the event stream: kill, a job's history (bhist) and an array's summary as the
controller counts it (xce jobs -A: the elements not yet materialised too), for the
detail screen.

``Actions.kill`` returns the controller's per-job answer ("kill requested",
"killed", "already DONE", "not found") or raises an XceError (PermissionDenied,
Unavailable...).  ``ClientActions`` talks to the controller; ``ReplayActions``
refuses, since a replay has no controller; tests pass their own fake.
``kill_outcome`` turns either into what the console says, and whether it was
a refusal.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol

from xce.client import Client
from xce.core.errors import PermissionDenied, Unavailable, XceError
from xce.core.model import HistEvent
from xce.core.views import ArrayView


class Actions(Protocol):
    def kill(self, ids: list[int]) -> dict[int, str]: ...

    def hist(self, job_id: int) -> list[HistEvent]: ...

    def arrays(self, ids: list[int]) -> list[ArrayView]: ...


class ClientActions:
    def __init__(self, state_dir: str | Path | None = None, endpoint: str | list[str] | None = None) -> None:

        self.client = Client(endpoint, state_dir=state_dir, timeout=5.0)
        self.lock = threading.Lock()

    def kill(self, ids: list[int]) -> dict[int, str]:
        with self.lock:
            return self.client.kill(ids, reason="killed from xce-top")

    def hist(self, job_id: int) -> list[HistEvent]:
        with self.lock:
            return self.client.hist(job_id)

    def arrays(self, ids: list[int]) -> list[ArrayView]:
        with self.lock:
            return self.client.arrays(ids)

    def close(self) -> None:
        self.client.close()


class ReplayActions:
    def kill(self, ids: list[int]) -> dict[int, str]:
        raise Unavailable("this is a replay: there is no controller to send a kill to")

    def hist(self, job_id: int) -> list[HistEvent]:
        raise Unavailable("this is a replay: there is no controller to ask for the history")

    def arrays(self, ids: list[int]) -> list[ArrayView]:
        raise Unavailable("this is a replay: there is no controller to ask for the array's summary")


ACCEPTED = ("kill requested", "killed")


def kill_outcome(job_id: int, call: Actions) -> tuple[bool, str]:
    """(accepted, message) for killing one job through ``call``."""
    try:
        answer = call.kill([job_id]).get(job_id, "no answer")
    except PermissionDenied as e:
        return False, f"kill of job {job_id} refused: permission denied ({e.message})"
    except XceError as e:
        return False, f"kill of job {job_id} refused: {e.message}"
    if answer in ACCEPTED:
        return True, f"job {job_id}: {answer}"
    if answer.startswith("already"):
        return False, f"kill of job {job_id} refused: the job has {answer.replace('already', 'already ended:')}"
    return False, f"kill of job {job_id} refused: {answer}"
