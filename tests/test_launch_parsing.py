"""blaunch's words, srun's step plan and output names, the launch token: the pure parts of xce launch."""

from __future__ import annotations

from pathlib import Path

import pytest

from xce.client.launch import exit_status, launch_token, parse_blaunch
from xce.compat.session import Refused
from xce.compat.steps import Placed, caller_env, job_hosts, output_name, plan_step, step_env
from xce.core.errors import InvalidRequest, LaunchDenied
from xce.security.launch import derive_key, make_token, parse_token, verify_token


@pytest.mark.parametrize("words,hosts,command", [
    (["b", "hostname"], ["b"], ["hostname"]),
    (["-n", "b", "echo", "-n", "x"], ["b"], ["echo", "-n", "x"]),
    (["-z", "a b", "env"], ["a", "b"], ["env"]),
    (["-n", "-z", "a", "--", "-x"], ["a"], ["-x"]),
    (["-no-shell", "a", "true"], ["a"], ["true"]),
])
def test_blaunch_words(words: list[str], hosts: list[str], command: list[str]) -> None:
    assert parse_blaunch(words) == (hosts, command)


def test_blaunch_host_file(tmp_path: Path) -> None:
    (tmp_path / "hf").write_text("a\na\nb extra\n\n")
    assert parse_blaunch(["-u", str(tmp_path / "hf"), "true"]) == (["a", "a", "b"], ["true"])


@pytest.mark.parametrize("words,why", [
    ([], "no host given"), (["a"], "no command given"), (["-z"], "-z needs a value"),
    (["-q", "a", "b"], "unknown option -q"), (["-u", "/nonexistent", "x"], "cannot read host file /nonexistent"),
])
def test_blaunch_refusals(words: list[str], why: str) -> None:
    with pytest.raises(InvalidRequest, match=why):
        parse_blaunch(words)


def test_outside_a_job_there_is_no_token() -> None:
    with pytest.raises(InvalidRequest, match="not inside an XCE job: XCE_LAUNCH_TOKEN is not set"):
        launch_token({})
    assert launch_token({"XCE_LAUNCH_TOKEN": "1.1.ab"}) == "1.1.ab"


def test_the_exit_status_is_the_highest_and_a_lost_end_is_1() -> None:
    assert exit_status([0, 7, 3]) == 7 and exit_status([0, None]) == 1 and exit_status([]) == 0


def test_tokens_verify_under_their_key_only() -> None:
    key = derive_key("raft-password")
    assert key == derive_key(b"raft-password") and len(key) == 32
    token = make_token(key, 12, 3)
    assert verify_token(key, token) == (12, 3) and parse_token(token)[:2] == (12, 3)
    with pytest.raises(LaunchDenied, match="not valid for job 12"):
        verify_token(derive_key("other"), token)
    with pytest.raises(LaunchDenied):
        verify_token(key, token.replace("12.3.", "12.4."))
    assert derive_key("") != derive_key("")  # no shared secret: a key of this process only


H, S = ["a", "b", "c"], [2, 2, 1]


def ranks(plan: list[Placed]) -> list[tuple[str, int, int, int]]:
    return [tuple(p) for p in plan]  # type: ignore[misc]


def test_a_step_without_options_runs_a_task_per_slot() -> None:
    assert ranks(plan_step(H, S, None, None, None)) == [
        ("a", 0, 0, 0), ("a", 0, 1, 1), ("b", 1, 2, 0), ("b", 1, 3, 1), ("c", 2, 4, 0)]


def test_n_spreads_over_as_many_hosts_as_it_can() -> None:
    assert ranks(plan_step(H, S, 2, None, None)) == [("a", 0, 0, 0), ("b", 1, 1, 0)]
    assert ranks(plan_step(H, S, 4, None, None)) == [("a", 0, 0, 0), ("a", 0, 1, 1), ("b", 1, 2, 0), ("c", 2, 3, 0)]
    assert ranks(plan_step(H, S, 3, 1, None)) == [("a", 0, 0, 0), ("a", 0, 1, 1), ("a", 0, 2, 2)]


def test_ntasks_per_node_and_nodes() -> None:
    assert ranks(plan_step(H, S, None, 2, 1)) == [("a", 0, 0, 0), ("b", 1, 1, 0)]
    assert ranks(plan_step(H, S, None, None, 1)) == [("a", 0, 0, 0), ("b", 1, 1, 0), ("c", 2, 2, 0)]
    assert ranks(plan_step(H, S, 2, None, 3)) == [("a", 0, 0, 0), ("b", 1, 1, 0)]
    assert ranks(plan_step(H, S, None, 1, None)) == [("a", 0, 0, 0), ("a", 0, 1, 1)]


