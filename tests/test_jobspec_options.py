"""#BSUB/#SBATCH directives, the bsub option table, run limits and output-name patterns."""

from __future__ import annotations

import pytest

from xce.core.jobspec.arrays import ArraySpec
from xce.core.jobspec.bsub import EnvPolicy, bsub_request, parse_env
from xce.core.jobspec.depend import JobRef, State
from xce.core.jobspec.directives import bsub_directives, sbatch_directives
from xce.core.jobspec.errors import DirectiveError, JobSpecError, RunLimitError
from xce.core.jobspec.filenames import lsf_filename, slurm_filename
from xce.core.jobspec.options import merge_options, parse_bsub_args
from xce.core.jobspec.runlimit import parse_lsf_time, parse_mem_limit, parse_slurm_time
from xce.core.jobspec.slurm import merge_sbatch_options, parse_sbatch_args

SCRIPT = """#!/bin/bash
#BSUB -J "my job"
#BSUB -P "proj"   # project, quoted
# an ordinary comment

#BSUB -R "rusage[mem=2G] span[hosts=1]"
#BSUB -R 'select[mem>2000MB]'
#BSUB -q normal -n 4 -W 1:30 -We 45 -M 4GB
#BSUB -oo out.%J.%I -e err.%J
#BSUB -cwd /tmp/work -G grp -sp 10 -x -K -I -E "test -d /tmp" -U resv1 -ti
#BSUB -env "all, ~HOME, A=1"
#BSUB -w 'done(12) && started("pre*")'
#BSUBX -q ignored-as-a-comment
echo start
#BSUB -q late
"""


def test_script_directives_into_a_request() -> None:
    d = bsub_directives(SCRIPT)
    assert d.late_lines == [15]
    r = bsub_request(d.options)
    assert (r.name, r.project, r.queue, r.slots) == ("my job", "proj", "normal", 4)
    assert r.resreq == "rusage[mem=2G] span[hosts=1] select[mem>2000MB]"
    assert (r.run_limit, r.run_estimate, r.mem_limit) == (5400, 2700, 4 * 1024**3)
    assert (r.stdout, r.stdout_overwrite, r.stderr, r.stderr_overwrite) == ("out.%J.%I", True, "err.%J", False)
    assert (r.cwd, r.user_group, r.priority, r.pre_exec, r.reservation) == ("/tmp/work", "grp", 10,
                                                                          "test -d /tmp", "resv1")
    assert r.exclusive and r.wait and r.interactive and r.kill_if_never
    assert r.env == EnvPolicy("all", (), ("HOME",), {"A": "1"})
    assert r.depend is not None and r.depend.args[0] == State("done", JobRef(12))  # type: ignore[union-attr]
    assert d.options.origins["-W"] == "#BSUB at line 8"


def test_command_line_overrides_directives_slot_by_slot() -> None:
    cl = parse_bsub_args(["-q", "short", "-o", "mine.out", "-R", "rusage[mem=1G]", "--", "./run", "-q"])
    assert cl.command == ["./run", "-q"]
    merged = merge_options(bsub_directives(SCRIPT).options, cl.options)
    r = bsub_request(merged)
    assert r.queue == "short" and r.stdout == "mine.out" and not r.stdout_overwrite  # -o replaced -oo
    assert r.resreq == "rusage[mem=1G]"  # the command line's -R list replaces the directives'
    assert r.name == "my job" and merged.origins["-q"] == "command line"


def test_command_ends_at_first_word() -> None:
    parsed = parse_bsub_args(["-J", "a[1-3]", "sleep", "-n", "1"])
    assert parsed.command == ["sleep", "-n", "1"] and parsed.options.values == {"-J": "a[1-3]"}
    r = bsub_request(parsed.options)
    assert r.name == "a" and r.array == ArraySpec(((1, 3, 1),))


def test_leading_block_stops_at_first_command() -> None:
    script = "#!/bin/sh\necho hi\n#BSUB -q never\n"
    d = bsub_directives(script)
    assert d.options.values == {} and d.late_lines == [3]
    assert bsub_directives("#BSUB -q a\n\n   #BSUB -n 2\n").options.values == {"-q": "a", "-n": "2"}


