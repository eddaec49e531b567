"""The LSF/Slurm front-ends' pure parts: the mapping, the formatters, the option -> JobSpec maps."""

from __future__ import annotations

import json
from typing import Any

import pytest

from xce.compat import lsf_fmt, mapping, slurm_fmt
from xce.compat.fast import Row
from xce.compat.lsf_submit import bsub_spec
from xce.compat.session import Refused, apply_env, visible
from xce.compat.slurm_submit import sbatch_spec
from xce.core.errors import InvalidRequest
from xce.core.jobspec.bsub import parse_env
from xce.core.views import JobAccountView, JobView

MB = 1024 * 1024


def view(**kw: Any) -> JobView:
    base: dict[str, Any] = dict(
        id=12, name="job", user="alice", queue="normal", state="RUN", slots=1, hosts=["node1"],
        command=["/bin/sh", "-c", "sleep 1"], resreq="", mem_reserved=100 * MB, mem_actual=50 * MB,
        mem_peak=60 * MB, mem_charged=100 * MB, mem_limit=None, efficiency=None, reason="",
        exit_code=None, signal=None, submit_time=1_700_000_000.0, start_time=1_700_000_010.0, end_time=None)
    base.update(kw)
    return JobView(**base)


@pytest.mark.parametrize("state, reason, long, short, term", [
    ("PEND", "", "PENDING", "PD", ""),
    ("RUN", "", "RUNNING", "R", ""),
    ("UNKWN", "", "RUNNING", "R", ""),
    ("USUSP", "", "SUSPENDED", "S", ""),
    ("PSUSP", "", "PENDING", "PD", ""),
    ("SSUSP", "", "SUSPENDED", "S", ""),
    ("DONE", "", "COMPLETED", "CD", ""),
    ("EXIT", "", "FAILED", "F", ""),
    ("EXIT", "MEMLIMIT", "OUT_OF_MEMORY", "OOM", "TERM_MEMLIMIT"),
    ("EXIT", "TERM_RUNLIMIT", "TIMEOUT", "TO", "TERM_RUNLIMIT"),
    ("EXIT", "killed by user", "CANCELLED", "CA", "TERM_OWNER"),
    ("EXIT", "lost: the worker no longer has the job", "NODE_FAIL", "NF", "TERM_HOST"),
])
def test_states_lsf_to_slurm(state: str, reason: str, long: str, short: str, term: str) -> None:
    assert mapping.slurm_state(state, reason) == (long, short)
    assert mapping.lsf_term(state, reason) == term


@pytest.mark.parametrize("name, states", [
    ("PD", {"PEND", "PSUSP"}), ("pending", {"PEND", "PSUSP"}), ("R", {"RUN", "UNKWN"}), ("S", {"USUSP", "SSUSP"}),
    ("CD", {"DONE"}), ("F", {"EXIT"}), ("CA", {"EXIT"}), ("TO", {"EXIT"}), ("OOM", {"EXIT"}),
    ("all", {"PEND", "RUN", "UNKWN", "PSUSP", "USUSP", "SSUSP", "DONE", "EXIT"}),
])
def test_states_slurm_to_xce(name: str, states: set[str]) -> None:
    assert mapping.xce_states_of_slurm(name) == states


def test_unknown_slurm_state_is_named() -> None:
    with pytest.raises(ValueError, match="invalid job state specified: XX"):
        mapping.xce_states_of_slurm("XX")


@pytest.mark.parametrize("state, reason, want", [
    ("PEND", "no host fits", "Resources"), ("PEND", "", "Priority"), ("RUN", "", "None"),
    ("DONE", "", "None"), ("EXIT", "", "NonZeroExitCode"), ("EXIT", "TERM_RUNLIMIT", "TimeLimit"),
    ("EXIT", "MEMLIMIT", "OutOfMemory"), ("EXIT", "killed by user", "None")])
def test_slurm_reasons(state: str, reason: str, want: str) -> None:
    assert mapping.slurm_reason(state, reason) == want


@pytest.mark.parametrize("n, lsf, slurm", [
    (None, "-", "0"), (0, "-", "0"), (100 * MB, "100 Mbytes", "100M"), (2 * 1024 * MB, "2048 Mbytes", "2G"),
    (1536 * 1024, "2 Mbytes", "1536K")])
def test_memory_units(n: int | None, lsf: str, slurm: str) -> None:
    assert mapping.lsf_mb(n) == lsf
    assert mapping.slurm_mem(n) == slurm


@pytest.mark.parametrize("text, want", [("100", "100M"), ("4G", "4G"), ("512MB", "512M"), ("2t", "2T")])
def test_slurm_mem_option(text: str, want: str) -> None:
    assert mapping.slurm_mem_option(text) == want


def test_names_map_one_to_one() -> None:
    assert mapping.queue_of(mapping.partition_of("short")) == "short"
    assert mapping.project_of(mapping.account_of("proj")) == "proj"


def test_array_elements_as_each_system_writes_them() -> None:
    from xce.compat.session import job_ids
    from xce.core.arrays import element_id

    e = element_id(12, 3)
    assert (mapping.lsf_id(e), mapping.lsf_name(e, "arr"), mapping.slurm_id(e)) == ("12", "arr[3]", "12_3")
    assert (mapping.lsf_id(7), mapping.lsf_name(7, "x"), mapping.slurm_id(7)) == ("7", "x", "7")
    assert job_ids(["7", "12[3]", "12_3", "12[1-2]"]) == [7, e, e, element_id(12, 1), element_id(12, 2)]
    with pytest.raises(Refused, match="abc: Illegal job ID"):
        job_ids(["abc"])


