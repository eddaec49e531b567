"""Run by the workflow tools' interpreter: submitit's executors over XCE's Slurm commands.

argv: FOLDER.  submitit.AutoExecutor picks Slurm (srun is on PATH) and runs a function on the
cluster: its value comes back.  submitit.SlurmExecutor runs one that raises: its exception comes
back.  Every script submitit writes carries ``#SBATCH --signal=USR2@90`` and runs its function
through ``srun --unbuffered``; it watches the jobs with ``sacct -o JobID,State,NodeList --parsable2 -j``.
Prints ``NAME VALUE`` lines.
"""

import socket
import sys
import time

import submitit

folder = sys.argv[1]


def final_state(job: submitit.Job) -> str:
    """The job's state as submitit reads it from sacct, once the job has ended (its result is
    written before its process exits), within a minute."""
    deadline = time.monotonic() + 60
    while True:
        state = job.get_info(mode="force").get("State", "")
        if state not in ("", "PENDING", "RUNNING") or time.monotonic() > deadline:
            return state
        time.sleep(0.5)


def add(a: int, b: int) -> tuple[int, str]:
    return a + b, socket.gethostname()


def fail() -> None:
    raise ValueError("boom on the cluster")


auto = submitit.AutoExecutor(folder=folder)
print("cluster", auto.cluster, flush=True)
auto.update_parameters(timeout_min=5, name="submitit-add")
job = auto.submit(add, 1, 2)
value, host = job.result()
print("result", value, flush=True)
print("state", final_state(job), flush=True)
print("job", job.job_id, flush=True)

slurm = submitit.SlurmExecutor(folder=folder)
slurm.update_parameters(time=5, job_name="submitit-fail")
bad = slurm.submit(fail)
try:
    bad.result()
except submitit.core.utils.FailedJobError as e:
    print("failed", "ValueError: boom on the cluster" in str(e), flush=True)
print("badstate", final_state(bad), flush=True)
print("bad", bad.job_id, flush=True)