@pytest.mark.parametrize("script, message", [
    ("#!/bin/sh\n#BSUB -q a\n#BSUB -Q x\n", "#BSUB -Q: unknown directive -Q at line 3"),
    ("#BSUB -J \"open\n", "#BSUB at line 1: no closing quotation in '-J \"open'"),
    ("#BSUB -q\n", "#BSUB -q: -q needs a value at line 1"),
    ("#BSUB -q a b\n", "#BSUB b: unexpected word 'b' (a directive line holds options only) at line 1"),
    ("#BSUB -o a\n#BSUB -oo b\n", "#BSUB -oo: -oo and -o both set the stdout file; give one at line 2"),
    ("#BSUB -Is\n", "#BSUB -Is: -Is is not supported: interactive jobs with a pseudo-terminal"),
    ("#BSUB -gpu num=1\n", "#BSUB -gpu: -gpu is not supported: GPU requests are not supported"),
])
def test_directive_errors_name_the_directive_and_line(script: str, message: str) -> None:
    with pytest.raises(DirectiveError) as e:
        bsub_directives(script)
    assert e.value.message.startswith(message)


@pytest.mark.parametrize("script, message", [
    ("#BSUB -W 1:75\n", "#BSUB at line 1: -W 1:75: minutes 75 after hours must be 0-59"),
    ("\n#BSUB -J \"a[1-0]\"\n", '#BSUB at line 2: -J "a[1-0]": array range 1-0 ends before it starts'),
    ("#BSUB -M 4XB\n", "#BSUB at line 1: -M 4XB: bad memory size '4XB': unknown unit 'XB'"),
    ("#BSUB -n 2,4\n", "#BSUB at line 1: -n 2,4: a range of slots (min,max) is not supported"),
    ("#BSUB -sp 0\n", "#BSUB at line 1: -sp 0: expected a whole number, 1 or more"),
    ("#BSUB -w 'done(12'\n", "#BSUB at line 1: -w 'done(12': expected ')' to close done("),
    ("#BSUB -env \"none, A\"\n", '#BSUB at line 1: -env "none, A": none takes nothing after it'),
])
def test_value_errors_from_directives_name_their_line(script: str, message: str) -> None:
    with pytest.raises(JobSpecError) as e:
        bsub_request(bsub_directives(script).options)
    assert e.value.message.startswith(message)


def test_unknown_command_line_option() -> None:
    with pytest.raises(DirectiveError, match="^-Q: unknown option -Q$"):
        parse_bsub_args(["-Q", "x", "cmd"])


@pytest.mark.parametrize("text, policy", [
    ("all", EnvPolicy("all")),
    ("none", EnvPolicy("none")),
    ("PATH, A=1", EnvPolicy("names", ("PATH",), (), {"A": "1"})),
    ("all, ~HOME, ~USER", EnvPolicy("all", (), ("HOME", "USER"))),
])
def test_env_forms(text: str, policy: EnvPolicy) -> None:
    assert parse_env(text) == policy


@pytest.mark.parametrize("text", ["all, PATH", "PATH, ~HOME", "1BAD", "none, x"])
def test_env_errors(text: str) -> None:
    with pytest.raises(DirectiveError, match=f'-env "{text}"'):
        parse_env(text)


@pytest.mark.parametrize("text, seconds", [
    ("10", 600), ("210", 12600), ("3:30", 12600), ("1:5", 3900), ("01:05", 3900), ("0:1", 60),
])
def test_lsf_run_limit_forms(text: str, seconds: int) -> None:
    assert parse_lsf_time(text) == seconds


@pytest.mark.parametrize("text, message", [
    ("1:60", "-W 1:60: minutes 60 after hours must be 0-59"),
    ("10/hostA", "-W 10/hostA: normalising a limit by host name or model (/hostA) is not supported"),
    ("1h", "-W 1h: expected [hours:]minutes"),
    ("0", "-W 0: the limit must be at least one minute"),
    ("", "-W : expected [hours:]minutes"),
])
def test_lsf_run_limit_errors(text: str, message: str) -> None:
    with pytest.raises(RunLimitError) as e:
        parse_lsf_time(text)
    assert e.value.message.startswith(message)


@pytest.mark.parametrize("text, seconds", [
    ("30", 1800), ("5:30", 330), ("1:02:03", 3723), ("2-0", 172800), ("1-12", 129600),
    ("1-2:03", 93780), ("1-2:03:04", 93784), ("0", None), ("UNLIMITED", None), ("infinite", None),
    ("90:00", 5400),
])
def test_slurm_time_forms(text: str, seconds: int | None) -> None:
    assert parse_slurm_time(text) == seconds


@pytest.mark.parametrize("text, message", [
    ("1:60", "--time=1:60: seconds 60 after minutes must be 0-59"),
    ("1:60:00", "--time=1:60:00: minutes 60 after hours must be 0-59"),
    ("1-24", "--time=1-24: hours 24 after days must be 0-23"),
    ("1:2:3:4", "--time=1:2:3:4: expected M, M:S"),
    ("1d", "--time=1d: expected M, M:S"),
])
def test_slurm_time_errors(text: str, message: str) -> None:
    with pytest.raises(RunLimitError) as e:
        parse_slurm_time(text)
    assert e.value.message.startswith(message)