def test_clean_period_hides_only_old_finished_jobs() -> None:
    now = 10_000.0
    jobs = [view(id=1, end_time=None), view(id=2, state="DONE", end_time=now - 100),
            view(id=3, state="EXIT", end_time=now - 4000)]
    assert [v.id for v in visible(jobs, 3600, now)] == [1, 2]


# ---- bjobs output ------------------------------------------------------------------------

def test_bjobs_o_columns_and_delimiter() -> None:
    cols = lsf_fmt.parse_o("JOBID stat Exit_Code exit_reason delimiter=','")
    done = view(id=7, state="EXIT", exit_code=3, end_time=1_700_000_020.0)
    assert lsf_fmt.columns([done], cols, header=True) == "JOBID,STAT,EXIT_CODE,EXIT_REASON\n7,EXIT,3,-"
    plain = lsf_fmt.columns([view()], lsf_fmt.parse_o("jobid stat"), header=False)
    assert plain == "12      RUN"


def test_exit_reason_of_a_kill_is_empty_but_long_listing_says_term_owner() -> None:
    killed = view(state="EXIT", reason="killed by user", exit_code=143, end_time=1_700_000_020.0)
    assert lsf_fmt.json_record(killed, ["exit_reason"]) == {"EXIT_REASON": ""}
    assert "TERM_OWNER: killed by user" in lsf_fmt.long_listing(killed)


def test_bjobs_o_refuses_unknown_field_by_name() -> None:
    with pytest.raises(Refused, match='field "bogus"'):
        lsf_fmt.parse_o("jobid bogus")


def test_bjobs_l_shows_the_pre_execution_command_as_lsf_does() -> None:
    """LSF's bjobs -l ends the "Submitted from host" line with ", Pre-execute Command <CMD>"
    (after ", Exclusive Execution"); a job without -E has none."""
    line = lsf_fmt.long_listing(view(pre_exec="test -e /scratch && echo ok", exclusive=True)).splitlines()[1]
    assert line.endswith(", CWD <->, Exclusive Execution, Pre-execute Command <test -e /scratch && echo ok>;"), line
    assert "Pre-execute" not in lsf_fmt.long_listing(view())


def test_bjobs_json_shape() -> None:
    names = lsf_fmt.parse_o("jobid stat exit_reason kill_reason max_mem").names
    records = [lsf_fmt.json_record(view(state="EXIT", reason="MEMLIMIT", exit_code=137), names),
               {"JOBID": "99", "ERROR": "Job <99> is not found"}]
    text = lsf_fmt.to_json(records)
    doc = json.loads(text)
    assert doc == {"COMMAND": "bjobs", "JOBS": 2, "RECORDS": [
        {"JOBID": "12", "STAT": "EXIT", "EXIT_REASON": "TERM_MEMLIMIT: MEMLIMIT", "KILL_REASON": "",
         "MAX_MEM": "60 Mbytes"},
        {"JOBID": "99", "ERROR": "Job <99> is not found"}]}
    assert '"COMMAND":"bjobs"' in text and '      "JOBID":"12",' in text  # LSF's own spacing
    assert json.loads(lsf_fmt.to_json([])) == {"COMMAND": "bjobs", "JOBS": 0, "RECORDS": []}


def test_bjobs_default_listing() -> None:
    long_name = view(name="a-very-long-job-name", slots=2, hosts=["node1"])
    out = lsf_fmt.default_listing([long_name], wide=False, header=True).splitlines()
    assert out[0].split() == ["JOBID", "USER", "STAT", "QUEUE", "FROM_HOST", "EXEC_HOST", "JOB_NAME",
                              "SUBMIT_TIME"]
    assert out[1].split()[:7] == ["12", "alice", "RUN", "normal", "-", "node1", "*-job-name"]
    wide = lsf_fmt.default_listing([long_name], wide=True, header=False)
    assert "a-very-long-job-name" in wide


# ---- squeue / sacct output ----------------------------------------------------------------

def test_squeue_format_letters() -> None:
    out = slurm_fmt.squeue_format([view(), view(id=13, state="PEND", hosts=[], reason="x")],
                                  "%i %t %T %P %j %u %D %C %R", header=False)
    assert out.splitlines() == ["12 R RUNNING normal job alice 1 1 node1",
                                "13 PD PENDING normal job alice 1 1 (Resources)"]
    default = slurm_fmt.squeue_format([view()], slurm_fmt.SQUEUE_DEFAULT, header=True).splitlines()
    assert default[0] == "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)"
    assert default[1].split() == ["12", "normal", "job", "alice", "R", default[1].split()[5], "1", "node1"]


def test_squeue_O_fields_as_psij_reads_them() -> None:
    out = slurm_fmt.squeue_fields([view(state="EXIT", exit_code=2, end_time=1_700_000_020.0)],
                                  "JobArrayID,StateCompact,Reason", header=True)
    lines = out.splitlines()
    assert lines[0].split() == ["JOBID", "ST", "REASON"]
    assert lines[1].split() == ["12", "F", "NonZeroExitCode"]


