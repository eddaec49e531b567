"""The environment a job runs in: XCE's own variables, LSF's LSB_* set and Slurm's SLURM_* set.

One pure function, ``job_env``, from the facts of a dispatch (``JobFacts``) to the
variables.  No I/O: the worker resolves the paths (cwd, output file, host file) and
writes the host file; this module only names them.  Front-ends built for bsub or
sbatch users (issue 15) read the same variables their schedulers set.

What each variable holds (docs/jobs.md lists them for users):

- ``LSB_HOSTS``: one host name per slot, in allocation order ("a a b b");
  ``LSB_MCPU_HOSTS``: each host once with its slots ("a 2 b 2"); ``LSB_DJOB_HOSTFILE``:
  a file with one line per slot, as LSB_HOSTS; ``LSB_DJOB_NUMPROC``: all slots.
- ``LSB_JOBID``: the job's id, or an array element's array id (LSF gives every element the
  array's id and tells them apart by ``LSB_JOBINDEX``, which is 0 outside an array);
  ``LSB_JOBNAME``: an element's is its array's name with its index (``sweep[7]``).
- ``SLURM_NTASKS``: the slots over ``cpus_per_task`` (sbatch -c; SLURM_CPUS_PER_TASK when
  above 1); ``SLURM_CPUS_ON_NODE``: this host's slots; ``SLURM_JOB_NODELIST``: the hosts in
  Slurm's compressed form (``node[1-2]``, xce/core/hostlist.py), sorted as Slurm sorts them;
  ``SLURM_NODEID``: this host's index in that sorted list (which need not be the allocation's
  order: the batch script runs on the allocation's first host); ``SLURM_PROCID``/
  ``SLURM_LOCALID``: 0 (the batch script is the first task).
- ``XCE_LAUNCH_TOKEN``: the leader's credential for this attempt (RUN_JOB's ``launch_token``,
  xce/security/launch.py), which `xce launch`, blaunch and srun show to start tasks of the job
  on its hosts; a launched task gets the same environment as its host's share, plus what its
  launcher adds (an srun step's SLURM_PROCID, SLURM_LOCALID, ...).

The job's own environment (``spec.env``) comes first; these override it, since a stale
LSB_JOBID carried from the submitting shell must never name another job.
"""

from __future__ import annotations

from dataclasses import dataclass

from xce.core import hostlist
from xce.core.model import JobSpec


@dataclass(frozen=True)
class ArrayElement:
    """Where an array element sits (RUN_JOB's ``element``): its array's id, index, step, last index."""

    array_id: int
    index: int
    step: int = 1
    end: int = 0


@dataclass(frozen=True)
class JobFacts:
    """Everything ``job_env`` reads: the order's facts and the paths the worker resolved."""

    job_id: int
    spec: JobSpec
    hosts: list[str]          # the allocation, in order; hosts[0] runs the command
    slots: list[int]          # slots per host, as hosts
    host: str                 # this worker's host
    cwd: str                  # the resolved working directory
    hostfile: str             # the path of LSB_DJOB_HOSTFILE
    stdout: str | None = None  # the resolved -o/-oo path, when one was given
    element: ArrayElement | None = None
    launch_token: str = ""    # what `xce launch` shows to prove it runs inside this job


def slot_hosts(hosts: list[str], slots: list[int]) -> list[str]:
    """One host name per slot, in allocation order: LSB_HOSTS and the host file's lines."""
    return [h for h, n in zip(hosts, slots, strict=True) for _ in range(n)]


def xce_vars(f: JobFacts) -> dict[str, str]:
    """XCE's own names, kept as they were before the LSB/SLURM sets."""
    mine = f.slots[f.hosts.index(f.host)] if f.host in f.hosts else 0
    out = {"XCE_JOBID": str(f.job_id), "XCE_HOSTS": " ".join(f.hosts), "XCE_HOST": f.host,
           "XCE_SLOTS": str(mine), "XCE_QUEUE": f.spec.queue, "XCE_JOBNAME": f.spec.name}
    if f.launch_token:
        out["XCE_LAUNCH_TOKEN"] = f.launch_token
    return out


