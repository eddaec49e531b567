"""Idempotency keys: what one is, and how a door makes one.  Stdlib only (xce/cli/quick.py uses it).

Every client write (SUBMIT, KILL, MODIFY, HOST_ADMIN) carries a key.  A door makes one
key per thing the user asked for and sends the same key on every retry of it, so a
request re-sent after a timeout or a failover is answered, not done twice: the state
machine keeps each key's first answer, scoped by the principal who sent it
(xce/core/state.py ``Keyed``).
"""

from __future__ import annotations

import os

KEY_MAX = 128  # characters


def new_key() -> str:
    """96 random bits: no two doors pick the same key by chance."""
    return os.urandom(12).hex()


def key_problem(key: object) -> str | None:
    """Why ``key`` cannot be an idempotency key, or None if it can."""
    if not isinstance(key, str) or not key:
        return "an idempotency key is required"
    if len(key) > KEY_MAX:
        return f"an idempotency key has at most {KEY_MAX} characters, got {len(key)}"
    return None
