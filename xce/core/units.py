"""Parsing and printing of quantities: memory sizes and durations.

Quantities are parsed once at the edge into integers (bytes, seconds) and never
compared as floats.  Bare memory numbers are MB, as in LSF.
"""

from __future__ import annotations

from xce.core.errors import InvalidRequest

KIB = 1024
MIB = 1024**2
GIB = 1024**3
TIB = 1024**4

_MEM_UNITS = {"": MIB, "B": 1, "K": KIB, "KB": KIB, "M": MIB, "MB": MIB, "G": GIB, "GB": GIB,
              "T": TIB, "TB": TIB}
_DUR_UNITS = {"s": 1, "m": 60, "h": 3600, "": 60}


def parse_mem(text: str | int, default_unit: str = "M") -> int:
    """Parse ``"4G"``, ``"500"`` (MB), ``"1.5g"`` into bytes."""
    if isinstance(text, int):
        return text * _MEM_UNITS[default_unit.upper()]
    parts = _mem_parts(text)
    if parts is None:
        raise InvalidRequest(f"bad memory size {text!r}: expected a number with an optional K/M/G/T unit")
    number, given = parts
    unit = given.upper() or default_unit.upper()
    if unit not in _MEM_UNITS:
        raise InvalidRequest(f"bad memory size {text!r}: unknown unit {given!r} (use K, M, G or T)")
    value = float(number) * _MEM_UNITS[unit]
    return int(round(value))


def _mem_parts(text: str) -> tuple[str, str] | None:
    """``" 1.5 gb "`` -> ("1.5", "gb"): digits, an optional fraction, optional ASCII letters, blanks
    around.  Without re: bsub, sbatch and `xce submit` start without importing it (docs/benchmarks.md)."""
    t = text.strip()
    n = _digits(t)
    if n and t[n:n + 1] == ".":
        fraction = _digits(t[n + 1:])
        n = n + 1 + fraction if fraction else 0
    unit = t[n:].lstrip()
    if not n or not (unit == "" or unit.isascii() and unit.isalpha()):
        return None
    return t[:n], unit


def _digits(t: str) -> int:
    """How many decimal digits ``t`` starts with."""
    n = 0
    while n < len(t) and t[n].isdecimal():
        n += 1
    return n


def parse_duration(text: str) -> int:
    """Parse a duration in seconds: ``"10"`` is minutes (LSF), ``"30s"``, ``"2h"``."""
    import re  # lazy: the commands' start-up path parses no duration

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
