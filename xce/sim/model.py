"""The simulator's stated model: the machine, and each trace job's demand and memory curve.

Hosts are groupings of the trace's processors (``--hosts N --slots S --mem M``), each a
host of S slots and M bytes; what a flag leaves out comes from the trace header
(MaxProcs, else MaxNodes, else the widest job) and, for memory, from the trace itself
(S x the largest per-processor memory any job requested or used).

A job takes its processors as slots (allocated, else requested), reserves its requested
memory per slot (``rusage[mem=..K/task]``; none if unknown), runs for its recorded run
time, and its actual memory ramps linearly from 0 to its used memory (per slot, else its
request) over the first ``ramp`` share of its run, in ``steps`` equal reports: the
heartbeats the simulator sends.  ``noise`` scales each job's used memory by a seeded
factor max(0, 1 + noise * N(0, 1)), the same for every policy.  See docs/simulation.md.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from xce.core.errors import InvalidRequest
from xce.sim.swf import SwfJob, Trace

KB = 1024


@dataclass(frozen=True, slots=True)
class Machine:
    hosts: int
    slots: int      # per host
    mem: int        # bytes per host; 0 = no memory model (slots only)

    @property
    def slots_total(self) -> int:
        return self.hosts * self.slots


def machine(trace: Trace, hosts: int | None = None, slots: int | None = None,
            mem: int | None = None) -> Machine:
    """The hosts the replay runs on: flags first, then the trace's own figures."""
    procs = trace.header.max_procs or trace.header.max_nodes or max((j.procs for j in trace.jobs), default=1)
    if hosts is None and slots is None:
        slots = 1  # the trace's machine as recorded: space-shared, one processor a host
    if slots is None:
        slots = max(1, procs // hosts) if hosts else 1
    if hosts is None:
        hosts = max(1, procs // slots)
    if hosts < 1 or slots < 1:
        raise InvalidRequest(f"--hosts and --slots must be at least 1, got {hosts} and {slots}")
    if mem is None:
        per = max((max(j.req_mem, j.used_mem) for j in trace.jobs), default=0)
        mem = int(max(per, 0) * KB) * slots
    if mem < 0:
        raise InvalidRequest(f"--mem must not be negative, got {mem}")
    return Machine(hosts, slots, mem)


@dataclass(frozen=True, slots=True)
class SimJob:
    """A trace job as the replay sees it: bytes and seconds."""

    trace_id: int
    submit: float
    run: float
    slots: int
    reserve_slot: int   # bytes reserved per slot (0: none requested)
    use_slot: int       # bytes really used per slot at the top of the ramp
    user: str
    queue: str
    wait: float         # the wait the trace recorded (-1 unknown): for the check against the record
    req_time: float = -1.0  # the requested time (-1 unknown): the run limit backfill plans with
    exe: int = -1           # executable number (-1 unknown): right-sizing's "same job" with user and queue


@dataclass(frozen=True, slots=True)
class UsageModel:
    ramp: float = 0.1   # share of the run over which actual memory rises to its level
    steps: int = 4      # usage reports along the ramp
    noise: float = 0.0
    seed: int = 1
    memory: bool = True  # False: slots only (no reservations, no reports)

    def __post_init__(self) -> None:
        if not 0.0 <= self.ramp <= 1.0:
            raise InvalidRequest(f"--ramp must be between 0 and 1, got {self.ramp}")
        if self.steps < 1:
            raise InvalidRequest(f"--steps must be at least 1, got {self.steps}")
        if self.noise < 0:
            raise InvalidRequest(f"--noise must not be negative, got {self.noise}")

    def reports(self, job: SimJob) -> list[tuple[float, int]]:
        """(seconds after start, actual bytes per slot) of each report along the ramp."""
        if not self.memory or job.use_slot <= 0:
            return []
        level = job.use_slot
        if self.noise:
            r = random.Random(self.seed * 1_000_003 + job.trace_id)
            level = int(level * max(0.0, 1.0 + self.noise * r.gauss(0.0, 1.0)))
        span = self.ramp * job.run
        return [(span * i / self.steps, level * i // self.steps) for i in range(1, self.steps + 1)]


def sim_jobs(trace: Trace, m: Machine, memory: bool = True) -> tuple[list[SimJob], int]:
    """The trace's replayable jobs in submit order, and how many lines were skipped
    (no processor count, no run time or no submit time: nothing to replay)."""
    out: list[SimJob] = []
    skipped = 0
    queues = trace.header.queues
    for j in trace.jobs:
        sj = _sim_job(j, queues, memory)
        if sj is None:
            skipped += 1
        else:
            out.append(sj)
    out.sort(key=lambda s: (s.submit, s.trace_id))
    return out, skipped


def _sim_job(j: SwfJob, queues: dict[int, str], memory: bool) -> SimJob | None:
    slots = j.procs if j.procs > 0 else j.req_procs
    if slots <= 0 or j.run < 0 or j.submit < 0:
        return None
    reserve = int(j.req_mem * KB) if memory and j.req_mem > 0 else 0
    use = int(j.used_mem * KB) if j.used_mem >= 0 else reserve
    queue = queues.get(j.queue, str(j.queue)) if j.queue >= 0 else "default"
    return SimJob(trace_id=j.job, submit=j.submit, run=j.run, slots=slots, reserve_slot=reserve,
                  use_slot=use if memory else 0, user=f"u{j.user}" if j.user >= 0 else "unknown",
                  queue=queue, wait=j.wait, req_time=j.req_time, exe=j.exe)
