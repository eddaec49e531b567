"""Signal names as users give them (``xce kill -s``, ``bkill -s``, ``scancel --signal``).

``STOP``, ``SIGSTOP`` and ``19`` are one signal; an unknown name is refused naming the
option and the text.  Pure: only the standard library's signal table.

The table is ``_signal``'s (the C module ``signal`` wraps): the same names and numbers as
``signal.Signals`` without importing enum, functools and collections, which would cost each
sbatch --signal (submitit's default) and bsub -wa milliseconds of its ~10 ms start-up.
"""

from __future__ import annotations

import _signal

from xce.core.errors import InvalidRequest

ENDING = frozenset({_signal.SIGKILL, _signal.SIGTERM, _signal.SIGINT})  # what ends a job as a kill does


def parse_signal(text: str, option: str = "kill -s") -> int:
    """``STOP``, ``SIGSTOP`` or ``19`` -> 19; an unknown name is refused by name."""
    if text.isdigit():
        return int(text)
    name = text.upper() if text.upper().startswith("SIG") else f"SIG{text.upper()}"
    number = None if name.startswith("SIG_") else getattr(_signal, name, None)  # SIG_DFL, SIG_IGN: no signals
    if type(number) is not int:
        raise InvalidRequest(f"{option}: unknown signal {text!r}")
    return number


SLURM_WARN_DEFAULT = 60  # seconds: sbatch --signal=SIG without @TIME
SLURM_WARN_MAX = 65535   # sbatch's bound on @TIME


def parse_slurm_warning(text: str) -> tuple[int, float, str]:
    """sbatch ``--signal=[{R|B}:]SIG[@TIME]`` -> (signal, seconds before the run limit, JobSpec.warn_to).

    ``B:`` sends it to the batch shell alone ("batch"); without it Slurm signals the job's steps
    and not the batch shell ("steps").  ``R:`` lets a job overlap a reservation with MaxStartDelay:
    XCE has no reservations, so it changes nothing here and is accepted."""
    where = f"--signal={text}"
    flags, colon, rest = text.partition(":")
    if not colon:
        flags, rest = "", text
    if not set(flags.upper()) <= {"R", "B"} or (colon and not flags):
        raise InvalidRequest(f"{where}: before ':' only R and B may stand ([{{R|B}}:]SIG[@TIME])")
    sig_text, at, time_text = rest.partition("@")
    if not sig_text:
        raise InvalidRequest(f"{where}: no signal given ([{{R|B}}:]SIG[@TIME])")
    sig = parse_signal(sig_text, "--signal")
    if not 0 < sig < 65:
        raise InvalidRequest(f"{where}: signal number {sig} is out of range (1-64)")
    if not at:
        seconds = SLURM_WARN_DEFAULT
    elif time_text.isdigit() and int(time_text) <= SLURM_WARN_MAX:
        seconds = int(time_text)
    else:
        raise InvalidRequest(f"{where}: the time after @ must be whole seconds from 0 to {SLURM_WARN_MAX}")
    return sig, float(seconds), "batch" if "B" in flags.upper() else "steps"
