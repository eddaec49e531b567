"""Run by the workflow tools' interpreter: psij-python's lsf or slurm executor.

argv: lsf|slurm WORK_DIR.  A job to COMPLETED with its stdout, a failing one to FAILED with
its exit code, a running one cancelled; prints one line per job: ``NAME STATE EXIT_CODE``.
"""

import sys
import time
from datetime import timedelta
from pathlib import Path

import psij
from psij.executors.batch.lsf import LsfExecutorConfig
from psij.executors.batch.slurm import SlurmExecutorConfig

flavor, work = sys.argv[1], Path(sys.argv[2])
config = (LsfExecutorConfig if flavor == "lsf" else SlurmExecutorConfig)(
    work_directory=work, queue_polling_interval=1)
ex = psij.JobExecutor.get_instance(flavor, config=config)


def job(executable: str, *args: str, out: Path | None = None) -> psij.Job:
    spec = psij.JobSpec(executable=executable, arguments=list(args), stdout_path=out,
                        directory=work, attributes=psij.JobAttributes(duration=timedelta(minutes=5)))
    return psij.Job(spec)


out = work / "hello.out"
ok, bad, long = job("/bin/echo", "hello psij", out=out), job("/bin/sh", "-c", "exit 3"), job("/bin/sleep", "60")
for j in (ok, bad, long):
    ex.submit(j)
for name, j in (("ok", ok), ("bad", bad)):
    s = j.wait(timeout=timedelta(seconds=90))
    print(name, s.state if s else None, s.exit_code if s else None, flush=True)
print("stdout", out.read_text().strip(), flush=True)
long.wait(timeout=timedelta(seconds=60), target_states=[psij.JobState.ACTIVE])
print("native", long.native_id, flush=True)
long.cancel()
s = long.wait(timeout=timedelta(seconds=60))
print("cancelled", s.state if s else None, flush=True)
time.sleep(0)
