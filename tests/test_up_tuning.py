"""`xce up`'s Raft tuning flags reach the controllers' config, and bad values are refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from xce.cli.main import _run
from xce.cli.up import CLUSTER_FILE, write_cluster_file
from xce.site.config import load


def test_election_timeout_reaches_the_cluster_config(tmp_path: Path) -> None:
    from xce.cli.main import _compaction_conf, _election_timeout

    class A:
        compact_entries, compact_seconds, election_timeout = None, 30.0, _election_timeout("2,4")
    extra = {"controller": _compaction_conf(A())}
    write_cluster_file(tmp_path, 3, "1G", 1, 1.0, extra)
    cfg = load(tmp_path / CLUSTER_FILE)
    assert cfg.controller.election_timeout == (2.0, 4.0)
    assert cfg.controller.compact_seconds == 30.0


@pytest.mark.parametrize("value, says", [("4,2", "0 < MIN < MAX"), ("2", "MIN,MAX"), ("a,b", "MIN,MAX")])
def test_a_bad_election_timeout_is_refused_naming_the_flag(value: str, says: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        _run(["up", "--election-timeout", value])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--election-timeout" in err and says in err
