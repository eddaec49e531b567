"""The one bsub builder (xce/core/jobspec/build.py): options + #BSUB lines -> JobSpec fields, table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from xce.core.errors import InvalidRequest
from xce.core.jobspec.build import STDIN_NAME, Submission, apply_env, bsub_job
from xce.core.jobspec.bsub import parse_env
from xce.core.jobspec.arrays import parse_lsf_job_name
from xce.core.jobspec.depend import parse_depend
from xce.core.jobspec.options import parse_bsub_args
from xce.core.jobspec.scripts import SCRIPT_SNIFF, is_script
from xce.core.model import JobSpec
from xce.core.units import MIB

ENV = {"A": "1", "HOME": "/h"}
SCRIPT = ('#!/bin/sh\n#BSUB -J scripted\n#BSUB -q high\n#BSUB -R "rusage[mem=100]"\n'
          '#BSUB -oo out.%J\n#BSUB -n 2\necho hi\n#BSUB -q ignored\n')


def build(argv: list[str], script: str | None = None, cwd: str = "/work") -> dict[str, Any]:
    options, command = parse_bsub_args(argv)
    return bsub_job(options, Submission(command=command, script=script, environ=ENV, cwd=cwd)).fields


CASES: list[tuple[str, list[str], str | None, dict[str, Any]]] = [
    ("a plain command", ["echo", "a b"], None, {"command": ["echo", "a b"], "env": ENV, "cwd": "/work"}),
    ("-ti with -w", ["-w", "done(1)", "-ti", "true"], None, {"dep_never_kill": True}),
    ("every value option", ["-J", "j", "-q", "high", "-n", "4", "-R", "rusage[mem=1G]", "-R", "span[hosts=1]",
                            "-M", "500", "-W", "1:30", "-We", "45", "-P", "p", "-G", "g", "-sp", "7", "--", "true"],
     None, {"name": "j", "queue": "high", "slots": 4, "resreq": "rusage[mem=1G] span[hosts=1]",
            "mem_limit": 500 * MIB, "run_limit": 5400, "run_estimate": 2700, "project": "p", "group": "g",
            "priority": 7}),
    ("-o appends, -eo overwrites", ["-o", "o.%J", "-eo", "e.%J", "true"], None,
     {"stdout": "o.%J", "stderr": "e.%J", "stderr_overwrite": True}),
    ("-cwd relative to the submitting dir", ["-cwd", "../run", "true"], None, {"cwd": "/run"}),
    ("-x: exclusive use of hosts", ["-x", "true"], None, {"exclusive": True}),
    ("-E: a pre-execution command line", ["-E", "test -d /scratch && echo ok", "true"], None,
     {"pre_exec": "test -d /scratch && echo ok", "command": ["true"]}),
    ("#BSUB -E, the command line's -E wins", ["-E", "mine", "job.sh"], "#!/bin/sh\n#BSUB -E 'theirs x'\ntrue\n",
     {"pre_exec": "mine"}),
    ("#BSUB -E", ["job.sh"], "#!/bin/sh\n#BSUB -E '/bin/check --fast'\ntrue\n", {"pre_exec": "/bin/check --fast"}),
    ("-cwd absolute", ["-cwd", "/scratch/x/", "true"], None, {"cwd": "/scratch/x"}),
    ("-env none", ["-env", "none", "true"], None, {"env": {}}),
    ("-env names", ["-env", "A, B=2", "true"], None, {"env": {"A": "1", "B": "2"}}),
    ("an array", ["-J", "a[1-9:2]%3", "true"], None, {"name": "a", "array": parse_lsf_job_name("a[1-9:2]%3")[1]}),
    ("-w", ["-w", "done(12) && ended(13)", "true"], None, {"depend": parse_depend("done(12) && ended(13)")}),
    ("a script on stdin: its directives, in its leading block only", [], SCRIPT,
     {"command": [STDIN_NAME], "script": SCRIPT, "name": "scripted", "queue": "high", "slots": 2,
      "resreq": "rusage[mem=100]", "stdout": "out.%J", "stdout_overwrite": True}),
    ("a script FILE with args", ["job.sh", "x"], SCRIPT, {"command": ["job.sh", "x"], "script": SCRIPT}),
    ("the command line wins, slot by slot", ["-q", "normal", "-o", "mine", "-R", "rusage[mem=5]", "job.sh"],
     SCRIPT, {"queue": "normal", "stdout": "mine", "stdout_overwrite": None,  # -o replaces the directive's -oo
               "resreq": "rusage[mem=5]", "name": "scripted", "slots": 2}),
]


@pytest.mark.parametrize("what, argv, script, expected", CASES, ids=[c[0] for c in CASES])
def test_options_and_directives_become_jobspec_fields(what: str, argv: list[str], script: str | None,
                                                      expected: dict[str, Any]) -> None:
    fields = build(argv, script)
    assert {k: fields.get(k) for k in expected} == expected
    JobSpec(**fields)  # every key is a JobSpec field


REFUSED = [
    (["-Q", "x", "true"], None, "unknown option -Q"),
    ([], "#!/bin/sh\n#BSUB -Q x\ntrue\n", "#BSUB -Q: unknown directive -Q at line 2"),
    ([], "#BSUB -W 1:75\ntrue\n", "#BSUB at line 1: -W 1:75: minutes 75"),
    (["-Is", "true"], None, "-Is is not supported"),
    (["-E", " ", "true"], None, r'-E "": give the pre-execution command'),
    ([], "#BSUB -E ''\ntrue\n", r'#BSUB at line 1: -E "": give the pre-execution command'),
    (["-En", "true"], None, r"-En drops a pending job's pre-execution command: it is for modify"),
    (["-ti", "true"], None, r"-ti ends the job when its dependency can never be met: give the dependency with -w"),
    (["-U", "r1", "true"], None, r"-U \(advance"),
    (["-n", "x", "true"], None, "-n x: expected a whole number"),
    ([], None, "no command given"),
]


@pytest.mark.parametrize("argv, script, message", REFUSED)
def test_what_it_cannot_carry_is_refused_by_name(argv: list[str], script: str | None, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        build(argv, script)


@pytest.mark.parametrize("head, script", [
    (b"#!/bin/sh\necho\n", True), (b"echo plain\n", True), (b"", True), (b"\x7fELF\x02\x01\0\0", False),
    (b"caf\xc3", False), (b"a" * (SCRIPT_SNIFF - 1) + b"\xc3", True),  # a character cut by the sniff
])
def test_a_text_file_is_a_script_a_binary_is_a_program(head: bytes, script: bool) -> None:
    assert is_script(head) is script


def test_env_policies() -> None:
    environ = {"A": "1", "B": "2", "HOME": "/h"}
    assert apply_env(parse_env("all, ~HOME, C=3"), environ) == {"A": "1", "B": "2", "C": "3"}
    assert apply_env(parse_env("none"), environ) == {}
    assert apply_env(parse_env("A, C=3"), environ) == {"A": "1", "C": "3"}
