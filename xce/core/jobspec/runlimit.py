"""Run limits, runtime estimates and memory limits, parsed into seconds and bytes.

============  =====================================  ==============================
option        forms                                  result
============  =====================================  ==============================
``-W``        ``MM``, ``H:M``, ``HH:MM`` (minutes    seconds; minutes may pass 59
``-We``       may pass 59 only without hours)        only in the bare form
``--time``    ``M``, ``M:S``, ``H:M:S``, ``D-H``,    seconds, or None for ``0``,
              ``D-H:M``, ``D-H:M:S``                 ``UNLIMITED``, ``INFINITE``
``-M``        ``500`` (in ``unit``), ``4G``,         bytes, through xce/core/units.py
              ``512KB``, ``2GB``, ``1TB``
============  =====================================  ==============================

LSF's host normalisation (``-W 10/hostA``) is refused by name: XCE does not scale
limits by CPU factor.  The memory units are xce/core/units.py's, so there is one unit
parser in XCE.
"""

from __future__ import annotations

from xce.core.errors import InvalidRequest
from xce.core.jobspec.errors import RunLimitError
from xce.core.units import parse_mem

_UNLIMITED = {"unlimited", "infinite"}


def parse_lsf_time(text: str, option: str = "-W") -> int:
    """``-W``/``-We`` value -> seconds: ``90`` -> 5400, ``1:30`` -> 5400."""
    where = f"{option} {text}"
    value = text.strip()
    if "/" in value:
        raise RunLimitError(f"{where}: normalising a limit by host name or model ({value[value.index('/'):]}) "
                            "is not supported")
    head, colon, tail = value.partition(":")  # [hours:]minutes, without re (bsub starts without it)
    given_hours, given_minutes = (head, tail) if colon else (None, head)
    if not (_decimal(given_minutes, 8) and (given_hours is None or _decimal(given_hours, 6))):
        raise RunLimitError(f"{where}: expected [hours:]minutes, e.g. 90 or 1:30")
    hours, minutes = int(given_hours or 0), int(given_minutes)
    if given_hours is not None and minutes > 59:
        raise RunLimitError(f"{where}: minutes {minutes} after hours must be 0-59 (or give minutes alone)")
    seconds = (hours * 60 + minutes) * 60
    if seconds == 0:
        raise RunLimitError(f"{where}: the limit must be at least one minute")
    return seconds


def _decimal(text: str, most: int) -> bool:
    return 0 < len(text) <= most and text.isdecimal()


def parse_slurm_time(text: str, option: str = "--time") -> int | None:
    """``--time`` value -> seconds, None for no limit: ``1-12`` -> 129600."""
    where = f"{option}={text}"
    value = text.strip()
    if value.lower() in _UNLIMITED:
        return None
    groups = _slurm_time_groups(value)
    if groups is None:
        raise RunLimitError(f"{where}: expected M, M:S, H:M:S, D-H, D-H:M or D-H:M:S")
    days, a, b, c = groups
    if days is not None:
        fields = (int(days), int(a), int(b or 0), int(c or 0))  # D-H[:M[:S]]
    elif c is not None:
        fields = (0, int(a), int(b), int(c))  # H:M:S
    else:
        fields = (0, 0, int(a), int(b or 0))  # M[:S]
    _check_fields(where, fields, hours_bounded=days is not None,
                  minutes_bounded=days is not None and b is not None or c is not None)
    d, h, mi, s = fields
    total = ((d * 24 + h) * 60 + mi) * 60 + s
    return total or None  # Slurm: a limit of 0 means none


def _slurm_time_groups(value: str) -> tuple[str | None, str, str | None, str | None] | None:
    """``[D-]A[:B[:C]]`` (D up to 5 digits, the others up to 8) -> (D, A, B, C), None if not that
    form; read without re, which sbatch's start-up does not load."""
    days, dash, rest = value.partition("-")
    if not dash:
        days, rest = None, value
    elif not _decimal(days, 5):
        return None
    parts = rest.split(":")
    if len(parts) > 3 or not all(_decimal(p, 8) for p in parts):
        return None
    return days, parts[0], (parts[1:2] or [None])[0], (parts[2:3] or [None])[0]


def _check_fields(where: str, fields: tuple[int, int, int, int], hours_bounded: bool,
                  minutes_bounded: bool) -> None:
    """A field after a larger unit stays below that unit's size; the leading one is free."""
    _, h, mi, s = fields
    if hours_bounded and h > 23:
        raise RunLimitError(f"{where}: hours {h} after days must be 0-23")
    if minutes_bounded and mi > 59:
        raise RunLimitError(f"{where}: minutes {mi} after hours must be 0-59")
    if s > 59:
        raise RunLimitError(f"{where}: seconds {s} after minutes must be 0-59")


def parse_mem_limit(text: str, unit: str = "MB", option: str = "-M") -> int:
    """``-M`` value -> bytes; a bare number is in ``unit`` (LSF_UNIT_FOR_LIMITS)."""
    where = f"{option} {text}"
    try:
        value = parse_mem(text.strip(), default_unit=unit)
    except InvalidRequest as e:
        raise RunLimitError(f"{where}: {e.message}") from None
    if value <= 0:
        raise RunLimitError(f"{where}: the limit must be more than 0")
    return value
