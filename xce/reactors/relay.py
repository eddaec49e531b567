"""Clients waiting under a ticket for a worker's answer: peek's JOB_OUTPUT, launch's TASK_STATE.

The leader forwards such a request to a worker and keeps the client on a book (``Book.peeks``,
``Book.launches``: ticket -> ``Peek``) until the worker answers or the wait runs out.  Soft
state: a new leader has no book, and its clients ask again.
"""

from __future__ import annotations

from xce.core.errors import Unavailable
from xce.reactors.context import Peek, Slot
from xce.reactors.outbox import Outbox


def settle(waiting: dict[int, Peek], ticket: int, job_id: int) -> Peek | None:
    """The client waiting under ``ticket``, taken off the book; None if it expired or the
    answer is about another job (a ticket is never answered twice either way)."""
    w = waiting.pop(ticket, None)
    return w if w is not None and w.job_id == job_id else None


def expire(waiting: dict[int, Peek], now: float, wait: float, what: str, out: Outbox) -> None:
    """Answer every client that has waited past ``wait`` seconds with an error naming ``what``."""
    for ticket, w in list(waiting.items()):
        if now - w.sent > wait:
            del waiting[ticket]
            client = w.client.claim() if isinstance(w.client, Slot) else w.client  # a gathered poll errs once
            if client is not None:
                out.error(client, Unavailable(f"{what}: job {w.job_id}'s host did not answer within {wait:g} s"))
