"""The one mapping between XCE's job model and LSF's and Slurm's vocabularies.

Every front-end (xce/compat/lsf.py, xce/compat/slurm.py) reads states, units,
queue/partition and project/account names, and what it refuses, from here; none
decides any of it on its own.  docs/compat.md writes the same tables.  Pure: no I/O.

States.  XCE's states are LSF's, so LSF shows them as they are.  A finished job's
Slurm state comes from its XCE state *and* its end reason::

    XCE state / reason            LSF (bjobs STAT, exit_reason)   Slurm (%T, %t)
    PEND                          PEND                            PENDING        PD
    RUN, UNKWN                    RUN, UNKWN                      RUNNING        R
    PSUSP (held while pending)    PSUSP                           PENDING        PD  (JobHeldUser)
    USUSP SSUSP                   as is                           SUSPENDED      S
    DONE                          DONE                            COMPLETED      CD
    EXIT, reason MEMLIMIT         EXIT  TERM_MEMLIMIT             OUT_OF_MEMORY  OOM
    EXIT, reason *RUNLIMIT        EXIT  TERM_RUNLIMIT             TIMEOUT        TO
    EXIT, reason "killed..."      EXIT  TERM_OWNER                CANCELLED      CA
    EXIT, reason "lost..."        EXIT  TERM_HOST                 NODE_FAIL      NF
    EXIT, anything else           EXIT  (exit code)               FAILED         F

Units.  LSF_UNIT_FOR_LIMITS is MB: a bare ``-M`` and ``rusage[mem=]`` number is MB
(MiB, as everywhere in XCE: xce/core/units.py); bjobs shows memory in MB ("12 Mbytes"),
Slurm in its own ``K M G`` suffixes, ``--mem`` bare numbers in MB too.

Names.  A Slurm partition is an XCE queue; a Slurm account is an XCE project
(JobSpec.project, LSF's ``-P``); Slurm's ``--wckey`` is ignored (accounting only).

Lazy imports: the mapping tables load without the wire; parsers join only when used.
"""

from __future__ import annotations

from xce.core.jobids import split_id  # stdlib only: the listings call it per row

LSF_UNIT_FOR_LIMITS = "MB"
MB = 1024 * 1024


class SlurmState(tuple[str, str]):
    """A Slurm state: ``long`` as %T and sacct's State show it, ``short`` as %t (a tuple, compared as
    one).  Not a namedtuple: collections (and typing.NamedTuple's typing) cost the commands' start-up."""

    __slots__ = ()

    def __new__(cls, long: str, short: str) -> SlurmState:
        return tuple.__new__(cls, (long, short))

    @property
    def long(self) -> str:
        return self[0]

    @property
    def short(self) -> str:
        return self[1]

    def __repr__(self) -> str:
        return f"SlurmState(long={self[0]!r}, short={self[1]!r})"


PENDING = SlurmState("PENDING", "PD")
RUNNING = SlurmState("RUNNING", "R")
SUSPENDED = SlurmState("SUSPENDED", "S")
COMPLETED = SlurmState("COMPLETED", "CD")
FAILED = SlurmState("FAILED", "F")
OUT_OF_MEMORY = SlurmState("OUT_OF_MEMORY", "OOM")
TIMEOUT = SlurmState("TIMEOUT", "TO")
CANCELLED = SlurmState("CANCELLED", "CA")
NODE_FAIL = SlurmState("NODE_FAIL", "NF")

_LIVE_TO_SLURM = {
    "PEND": PENDING, "RUN": RUNNING, "UNKWN": RUNNING,
    "PSUSP": PENDING, "USUSP": SUSPENDED, "SSUSP": SUSPENDED, "DONE": COMPLETED,
}
ALL_SLURM_STATES = (PENDING, RUNNING, SUSPENDED, COMPLETED, FAILED, OUT_OF_MEMORY, TIMEOUT,
                    CANCELLED, NODE_FAIL)

# An EXIT job's end reason, as the worker and the controller write it -> (LSF term, Slurm state).
# Tried in order; the first whose test holds wins.
_EXIT_CAUSES: tuple[tuple[str, str, SlurmState], ...] = (
    ("MEMLIMIT", "TERM_MEMLIMIT", OUT_OF_MEMORY),
    ("RUNLIMIT", "TERM_RUNLIMIT", TIMEOUT),
    ("killed", "TERM_OWNER", CANCELLED),
    ("lost", "TERM_HOST", NODE_FAIL),
)


def _exit_cause(reason: str) -> tuple[str, SlurmState]:
    for needle, term, slurm in _EXIT_CAUSES:
        if needle in reason:
            return term, slurm
    return "", FAILED


def slurm_state(state: str, reason: str = "") -> SlurmState:
    """XCE state (and, for EXIT, its reason) -> Slurm's state."""
    if state == "EXIT":
        return _exit_cause(reason)[1]
    return _LIVE_TO_SLURM.get(state, RUNNING)


def lsf_term(state: str, reason: str) -> str:
    """LSF's TERM_* code of a finished job ("" when it ended of itself)."""
    return _exit_cause(reason)[0] if state == "EXIT" else ""


def xce_states_of_slurm(name: str) -> frozenset[str]:
    """``squeue -t``/``sacct -s`` names (long or short, any case) -> the XCE states they select."""
    key = name.strip().upper()
    if key == "ALL":
        return frozenset({"PEND", "RUN", "UNKWN", "PSUSP", "USUSP", "SSUSP", "DONE", "EXIT"})
    for s in ALL_SLURM_STATES:
        if key in (s.long, s.short):
            if s in (FAILED, OUT_OF_MEMORY, TIMEOUT, CANCELLED, NODE_FAIL):
                return frozenset({"EXIT"})
            return frozenset(x for x, v in _LIVE_TO_SLURM.items() if v == s)
    raise ValueError(f"invalid job state specified: {name}")


