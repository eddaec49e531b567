"""Parsing and printing of quantities: memory sizes and durations.

Quantities are parsed once at the edge into integers (bytes, seconds) and never
compared as floats.  Bare memory numbers are MB, as in LSF.
"""

from __future__ import annotations

import re

from xce.core.errors import InvalidRequest

KIB = 1024
MIB = 1024**2
GIB = 1024**3
TIB = 1024**4

_MEM_UNITS = {"": MIB, "B": 1, "K": KIB, "KB": KIB, "M": MIB, "MB": MIB, "G": GIB, "GB": GIB,
              "T": TIB, "TB": TIB}
_MEM_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
_DUR_UNITS = {"s": 1, "m": 60, "h": 3600, "": 60}


def parse_mem(text: str | int, default_unit: str = "M") -> int:
    """Parse ``"4G"``, ``"500"`` (MB), ``"1.5g"`` into bytes."""
    if isinstance(text, int):
        return text * _MEM_UNITS[default_unit.upper()]
    m = _MEM_RE.match(text)
    if not m:
        raise InvalidRequest(f"bad memory size {text!r}: expected a number with an optional K/M/G/T unit")
    unit = m.group(2).upper() or default_unit.upper()
    if unit not in _MEM_UNITS:
        raise InvalidRequest(f"bad memory size {text!r}: unknown unit {m.group(2)!r} (use K, M, G or T)")
    value = float(m.group(1)) * _MEM_UNITS[unit]
    return int(round(value))


def parse_duration(text: str) -> int:
    """Parse a duration in seconds: ``"10"`` is minutes (LSF), ``"30s"``, ``"2h"``."""
    m = re.match(r"^\s*(\d+)\s*([smhSMH]?)\s*$", text)
    if not m:
        raise InvalidRequest(f"bad duration {text!r}: expected a whole number with an optional s/m/h unit")
    return int(m.group(1)) * _DUR_UNITS[m.group(2).lower()]


def fmt_bytes(n: int | None) -> str:
    """Human size with one decimal: 4294967296 -> '4.0G'. None -> '-'."""
    if n is None:
        return "-"
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit, size in (("T", TIB), ("G", GIB), ("M", MIB), ("K", KIB)):
        if n >= size:
            return f"{sign}{n / size:.1f}{unit}"
    return f"{sign}{n}B"


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"
