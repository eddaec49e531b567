"""Signal names as users give them (``xce kill -s``, ``bkill -s``, ``scancel --signal``).

``STOP``, ``SIGSTOP`` and ``19`` are one signal; an unknown name is refused naming the
option and the text.  Pure: only the standard library's signal table.
"""

from __future__ import annotations

import signal

from xce.core.errors import InvalidRequest

ENDING = frozenset({signal.SIGKILL, signal.SIGTERM, signal.SIGINT})  # what ends a job as a kill does


def parse_signal(text: str, option: str = "kill -s") -> int:
    """``STOP``, ``SIGSTOP`` or ``19`` -> 19; an unknown name is refused by name."""
    if text.isdigit():
        return int(text)
    name = text.upper() if text.upper().startswith("SIG") else f"SIG{text.upper()}"
    try:
        return int(signal.Signals[name])
    except KeyError:
        raise InvalidRequest(f"{option}: unknown signal {text!r}") from None
