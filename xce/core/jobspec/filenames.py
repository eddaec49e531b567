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

SLURM_NO_INDEX = 4294967294
_SLURM_KEYS = "%jAaJxuN"  # what may follow ``%`` and up to 10 digits (read without re: sbatch's start-up)


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
    out, i, n = [], 0, len(pattern)
    while i < n:
        j = pattern.find("%", i)
        if j < 0:
            break
        out.append(pattern[i:j])
        k = j + 1
        while k < n and k - j <= 10 and pattern[k] in "0123456789":
            k += 1
        if k < n and pattern[k] in _SLURM_KEYS:
            key, width = pattern[k], pattern[j + 1:k]
            out.append(str(numbers[key]).zfill(int(width or 0)) if key in numbers else words[key])
            i = k + 1
        else:  # not a pattern: the % stays, and the scan goes on after it
            out.append("%")
            i = j + 1
    out.append(pattern[i:])
    return "".join(out)
