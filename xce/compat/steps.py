"""srun inside a job: a job step, its tasks started on the job's hosts by `xce launch`'s path.

Inside a job (``XCE_LAUNCH_TOKEN`` set), ``srun [options] CMD`` plans the step's tasks over
the job's hosts (``plan_step``), starts each through LAUNCH in the job's share on its host
(xce/client/launch.py), relays their output and exits with the highest task exit code, as
Slurm's srun.  What is read:

- The job's hosts are taken in Slurm's order (sorted: the order of SLURM_JOB_NODELIST, whose
  index is SLURM_NODEID, xce/core/hostlist.py), each holding its slots over SLURM_CPUS_PER_TASK.
- ``-n/--ntasks N``, ``-N/--nodes N``, ``--ntasks-per-node K``: without any, one task per
  slot of the job (per SLURM_CPUS_PER_TASK slots under sbatch -c: SLURM_NTASKS) on every host; with ``-n`` alone, N tasks spread evenly
  (block: the first hosts get one more) over min(N, hosts) hosts; ``-N`` takes the first N
  hosts of the job; ``--ntasks-per-node`` K tasks on each.
- ``-o/--output`` and ``-e/--error`` patterns with ``%j`` (job id), ``%t`` (task id), ``%N``
  (host), ``%n`` (node id in the step), ``%s`` (step id, 0), ``%%``; files are written here,
  by srun (one per task with ``%t``, else shared); without ``-e`` stderr goes where stdout
  goes.  Without ``-o`` the output comes to srun's own stdout and stderr.
- ``-D/--chdir``: the tasks' directory.  ``-J``, ``-c``, ``--mem``, ``--export``, ``-t``, ``-u`` are
  accepted and have no effect on a step (the job's allocation governs); every other option is
  refused by name.

Each task gets srun's own environment (as Slurm's default --export=ALL: what the batch script
exported reaches the tasks), but for the SLURM_*, LSB_* and XCE_* variables its host's share sets
(``caller_env``); then SLURM_PROCID (its rank), SLURM_LOCALID (its rank on its host), SLURM_NODEID
(its host's place in the job's sorted host list), SLURM_STEP_ID/SLURM_STEPID (0), SLURM_STEP_NUM_TASKS,
SLURM_STEP_NUM_NODES, SLURM_STEP_NODELIST, and SLURM_NTASKS set to the step's task count.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from xce.compat.session import Refused, Session
from xce.core import hostlist

STEP_OPTIONS = {"--ntasks", "--nodes", "--ntasks-per-node", "--output", "--error", "--chdir"}
IGNORED = {"--job-name", "--cpus-per-task", "--mem", "--mem-per-cpu", "--export", "--time", "--unbuffered"}


class Placed(NamedTuple):
    host: str
    node_id: int    # the host's index in the job's host list
    proc_id: int    # the task's rank in the step
    local_id: int   # its rank on its host


def plan_step(hosts: list[str], slots: list[int], ntasks: int | None, nodes: int | None,
              per_node: int | None) -> list[Placed]:
    """The step's tasks in rank order (block distribution); Refused if the job cannot hold them."""
    if nodes is not None and not 0 < nodes <= len(hosts):
        raise Refused(f"srun: -N {nodes}: the job has {len(hosts)} node(s)")
    for name, v in (("-n", ntasks), ("--ntasks-per-node", per_node)):
        if v is not None and v < 1:
            raise Refused(f"srun: {name} must be at least 1, got {v}")
    if per_node is not None:
        used = nodes or len(hosts)
        counts = [per_node] * used
        if ntasks is not None:
            counts = _spread(min(ntasks, per_node * used), used)
    elif ntasks is not None:
        counts = _spread(ntasks, min(nodes or len(hosts), ntasks))
    else:
        counts = slots[:nodes] if nodes else list(slots)
    out, rank = [], 0
    for node_id, n in enumerate(counts):
        for local in range(n):
            out.append(Placed(hosts[node_id], node_id, rank, local))
            rank += 1
    return out


def _spread(n: int, nodes: int) -> list[int]:
    base, extra = divmod(n, nodes)
    return [base + (1 if i < extra else 0) for i in range(nodes)]