_SHAPES = [view(), view(state="RUN", hosts=["n1", "n2"], start_time=5.0, run_limit=90.0),
           view(state="EXIT", reason="TERM_MEMLIMIT: over", exit_code=None, signal=9, start_time=5.0, end_time=9.0),
           view(id=(7 << 20) | 3, name="arr", state="SSUSP", reason="load"), view(state="PEND", reason="no slot"),
           view(state="DONE", exit_code=0, start_time=1.0, end_time=2.0, mem_limit=2**30),
           view(state="PEND", pre_exec="test -e /scratch", exclusive=True),
           view(state="RUN", hosts=["n1", "n2"], slots=3, host_slots=[2, 1], accounts=[
               JobAccountView(host="n1", slots=2, mem_reserved=0, mem_actual=None, mem_peak=0, mem_charged=0,
                              mem_slack=0, mem_overage=0),
               JobAccountView(host="n2", slots=1, mem_reserved=0, mem_actual=None, mem_peak=0, mem_charged=0,
                              mem_slack=0, mem_overage=0)])]


def _only(v: JobView, reads: Any) -> Row:
    """The view as the read door hands it over: the fields named, no others."""
    return Row(sorted(reads), [getattr(v, f) for f in sorted(reads)])


@pytest.mark.parametrize("name", sorted(lsf_fmt.FIELDS))
def test_each_bjobs_column_reads_only_the_fields_it_declares(name: str, monkeypatch: Any) -> None:
    monkeypatch.setattr(lsf_fmt.time, "time", lambda: 100.0)  # a running job's time: the same for both
    f = lsf_fmt.FIELDS[name]
    for v in _SHAPES:
        assert f.value(_only(v, f.reads)) == f.value(v)


def test_bjobs_long_listing_reads_only_what_it_declares(monkeypatch: Any) -> None:
    monkeypatch.setattr(lsf_fmt.time, "time", lambda: 100.0)
    for v in _SHAPES:
        assert lsf_fmt.long_listing(_only(v, lsf_fmt.LONG_READS)) == lsf_fmt.long_listing(v)


def test_exec_host_reads_the_allocation_not_the_accounts() -> None:
    """EXEC_HOST's slots per host come from host_slots (the allocation, a row field read off the
    job), so the default bjobs asks no view per job; a view without them (an older controller)
    still lists each host once."""
    v = _SHAPES[-1]
    assert "accounts" not in lsf_fmt.FIELDS["exec_host"].reads
    assert lsf_fmt.exec_hosts(_only(v, ["hosts", "host_slots"])) == lsf_fmt.exec_hosts(v) == "2*n1:n2"
    assert lsf_fmt.exec_hosts(view(state="RUN", hosts=["n1", "n2"])) == "n1:n2"


@pytest.mark.parametrize("letter", sorted(slurm_fmt.SQUEUE_LETTERS))
def test_each_squeue_letter_reads_only_the_fields_it_declares(letter: str, monkeypatch: Any) -> None:
    monkeypatch.setattr(slurm_fmt.time, "time", lambda: 100.0)
    fmt = f"%{letter}"
    reads = slurm_fmt.squeue_reads(fmt, None)
    for v in _SHAPES:
        assert slurm_fmt.squeue_format([_only(v, reads)], fmt, False) == slurm_fmt.squeue_format([v], fmt, False)
    assert slurm_fmt.squeue_reads(None, "JobArrayID,StateCompact,Reason") == {"id", "state", "reason"}


@pytest.mark.parametrize("name", sorted(slurm_fmt.SACCT_HEADERS.values()))
def test_each_sacct_field_reads_only_the_fields_it_declares(name: str, monkeypatch: Any) -> None:
    monkeypatch.setattr(slurm_fmt.time, "time", lambda: 100.0)
    reads = slurm_fmt.sacct_reads(name)
    for v in _SHAPES:
        assert slurm_fmt.sacct_rows([_only(v, reads)], name, False, "|", False) == \
            slurm_fmt.sacct_rows([v], name, False, "|", False)


def test_squeue_refuses_unknown_letter() -> None:
    with pytest.raises(Refused, match="%Z"):
        slurm_fmt.squeue_format([], "%i %Z", header=True)


def test_sacct_parsable2_and_table() -> None:
    v = view(state="DONE", exit_code=0, end_time=1_700_000_075.0, hosts=["node1", "node2"], slots=4)
    rows = slurm_fmt.sacct_rows([v], "JobID,JobName,State,ExitCode,Elapsed,MaxRSS,ReqMem,AllocCPUS,NodeList",
                                header=True, sep="|", trailing=False).splitlines()
    assert rows == ["JobID|JobName|State|ExitCode|Elapsed|MaxRSS|ReqMem|AllocCPUS|NodeList",
                    "12|job|COMPLETED|0:0|00:01:05|60M|100M|4|node[1-2]"]
    table = slurm_fmt.sacct_rows([v], slurm_fmt.SACCT_DEFAULT, header=True, sep=None, trailing=False)
    assert table.splitlines()[1].startswith("------------ ----------")