_SLURM_END_REASONS = {FAILED: "NonZeroExitCode", TIMEOUT: "TimeLimit", OUT_OF_MEMORY: "OutOfMemory",
                      NODE_FAIL: "NodeDown"}


ARRAY_LIMIT = "the array's running limit is reached"  # an element held back by %N (no Job yet to say it)


def slurm_reason(state: str, reason: str) -> str:
    """squeue's Reason: why a job waits (``JobArrayTaskLimit`` for an element held back by its
    array's %N, ``Resources`` when XCE gave a reason, else ``Priority``), why it failed, or ``None``."""
    if state == "PSUSP":
        return "JobHeldUser"  # scontrol hold, bstop of a pending job
    if state == "PEND":
        return "JobArrayTaskLimit" if reason == ARRAY_LIMIT else "Resources" if reason else "Priority"
    return _SLURM_END_REASONS.get(slurm_state(state, reason), "None")


def slurm_exit_code(exit_code: int | None, signal: int | None) -> str:
    """sacct ExitCode: ``code:signal``."""
    return f"{exit_code or 0}:{signal or 0}"


# Array elements (xce/core/arrays.py: id A << 32 | INDEX) as each system writes them.
def lsf_id(job_id: int) -> str:
    """bjobs' JOBID: an element shows its array's id (its index goes with the name)."""
    return str(split_id(job_id)[0])


def lsf_job(job_id: int) -> str:
    """A job as LSF's messages and ``bjobs -l`` name it: ``12``, an element ``12[3]``."""
    array, index = split_id(job_id)
    return str(array) if index is None else f"{array}[{index}]"


def lsf_name(job_id: int, name: str) -> str:
    """bjobs' JOB_NAME: ``name[INDEX]`` for an element, as LSF shows it."""
    index = split_id(job_id)[1]
    return name if index is None else f"{name}[{index}]"


def slurm_id(job_id: int) -> str:
    """squeue/sacct JobID: ``A_INDEX`` for an element."""
    array, index = split_id(job_id)
    return str(array) if index is None else f"{array}_{index}"


# The controller's answer to a kill, per id (xce/core/state.py kill): what bkill and scancel say.
ENDING, SIGNALED, FINISHED, UNKNOWN = "ending", "signaled", "finished", "unknown"


def kill_outcome(answer: str) -> str:
    """``killed``, ``kill requested``, an array's ``killed N, kill requested for M`` -> ENDING;
    ``signal ...`` -> SIGNALED; ``already DONE``, ``not running`` -> FINISHED; else UNKNOWN."""
    if answer in ("killed", "kill requested") or answer.startswith("killed "):
        return ENDING
    if answer.startswith("signal "):
        return SIGNALED
    if answer.startswith(("already", "not running")):
        return FINISHED
    return UNKNOWN


# Queues and partitions are one thing; projects and accounts are one thing.
def partition_of(queue: str) -> str:
    return queue


def queue_of(partition: str) -> str:
    return partition


def project_of(account: str) -> str:
    return account


def account_of(project: str) -> str:
    return project


# XCE's host states as bhosts' STATUS: a host with every slot taken is LSF's "closed" (closed_Full).
_LSF_HOST_STATUS = {"ok": "ok", "full": "closed", "closed": "closed", "unavail": "unavail"}


def lsf_host_status(state: str) -> str:
    return _LSF_HOST_STATUS.get(state, state)


def lsf_mb(n_bytes: int | None) -> str:
    """Memory in LSF_UNIT_FOR_LIMITS (MB), as bjobs -o mem/max_mem show it."""
    if not n_bytes:
        return "-"
    return f"{n_bytes / MB:.0f} Mbytes"


def slurm_mem(n_bytes: int | None) -> str:
    """Slurm's memory figures (``%m``, MaxRSS, ReqMem): whole K/M/G, bare number in MB for %m."""
    if not n_bytes:
        return "0"
    for unit, size in (("T", 1024 ** 4), ("G", 1024 ** 3), ("M", MB)):
        if n_bytes >= size and n_bytes % size == 0:
            return f"{n_bytes // size}{unit}"
    return f"{max(1, n_bytes // 1024)}K"


def slurm_mem_option(text: str) -> str:
    """``--mem``/``--mem-per-cpu`` (bare MB; K M G T suffixes) -> an XCE size string."""
    value = text.strip().upper()
    if value.endswith("B"):
        value = value[:-1]
    if value and value[-1] in "KMGT":
        return value
    return f"{value}M"


# Accepted with a stated meaning (docs/compat.md): these change nothing in XCE.
SLURM_IGNORED: dict[str, str] = {
    "--qos": "XCE has no QOS: the partition (queue) decides priority and limits",
    "--wckey": "workload keys are accounting labels XCE does not keep",
}

# What is refused, by front-end and name, with why.  Removed here as the job model lands.
# bsub's options XCE does not take at submit (-U: no advance reservations; -En, modify's) are
# refused once, for xce submit and bsub alike, by xce.core.jobspec.build.UNSUPPORTED (-Is & co.
# by options.BSUB_REFUSED).
NOT_YET = "is not supported by this XCE yet"
SLURM_REFUSED: dict[str, str] = {
    "--mail-type": "--mail-type: XCE sends no mail",
    "--mail-user": "--mail-user: XCE sends no mail",
    "salloc": "salloc (interactive allocations) is not supported by XCE; use sbatch or srun",
}
