"""-E (pre-execution) in the state machine, the option grammars and the queue config (issue 14).

LSF: a failed pre-exec sends the job back to PEND for another try; after the queue's
MAX_PREEXEC_RETRY failures LOCAL_MAX_PREEXEC_RETRY_ACTION decides: SUSPEND (held, PSUSP) or
EXIT (the pre-exec's exit code).  The worker side is tests/test_e2e_preexec.py.
"""

from __future__ import annotations

import pytest
from builders import T0, alloc, cluster_state, host, queue, spec, submit

from xce.core.errors import InvalidRequest
from xce.core.jobspec.modify import bmod_changes
from xce.core.jobspec.options import parse_bsub_args
from xce.core.model import PREEXEC_FAILED, PREEXEC_TIMEOUT, PREEXEC_TIMEOUT_CODE, JobState
from xce.core.state import ClusterState, Finish, Kill, ModifySpec, Place, Resume, SpecPatch

S = JobState


def cluster(**kw) -> ClusterState:
    return cluster_state(queue(**kw), hosts=(host("n1"),))


def run(st: ClusterState, t: float) -> None:
    st.apply(Place(time=t, job_id=1, attempt=st.jobs[1].attempt, allocs=[alloc("n1", 1)]))


def fail_preexec(st: ClusterState, t: float, code: int = 3) -> str:
    run(st, t)
    return st.apply(Finish(time=t + 0.5, job_id=1, attempt=st.jobs[1].attempt, host="n1", exit_code=code,
                           reason=PREEXEC_FAILED))


def test_a_failed_pre_exec_sends_the_job_back_to_pend_naming_the_command_and_its_code() -> None:
    st = cluster()
    submit(st, spec(pre_exec="test -e /data/ready"))
    fail_preexec(st, T0 + 1)
    job = st.jobs[1]
    assert job.state == S.PEND and job.attempt == 1 and job.requeues == 1 and job.preexec_fails == 1
    assert job.reason == 'requeued: pre-execution command "test -e /data/ready" exited 3 (failure 1 of 5)'
    assert job.exit_code is None and job.allocs == [] and job.start_time is None  # a new attempt comes
    assert [e.event for e in st.history[1]] == ["submitted", "dispatched", "requeued"]
    run(st, T0 + 3)  # ...and it is placed again
    assert st.jobs[1].state == S.RUN and st.jobs[1].attempt == 2


def test_after_max_preexec_retry_failures_the_job_is_held_and_resume_gives_it_every_try_again() -> None:
    st = cluster(max_preexec_retry=3)
    submit(st, spec(pre_exec="false"))
    for i in range(3):
        fail_preexec(st, T0 + 1 + i, code=1)
    job = st.jobs[1]
    assert job.state == S.PSUSP and job.preexec_fails == 3 and job.requeues == 3
    assert job.reason == ('held: pre-execution command "false" exited 1, 3 failures (the queue\'s '
                          'max_preexec_retry); xce resume to retry')
    assert st.history[1][-1].event == "held (pre-exec)"
    st.apply(Resume(time=T0 + 9, job_ids=[1]))
    assert (job.state, job.reason, job.preexec_fails) == (S.PEND, "", 0)
    fail_preexec(st, T0 + 10)
    assert job.state == S.PEND and job.preexec_fails == 1


def test_the_exit_action_ends_the_job_exit_with_the_pre_execs_code() -> None:
    st = cluster(max_preexec_retry=2, preexec_retry_action="exit")
    submit(st, spec(pre_exec="false"))
    fail_preexec(st, T0 + 1, code=4)
    fail_preexec(st, T0 + 3, code=7)
    job = st.jobs[1]
    assert job.state == S.EXIT and job.exit_code == 7 and 1 in st.finished_order
    assert job.reason == 'pre-execution command "false" exited 7: failed 2 times, the queue\'s max_preexec_retry'


def test_a_job_killed_while_its_pre_exec_runs_is_killed_not_requeued() -> None:
    st = cluster()
    submit(st, spec(pre_exec="sleep 100"))
    run(st, T0 + 1)
    st.apply(Kill(time=T0 + 2, job_ids=[1]))
    st.apply(Finish(time=T0 + 3, job_id=1, attempt=1, host="n1", exit_code=143, signal=15, reason=PREEXEC_FAILED))
    assert st.jobs[1].state == S.EXIT and st.jobs[1].requeues == 0