@pytest.mark.parametrize("hosts, text", [
    (["node1", "node2", "node3", "node5"], "node[1-3,5]"), (["a"], "a"),
    (["n01", "n02"], "n[01-02]"), (["login", "c1"], "c1,login"), (["node10", "node2", "node1"], "node[1-2,10]"),
    (["n9", "n10", "n11", "m1"], "m1,n[9-11]"), (["n09", "n10"], "n[09-10]"), (["b2", "a1", "b1"], "a1,b[1-2]")])
def test_hostlists_round_trip_in_slurms_sorted_order(hosts: list[str], text: str) -> None:
    from xce.core import hostlist

    assert hostlist.compress(hosts) == text
    assert hostlist.expand(text) == hostlist.order(hosts) == sorted(hosts, key=lambda h: (h.rstrip("0123456789"),
                                                                                         int(h[len(h.rstrip("0123456789")):] or -1)))


def test_a_bad_hostlist_range_is_named() -> None:
    from xce.core import hostlist

    with pytest.raises(ValueError, match="'x-2' is not a number"):
        hostlist.expand("node[x-2]")


# ---- bsub and sbatch -> JobSpec fields -------------------------------------------------------

def test_bsub_options_map_to_jobspec_fields() -> None:
    fields, req = bsub_spec(["-J", "j1", "-q", "short", "-n", "4", "-R", "rusage[mem=100.0]", "-R",
                             "span[hosts=1]", "-M", "500", "-W", "1:30", "-P", "proj", "-G", "grp",
                             "-sp", "5", "-o", "out.%J", "-cwd", "/tmp", "echo", "a b"], lambda: None)
    assert fields["command"] == ["/bin/sh", "-c", "echo a b"]
    assert (fields["name"], fields["queue"], fields["slots"]) == ("j1", "short", 4)
    assert fields["resreq"] == "rusage[mem=100.0] span[hosts=1]"
    assert fields["mem_limit"] == 500 * MB  # LSF_UNIT_FOR_LIMITS=MB
    assert (fields["run_limit"], fields["project"], fields["group"], fields["priority"]) == (5400, "proj", "grp", 5)
    assert (fields["stdout"], fields["cwd"]) == ("out.%J", "/tmp")
    assert not req.wait
    assert {"hold", "warn_signal", "warn_time", "warn_to"}.isdisjoint(fields)  # defaults: omitted


def test_bsub_hold_and_job_warning_map_to_the_same_fields_as_sbatchs() -> None:
    """bsub -H is sbatch -H; -wa SIG -wt [H:]MIN is --signal, to every process of the job (LSF's)."""
    fields, _ = bsub_spec(["-H", "-wa", "USR1", "-wt", "1:30", "-W", "3:00", "true"], lambda: None)
    assert {k: fields[k] for k in ("hold", "warn_signal", "warn_time", "warn_to")} == \
        {"hold": True, "warn_signal": 10, "warn_time": 5400.0, "warn_to": ""}


def test_bsub_ti_asks_for_its_end_when_the_dependency_is_never_met() -> None:
    fields, _ = bsub_spec(["-w", "done(12)", "-ti", "true"], lambda: None)
    assert fields["dep_never_kill"] is True
    assert "dep_never_kill" not in bsub_spec(["-w", "done(12)", "true"], lambda: None)[0]


def test_bsub_dependency_and_overwrite_reach_the_spec() -> None:
    from xce.core.jobspec.depend import parse_depend

    fields, _ = bsub_spec(["-w", "done(12) && ended(13)", "-oo", "o", "-eo", "e", "true"], lambda: None)
    assert fields["depend"] == parse_depend("done(12) && ended(13)")
    assert (fields["stdout_overwrite"], fields["stderr_overwrite"]) == (True, True)


def test_bsub_script_on_stdin_with_directives(tmp_path: Any) -> None:
    script = "#!/bin/bash\n#BSUB -J scripted\n#BSUB -n 2\necho hi\n"
    fields, _ = bsub_spec(["-q", "q1"], lambda: script)
    assert (fields["name"], fields["slots"], fields["queue"]) == ("scripted", 2, "q1")
    assert fields["command"] == ["STDIN"] and fields["script"] == script  # kept as submitted; the worker runs it


def test_bsub_file_reads_its_directives(tmp_path: Any) -> None:
    f = tmp_path / "job.sh"
    f.write_text('#!/bin/sh\n#BSUB -J "from file"\n#BSUB -M 1GB\ntrue\n')
    fields, _ = bsub_spec(["-n", "2", str(f)], lambda: None)
    assert (fields["name"], fields["mem_limit"], fields["slots"]) == ("from file", 1024 * MB, 2)
    assert fields["command"] == [str(f)] and fields["script"] == f.read_text()  # kept: the worker runs it
    f.unlink()  # spooled at submit: the job does not need the file any more
    binary = tmp_path / "prog"
    binary.write_bytes(b"\x7fELF\0\0")
    assert bsub_spec([str(binary)], lambda: None)[0]["command"] == ["/bin/sh", "-c", str(binary)]  # a program


