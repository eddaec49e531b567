"""Output file names: LSF's ``%J``/``%I`` and Slurm's ``%j %A %a %x %u ...`` patterns.

Pure: the caller (the worker, at dispatch) supplies the job's facts.

LSF (``-o``, ``-e``, ``-oo``, ``-eo``): ``%J`` the job id, ``%I`` the array index (0
for a job that is not an array element, as LSB_JOBINDEX).  Any other ``%`` stays.

Slurm (``--output``, ``--error``): ``%%`` a ``%``, ``%j`` the job id (an element's own),
``%A`` the array's id, ``%a`` the element's index, ``%J`` the job id (XCE runs one step
per batch job), ``%x`` the job name, ``%u`` the user, ``%N`` the first host.  A number
after the ``%`` zero-pads numeric fields (``%4a`` -> ``0007``).  A job that is no array
element has ``%A`` = its id and ``%a`` = 4294967294, Slurm's NO_VAL.  A backslash
anywhere turns substitution off (the backslashes are dropped), as in sbatch.  Other
``%`` sequences stay as written.
"""

from __future__ import annotations

import re

SLURM_NO_INDEX = 4294967294
_SLURM_RE = re.compile(r"%(\d{0,10})([%jAaJxuN])")


def lsf_filename(pattern: str, job_id: int, index: int = 0) -> str:
    """``out.%J.%I`` -> ``out.12.3``."""
    return pattern.replace("%J", str(job_id)).replace("%I", str(index))


def slurm_filename(pattern: str, *, job_id: int, array_job_id: int | None = None,
                   index: int | None = None, name: str = "", user: str = "", host: str = "") -> str:
    """``slurm-%A_%a.out`` -> ``slurm-12_3.out``."""
    if "\\" in pattern:
        return pattern.replace("\\", "")
    numbers = {"j": job_id, "J": job_id, "A": array_job_id if array_job_id is not None else job_id,
               "a": index if index is not None else SLURM_NO_INDEX}
    words = {"x": name, "u": user, "N": host, "%": "%"}

    def field(m: re.Match[str]) -> str:
        width, key = m.group(1), m.group(2)
        if key in numbers:
            return str(numbers[key]).zfill(int(width or 0))
        return words[key]

    return _SLURM_RE.sub(field, pattern)
