"""The outcome of one replicated command: ``Ok(value)`` or ``Err(error)``, a small tagged union.

``ReplicatedState.apply_batch`` returns one per command; the controller's continuations
match on it.  ``Err`` holds the XceError itself, so nothing downstream rebuilds an error
from its code and loses its fields (xce/core/errors.py).  Results stay in the process that
asked: they are never replicated or sent as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xce.core.errors import XceError


@dataclass(frozen=True, slots=True)
class Ok:
    value: Any


@dataclass(frozen=True, slots=True)
class Err:
    error: XceError


Result = Ok | Err