@pytest.mark.parametrize("argv, message", [
    (["-ti", "true"], "-ti ends the job when its dependency can never be met: give the dependency with -w"),
    (["-U", "r1", "true"], "-U (advance reservations): XCE has no advance reservations"),
    (["-gpu", "num=1", "true"], "-gpu is not supported"),
    (["-nnodes", "2", "-n", "3", "true"], "cannot be spread evenly"),
    (["-nnodes", "1", "-R", "span[ptile=2]", "true"], "give one"),
    (["-Q", "x", "true"], "unknown option -Q"),
    (["-W", "1:75", "true"], "minutes 75"),
    (["-wa", "USR1", "true"], "-wa (the warning signal) and -wt (how long before the run limit) go together"),
    (["-wa", "NOPE", "-wt", "1", "true"], "-wa: unknown signal 'NOPE'"),
])
def test_bsub_refuses_by_name(argv: list[str], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        bsub_spec(argv, lambda: None)


@pytest.mark.parametrize("argv, resreq", [
    (["-nnodes", "1", "-n", "4"], "span[hosts=1]"), (["-nnodes", "2", "-n", "4"], "span[ptile=2]"),
    (["-nnodes", "1", "-R", "rusage[mem=10]"], "rusage[mem=10] span[hosts=1]")])
def test_bsub_nnodes_as_span(argv: list[str], resreq: str) -> None:
    assert bsub_spec([*argv, "true"], lambda: None)[0]["resreq"] == resreq


def test_bsub_takes_an_array_through_the_one_builder() -> None:
    fields, _ = bsub_spec(["-J", "a[1-10]%2", "true"], lambda: None)
    assert (fields["name"], fields["array"].count, fields["array"].limit) == ("a", 10, 2)


def test_bsub_without_command_is_named() -> None:
    with pytest.raises(Refused, match="no command given"):
        bsub_spec([], lambda: None)


def test_env_policies() -> None:
    environ = {"A": "1", "B": "2", "HOME": "/h"}
    assert apply_env(parse_env("all, ~HOME, C=3"), environ) == {"A": "1", "B": "2", "C": "3"}
    assert apply_env(parse_env("none"), environ) == {}
    assert apply_env(parse_env("A, C=3"), environ) == {"A": "1", "C": "3"}


def _script(text: str) -> Any:
    return lambda command: (text, "job.sh")


def test_sbatch_options_map_to_jobspec_fields() -> None:
    script = ('#!/bin/bash\n#SBATCH --job-name="my job"\n#SBATCH -p short -A proj\n#SBATCH --ntasks=2\n'
              '#SBATCH --cpus-per-task=2\n#SBATCH --mem=2G\n#SBATCH -t 1-00:30:00\n#SBATCH -o out-%j-%x.txt\n'
              '#SBATCH --qos=high\necho hi\n')
    fields, parsable = sbatch_spec(["--parsable", "-e", "err-%A_%a"], _script(script))
    assert parsable
    assert (fields["script"], fields["command"]) == (script, ["STDIN"])  # kept as submitted, run by the worker
    assert (fields["name"], fields["queue"], fields["project"], fields["slots"]) == ("my job", "short", "proj", 4)
    assert fields["resreq"] == "rusage[mem=2G/host]"
    assert fields["run_limit"] == 86400 + 1800
    assert fields["stdout"] == "out-%J-my job.txt"
    assert fields["stderr"] == "err-%J_4294967294"


@pytest.mark.parametrize("argv, directives, array, out, err", [
    (["--array=1-10%2"], "", "1-10%2", "slurm-%J_%I.out", None),  # Slurm's default: slurm-%A_%a.out
    (["-a", "0-4:2", "-o", "o-%A.%a", "-e", "e-%j"], "", "0-4:2", "o-%J.%I", "e-%J_%I"),
    ([], "#SBATCH --array=1-10%2\n", "1-10%2", "slurm-%J_%I.out", None),
])
def test_sbatch_array_maps_onto_the_job_model(argv: list[str], directives: str, array: str, out: str,
                                              err: str | None) -> None:
    from xce.core.jobspec.arrays import parse_slurm_array

    fields, _ = sbatch_spec(argv, _script("#!/bin/sh\n" + directives + "true\n"))
    assert fields["array"] == parse_slurm_array(array)
    assert (fields["stdout"], fields.get("stderr")) == (out, err)


def test_sbatch_array_is_what_bsub_builds() -> None:
    from xce.core.jobspec.arrays import parse_lsf_job_name

    fields, _ = sbatch_spec(["--array=1-10%2"], _script("#!/bin/sh\ntrue\n"))
    assert fields["array"] == parse_lsf_job_name("x[1-10]%2")[1]


def test_sbatch_without_array_has_none() -> None:
    assert "array" not in sbatch_spec([], _script("#!/bin/sh\ntrue\n"))[0]


def test_run_limit_and_submit_host_are_shown() -> None:
    v = view(run_limit=5400.0, submit_host="login1")
    assert slurm_fmt.squeue_format([v, view()], "%i %l", header=False).splitlines() == ["12 1:30:00", "12 UNLIMITED"]
    assert slurm_fmt.squeue_fields([v], "JobID,TimeLimit", header=False).split() == ["12", "1:30:00"]
    assert slurm_fmt.sacct_rows([v, view()], "JobID,Timelimit", header=False, sep="|", trailing=False) \
        == "12|01:30:00\n12|UNLIMITED\n"
    assert "TimeLimit=01:30:00" in slurm_fmt.scontrol_job(v)
    assert lsf_fmt.columns([v, view()], lsf_fmt.parse_o("jobid FROM_HOST runtimelimit delimiter=','"),
                           header=False).splitlines() == ["12,login1,90.0 min", "12,-,-"]
    assert lsf_fmt.default_listing([v], wide=False, header=False).split()[4] == "login1"
    assert "Submitted from host <login1>" in lsf_fmt.long_listing(v) and " RUNLIMIT" in lsf_fmt.long_listing(v)


def test_sbatch_dependency_and_open_mode() -> None:
    from xce.core.jobspec.slurm import parse_slurm_dependency

    fields, _ = sbatch_spec(["--dependency=afterok:3:4", "--open-mode=truncate"], _script("#!/bin/sh\ntrue\n"))
    assert fields["depend"] == parse_slurm_dependency("afterok:3:4")
    assert fields["stdout_overwrite"] and fields["stderr_overwrite"]


def test_sbatch_exclusive_is_bsub_x() -> None:
    assert sbatch_spec(["--exclusive"], _script("#!/bin/sh\ntrue\n"))[0]["exclusive"] is True
    assert sbatch_spec([], _script("#!/bin/sh\n#SBATCH --exclusive\ntrue\n"))[0]["exclusive"] is True
    assert "exclusive" not in sbatch_spec([], _script("#!/bin/sh\ntrue\n"))[0]


@pytest.mark.parametrize("lines, resreq, slots", [
    ("#SBATCH -N 1 -n 3\n", "span[hosts=1]", 3),
    ("#SBATCH --nodes=2 --ntasks-per-node=2\n", "span[ptile=2]", 4),
    ("#SBATCH --mem-per-cpu=100\n", "rusage[mem=100M/task] span[hosts=1]", 1),
])
def test_sbatch_layouts(lines: str, resreq: str, slots: int) -> None:
    fields, _ = sbatch_spec([], _script("#!/bin/sh\n" + lines + "true\n"))
    assert (fields["resreq"], fields["slots"]) == (resreq, slots)


@pytest.mark.parametrize("argv, message", [
    (["--array=0-3%0"], "--array=0-3%0: running limit %0 must be 1 or more"),
    (["--signal=X:USR1"], "--signal=X:USR1: before ':' only R and B may stand"),
    (["--signal=NOPE@10"], "--signal: unknown signal 'NOPE'"),
    (["--signal=USR1@70000"], "--signal=USR1@70000: the time after @ must be whole seconds from 0 to 65535"),
    (["--exclusive=user"], "--exclusive=user: sharing nodes by user or MCS label is not supported"),
    (["--gres=gpu:1"], "--gres is not supported"),
    (["--mail-type=END"], "XCE sends no mail"),
])
def test_sbatch_refuses_by_name(argv: list[str], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message.replace("(", r"\(").replace(")", r"\)")):
        sbatch_spec(argv, _script("#!/bin/sh\ntrue\n"))


def test_shims_point_at_this_interpreter(tmp_path: Any) -> None:
    import sys

    from xce.compat import shims
    from xce.site.config import Config

    d = shims.ensure_bin(tmp_path, "lsf")
    assert {p.name for p in d.iterdir()} >= {"bsub", "bjobs", "bkill", "bqueues", "lsid"}
    text = (d / "bsub").read_text()
    assert text.startswith(f"#!{sys.executable} -S\n") and "main('bsub'" in text  # no site: see shims._SHIM
    env = shims.ensure_envdir(tmp_path, Config())
    assert "LSF_UNIT_FOR_LIMITS=MB" in (env / "lsf.conf").read_text().splitlines()
    params = (env / "lsbatch" / "xce" / "configdir" / "lsb.params").read_text()
    assert "CLEAN_PERIOD = 3600" in params and "DEFAULT_QUEUE = normal" in params


@pytest.mark.parametrize("answer, outcome", [
    ("killed", mapping.ENDING), ("kill requested", mapping.ENDING),
    ("killed 8, kill requested for 2", mapping.ENDING),  # a whole array's answer
    ("signal 18 sent", mapping.SIGNALED), ("already DONE", mapping.FINISHED), ("not running", mapping.FINISHED),
    ("not found", mapping.UNKNOWN)])
def test_kill_answers_as_bkill_and_scancel_read_them(answer: str, outcome: str) -> None:
    assert mapping.kill_outcome(answer) == outcome


def test_scontrol_update_keys_map_onto_what_xce_modify_changes() -> None:
    from xce.core.jobspec.modify import scontrol_changes

    assert scontrol_changes(["TimeLimit=1-0", "partition=high", "JobName=x", "NumCPUs=3", "Priority=5",
                             "Dependency=afterok:12:13"]) == {
        "run_limit": 86400, "queue": "high", "name": "x", "slots": 3, "priority": 5,
        "depend": "done(12) && done(13)"}
    assert scontrol_changes(["TimeLimit=UNLIMITED", "Dependency="]) == {"run_limit": None, "depend": ""}
    assert scontrol_changes(["JobName=solo", "Dependency=singleton"], "old") == {"name": "solo", "depend": 'ended("solo")'}
    # a job of -c 2: NumTasks counts tasks (slots = tasks x 2), NumCPUs slots
    assert scontrol_changes(["NumTasks=3"], cpus_per_task=2) == {"slots": 6}
    assert scontrol_changes(["NumCPUs=4"], cpus_per_task=2) == {"slots": 4}
    for word, message in (("NumTasks=x", "NumTasks=x: expected a whole number"), ("Nice=5", "not supported: Nice=5"),
                          ("TimeLimit", "not supported: TimeLimit"), ("TimeLimit=1:75", "TimeLimit=1:75")):
        with pytest.raises(InvalidRequest, match=message):
            scontrol_changes([word])


def test_squeue_folds_an_arrays_pending_elements_into_one_row_and_r_lists_each() -> None:
    from xce.core.jobids import element_id
    from xce.core.views import ArrayView

    a = 40
    elems = [view(id=element_id(a, 1), name="sw"), view(id=element_id(a, 2), name="sw"),
             view(id=element_id(a, 3), name="sw", state="PEND", hosts=[], reason="no slots")]
    summary = ArrayView(id=a, name="sw", user="alice", queue="normal", indices="1-10", limit=2, elements=10,
                        counts={"RUN": 2, "PEND": 8}, unstarted="4-10")
    jobs = [view(id=7), *elems, view(id=50, state="PEND", hosts=[])]
    folded = slurm_fmt.fold_arrays(jobs, [summary], each=False)
    assert slurm_fmt.squeue_format(folded, "%i %j %t %R %C", header=False).splitlines() == [
        "7 job R node1 1", "40_1 sw R node1 1", "40_2 sw R node1 1", "40_[3-10%2] sw PD (JobArrayTaskLimit) 1",
        "50 job PD (Priority) 1"]
    each = slurm_fmt.fold_arrays(jobs, [summary], each=True)
    assert [line.split()[:2] for line in slurm_fmt.squeue_format(each, "%i %t", header=False).splitlines()] == [
        ["7", "R"], ["40_1", "R"], ["40_2", "R"], *[[f"40_{i}", "PD"] for i in range(3, 11)], ["50", "PD"]]
    asked = slurm_fmt.fold_arrays([], [summary], each=False, only={element_id(a, 9)})  # -j 40_9: unstarted
    assert slurm_fmt.squeue_format(asked, "%i %j %t %u %P", header=False) == "40_9 sw PD alice normal\n"
    stepped = ArrayView(id=a, name="sw", user="alice", queue="normal", indices="0-8:2", limit=None, elements=5,
                        counts={"PEND": 5}, unstarted="0-8:2")
    assert slurm_fmt.squeue_format(slurm_fmt.fold_arrays([], [stepped], each=False), "%i", header=False) == \
        "40_[0,2,4,6,8]\n"


# ---- formats checked against LSF's and Slurm's own (session 7) ------------------------------

def test_a_held_pending_job_is_slurms_pending_job_held_user() -> None:
    """scontrol hold (XCE's stop of a pending job: PSUSP) leaves a Slurm job PENDING, Reason JobHeldUser."""
    assert mapping.slurm_state("PSUSP") == mapping.PENDING
    assert mapping.slurm_reason("PSUSP", "") == "JobHeldUser"
    assert mapping.xce_states_of_slurm("PD") == {"PEND", "PSUSP"}
    assert mapping.xce_states_of_slurm("S") == {"USUSP", "SSUSP"}


def test_an_elements_lsf_name_in_messages_and_long_listing() -> None:
    from xce.core.jobids import element_id

    e = element_id(3, 1)
    assert (mapping.lsf_job(e), mapping.lsf_job(3)) == ("3[1]", "3")
    long = lsf_fmt.long_listing(view(id=e, name="arr"))
    assert long.startswith("Job <3[1]>, Job Name <arr[1]>, User <alice>"), long


def test_bjobs_long_listing_times_are_lsfs_full_ones() -> None:
    import time

    long = lsf_fmt.long_listing(view(submit_time=1_700_000_000.0))
    want = time.strftime("%a %b %e %H:%M:%S", time.localtime(1_700_000_000.0))
    assert long.splitlines()[1].startswith(f"{want}: Submitted from host"), long


def test_bjobs_default_listing_puts_each_further_host_on_its_own_line() -> None:
    v = _SHAPES[-1]  # 2 slots on n1, 1 on n2
    head, first, second = lsf_fmt.default_listing([v], wide=False, header=True).splitlines()
    assert first.split()[5] == "2*n1" and second.strip() == "n2", (first, second)
    assert first.index("2*n1") == second.index("n2") == head.index("EXEC_HOST")
    assert lsf_fmt.default_listing([v], wide=True, header=False).split()[5] == "2*n1:n2"


def test_bhosts_status_is_lsfs() -> None:
    assert [mapping.lsf_host_status(s) for s in ("ok", "full", "closed", "unavail")] == \
        ["ok", "closed", "closed", "unavail"]


@pytest.mark.parametrize("argv, fields", [
    (["--signal=USR2@90"], {"warn_signal": 12, "warn_time": 90.0, "warn_to": "steps"}),  # submitit's line
    (["--signal=B:USR1@55"], {"warn_signal": 10, "warn_time": 55.0, "warn_to": "batch"}),
    (["--signal=R:10"], {"warn_signal": 10, "warn_time": 60.0, "warn_to": "steps"}),  # R: no reservations: no effect
    (["--hold"], {"hold": True}), (["-H"], {"hold": True}),
    (["-n", "1", "-c", "2"], {"slots": 2, "cpus_per_task": 2}),
    (["-n", "3"], {"slots": 3}),
])
def test_sbatch_signal_hold_and_cpus_per_task(argv: list[str], fields: dict[str, Any]) -> None:
    got, _ = sbatch_spec(argv, _script("#!/bin/sh\ntrue\n"))
    assert {k: got.get(k) for k in fields} == fields
    for absent in {"hold", "warn_signal", "warn_time", "warn_to", "cpus_per_task"} - set(fields):
        assert absent not in got  # JobSpec's default: omitted on the wire


def test_scontrol_and_squeue_long_show_the_signal_and_tasks() -> None:
    v = view(run_limit=60.0, warn_signal=10, warn_time=55.0, warn_to="batch", slots=4, cpus_per_task=2)
    text = slurm_fmt.scontrol_job(v)
    assert "TimeLimit=00:01:00 Signal=B:USR1@55\n" in text and "NumTasks=2 CPUs/Task=2\n" in text, text
    assert "Signal=" not in slurm_fmt.scontrol_job(view())
    held = view(id=13, state="PSUSP", hosts=[], reason="held by its user (submitted held)", start_time=None)
    lines = slurm_fmt.squeue_format([v, held], slurm_fmt.SQUEUE_LONG, header=True).splitlines()
    assert lines[0].split() == ["JOBID", "PARTITION", "NAME", "USER", "STATE", "TIME", "TIME_LIMI", "NODES",
                                "NODELIST(REASON)"]
    assert lines[1].split()[4:] == ["RUNNING", lines[1].split()[5], "1:00", "1", "node1"]
    assert lines[2].split()[4:] == ["PENDING", "0:00", "UNLIMITED", "1", "(JobHeldUser)"]


def test_scontrol_show_job_names_an_elements_array() -> None:
    from xce.core.jobids import element_id

    text = slurm_fmt.scontrol_job(view(id=element_id(3, 1), name="arr"))
    assert f"JobId={element_id(3, 1)} ArrayJobId=3 ArrayTaskId=1 JobName=arr\n" in text, text
    assert slurm_fmt.scontrol_job(view()).startswith("JobId=12 JobName=job\n")


def test_the_project_is_lsfs_project_and_slurms_account() -> None:
    v = view(project="astro")
    assert "Project <astro>" in lsf_fmt.long_listing(v) and "Project <default>" in lsf_fmt.long_listing(view())
    assert lsf_fmt.columns([v], lsf_fmt.parse_o("jobid proj_name"), header=False).split() == ["12", "astro"]
    assert slurm_fmt.sacct_rows([v], "JobID,Account", header=False, sep="|", trailing=False) == "12|astro\n"
    assert slurm_fmt.squeue_format([v], "%i %a", header=True) == "JOBID ACCOUNT\n12 astro\n"
    assert slurm_fmt.squeue_fields([v], "JobID:6,Account", header=False) == "12    astro\n"
    assert "Account=astro QOS" in slurm_fmt.scontrol_job(v)


def test_sinfo_by_partition_and_by_node() -> None:
    from types import SimpleNamespace as NS

    queues = NS(queues=[NS(name="normal"), NS(name="high")], default="normal")
    hosts = [NS(name="n1", state="ok", slots_used=0, slots_total=2), NS(name="n2", state="full", slots_used=2,
                                                                        slots_total=2)]
    assert slurm_fmt.sinfo_rows(queues, hosts, True, partitions=["high"]).splitlines() == [
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST", "high         up   infinite      1   idle n1",
        "high         up   infinite      1  alloc n2"]
    assert slurm_fmt.sinfo_nodes(queues, hosts, True, partitions=None).splitlines() == [
        "NODELIST   NODES PARTITION STATE", "n1             1   normal* idle", "n1             1      high idle",
        "n2             1   normal* alloc", "n2             1      high alloc"]


def test_bjobs_default_listing_leaves_a_pending_jobs_exec_host_blank() -> None:
    head, row = lsf_fmt.default_listing([view(state="PEND", hosts=[])], wide=False, header=True).splitlines()
    assert row[head.index("EXEC_HOST"):head.index("JOB_NAME")].strip() == "" and row.split()[5] == "job", row


def test_bjobs_default_listing_shows_each_jobs_own_submit_time() -> None:
    """The listing formats each minute once (10,000 jobs share a few): every row still shows its job's."""
    views = [view(id=i + 1, submit_time=1_700_000_000.0 + 17 * i) for i in range(400)] + [view(id=999, submit_time=0.0)]
    rows = lsf_fmt.default_listing(views, wide=False, header=False).splitlines()
    assert [r[68:] for r in rows] == [lsf_fmt.lsf_time(v.submit_time) for v in views]  # SUBMIT_TIME at 68
    assert len({r[68:] for r in rows}) > 100


@pytest.mark.parametrize("sig, flags, sent", [
    (None, set(), (None, "")),                   # no --signal: cancel the job
    (9, {"--batch"}, (None, "")),                # KILL: a cancel, whatever -b
    (15, set(), (15, "steps")),                  # any other: the steps only (submitit's TERM, USR2)
    (10, {"--batch"}, (10, "batch")),            # -b: the batch shell alone
    (10, {"--full"}, (10, "")),                  # -f: every process
    (10, {"--full", "--batch"}, (10, "")),       # -b is ignored with -f, as Slurm's
])
def test_scancel_sends_a_signal_where_slurm_does(sig: int | None, flags: set[str], sent: tuple) -> None:
    from xce.compat.slurm import _scancel_signal

    assert _scancel_signal(sig, flags) == sent