def job_name(spec: JobSpec) -> str:
    """The job's name; LSF names an unnamed job after its command."""
    return spec.name or " ".join(spec.command)


def lsb_vars(f: JobFacts) -> dict[str, str]:
    """LSF's names (IBM Spectrum LSF, "Environment variables set for job execution")."""
    e = f.element
    # An element's name is its array's with its index, as bjobs shows it ("sweep[7]").
    name = f"{job_name(f.spec)}[{e.index}]" if e else job_name(f.spec)
    out = {"LSB_JOBID": str(e.array_id if e else f.job_id), "LSB_JOBNAME": name,
           "LSB_QUEUE": f.spec.queue, "LSB_HOSTS": " ".join(slot_hosts(f.hosts, f.slots)),
           "LSB_MCPU_HOSTS": " ".join(f"{h} {n}" for h, n in zip(f.hosts, f.slots, strict=True)),
           "LSB_DJOB_HOSTFILE": f.hostfile, "LSB_DJOB_NUMPROC": str(sum(f.slots)),
           "LSB_SUB_HOST": f.spec.submit_host, "LSB_JOBINDEX": str(e.index if e else 0)}
    if e is not None:
        out["LSB_JOBINDEX_STEP"] = str(e.step)
        out["LSB_JOBINDEX_END"] = str(e.end)
    if f.stdout:
        out["LSB_OUTPUTFILE"] = f.stdout
    return out


def slurm_vars(f: JobFacts) -> dict[str, str]:
    """Slurm's names for the same facts (sbatch(1), "OUTPUT ENVIRONMENT VARIABLES")."""
    mine = f.slots[f.hosts.index(f.host)] if f.host in f.hosts else f.slots[0]
    nodes = hostlist.order(f.hosts)  # Slurm numbers a job's nodes in its sorted, compressed list's order
    cpus = f.spec.cpus_per_task
    out = {"SLURM_JOB_ID": str(f.job_id), "SLURM_JOB_NAME": job_name(f.spec),
           "SLURM_NTASKS": str(max(1, sum(f.slots) // cpus)), "SLURM_CPUS_ON_NODE": str(mine),
           "SLURM_JOB_NUM_NODES": str(len(f.hosts)), "SLURM_JOB_NODELIST": hostlist.compress(f.hosts),
           "SLURM_NODEID": str(nodes.index(f.host) if f.host in nodes else 0), "SLURM_PROCID": "0",
           "SLURM_LOCALID": "0", "SLURM_SUBMIT_DIR": f.spec.cwd or f.cwd, "SLURM_JOB_PARTITION": f.spec.queue}
    if cpus > 1:
        out["SLURM_CPUS_PER_TASK"] = str(cpus)
    if f.element is not None:
        out.update(slurm_array_vars(f.element, f.spec))
    return out


def slurm_array_vars(e: ArrayElement, spec: JobSpec) -> dict[str, str]:
    """An element's SLURM_ARRAY_*: its array's id, its index, and the array's lowest and highest
    index, the step of the element's range and the number of elements (sbatch(1))."""
    out = {"SLURM_ARRAY_JOB_ID": str(e.array_id), "SLURM_ARRAY_TASK_ID": str(e.index),
           "SLURM_ARRAY_TASK_STEP": str(e.step)}
    if spec.array is not None:  # an older controller's order names no array: the bounds are unknown
        out.update(SLURM_ARRAY_TASK_MIN=str(spec.array.ranges[0][0]), SLURM_ARRAY_TASK_MAX=str(spec.array.end),
                   SLURM_ARRAY_TASK_COUNT=str(spec.array.count))
    return out


def job_env(f: JobFacts) -> dict[str, str]:
    """The job's full environment on this host, but for PATH/HOME/USER defaults (the runner's)."""
    return {**f.spec.env, **xce_vars(f), **lsb_vars(f), **slurm_vars(f)}


def hostfile_text(hosts: list[str], slots: list[int]) -> str:
    """LSB_DJOB_HOSTFILE's content: a host per line per slot."""
    return "".join(f"{h}\n" for h in slot_hosts(hosts, slots))
