"""Run by the workflow tools' interpreter: parsl's HighThroughputExecutor over its LSFProvider or
SlurmProvider (a block is one batch job running parsl's worker pool) computes 1 + 1.

argv: lsf|slurm RUN_DIR.  Prints ``RESULT 2`` and the block's job id as ``BLOCK <id>``.
"""

import os
import sys

import parsl
from parsl.app.app import python_app
from parsl.config import Config
from parsl.executors import HighThroughputExecutor
from parsl.launchers import SingleNodeLauncher

flavor, run_dir = sys.argv[1], sys.argv[2]
# parsl starts its interchange, and the block's job its worker pool, from this interpreter's
# environment (the job inherits the submitting environment, as bsub's and sbatch's default).
os.environ["PATH"] = f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"
init = ""
if flavor == "lsf":
    from parsl.providers import LSFProvider

    provider = LSFProvider(walltime="00:10:00", worker_init=init, launcher=SingleNodeLauncher(), init_blocks=1,
                           max_blocks=1, cmd_timeout=60)
else:
    from parsl.providers import SlurmProvider

    provider = SlurmProvider(walltime="00:10:00", worker_init=init, launcher=SingleNodeLauncher(), init_blocks=1,
                             max_blocks=1, cmd_timeout=60, exclusive=False)

config = Config(executors=[HighThroughputExecutor(label="xce", address="127.0.0.1", max_workers_per_node=1,
                                                  provider=provider)],
                run_dir=run_dir, strategy="none")


@python_app
def plus_one(x: int) -> int:
    return x + 1


with parsl.load(config) as dfk:
    print("RESULT", plus_one(1).result(timeout=120), flush=True)
    print("BLOCK", " ".join(dfk.executors["xce"].provider.resources), flush=True)
