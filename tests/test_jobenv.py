"""The job environment (xce/worker/jobenv.py) and the run-limit clock, as tables."""

from __future__ import annotations

import pytest

from xce.core.jobspec.arrays import parse_slurm_array
from xce.core.model import JobSpec
from xce.worker.jobenv import ArrayElement, JobFacts, hostfile_text, job_env
from xce.worker.runner import run_elapsed


def facts(host: str = "a", hosts: tuple[str, ...] = ("a", "b"), slots: tuple[int, ...] = (2, 2),
          element: ArrayElement | None = None, stdout: str | None = None, **spec: object) -> JobFacts:
    s = JobSpec(command=["./run.sh", "x"], queue="normal", submit_host="login1", **spec)  # type: ignore[arg-type]
    return JobFacts(job_id=12, spec=s, hosts=list(hosts), slots=list(slots), host=host, cwd="/home/u",
                    hostfile="/s/jobs/12.1/hostfile", stdout=stdout, element=element)


@pytest.mark.parametrize("f,expected", [
    (facts(), {"LSB_JOBID": "12", "LSB_JOBNAME": "./run.sh x", "LSB_QUEUE": "normal",
               "LSB_HOSTS": "a a b b", "LSB_MCPU_HOSTS": "a 2 b 2", "LSB_DJOB_HOSTFILE": "/s/jobs/12.1/hostfile",
               "LSB_DJOB_NUMPROC": "4", "LSB_SUB_HOST": "login1", "LSB_JOBINDEX": "0",
               "SLURM_JOB_ID": "12", "SLURM_JOB_NAME": "./run.sh x", "SLURM_NTASKS": "4",
               "SLURM_CPUS_ON_NODE": "2", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "a,b",
               "SLURM_NODEID": "0", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_SUBMIT_DIR": "/home/u",
               "SLURM_JOB_PARTITION": "normal", "XCE_JOBID": "12", "XCE_HOSTS": "a b", "XCE_HOST": "a",
               "XCE_SLOTS": "2", "XCE_QUEUE": "normal", "XCE_JOBNAME": ""}),
    (facts(host="b", hosts=("a", "b"), slots=(3, 1)),
     {"LSB_HOSTS": "a a a b", "LSB_MCPU_HOSTS": "a 3 b 1", "SLURM_CPUS_ON_NODE": "1", "SLURM_NODEID": "1",
      "XCE_SLOTS": "1", "LSB_DJOB_NUMPROC": "4"}),
    (facts(name="sim", cwd="/proj"), {"LSB_JOBNAME": "sim", "SLURM_JOB_NAME": "sim", "SLURM_SUBMIT_DIR": "/proj",
                                      "XCE_JOBNAME": "sim"}),
    (facts(element=ArrayElement(array_id=10, index=7, step=2, end=9), name="sweep"),
     {"LSB_JOBID": "10", "LSB_JOBNAME": "sweep[7]", "SLURM_JOB_NAME": "sweep", "LSB_JOBINDEX": "7", "LSB_JOBINDEX_STEP": "2", "LSB_JOBINDEX_END": "9",
      "SLURM_JOB_ID": "12", "SLURM_ARRAY_JOB_ID": "10", "SLURM_ARRAY_TASK_ID": "7", "XCE_JOBID": "12"}),
    (facts(element=ArrayElement(array_id=10, index=7, step=2, end=9), array=parse_slurm_array("1-9:2,20%2")),
     {"SLURM_ARRAY_JOB_ID": "10", "SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_MIN": "1",
      "SLURM_ARRAY_TASK_MAX": "20", "SLURM_ARRAY_TASK_STEP": "2", "SLURM_ARRAY_TASK_COUNT": "6"}),
    (facts(stdout="/home/u/out.12"), {"LSB_OUTPUTFILE": "/home/u/out.12"}),
    (facts(env={"LSB_JOBID": "999", "MINE": "1"}), {"LSB_JOBID": "12", "MINE": "1"}),
    # Slurm's node ids follow its sorted, compressed list, not the allocation's order
    (facts(host="node10", hosts=("node10", "node2", "node1"), slots=(1, 1, 1)),
     {"SLURM_JOB_NODELIST": "node[1-2,10]", "SLURM_NODEID": "2", "LSB_MCPU_HOSTS": "node10 1 node2 1 node1 1"}),
    (facts(host="node1", hosts=("node10", "node2", "node1"), slots=(1, 1, 1)), {"SLURM_NODEID": "0"}),
    (facts(slots=(2, 2), cpus_per_task=2), {"SLURM_NTASKS": "2", "SLURM_CPUS_PER_TASK": "2", "SLURM_CPUS_ON_NODE": "2"}),
    (facts(hosts=("a",), slots=(2,), cpus_per_task=2), {"SLURM_NTASKS": "1", "SLURM_CPUS_PER_TASK": "2"}),
], ids=["first-host", "second-host", "named", "array-element", "slurm-array-bounds", "output-file", "stale-env-overridden",
        "nodeid-sorted", "nodeid-first-sorted", "cpus-per-task", "one-task-two-cpus"])
def test_job_env(f: JobFacts, expected: dict[str, str]) -> None:
    env = job_env(f)
    assert {k: env.get(k) for k in expected} == expected


@pytest.mark.parametrize("f,absent", [
    (facts(), {"LSB_OUTPUTFILE", "LSB_JOBINDEX_STEP", "LSB_JOBINDEX_END", "SLURM_ARRAY_JOB_ID",
               "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "XCE_LAUNCH_TOKEN", "SLURM_CPUS_PER_TASK"}),
])
def test_job_env_leaves_out_what_does_not_apply(f: JobFacts, absent: set[str]) -> None:
    assert absent.isdisjoint(job_env(f))


def test_hostfile_has_a_line_per_slot_in_allocation_order() -> None:
    assert hostfile_text(["b", "a"], [1, 3]) == "b\na\na\na\n"


@pytest.mark.parametrize("start,now,total,at,expected", [
    (100.0, 160.0, 0.0, None, 60.0),     # never suspended
    (100.0, 160.0, 20.0, None, 40.0),    # suspended 20 s, resumed
    (100.0, 160.0, 0.0, 150.0, 50.0),    # suspended since 150: the clock stopped there
    (100.0, 160.0, 15.0, 150.0, 35.0),   # both
    (100.0, 90.0, 0.0, None, 0.0),       # a clock that went back never reads negative
])
def test_run_elapsed_excludes_suspended_time(start: float, now: float, total: float, at: float | None,
                                             expected: float) -> None:
    assert run_elapsed(start, now, total, at) == pytest.approx(expected)
