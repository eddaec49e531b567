"""schemathesis against /v1/openapi.json on a live local cluster: no 5xx, every response
matches its documented status, content type, headers and schema, and auth is never ignored.

Environment.  schemathesis >= 4.11 needs pytest >= 9 and the test env pins pytest < 9, so
this runs the schemathesis CLI from its own virtual environment (nothing leaks into the test
env): schemathesis 4.10.2 (the last release that accepts pytest 8) with hypothesis 6.170.0
(its hypothesis-jsonschema 0.23.1 breaks on later hypothesis releases)::

    python3 -m venv .ci-venv/schemathesis
    .ci-venv/schemathesis/bin/pip install schemathesis==4.10.2 hypothesis==6.170.0

The executable is taken from ``$XCE_SCHEMATHESIS`` or ``.ci-venv/schemathesis/bin/``; the
test is skipped when neither exists.  Checks left out: positive_data_acceptance (valid
shapes can still be refused by the cluster, e.g. an unknown queue), negative_data_rejection
(an integer path id "mutated" to a string is the same URL) and use_after_free (DELETE kills
a job; its record stays readable, as in LSF).

Safety: fuzzed submissions run arbitrary commands, so the cluster's only host is closed
first and open_host is excluded: every generated job stays pending.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, local_cluster, wait_for
from test_rest_e2e import http

from xce.cli.up import free_port


def schemathesis() -> str | None:
    for exe in (os.environ.get("XCE_SCHEMATHESIS"), str(ROOT / ".ci-venv/schemathesis/bin/schemathesis")):
        if exe and os.access(exe, os.X_OK):
            return exe
    return None


@pytest.mark.skipif(schemathesis() is None, reason="no schemathesis venv (see this module's docstring)")
def test_openapi_contract_on_a_live_cluster(tmp_path: Path) -> None:
    with local_cluster(tmp_path, "--hosts", "1", "--slots-per-host", "2", "--mem-per-host", "2G") as c:
        c.xce("hosts", "close", "node1")
        conf = tmp_path / "rest.toml"
        conf.write_text("rate = 100000.0\nburst = 100000\n")  # fuzzing, not rate limiting
        url = f"http://127.0.0.1:{free_port()}"
        rest = subprocess.Popen([sys.executable, "-m", "xce.rest.server", "--state-dir", str(c.state_dir),
                                 "--config", str(conf), "--listen", url.split("//")[1]],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_for(lambda: http("GET", f"{url}/healthz")[0] == 200, 20, "xce-rest")
            token = c.xce("token").stdout.strip()
            r = subprocess.run(
                [schemathesis() or "", "run", f"{url}/v1/openapi.json", "-H", f"Authorization: Bearer {token}",
                 "--checks", "all", "--exclude-checks",
                 "positive_data_acceptance,negative_data_rejection,use_after_free",
                 "--exclude-operation-id", "open_host", "--phases", "fuzzing,stateful",
                 "-n", os.environ.get("XCE_SCHEMATHESIS_EXAMPLES", "8"), "--seed",
                 os.environ.get("XCE_SCHEMATHESIS_SEED", "1"), "-w", "1", "--no-shrink",
                 "--request-timeout", "15", "--max-failures", "5"],
                capture_output=True, text=True, timeout=240, cwd=tmp_path)
            assert r.returncode == 0, r.stdout[-12000:] + r.stderr[-4000:]
            assert all(h.state == "closed" for h in c.client.hosts())  # nothing ever ran
        finally:
            rest.terminate()
            _, err = rest.communicate(timeout=20)
        assert "Traceback" not in err.decode(), err.decode()[-4000:]
