"""Job scripts, #BSUB directives, -K and -I through `xce submit`, on a real local cluster (issue 14 items 1, 7)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import STREAMING_JOB, Cluster, local_cluster, run_streaming

SCRIPT = """#!/bin/sh
# a comment in the leading block
#BSUB -J scripted
#BSUB -q high
#BSUB -R "rusage[mem=20]"
#BSUB -o out.%J
echo "name=$LSB_JOBNAME queue=$LSB_QUEUE args=$*"
#BSUB -q normal
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with local_cluster(tmp_path_factory.mktemp("scripts"), "--hosts", "1", "--slots-per-host", "4",
                       "--mem-per-host", "2G") as c:
        yield c


def submitted(r: object) -> int:
    out = r.stdout  # type: ignore[attr-defined]
    assert "is submitted to queue" in out, out
    return int(out.split("<")[1].split(">")[0])


@pytest.mark.parametrize("quick", ["1", "0"])
@pytest.mark.parametrize("how", ["file", "stdin"])
def test_a_script_runs_with_its_directives(cluster: Cluster, tmp_path: Path, how: str, quick: str) -> None:
    (tmp_path / "job.sh").write_text(SCRIPT)
    env = {**os.environ, "XCE_QUICK": quick}
    if how == "file":
        r = cluster.xce("submit", "job.sh", "a1", "a2", cwd=tmp_path, env=env)
    else:
        r = cluster.xce("submit", cwd=tmp_path, env=env, input=SCRIPT)
    jid = submitted(r)
    view = cluster.wait_job(jid)
    assert (view.state, view.queue, view.name, view.resreq) == ("DONE", "high", "scripted", "rusage[mem=20]")
    args = "a1 a2" if how == "file" else ""
    assert (tmp_path / f"out.{jid}").read_text() == f"name=scripted queue=high args={args}\n"
    assert view.command == (["job.sh", "a1", "a2"] if how == "file" else ["STDIN"])


def test_the_script_is_kept_as_submitted(cluster: Cluster, tmp_path: Path) -> None:
    """The job runs the text given at submit, not the file as it is when the job starts."""
    f = tmp_path / "job.sh"
    f.write_text("#!/bin/sh\n#BSUB -o kept.out\nsleep 1; echo first\n")
    jid = submitted(cluster.xce("submit", str(f), cwd=tmp_path))
    f.write_text("#!/bin/sh\necho changed\n")
    assert cluster.wait_job(jid).state == "DONE"
    assert (tmp_path / "kept.out").read_text() == "first\n"


def test_a_script_runs_under_its_shebang(cluster: Cluster, tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(f"#!{sys.executable}\n#BSUB -oo py.out\nimport sys\nprint('py', sys.argv[1:])\n")
    jid = submitted(cluster.xce("submit", "job.py", "x", cwd=tmp_path))
    assert cluster.wait_job(jid).state == "DONE"
    assert (tmp_path / "py.out").read_text() == "py ['x']\n"


def test_the_command_line_overrides_a_directive(cluster: Cluster, tmp_path: Path) -> None:
    (tmp_path / "job.sh").write_text(SCRIPT)
    jid = submitted(cluster.xce("submit", "-q", "normal", "-J", "mine", "-o", "mine.%J", "job.sh", cwd=tmp_path))
    view = cluster.wait_job(jid)
    assert (view.queue, view.name, view.resreq) == ("normal", "mine", "rusage[mem=20]")
    assert (tmp_path / f"mine.{jid}").read_text() == "name=mine queue=normal args=\n"


@pytest.mark.parametrize("quick", ["1", "0"])
@pytest.mark.parametrize("how", ["file", "stdin"])
def test_an_unknown_directive_is_refused_by_name(cluster: Cluster, tmp_path: Path, how: str, quick: str) -> None:
    bad = "#!/bin/sh\n#BSUB -J ok\n#BSUB -Q all\ntrue\n"
    (tmp_path / "bad.sh").write_text(bad)
    before = len(cluster.client.jobs(all=True))
    env = {**os.environ, "XCE_QUICK": quick}
    r = cluster.xce("submit", *(["bad.sh"] if how == "file" else []), cwd=tmp_path, env=env,
                    input=None if how == "file" else bad, check=False)
    assert r.returncode == 2
    assert r.stderr.strip() == "xce submit: #BSUB -Q: unknown directive -Q at line 3"
    assert len(cluster.client.jobs(all=True)) == before


def test_minus_k_exits_with_the_jobs_code(cluster: Cluster, tmp_path: Path) -> None:
    r = cluster.xce("submit", "-K", "--", "sh", "-c", "exit 3", cwd=tmp_path, check=False)
    assert r.returncode == 3, r.stderr
    jid = submitted(r)
    assert "<<Job is finished>>" in r.stderr
    assert cluster.client.job(jid).exit_code == 3
    assert cluster.xce("submit", "-K", "true", cwd=tmp_path).returncode == 0


def test_minus_i_shows_the_output_while_it_runs(cluster: Cluster, tmp_path: Path) -> None:
    """The job writes "two" only once "one" has reached this terminal: so the output streams, not only at the end."""
    job = STREAMING_JOB.format(marker=tmp_path / "seen")
    lines, rest, err, code = run_streaming([sys.executable, "-m", "xce.cli.main", "--state-dir", str(cluster.state_dir),
                                            "submit", "-I", "--", "sh", "-c", job], tmp_path)
    assert "is submitted to queue" in lines[0] and lines[1] == "one\n", (lines, err)
    assert rest == "oops\ntwo\n", (lines, rest, err)  # stderr went with stdout (no -e): both here, in order
    assert code == 4, err
    assert "<<Starting on" in err


def test_minus_is_is_refused_by_name(cluster: Cluster, tmp_path: Path) -> None:
    r = cluster.xce("submit", "-Is", "bash", cwd=tmp_path, check=False)
    assert r.returncode == 2
    assert "-Is is not supported: interactive jobs with a pseudo-terminal" in r.stderr


def test_the_client_submits_a_script(cluster: Cluster, tmp_path: Path) -> None:
    jid = cluster.client.submit_script("echo from $0 with $1\n", ["x"], stdout=str(tmp_path / "c.out"))
    assert cluster.wait_job(jid).state == "DONE"
    assert (tmp_path / "c.out").read_text().endswith("/script with x\n")  # $0: the worker's private copy