@pytest.mark.parametrize("args,why", [((None, 4, None), "-N 4: the job has 3 node"),
                                      ((0, None, None), "-n must be at least 1"),
                                      ((None, None, 0), "--ntasks-per-node must be at least 1")])
def test_a_step_the_job_cannot_hold_is_refused(args: tuple[int | None, ...], why: str) -> None:
    with pytest.raises(Refused, match=why):
        plan_step(H, S, *args)


def test_step_environment_and_output_names() -> None:
    plan = plan_step(H, S, 2, None, None)
    env = step_env(plan[1], plan)
    assert (env["SLURM_PROCID"], env["SLURM_LOCALID"], env["SLURM_NODEID"], env["SLURM_NTASKS"]) == ("1", "0", "1", "2")
    assert env["SLURM_STEP_NODELIST"] == "a,b" and env["SLURM_STEP_NUM_NODES"] == "2"
    assert output_name("o.%j.%t.%N.%n.%s.%%.%x", "12", plan[1], 1) == "o.12.1.b.1.0.%.%x"


def test_the_jobs_hosts_come_from_its_environment() -> None:
    assert job_hosts({"LSB_MCPU_HOSTS": "a 2 b 1"}) == (["a", "b"], [2, 1])
    with pytest.raises(Refused, match="not inside an XCE job"):
        job_hosts({})


def test_the_jobs_hosts_are_in_slurms_sorted_order_with_tasks_of_cpus_per_task_slots() -> None:
    """Rank 0 is on SLURM_NODEID 0: the first host of the sorted list, not of the allocation."""
    assert job_hosts({"LSB_MCPU_HOSTS": "n10 4 n2 2"}) == (["n2", "n10"], [2, 4])
    assert job_hosts({"LSB_MCPU_HOSTS": "n10 4 n2 2", "SLURM_CPUS_PER_TASK": "2"}) == (["n2", "n10"], [1, 2])
    plan = plan_step(*job_hosts({"LSB_MCPU_HOSTS": "n10 1 n2 1"}), None, None, None)
    assert [(p.host, p.node_id, p.proc_id) for p in plan] == [("n2", 0, 0), ("n10", 1, 1)]


def test_srun_passes_its_own_environment_but_for_what_each_host_sets() -> None:
    env = caller_env({"SUBMITIT_EXECUTOR": "slurm", "PATH": "/x", "SLURM_NODEID": "0", "LSB_HOSTS": "a",
                      "XCE_LAUNCH_TOKEN": "t"})
    assert env == {"SUBMITIT_EXECUTOR": "slurm", "PATH": "/x"}


def test_the_caller_polls_once_a_round_for_all_its_tasks() -> None:
    """srun of N tasks made N LAUNCH_POLLs a round; now one, naming the others in ``more``, each
    task's share of the bytes asked for shrinking with their number."""
    import io

    from xce.client.launch import CHUNK, TaskRun, run_tasks
    from xce.proto import schema as S
    from xce.proto.opcodes import Op

    class Leader:  # stands for the controller's answers only: what the client sends is under test
        def __init__(self) -> None:
            self.polls: list[S.LaunchPoll] = []
            self.started = 0

        def request(self, op: Op, body: object) -> S.LaunchReply:
            if op == Op.LAUNCH:
                self.started += 1
                return S.LaunchReply(job_id=1, host=body.host, task=self.started)  # type: ignore[attr-defined]
            assert isinstance(body, S.LaunchPoll)
            self.polls.append(body)
            round_ = len(self.polls)
            asked = [(body.host, body.task), *((t.host, t.task) for t in body.more)]
            return _answer(asked, round_)

    def _answer(asked: list[tuple[str, int]], round_: int) -> S.LaunchReply:
        replies = [S.LaunchReply(job_id=1, host=h, task=n, stdout=f"{h}{n}.{round_}\n".encode(),
                                 ended=round_ >= n + 1, exit_code=n if round_ >= n + 1 else None) for h, n in asked]
        replies[0].more = replies[1:]
        return replies[0]

    leader = Leader()
    outs = [io.BytesIO() for _ in range(3)]
    runs = [TaskRun(h, ["true"], stdout=o, stderr=io.BytesIO()) for h, o in zip(("a", "b", "a"), outs)]
    assert run_tasks(leader, runs, token="t", sleep=lambda s: None) == [1, 2, 3]
    assert [1 + len(p.more) for p in leader.polls] == [3, 3, 2, 1]  # one poll a round, the ended ones dropped
    assert leader.polls[0].max_bytes == CHUNK // 3 and leader.polls[-1].max_bytes == CHUNK
    assert outs[2].getvalue() == b"a3.1\na3.2\na3.3\na3.4\n"