def step_env(p: Placed, plan: list[Placed]) -> dict[str, str]:
    hosts = list(dict.fromkeys(q.host for q in plan))
    return {"SLURM_PROCID": str(p.proc_id), "SLURM_LOCALID": str(p.local_id), "SLURM_NODEID": str(p.node_id),
            "SLURM_STEP_ID": "0", "SLURM_STEPID": "0", "SLURM_NTASKS": str(len(plan)),
            "SLURM_STEP_NUM_TASKS": str(len(plan)), "SLURM_STEP_NUM_NODES": str(len(hosts)),
            "SLURM_STEP_NODELIST": hostlist.compress(hosts)}


HOST_VARS = ("SLURM_", "LSB_", "XCE_")  # what the worker sets for each host of the job (xce/worker/jobenv.py)


def caller_env(environ: Any) -> dict[str, str]:
    """What srun passes its tasks of its own environment (Slurm's --export=ALL: what the batch script
    exported, e.g. submitit's SUBMITIT_EXECUTOR), less the variables each host's share sets itself."""
    return {k: v for k, v in environ.items() if not k.startswith(HOST_VARS)}


def output_name(pattern: str, job_id: str, p: Placed, step_node: int) -> str:
    """srun's filename pattern for task ``p``: %j %t %N %n %s %%."""
    subs = {"j": job_id, "J": job_id, "t": str(p.proc_id), "N": p.host, "n": str(step_node), "s": "0", "%": "%"}
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "%" and i + 1 < len(pattern) and pattern[i + 1] in subs:
            out.append(subs[pattern[i + 1]])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def job_hosts(environ: Any) -> tuple[list[str], list[int]]:
    """The job's hosts, in the order Slurm numbers them (SLURM_NODEID: xce/core/hostlist.py), and
    the tasks each can hold: its slots over SLURM_CPUS_PER_TASK (sbatch -c)."""
    words = environ.get("LSB_MCPU_HOSTS", "").split()
    if len(words) < 2 or len(words) % 2:
        raise Refused("srun: LSB_MCPU_HOSTS is not set: not inside an XCE job")
    slots = dict(zip(words[0::2], (int(n) for n in words[1::2])))
    cpus = environ.get("SLURM_CPUS_PER_TASK", "1")
    cpus = int(cpus) if cpus.isdigit() and int(cpus) > 0 else 1
    hosts = hostlist.order(list(slots))
    return hosts, [max(1, slots[h] // cpus) for h in hosts]


def _int(values: dict[str, Any], name: str) -> int | None:
    v = values.get(name)
    if v is None:
        return None
    try:
        return int(str(v))
    except ValueError:
        raise Refused(f"srun: {name} needs a number, got {v!r}") from None


def srun_step(s: Session, argv: list[str]) -> int:
    """srun inside a job: a step of tasks over the job's hosts; the highest task exit code."""
    # loaded when a step runs: the Slurm commands start in milliseconds without the client
    from xce.client.launch import TaskRun, exit_status, launch_token, run_tasks, with_sigterm
    from xce.core.jobspec.slurm import parse_sbatch_args  # the same, for the option parser

    cli, command = parse_sbatch_args(argv, srun=True)
    if not command:
        raise Refused("srun: no command given")
    for name in cli.values:
        if name not in STEP_OPTIONS | IGNORED:
            raise Refused(f"srun: {name} is not an option of a step inside a job (XCE reads -n, -N, "
                          "--ntasks-per-node, -o, -e, -D)")
    v = cli.values
    token = launch_token()
    hosts, slots = job_hosts(os.environ)
    plan = plan_step(hosts, slots, _int(v, "--ntasks"), _int(v, "--nodes"), _int(v, "--ntasks-per-node"))
    job_id = os.environ.get("SLURM_JOB_ID", "")
    step_nodes = {h: i for i, h in enumerate(dict.fromkeys(p.host for p in plan))}
    files: dict[str, Any] = {}

    def sink(pattern: Any, p: Placed) -> Any:
        if not pattern:
            return None
        name = output_name(str(pattern), job_id, p, step_nodes[p.host])
        if name not in files:
            files[name] = open(name, "ab")  # noqa: SIM115 - closed below, shared by the tasks naming it
        return files[name]

    caller = caller_env(os.environ)
    runs = []
    for p in plan:
        out = sink(v.get("--output"), p)
        err = sink(v.get("--error"), p) if v.get("--error") else out
        runs.append(TaskRun(p.host, list(command), {**caller, **step_env(p, plan)}, out, err,
                            cwd=str(v.get("--chdir") or "")))
    try:
        return with_sigterm(lambda: exit_status(run_tasks(s.client, runs, token)))
    finally:
        for f in files.values():
            f.close()