def test_a_long_pre_exec_is_cut_in_the_reason() -> None:
    st = cluster()
    submit(st, spec(pre_exec="x" * 200))
    fail_preexec(st, T0 + 1)
    assert '"' + "x" * 57 + '..." exited 3' in st.jobs[1].reason


def test_modify_sets_and_drops_a_pending_jobs_pre_exec() -> None:
    st = cluster()
    submit(st, spec())
    st.apply(ModifySpec(time=T0 + 1, job_id=1, patch=SpecPatch(pre_exec="check")))
    assert st.jobs[1].spec.pre_exec == "check"
    st.apply(ModifySpec(time=T0 + 2, job_id=1, patch=SpecPatch(pre_exec="")))
    assert st.jobs[1].spec.pre_exec == ""
    with pytest.raises(InvalidRequest, match="pre_exec: 5,000 bytes is over the limit"):
        st.apply(ModifySpec(time=T0 + 3, job_id=1, patch=SpecPatch(pre_exec="x" * 5000)))


@pytest.mark.parametrize("argv, changes", [
    (["-E", "/bin/check x", "7"], {"pre_exec": "/bin/check x"}),
    (["-En", "7"], {"pre_exec": ""}),
])
def test_bmod_and_xce_modify_take_E_and_En(argv: list[str], changes: dict[str, str]) -> None:
    opts, words = parse_bsub_args(argv)
    assert words == ["7"] and bmod_changes(opts)[0] == changes


def test_E_and_En_together_are_refused() -> None:
    opts, _ = parse_bsub_args(["-E", "x", "-En", "7"])
    with pytest.raises(InvalidRequest, match="-E sets the pre-execution command and -En drops it; give one"):
        bmod_changes(opts)


def test_the_queue_config_checks_the_retry_keys() -> None:
    from xce.core.errors import ConfigError
    from xce.site.config import from_dict

    with pytest.raises(ConfigError, match="key queues.q.max_preexec_retry: must be >= 1, got 0"):
        from_dict({"queues": {"q": {"default": True, "max_preexec_retry": 0}}})
    with pytest.raises(ConfigError, match="key queues.q.preexec_retry_action: must be one of suspend, exit"):
        from_dict({"queues": {"q": {"default": True, "preexec_retry_action": "hold"}}})
    with pytest.raises(ConfigError, match=r"key queues.q.preexec_timeout: must be a number of seconds \(0: none\), got -1"):
        from_dict({"queues": {"q": {"default": True, "preexec_timeout": -1}}})
    assert from_dict({"queues": {"q": {"default": True, "preexec_timeout": 90}}}).queues["q"].preexec_timeout == 90


def test_a_pre_exec_past_its_timeout_is_a_failure_of_it_as_lsfs_job_preproc_timeout() -> None:
    """LSF's JOB_PREPROC_TIMEOUT: the job goes back to the queue (exit value 98), and once the
    retries are spent it is suspended (PSUSP) as any failing pre-exec is."""
    st = cluster(max_preexec_retry=2, preexec_timeout=30.0)
    submit(st, spec(pre_exec="wait-for-licence"))
    run(st, T0 + 1)
    st.apply(Finish(time=T0 + 32, job_id=1, attempt=1, host="n1", exit_code=PREEXEC_TIMEOUT_CODE,
                    reason=PREEXEC_TIMEOUT, started=T0 + 1))
    job = st.jobs[1]
    assert job.state == S.PEND and job.preexec_fails == 1
    assert job.reason == ('requeued: pre-execution command "wait-for-licence" ran past the queue\'s '
                          'preexec_timeout (30 s): killed, exit 98 (failure 1 of 2)')
    assert "started" not in [e.event for e in st.history[1]]  # its command never ran
    run(st, T0 + 40)
    st.apply(Finish(time=T0 + 71, job_id=1, attempt=2, host="n1", exit_code=PREEXEC_TIMEOUT_CODE,
                    reason=PREEXEC_TIMEOUT))
    assert job.state == S.PSUSP and job.reason.startswith(
        'held: pre-execution command "wait-for-licence" ran past the queue\'s preexec_timeout (30 s): killed, exit 98')
