"""`xce kill -s` signal names and `xce submit -oo/-eo`, without a cluster."""

from __future__ import annotations

import pytest

from xce.cli.submit import job_spec, split_args
from xce.core.errors import InvalidRequest
from xce.core.jobspec.signals import parse_signal


@pytest.mark.parametrize("text,num", [("STOP", 19), ("sigcont", 18), ("USR1", 10), ("15", 15)])
def test_signal_names(text: str, num: int) -> None:
    assert parse_signal(text) == num


def test_unknown_signal_is_refused_by_name() -> None:
    with pytest.raises(InvalidRequest, match="unknown signal 'NOPE'"):
        parse_signal("NOPE")


@pytest.mark.parametrize("args,out,err", [
    (["-o", "o.%J"], ("o.%J", False), (None, False)),
    (["-oo", "o.%J", "-e", "e"], ("o.%J", True), ("e", False)),
    (["-eo", "e.%I"], (None, False), ("e.%I", True)),
])
def test_submit_output_options(args: list[str], out: tuple[str | None, bool], err: tuple[str | None, bool]) -> None:
    spec, _ = job_spec(split_args([*args, "--", "true"]))
    assert (spec.stdout, spec.stdout_overwrite) == out and (spec.stderr, spec.stderr_overwrite) == err
