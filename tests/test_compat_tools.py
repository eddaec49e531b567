"""Real workflow tools, unchanged, over the LSF and Slurm commands (issue 15 item 5).

dask-jobqueue, psij-python, parsl, submitit and Snakemake's LSF executor are installed from the package
index into their own environment (.ci/run: ``.ci-venv/compat-tools``, named by
``XCE_COMPAT_TOOLS``); each drives the commands of `xce compat path` on a real local
cluster, as it would drive LSF or Slurm.  Without that environment the tests skip, except
under CI, where its absence is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Cluster, local_cluster

DRIVERS = Path(__file__).resolve().parent / "compat_drivers"
TOOLS = os.environ.get("XCE_COMPAT_TOOLS", "")

if not TOOLS or not Path(TOOLS).exists():
    if os.environ.get("CI"):
        raise RuntimeError("XCE_COMPAT_TOOLS does not name the workflow tools' python (.ci/run installs it)")
    pytest.skip("the workflow tools' environment (XCE_COMPAT_TOOLS) is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with local_cluster(tmp_path_factory.mktemp("tools"), "--hosts", "1", "--slots-per-host", "4",
                       "--mem-per-host", "4G", "--heartbeat", "0.5") as c:
        yield c


def _env(c: Cluster, flavor: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XCE_STATE_DIR", "LSF_ENVDIR")}
    for line in c.xce("compat", "env", flavor).stdout.splitlines():  # export NAME="value"
        name, _, value = line.removeprefix("export ").partition("=")
        env[name] = value.strip('"').replace("$PATH", env["PATH"])
    return env


def _tool(c: Cluster, flavor: str, argv: list[str], cwd: Path, timeout: float = 240) -> str:
    r = subprocess.run(argv, env=_env(c, flavor), cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{argv} exited {r.returncode}\nstdout: {r.stdout[-3000:]}\nstderr: {r.stderr[-3000:]}"
    return r.stdout


@pytest.mark.parametrize("flavor", ["lsf", "slurm"])
def test_dask_jobqueue_worker_computes(cluster: Cluster, flavor: str, tmp_path: Path) -> None:
    out = _tool(cluster, flavor, [TOOLS, str(DRIVERS / "dask_cluster.py"), flavor, str(tmp_path / "logs")], tmp_path)
    assert "RESULT 2\n" in out
    workers = [v for v in cluster.client.jobs(all=True) if v.name.startswith("dask-worker")]
    assert workers and workers[-1].state == "EXIT" and "killed" in workers[-1].reason  # closed by bkill/scancel


@pytest.mark.parametrize("flavor, cancelled", [("lsf", "FAILED"), ("slurm", "CANCELED")])
def test_psij_executor_runs_fails_and_cancels(cluster: Cluster, flavor: str, cancelled: str, tmp_path: Path) -> None:
    out = _tool(cluster, flavor, [TOOLS, str(DRIVERS / "psij_jobs.py"), flavor, str(tmp_path)], tmp_path)
    lines = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert lines["ok"] == "COMPLETED 0"
    assert lines["bad"] == "FAILED 3"
    assert lines["stdout"] == "hello psij"
    assert lines["cancelled"] == cancelled  # psij maps LSF's EXIT to FAILED, Slurm's CA to CANCELED
    killed = cluster.client.job(int(lines["native"]))
    assert killed.state == "EXIT" and "killed" in killed.reason  # really ended, not just forgotten


@pytest.mark.parametrize("flavor", ["lsf", "slurm"])
def test_parsl_block_runs_an_app(cluster: Cluster, flavor: str, tmp_path: Path) -> None:
    out = _tool(cluster, flavor, [TOOLS, str(DRIVERS / "parsl_app.py"), flavor, str(tmp_path / "runinfo")], tmp_path)
    lines = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert lines["RESULT"] == "2"
    block = cluster.client.job(int(lines["BLOCK"]))
    assert block.name.startswith("parsl.") and block.state == "EXIT" and "killed" in block.reason  # closed by parsl


def test_submitit_returns_a_value_and_an_exception_from_the_cluster(cluster: Cluster, tmp_path: Path) -> None:
    """submitit's scripts carry #SBATCH --signal=USR2@90 and run through srun --unbuffered; it
    watches with sacct -j ... --parsable2.  A value and an exception come back from the job."""
    out = _tool(cluster, "slurm", [TOOLS, str(DRIVERS / "submitit_jobs.py"), str(tmp_path / "submitit")], tmp_path)
    lines = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert (lines["cluster"], lines["result"], lines["state"]) == ("slurm", "3", "COMPLETED"), out
    assert (lines["failed"], lines["badstate"]) == ("True", "FAILED"), out
    ok, bad = cluster.client.job(int(lines["job"])), cluster.client.job(int(lines["bad"]))
    assert (ok.name, ok.state, ok.warn_signal, ok.warn_time, ok.warn_to) == ("submitit-add", "DONE", 12, 90.0, "steps")
    assert (bad.name, bad.state) == ("submitit-fail", "EXIT")


def test_snakemake_lsf_executor_runs_two_rules(cluster: Cluster, tmp_path: Path) -> None:
    shutil.copy(DRIVERS / "Snakefile", tmp_path / "Snakefile")
    snakemake = str(Path(TOOLS).parent / "snakemake")
    _tool(cluster, "lsf", [snakemake, "--executor", "lsf", "--jobs", "2", "--latency-wait", "5"], tmp_path, 300)
    assert (tmp_path / "result.txt").read_text() == "first\nsecond\n"
    names = [v.name for v in cluster.client.jobs(all=True)]
    assert sum("first" in n or "second" in n for n in names) >= 2  # both rules ran as cluster jobs
