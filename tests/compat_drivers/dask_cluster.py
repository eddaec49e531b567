"""Run by the workflow tools' interpreter: dask-jobqueue's LSFCluster or SLURMCluster computes 1 + 1.

argv: lsf|slurm LOG_DIR.  Prints ``RESULT 2``.
"""

import sys

from distributed import Client

flavor, logs = sys.argv[1], sys.argv[2]
if flavor == "lsf":
    from dask_jobqueue import LSFCluster as Cluster
    extra = {"lsf_units": None}
else:
    from dask_jobqueue import SLURMCluster as Cluster
    extra = {}

cluster = Cluster(cores=1, processes=1, memory="1GB", walltime="00:10", log_directory=logs,
                  scheduler_options={"host": "127.0.0.1"}, worker_extra_args=["--host", "127.0.0.1"],
                  death_timeout=60, **extra)
try:
    cluster.scale(1)
    with Client(cluster) as client:
        client.wait_for_workers(1, timeout=90)
        print("RESULT", client.submit(lambda x: x + 1, 1).result(timeout=60), flush=True)
finally:
    cluster.close()