@pytest.mark.parametrize("text, unit, value", [
    ("500", "MB", 500 * 1024**2), ("500", "KB", 500 * 1024), ("4G", "MB", 4 * 1024**3),
    ("4GB", "MB", 4 * 1024**3), ("512KB", "MB", 512 * 1024), ("2TB", "MB", 2 * 1024**4),
    ("100.5MB", "MB", int(100.5 * 1024**2)),
])
def test_memory_limit(text: str, unit: str, value: int) -> None:
    assert parse_mem_limit(text, unit) == value


@pytest.mark.parametrize("text, message", [("4PB", "-M 4PB: bad memory size"), ("0", "-M 0: the limit must be")])
def test_memory_limit_errors(text: str, message: str) -> None:
    with pytest.raises(RunLimitError, match=f"^{message}"):
        parse_mem_limit(text)


SBATCH_SCRIPT = """#!/bin/bash
#SBATCH --job-name="my job"
#SBATCH -o out-%j.txt -e err-%A_%a.txt
#SBATCH --time 1-12:00:00
#SBATCH -N2 --ntasks-per-node=4 -c 2
#SBATCH --mem=4G --exclusive --parsable
#SBATCH --array=0-15%4 -d afterok:12:13
#SBATCH -p short -A proj --qos=high --export=ALL --open-mode=append
srun hostname
"""


def test_sbatch_directives_long_and_short() -> None:
    v = sbatch_directives(SBATCH_SCRIPT).options.values
    assert v == {"--job-name": "my job", "--output": "out-%j.txt", "--error": "err-%A_%a.txt",
                 "--time": "1-12:00:00", "--nodes": "2", "--ntasks-per-node": "4", "--cpus-per-task": "2",
                 "--mem": "4G", "--exclusive": True, "--parsable": True, "--array": "0-15%4",
                 "--dependency": "afterok:12:13", "--partition": "short", "--account": "proj", "--qos": "high",
                 "--export": "ALL", "--open-mode": "append"}


def test_sbatch_command_line_overrides() -> None:
    cl = parse_sbatch_args(["--time=10", "-J", "x", "job.sh", "--time", "arg"])
    assert cl.command == ["job.sh", "--time", "arg"]
    merged = merge_sbatch_options(sbatch_directives(SBATCH_SCRIPT).options, cl.options)
    assert merged.values["--time"] == "10" and merged.values["--job-name"] == "x"
    assert merged.values["--mem"] == "4G"


@pytest.mark.parametrize("script, message", [
    ("#SBATCH --frobnicate=1\n", "#SBATCH --frobnicate: unknown directive --frobnicate at line 1"),
    ("#SBATCH --gres=gpu:1\n", "#SBATCH --gres: --gres is not supported: generic resources (GPUs)"),
    ("#SBATCH -G 1\n", "#SBATCH -G: -G is not supported: GPUs are not supported"),
    ("#SBATCH --parsable=1\n", "#SBATCH --parsable: --parsable takes no value"),
    ("#SBATCH --time\n", "#SBATCH --time: --time needs a value at line 1"),
    ("#SBATCH -Z\n", "#SBATCH -Z: unknown directive -Z at line 1"),
])
def test_sbatch_directive_errors(script: str, message: str) -> None:
    with pytest.raises(DirectiveError) as e:
        sbatch_directives(script)
    assert e.value.message.startswith(message)


def test_lsf_filenames() -> None:
    assert lsf_filename("out.%J.%I.log", 12, 3) == "out.12.3.log"
    assert lsf_filename("out.%J.%I", 12) == "out.12.0"
    assert lsf_filename("100%.%J", 5) == "100%.5"


@pytest.mark.parametrize("pattern, expected", [
    ("slurm-%j.out", "slurm-15.out"),
    ("%A_%a.out", "12_7.out"),
    ("%x-%u-%N.log", "nm-me-h1.log"),
    ("%4a|%%j|%J", "0007|%j|15"),
    ("a\\%j", "a%j"),
    ("%q stays", "%q stays"),
])
def test_slurm_filenames(pattern: str, expected: str) -> None:
    got = slurm_filename(pattern, job_id=15, array_job_id=12, index=7, name="nm", user="me", host="h1")
    assert got == expected


def test_slurm_filename_outside_an_array() -> None:
    assert slurm_filename("%A_%a", job_id=15) == "15_4294967294"
