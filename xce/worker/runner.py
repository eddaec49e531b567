"""Runs jobs as processes on this host and keeps hold of them across worker restarts.

The worker daemon is only a message shell; everything that touches a job's
processes lives here: launching (session, user, cwd, env, output files),
reaping, killing with escalation, sampling (peak, slack integral, mem_limit)
and the on-disk state that lets a restarted worker re-attach.

Durable exit status.  A job that ends while no worker runs is reaped by init and
its status is gone, so every job runs under a tiny ``/bin/sh`` wrapper (no
Python per job)::

    trap k=1 TERM              # survive our SIGTERM to the group, to record the child's fate
    read -r _ || [ "$k" ] || exit 125   # fd 0: a pipe; wait until the runner placed us
    [ -z "$k" ] || { echo 143; exit 143; }  # killed before the command started
    exec 3>&1 </dev/null       # fd 1: the task record, opened O_APPEND by the runner
    command exec >>"$1" 2>>"$2" || { echo "126 cannot open ..." >&3; exit 126; }
    shift 2
    [ -z "$k" ] || { echo 143 >&3; exit 143; }  # killed meanwhile: still not started
    "$@" 3>&-
    s=$?; echo $s >&3; exit $s

The first three lines are the go (``GO``); the rest, ``_script``, is the body.  A
wrapper started before its job, the *spare* (xce/worker/spare.py), runs the same body
after sourcing the job's cwd, environment and arguments from the same pipe: its session
and cgroup cost 5-20 ms of waiting that a fresh wrapper pays between RUN_JOB and the
command.  The worker keeps one spare ready when idle (``prepare_spare``); a job it cannot
run exactly as a fresh wrapper would (another user, a variable sh treats as its own)
starts a fresh one.  The record names the job's cgroup (``cgroup``), a spare's or the key.

On-disk state, per task: ``tasks/<job>.<attempt>.rec`` holds one JSON line
(written by the runner before the go byte: pid, /proc start time, reservation,
paths, method) and then the wrapper's status line ``<code> [message]``; and
``tasks/<key>.upd`` (only once ``persist`` ran) holds what changes (kill reason,
peak, slack integral).  One file created per launch, since file creation is the
dearest step of a launch (~0.5 ms on this ext4 VM); ``forget`` removes them.
The record is handed to the wrapper as a descriptor, so the status line gets
written whatever user the job runs as and wherever state_dir is.  Descriptors are
passed as 0/1/2 because dash only knows single-digit descriptors.  The output
files are opened by the wrapper, i.e. as the job user, so a root worker never
appends to a file on a job's behalf; the runner only pre-opens them (same user)
or checks their directory (other user) to fail early with InvalidRequest.  The
pipe hold-back means a command never runs before its task record is on disk and
its session leader sits in its cgroup (moving a process does not move its
children).  If the worker dies during that instant, the wrapper sees EOF and
exits 125 without running the command.  One race remains: a SIGTERM landing
between the wrapper's fork and the command's exec is taken by the wrapper's trap
in the child and lost; the SIGKILL after the grace then ends the job (137).

Exit codes.  ``exit_code`` is the shell's view: the command's code, or 128+n
when it (or the wrapper) died of signal n, in which case ``signal`` is n.  A
command that itself calls ``exit 137`` therefore reads as SIGKILL; POSIX sh
cannot tell these apart.

When the wrapper exits, what is left of the job (background processes in its
process group or cgroup) is SIGKILLed: a finished job holds no memory.

Decisions: a command that is not found, a missing cwd or an unknown user raise
InvalidRequest at ``start`` (the wrapper would otherwise exit 127).  stdout
``None`` goes to ``<state_dir>/output/<job>.out``; stderr ``None`` goes where
stdout goes (as LSF -o without -e).  Both are appended, but for ``stdout_overwrite``/
``stderr_overwrite`` (-oo/-eo), which start the file anew.  A relative path is
relative to the job's cwd; ``%J`` is the job id, ``%I`` the array index (0 outside
an array).  An empty cwd means the job
user's home directory.  Without PATH in the job env, PATH is
``/usr/local/bin:/usr/bin:/bin``.  A root worker runs a job as ``spec.user``
(uid, gid, supplementary groups; HOME/USER/LOGNAME default to that user) and
the job's own output files are opened by the wrapper *as that user* so a job
can never append to a file only root may write; a non-root worker runs every
job as itself.

Job scripts.  A spec with ``script`` (kept as submitted) runs from a copy written into
the job's private directory (``job_dir``, mode 700, the job user's): under its ``#!``
line, else by /bin/sh, with ``command[1:]`` as its arguments (``script_argv``).

Parallel jobs.  Only the first host of an allocation runs the command; every other
host runs a *holder* (HOLD_COMMAND, no output, cwd /) that keeps the share's slot,
cgroup and record, reports 0 usage, and ends when the controller's kill arrives
(the job ended on its first host): ``share_outcome`` reports that end as clean.

Run limits and signals.  ``run_limit`` (-W) counts running time only
(``run_elapsed``: suspended time excluded); past it ``sample_all`` kills the task with
reason TERM_RUNLIMIT (SIGTERM, ``kill_grace``, SIGKILL).  ``send_signal`` sends any
signal to the group and cgroup; a stop signal pauses the run-limit clock until
SIGCONT, and the pause is saved in the ``.upd`` file so that ``adopt`` keeps it.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from resource import struct_rusage
from typing import Any, NamedTuple

import msgspec

from xce.core.accounting import pressure_victim, reserved_in_force, slack
from xce.core.errors import InvalidRequest
from xce.core.arrays import split_id
from xce.core.jobspec.filenames import lsf_filename
from xce.core.model import PREEXEC_TIMEOUT, PREEXEC_TIMEOUT_CODE, JobSpec
from xce.worker import spare
from xce.worker.spawn import Spawned, spawn
from xce.worker.tasks import Kept, Launched, keep, reap, share_sample, signal_tasks, tasks_in_grace
from xce.worker.tasks import adopt as adopt_tasks
from xce.worker.measure import (
    CgroupPool,
    Meter,
    ProcMeter,
    Sample,
    attach_meter,
    child_pids,
    proc_stat,
    sweep_cgroups,
)

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
# What a host other than a parallel job's first runs until `xce launch` starts a task there:
# a process that holds the share (its cgroup, its slot in the records) and does nothing.
HOLD_COMMAND = [shutil.which("sleep") or "/bin/sleep", "2147483647"]
STOP_SIGNALS = frozenset({signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU})
# Kills the worker decides for itself; any other kill of a holder is an order from the
# controller (the job ended on its first host, or was killed there), not the share's failure.
WORKER_KILLS = frozenset({"MEMLIMIT", "MEMPRESSURE", "RECLAIMED", "TERM_RUNLIMIT"})
FOUND_KEEP = 256  # commands whose file _check_command remembers
LOST_DOWN = "exit status lost: the worker was down when the job ended"
LOST_REAPED = "exit status lost: the job's process was reaped by someone else"
EnvOf = Callable[[str, "str | None"], dict[str, str]]  # (cwd, the -o path given) -> variables


@dataclass(eq=False)
class Task:
    """One attempt of one job on this host; identity is the object."""

    job_id: int
    attempt: int
    pid: int                      # the wrapper: session leader and process group id
    start_time: float
    key: str                      # "<job>.<attempt>"
    stdout: str
    stderr: str
    mem_limit: int | None
    reserved: int
    duration_s: int | None
    decay: bool
    meter: Meter
    last: Sample | None = None
    peak: int = 0
    slack_integral: float = 0.0   # byte-seconds of accounting.slack() since start
    kill_reason: str | None = None
    kill_deadline: float | None = None
    term_again_at: float | None = None  # a kill of a stopped job sends SIGTERM once more then
    adopted: bool = False
    proc_start: int = 0           # /proc/<pid>/stat field 22: guards against PID reuse
    ended: Exit | None = None     # set when poll() reported it; kept until forget()
    hard_killed: bool = False
    run_limit: float | None = None  # seconds of running (suspended time excluded); None: none
    warning: tuple[int, float, str] | None = None  # (signal, seconds before run_limit, to whom): --signal, -wa
    warned: bool = False            # the warning signal was sent (saved: a restarted worker sends it once)
    holder: bool = False            # a parallel job's share on a host other than the first
    reclaiming: bool = False        # runs on reclaimable memory: the first to go under pressure
    suspended_at: float | None = None  # when a stop signal was sent, while it holds
    suspended_total: float = 0.0       # seconds suspended before suspended_at
    cgroup: str = ""                   # its job cgroup's name: the key, or the spare's it ran in
    preexec_timeout: float | None = None  # seconds its -E may run (LSF JOB_PREPROC_TIMEOUT); None: no limit
    preexec_done: bool = False         # its -E ended well (the record says PREEXEC_DONE): the command runs
    # Its reservation in force once the leader shrank or restored it (RunJob.mem_in_force); None: the
    # placement's, decayed by duration=.  What the pressure kill and the slack integral read (``in_force``);
    # the MEMLIMIT kill stays mem_limit, the job's -M: a shrunk job may grow back to what it asked.
    in_force: int | None = None
    launched: list[Launched] = field(default_factory=list)  # what `xce launch` started in it (tasks.py)
    _proc: subprocess.Popen[bytes] | Spawned | None = field(default=None, repr=False)
    _last_t: float | None = field(default=None, repr=False)
    _last_slack: int = field(default=0, repr=False)
    _persisted: bool = field(default=False, repr=False)
    _alone: bool = field(default=False, repr=False)  # reaped, and nothing else was left in its cgroup


class Exit(NamedTuple):
    task: Task
    exit_code: int | None
    signal: int | None
    reason: str  # "" normal; the kill reason ("MEMLIMIT", ...); or "exit status lost: ..."


def in_force(task: Task, now: float) -> int:
    """The task's reservation in force: the leader's shrink or restore, else its placement's decayed by duration=."""
    if task.in_force is not None:
        return task.in_force
    return reserved_in_force(task.reserved, task.duration_s, task.decay, task.start_time, now)


def set_in_force(task: Task, mem: int | None) -> bool:
    """The leader told a running task its reservation in force (RunJob.mem_in_force); whether it moved."""
    if mem is None or mem == task.in_force:
        return False
    task.in_force = mem
    return True


def run_elapsed(start: float, now: float, suspended_total: float, suspended_at: float | None) -> float:
    """Seconds a job has been running: since its start, less the time it spent suspended
    (LSF's RUNLIMIT counts the same way, so a stopped job is not killed for its stop)."""
    current = now - suspended_at if suspended_at is not None else 0.0
    return max(0.0, now - start - suspended_total - current)


def over_run_limit(task: Task, now: float) -> bool:
    """Whether ``task`` ran past its run limit (holders never: the first host's share governs)."""
    return task.run_limit is not None and not task.holder and task.kill_reason is None \
        and run_elapsed(task.start_time, now, task.suspended_total, task.suspended_at) > task.run_limit


def preexec_overdue(task: Task, now: float) -> bool:
    """Whether the job's -E may have run past its timeout: wall time since the start, as LSF's
    JOB_PREPROC_TIMEOUT (the record says whether the -E has in fact ended: ``Runner.preexec_ended``)."""
    return task.preexec_timeout is not None and not task.preexec_done and task.kill_reason is None \
        and now - task.start_time > task.preexec_timeout


def warning_due(task: Task, now: float) -> bool:
    """Whether the job's warning signal (sbatch --signal, bsub -wa/-wt) is due: its run limit is
    at most its warning time away.  Without a run limit it never is, as in Slurm and LSF."""
    return task.warning is not None and not task.warned and task.run_limit is not None \
        and task.kill_reason is None \
        and run_elapsed(task.start_time, now, task.suspended_total, task.suspended_at) >= \
        task.run_limit - task.warning[1]


def share_outcome(ex: Exit) -> tuple[int | None, int | None, str]:
    """(exit code, signal, reason) to report for a share: a holder that the controller's order
    ended reports a clean end, as its job's outcome is its first host's."""
    t = ex.task
    if t.holder and t.kill_reason is not None and t.kill_reason not in WORKER_KILLS:
        return 0, None, ""
    return ex.exit_code, ex.signal, ex.reason


def holder_spec(spec: JobSpec) -> JobSpec:
    """The spec a holder runs: the job's user and limits, HOLD_COMMAND, no output, cwd /."""
    return msgspec.structs.replace(spec, command=list(HOLD_COMMAND), stdout=os.devnull, stderr=os.devnull,
                                   stdout_overwrite=False, stderr_overwrite=False, cwd="/", script="",
                                   pre_exec="")


def script_argv(script: str, path: str, args: list[str]) -> list[str]:
    """How a job script runs from its copy at ``path``: by its ``#!`` line (the kernel reads it), else
    /bin/sh, as LSF and sbatch run a script without one."""
    return [path, *args] if script.startswith("#!") else ["/bin/sh", path, *args]


def _decode_code(c: int) -> tuple[int, int | None]:
    return c, (c - 128 if 128 < c < 128 + signal.NSIG else None)


def _decode_wait(status: int) -> tuple[int, int | None]:
    if os.WIFSIGNALED(status):
        n = os.WTERMSIG(status)
        return 128 + n, n
    return _decode_code(os.WEXITSTATUS(status))


TERM_AGAIN_S = 0.2
# Signals a user sends a job (kill -s, scancel --signal, a warning) that would end the wrapper, not
# only the command, by default: the wrapper takes them (its command still gets them, with its own
# disposition) and lives on to record the command's fate.
TRAPPED = "HUP INT QUIT USR1 USR2 ALRM"


PREEXEC_DONE = "PREEXEC_DONE"  # what the wrapper writes to the record after a good -E (the status line follows)

GO = 'trap k=1 TERM\nread -r _ || [ "$k" ] || exit 125\n[ -z "$k" ] || { echo 143; exit 143; }\n'


def _script(out: str, err: str, sink: str, out_trunc: bool = False, err_trunc: bool = False,
            pre_exec: bool = False) -> str:
    """The wrapper's body after its go (GO, or a spare's program): fd 1 the task record, fd 2 the sink.

    Positional parameters: the output paths it opens (out, then err if different,
    both unless they are the sink), then the command.  ``*_trunc``: -oo/-eo open the
    file anew (``>``), -o/-e append (``>>``).  A TERM taken before the command runs
    ends the wrapper without running it (checked again just before, as the program of a
    spare runs longer between its go and its command).  ``pre_exec``: the first parameter after
    the paths is the job's -E, run by /bin/sh where the command would be; if it fails, the
    status line says PREEXEC_FAILED with its code and the command never runs.
    """
    redirs, n = [], 0
    if out == sink:
        redirs.append(">&2")
    else:
        n += 1
        redirs.append(f'{">" if out_trunc else ">>"}"${n}"')
    if err == out:
        redirs.append("2>&1")
    elif err != sink:
        n += 1
        redirs.append(f'2{">" if err_trunc else ">>"}"${n}"')
    return (f"trap : {TRAPPED}\n"
            "exec 3>&1 </dev/null\n"
            f"command exec {' '.join(redirs)} || "
            '{ echo "126 cannot open the output file as the job user" >&3; exit 126; }\n'
            f"shift {n}\n"
            + (_PRE_EXEC if pre_exec else "") +
            '[ -z "$k" ] || { echo 143 >&3; exit 143; }\n'
            '"$@" 3>&-\n'
            "s=$?\n"
            "echo $s >&3\n"
            "exit $s\n")


# The -E step of the wrapper: the command line (the first parameter) by /bin/sh, LSF's way.
# A good one leaves a line in the record, for a queue's preexec_timeout (the status line is the last).
_PRE_EXEC = ('[ -z "$k" ] || { echo 143 >&3; exit 143; }\n'
             '/bin/sh -c "$1" 3>&- || { s=$?; echo "$s PREEXEC_FAILED" >&3; exit $s; }\n'
             f'echo "0 {PREEXEC_DONE}" >&3\n'
             'shift\n')


class Launch(NamedTuple):
    """A wrapper started and held on its go pipe: what ``_go`` needs to let it run."""

    proc: subprocess.Popen[bytes] | Spawned
    rec_fd: int
    go_w: int
    meter: Meter
    cgroup: str       # the name of its job cgroup (a spare's, or the job key)
    proc_start: int
    go: bytes         # what the pipe gets: a go byte, or a spare's program


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _open_append(path: str) -> int:
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise InvalidRequest(f"cannot open output file {path}: {e.strerror}") from None


class Runner:
    """The live jobs of one worker and their on-disk records under ``state_dir``."""

    def __init__(self, worker_name: str, state_dir: Path, clock: Callable[[], float] = time.time,
                 kill_grace: float = 5.0) -> None:
        self.worker_name = worker_name
        # Job cgroups live under a directory named for this worker *instance*: two workers
        # with the same host name (two local clusters on one machine) must never sweep,
        # signal or measure each other's jobs.
        digest = hashlib.sha1(str(Path(state_dir).resolve()).encode()).hexdigest()[:8]
        self.cgroup_name = f"{worker_name}-{digest}"
        self.state_dir = Path(state_dir)
        self.clock = clock
        self.kill_grace = kill_grace
        self.task_dir = self.state_dir / "tasks"
        self._task_dir = str(self.task_dir)
        self.output_dir = self.state_dir / "output"
        for d in (self.task_dir, self.output_dir):
            d.mkdir(parents=True, exist_ok=True)
        self._tasks: dict[str, Task] = {}
        self._closing: list[Meter] = []  # cgroups that still had stragglers when closed
        self._pool = CgroupPool(self.cgroup_name)  # emptied job cgroups, for the next jobs
        self._spare: spare.Spare | None = None  # a wrapper waiting for its job (prepare_spare)
        self._euid = os.geteuid()
        try:
            self._own_name: str | None = pwd.getpwuid(self._euid).pw_name
        except KeyError:
            self._own_name = None
        self._found: dict[tuple[str, str], str] = {}  # (command, PATH) -> the file found (_check_command)
        self._hostfiles: dict[str, str] = {}  # hostfile text -> its shared file (``hostfile``)
        self.jobs_dir = str(self.state_dir / "jobs")
        self._stray: list[Launched] = []  # launched tasks of forgotten shares, killed, not yet reaped
        self.kept: dict[tuple[int, int], Kept] = {}  # launched tasks' output past their share (tasks.keep)

    # ------------------------------------------------------------------ launching

    def start(self, job_id: int, attempt: int, spec: JobSpec, reserved: int, duration_s: int | None,
              decay: bool, extra_env: dict[str, str] | EnvOf, *, index: int = 0, holder: bool = False,
              reclaiming: bool = False, preexec_timeout: float | None = None) -> Task:
        """Launch one attempt; the same (job, attempt) again returns the running task.

        ``extra_env``: variables over ``spec.env``, or a function of the resolved cwd and
        -o path that gives them (jobenv.job_env).  ``index``: the array index for ``%I``.
        ``holder``: run HOLD_COMMAND for a parallel job's share on a host other than its first.
        """
        key = f"{job_id}.{attempt}"
        if key in self._tasks:
            return self._tasks[key]
        if holder:
            spec = holder_spec(spec)
        if not spec.command or any(not isinstance(a, str) or "\0" in a for a in spec.command):
            raise InvalidRequest("the command must be a non-empty list of strings")
        pw = self._job_user(spec.user)
        cwd = spec.cwd or (pw.pw_dir if pw is not None else os.path.expanduser("~")) or "/"
        if not os.path.isdir(cwd):
            raise InvalidRequest(f"working directory {cwd} does not exist on this host")
        given_out = self._out_path(spec.stdout, job_id, index, cwd)
        extra = extra_env(cwd, given_out) if callable(extra_env) else extra_env
        env = {**spec.env, **extra}
        env.setdefault("PATH", DEFAULT_PATH)
        if pw is not None:
            env.setdefault("HOME", pw.pw_dir)
            env.setdefault("USER", pw.pw_name)
            env.setdefault("LOGNAME", pw.pw_name)
        command = self._script_copy(spec, job_id, attempt, pw) if spec.script else spec.command
        self._check_command(command[0], cwd, env["PATH"])

        default_out = str(self.output_dir / f"{job_id}.out")
        out = given_out or default_out
        err = self._out_path(spec.stderr, job_id, index, cwd) or out
        # The wrapper opens the output files itself, as the job user.  Only the default
        # file in our state_dir is opened here for a job running as another user, and
        # handed over as the wrapper's stderr ("sink").
        sink_path = default_out if pw is not None and default_out in (out, err) else os.devnull
        for path in {out, err} - {sink_path, default_out}:  # the default: our own directory, made at start
            if pw is None:
                os.close(_open_append(path))  # a clear error now rather than exit 126 later
            else:
                self._check_dir(path)
        body = _script(out, err, sink_path, spec.stdout_overwrite and out == given_out,
                       spec.stderr_overwrite and err != out, bool(spec.pre_exec))
        params = [p for p in dict.fromkeys((out, err)) if p != sink_path] + \
            ([spec.pre_exec] if spec.pre_exec else []) + command
        prog = spare.program(body, params, env, cwd) if pw is None and self._spare is not None else None
        if prog is not None and spare.usable(self._spare):  # type: ignore[arg-type]
            launch = self._take_spare(key, prog)
        else:
            launch = self._spawn(key, ["/bin/sh", "-c", GO + body, f"xce-job[{key}]", *params],
                                 cwd, env, sink_path, pw)
        return self._go(key, launch, Task(
            job_id=job_id, attempt=attempt, pid=launch.proc.pid, start_time=self.clock(), key=key,
            stdout=out, stderr=err, mem_limit=spec.mem_limit, reserved=reserved, duration_s=duration_s,
            decay=decay, meter=launch.meter, proc_start=launch.proc_start, run_limit=spec.run_limit,
            warning=(spec.warn_signal, spec.warn_time, spec.warn_to) if spec.warn_signal else None,
            holder=holder, reclaiming=reclaiming, cgroup=launch.cgroup, _proc=launch.proc,
            preexec_timeout=preexec_timeout if spec.pre_exec else None))

    def _spawn(self, key: str, argv: list[str], cwd: str, env: dict[str, str], sink_path: str,
               pw: pwd.struct_passwd | None) -> Launch:
        """A fresh wrapper for ``key``, held on its go pipe, in the job's cgroup."""
        extra: dict[str, object] = {}
        if pw is not None:
            extra = {"user": pw.pw_uid, "group": pw.pw_gid,
                     "extra_groups": os.getgrouplist(pw.pw_name, pw.pw_gid)}
        sink = os.open(sink_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        fds = [sink]
        try:
            rec_fd = os.open(self._rec(key),
                             os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC, 0o644)
            fds.append(rec_fd)
            go_r, go_w = os.pipe()
            fds += [go_r, go_w]
            proc: subprocess.Popen[bytes] | Spawned = \
                subprocess.Popen(argv, stdin=go_r, stdout=rec_fd, stderr=sink, cwd=cwd, env=env,
                                 start_new_session=True, **extra) if extra else \
                spawn(argv, env, cwd, go_r, rec_fd, sink)  # type: ignore[call-overload]
        except BaseException as e:
            for fd in fds:
                os.close(fd)
            self._rec_path(key).unlink(missing_ok=True)
            if isinstance(e, OSError) and len(fds) == 4:  # Popen itself: chdir, setuid, exec
                raise InvalidRequest(f"cannot start job {key}: {e}") from None
            raise
        os.close(sink)
        os.close(go_r)
        try:
            meter = self._pool.meter(key, proc.pid)
        except BaseException:
            self._abandon(key, Launch(proc, rec_fd, go_w, None, key, 0, b""))  # type: ignore[arg-type]
            raise
        st = proc_stat(proc.pid)
        return Launch(proc, rec_fd, go_w, meter, getattr(meter, "name", key), st.start if st else 0, b"\n")

    def _take_spare(self, key: str, prog: bytes) -> Launch:
        """The waiting spare becomes ``key``'s wrapper: its record file is renamed to the job's."""
        sp, self._spare = self._spare, None
        assert sp is not None
        os.rename(sp.rec_path, self._rec(key))
        return Launch(sp.proc, sp.rec_fd, sp.go_w, sp.meter, getattr(sp.meter, "name", sp.name), sp.proc_start, prog)

    def _go(self, key: str, launch: Launch, task: Task) -> Task:
        """Write the task record, then let the wrapper run the command."""
        try:
            os.write(launch.rec_fd, msgspec.json.encode(self._record(task)) + b"\n")
            _write_all(launch.go_w, launch.go)  # the command may run now
        except BaseException:
            self._abandon(key, launch)
            raise
        os.close(launch.go_w)
        os.close(launch.rec_fd)
        self._tasks[key] = task
        return task

    def _abandon(self, key: str, launch: Launch) -> None:
        """Undo a launch that failed before its go: EOF makes the wrapper exit without running anything."""
        os.close(launch.go_w)
        os.close(launch.rec_fd)
        launch.proc.wait()
        if launch.meter is not None:
            self._close_meter(launch.meter)
        self._rec_path(key).unlink(missing_ok=True)

    def wants_spare(self) -> bool:
        """Whether no spare wrapper waits (or the one there was killed)."""
        return self._spare is None or not spare.usable(self._spare)

    def prepare_spare(self) -> None:
        """Have a spare wrapper waiting (xce/worker/spare.py).  It blocks for the ~5-20 ms that
        session and cgroup cost, so the worker calls it when it has nothing else to do."""
        if self._spare is not None and not spare.usable(self._spare):
            self.discard_spare()
        if self._spare is None:
            self._spare = spare.start_spare(self.task_dir, self._pool.meter)

    def close(self) -> None:
        """The worker stops: end the spare, remove the kept job cgroups (running jobs keep theirs)."""
        self.discard_spare()
        self._closing += self._pool.drain()

    def discard_spare(self) -> None:
        """End the waiting spare, if any (the worker stops)."""
        sp, self._spare = self._spare, None
        if sp is not None:
            spare.discard(sp)
            self._close_meter(sp.meter)

    def hostfile(self, job_id: int, attempt: int, text: str, one_host: bool) -> str:
        """The path of a file holding ``text``, the job's LSB_DJOB_HOSTFILE.

        A one-host job's file depends on its slot count only, so such jobs share one file per
        text under ``hostfiles/`` (written once, read-only): a file and a directory made and
        removed per job were a fifth of the worker's CPU a job.  A parallel job's file is its own.
        """
        if not one_host:
            path = self.job_dir(job_id, attempt) / "hostfile"
            path.write_text(text)
            return str(path)
        shared = self._hostfiles.get(text)
        if shared is None:
            d = self.state_dir / "hostfiles"
            d.mkdir(exist_ok=True)
            final = d / hashlib.sha1(text.encode()).hexdigest()[:16]
            tmp = final.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(text)
            tmp.chmod(0o444)
            os.replace(tmp, final)  # whole or absent: a job started meanwhile by another worker reads it all
            shared = self._hostfiles[text] = str(final)
        return shared

    def job_dir(self, job_id: int, attempt: int) -> Path:
        """The job's private directory on this host (LSB_DJOB_HOSTFILE is there); ``forget`` removes it."""
        d = self.state_dir / "jobs" / f"{job_id}.{attempt}"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def _script_copy(self, spec: JobSpec, job_id: int, attempt: int, pw: pwd.struct_passwd | None) -> list[str]:
        """Write the job's script into its private directory (the job user's, mode 700); its argv."""
        path = self.job_dir(job_id, attempt) / "script"
        path.write_text(spec.script)
        path.chmod(0o700)
        if pw is not None:
            os.chown(path, pw.pw_uid, pw.pw_gid)
        return script_argv(spec.script, str(path), spec.command[1:])

    def _job_user(self, user: str) -> pwd.struct_passwd | None:
        """The account to switch to, or None to run as ourselves."""
        if not user or self._euid != 0 or user == self._own_name:  # ourselves: no lookup a job
            return None
        try:
            pw = pwd.getpwnam(user)
        except KeyError:
            raise InvalidRequest(f"user {user!r} does not exist on host {self.worker_name}") from None
        return None if pw.pw_uid == self._euid else pw

    def _check_command(self, exe: str, cwd: str, path: str) -> None:
        if "/" in exe:
            full = os.path.join(cwd, exe)
            if not os.path.isfile(full):
                raise InvalidRequest(f"command not found: {exe}")
            if not os.access(full, os.X_OK):
                raise InvalidRequest(f"command is not executable: {exe}")
            return
        # A search of PATH was ~0.05 ms of a launch; the file found last time is checked by one
        # access(2), and only a miss searches again (which file the wrapper's exec finds is its own).
        found = self._found.get((exe, path))
        if found is not None and os.access(found, os.X_OK):
            return
        found = shutil.which(exe, path=path)
        if found is None:
            self._found.pop((exe, path), None)
            raise InvalidRequest(f"command not found: {exe} (PATH={path})")
        if len(self._found) >= FOUND_KEEP:
            self._found.clear()
        self._found[(exe, path)] = found

    @staticmethod
    def _out_path(spec_path: str | None, job_id: int, index: int, cwd: str) -> str | None:
        if not spec_path:
            return None
        # %J of an array element is its array's id, as LSF (and LSB_JOBID) has it: out.%J.%I -> out.12.3
        return os.path.join(cwd, lsf_filename(spec_path, split_id(job_id)[0], index))

    @staticmethod
    def _check_dir(path: str) -> None:
        if not os.path.isdir(os.path.dirname(path) or "/"):
            raise InvalidRequest(f"directory of output file {path} does not exist")

    # --------------------------------------------------------------- persistence

    def _rec_path(self, key: str) -> Path:
        return self.task_dir / f"{key}.rec"

    def _rec(self, key: str) -> str:
        """``_rec_path`` as a string, for the launch and reap path (a Path costs a parse each)."""
        return f"{self._task_dir}/{key}.rec"

    def _upd_path(self, key: str) -> Path:
        return self.task_dir / f"{key}.upd"

    def _record(self, task: Task) -> dict[str, object]:
        return {"job": task.job_id, "attempt": task.attempt, "pid": task.pid,
                "proc_start": task.proc_start, "start_time": task.start_time, "stdout": task.stdout,
                "stderr": task.stderr, "mem_limit": task.mem_limit, "reserved": task.reserved,
                "duration_s": task.duration_s, "decay": task.decay, "method": task.meter.method,
                "run_limit": task.run_limit, "holder": task.holder, "reclaiming": task.reclaiming,
                "cgroup": task.cgroup, "warning": task.warning, "preexec_timeout": task.preexec_timeout}

    def persist(self, task: Task) -> None:
        """Save what changes while a task runs (kill reason, peak, slack integral).

        Done at kill(); call it more often if restarts should lose less.  The
        immutable part was written once at start, in the record file.
        """
        upd = {"kill_reason": task.kill_reason, "peak": task.peak,
               "slack_integral": task.slack_integral, "saved_at": self.clock(),
               "suspended_at": task.suspended_at, "suspended_total": task.suspended_total,
               "warned": task.warned, "in_force": task.in_force}
        path = self._upd_path(task.key)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(upd))
        os.replace(tmp, path)
        task._persisted = True

    def forget(self, task: Task) -> None:
        """The exit was reported and acknowledged: drop the task and its files."""
        self._tasks.pop(task.key, None)
        if task.launched:
            signal_tasks(task, signal.SIGKILL)
            self._stray += [t for t in task.launched if not t.ended]
            keep(self, task)  # output its callers have not read yet outlives the share's directory
        try:
            os.unlink(self._rec(task.key))
        except FileNotFoundError:
            pass
        private = f"{self.jobs_dir}/{task.key}"
        if os.path.lexists(private):  # most jobs have none (hostfile), and rmtree's miss costs more
            shutil.rmtree(private, ignore_errors=True)
        if task._persisted:
            self._upd_path(task.key).unlink(missing_ok=True)
        if not (task._alone and not task.launched and self._pool.give_back(task.meter)):
            self._close_meter(task.meter)

    def _read_record(self, key: str) -> tuple[dict[str, Any], str]:
        """The record's JSON and the wrapper's status line ("" while it runs)."""
        text = self._rec_path(key).read_text()
        head, _, status = text.partition("\n")
        return json.loads(head), status.strip()

    def adopt(self) -> list[Task]:
        """Re-attach to the tasks recorded in state_dir; returns those still running.

        Tasks that ended while no worker ran are reported by the next poll().
        Job cgroups of this worker without a record are emptied and removed.
        """
        alive: list[Task] = []
        for path in sorted(self.task_dir.glob("*.rec")):
            key = path.name[:-4]
            if key in self._tasks:
                continue
            try:
                rec, _ = self._read_record(key)
                pid, start = int(rec["pid"]), int(rec["proc_start"])
            except (OSError, ValueError, KeyError):
                path.unlink(missing_ok=True)  # torn write: the wrapper never got its go
                continue
            try:
                upd = json.loads(self._upd_path(key).read_text())
            except (OSError, ValueError):
                upd = {}
            st = proc_stat(pid)
            live = st is not None and st.start == start and st.state not in "ZX"
            cgroup = rec.get("cgroup") or key
            meter: Meter = attach_meter(cgroup, pid, self.cgroup_name, rec.get("method", "proc"), start) \
                if live else ProcMeter(pid, start)
            task = Task(job_id=rec["job"], attempt=rec["attempt"], pid=pid, start_time=rec["start_time"],
                        key=key, stdout=rec["stdout"], stderr=rec["stderr"], mem_limit=rec["mem_limit"],
                        reserved=rec["reserved"], duration_s=rec["duration_s"], decay=rec["decay"],
                        meter=meter, peak=upd.get("peak", 0), slack_integral=upd.get("slack_integral", 0.0),
                        kill_reason=upd.get("kill_reason"), adopted=True, proc_start=start,
                        run_limit=rec.get("run_limit"), holder=rec.get("holder", False),
                        warning=tuple(rec["warning"]) if rec.get("warning") else None,  # type: ignore[arg-type]
                        warned=upd.get("warned", False),
                        reclaiming=rec.get("reclaiming", False),
                        suspended_at=upd.get("suspended_at"), suspended_total=upd.get("suspended_total", 0.0),
                        cgroup=cgroup, _last_t=upd.get("saved_at"), _persisted=bool(upd),
                        preexec_timeout=rec.get("preexec_timeout"), in_force=upd.get("in_force"))
            self._tasks[key] = task
            adopt_tasks(self, task)
            if live:
                alive.append(task)
                if task.kill_reason is not None:  # killed before the restart: finish the job
                    task.kill_deadline = self.clock() + self.kill_grace
                    self._signal(task, signal.SIGTERM)
        self._closing += sweep_cgroups(self.cgroup_name, {t.cgroup for t in alive} | {
            t.cgroup for t in self._tasks.values() if not t.adopted})
        for p in self.task_dir.iterdir():
            if p.suffix in (".upd", ".tmp") and p.stem not in self._tasks:
                p.unlink(missing_ok=True)
        return alive

    # ------------------------------------------------------------------ watching

    def tasks(self) -> list[Task]:
        """The running tasks: those whose exit poll() has not reported yet."""
        return [t for t in self._tasks.values() if t.ended is None]

    def find(self, job_id: int, attempt: int) -> Task | None:
        """Any task not yet forgotten, running or ended and awaiting acknowledgement."""
        return self._tasks.get(f"{job_id}.{attempt}")

    def watching(self) -> bool:
        """Whether ``poll`` has work that no SIGCHLD announces: an adopted task (not our child), a
        kill whose SIGTERM or SIGKILL is due at a time, launched or stray tasks, cgroups still closing."""
        return bool(self._stray or self._closing) or any(
            t.launched or (t.ended is None and (t.adopted or t.kill_deadline is not None or t.term_again_at is not None))
            for t in self._tasks.values())

    def poll(self) -> list[Exit]:
        """Report tasks that ended since the last call (each once); escalate overdue kills."""
        now = self.clock()
        exits: list[Exit] = []
        if self._stray:
            reap(self._stray)
            self._stray = [t for t in self._stray if not t.ended]
        for task in list(self._tasks.values()):
            if task.launched:
                reap(task.launched)
                if tasks_in_grace(task, now):
                    continue  # killed: its tasks get the grace too, though a holder's sleep died at once
            if task.ended is not None:
                continue
            ex = self._own_exit(task) if not task.adopted else self._adopted_exit(task)
            if ex is None:
                if task.term_again_at is not None and now >= task.term_again_at:
                    task.term_again_at = None
                    self._signal(task, signal.SIGTERM)
                if task.kill_deadline is not None and now >= task.kill_deadline and not task.hard_killed:
                    task.hard_killed = True
                    self._signal(task, signal.SIGKILL)
                continue
            task.ended = ex
            exits.append(ex)
        if self._closing:
            self._closing = [m for m in self._closing if not self._close_meter(m, retry=True)]
        return exits

    def _own_exit(self, task: Task) -> Exit | None:
        try:
            info = os.waitid(os.P_PID, task.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return self._finish(task, None, None)
        if info is None:
            return None
        # The zombie still holds its pid, so the group id cannot have been reused.
        left = self._signal(task, signal.SIGKILL, leftovers=True)
        task._alone = left is not None and all(p == task.pid for p in left)  # empty once it is reaped
        try:
            _, status, ru = os.wait4(task.pid, 0)
        except ChildProcessError:
            return self._finish(task, None, None)
        if task._proc is not None:
            task._proc.returncode = status  # we reaped it: keep Popen from ever waiting on the pid
        return self._finish(task, status, ru)

    def _adopted_exit(self, task: Task) -> Exit | None:
        st = proc_stat(task.pid)
        if st is not None and st.start == task.proc_start:
            if st.state not in "ZX":
                return None
            self._signal(task, signal.SIGKILL, leftovers=True)
            try:
                os.waitpid(task.pid, os.WNOHANG)  # ours only if the old runner lived in this process
            except ChildProcessError:
                pass
        elif st is None:
            # No process has that pid, so the number cannot be anybody's group id but ours.
            self._signal(task, signal.SIGKILL, leftovers=True)
        else:
            self._signal_cgroup(task, signal.SIGKILL)
        return self._finish(task, None, None)

    def _finish(self, task: Task, status: int | None, ru: struct_rusage | None) -> Exit:
        code: int | None
        sig: int | None
        code, sig, note = None, None, ""
        text = ""
        # A clean exit of our own child has nothing to add (the wrapper notes only failures).
        try:
            if status != 0:
                with open(self._rec(task.key), "rb") as f:  # the status line only: no JSON to parse
                    text = f.read().decode(errors="replace").partition("\n")[2].strip()
        except OSError:
            pass
        if text:
            first, _, note = text.rpartition("\n")[2].partition(" ")  # the last line: after PREEXEC_DONE
            try:
                code, sig = _decode_code(int(first))
            except ValueError:
                note = ""
        if status is not None:
            code, sig = _decode_wait(status)
        final = None if task.holder and not task.launched else getattr(task.meter, "final", lambda: None)()
        cpu = task.last.cpu_time if task.last else 0.0
        if final is not None:
            task.peak = max(task.peak, final.peak)
            cpu = max(cpu, final.cpu_time)
        if ru is not None and task.meter.method == "proc":
            # ru_maxrss is not used: after vfork+exec it carries the worker's own RSS.
            cpu = max(cpu, ru.ru_utime + ru.ru_stime)
        task.last = Sample(task.last.rss if task.last else 0, task.peak, cpu, task.meter.method)
        if task.kill_reason is not None:
            reason = task.kill_reason
            if reason == PREEXEC_TIMEOUT:
                code, sig = PREEXEC_TIMEOUT_CODE, None  # LSF's exit value for it, not the SIGKILL's
            elif code is None and task.hard_killed:
                code, sig = 128 + signal.SIGKILL, signal.SIGKILL
        elif code is None:
            reason = LOST_DOWN if task.adopted else LOST_REAPED
        else:
            reason = note
        task.kill_deadline = None
        # The cgroup is removed by ``forget``, after the end is reported: its rmdir waits for
        # the kernel (an RCU grace period, several ms after a quiet spell) and sat between the
        # job's exit and the JOB_FINISHED that ends it.
        return Exit(task, code, sig, reason)

    def _close_meter(self, meter: Meter, retry: bool = False) -> bool:
        meter.close()
        done = getattr(meter, "closed", True)
        if not done and not retry and meter not in self._closing:
            self._closing.append(meter)
        return done

    # ---------------------------------------------------------------- measuring

    def sample_all(self, now: float) -> list[tuple[Task, Sample]]:
        """Sample every running task; integrate slack; kill tasks above their mem_limit."""
        out: list[tuple[Task, Sample]] = []
        for task in list(self._tasks.values()):
            if task.ended is not None:
                continue
            if over_run_limit(task, now):
                self.kill(task, "TERM_RUNLIMIT")
            elif preexec_overdue(task, now) and not self.preexec_ended(task):
                self.kill(task, PREEXEC_TIMEOUT, grace=0)  # LSF kills the pre-exec's whole process group
            elif warning_due(task, now):
                self.warn(task)
            # A holder's own process is no use of the host: its share reports 0 until a task runs there.
            s = share_sample(task)
            if s is None:
                continue
            task.peak = max(task.peak, s.peak)
            sl = slack(in_force(task, now), s.rss)
            t0 = task._last_t if task._last_t is not None else task.start_time
            prev = task._last_slack if task.last is not None else sl
            if now > t0:
                task.slack_integral += (now - t0) * (prev + sl) / 2
            task._last_t, task._last_slack, task.last = now, sl, s
            out.append((task, s))
            if task.mem_limit is not None and s.rss > task.mem_limit:
                self.kill(task, "MEMLIMIT")
        return out

    def preexec_ended(self, task: Task) -> bool:
        """Whether the job's -E has ended well (the wrapper's PREEXEC_DONE line), or the job has:
        read once its timeout has passed, so a job whose -E ended in time costs one read."""
        try:
            with open(self._rec(task.key), "rb") as f:
                task.preexec_done = PREEXEC_DONE.encode() in f.read().partition(b"\n")[2]
        except OSError:
            task.preexec_done = True  # no record: nothing of the job's to time out
        return task.preexec_done

    def largest_overage(self) -> Task | None:
        """The pressure victim (accounting.pressure_victim): a reclaiming task first, else the running
        task furthest above its reservation in force; None if every task is within its own."""
        now = self.clock()
        running = [t for t in self._tasks.values() if t.ended is None and t.last is not None]
        return pressure_victim(
            ((t, t.last.rss - in_force(t, now))
             for t in running if t.last is not None),
            {t for t in running if t.reclaiming})

    # ------------------------------------------------------------------ killing

    def kill(self, task: Task, reason: str, grace: float | None = None) -> None:
        """SIGTERM the job's group (and cgroup), SIGKILL after ``grace``; idempotent.

        The first reason sticks; a later call may only shorten the grace.
        """
        if task.ended is not None or task.hard_killed:
            return
        now = self.clock()
        g = self.kill_grace if grace is None else grace
        if task.kill_reason is None:
            task.kill_reason = reason
            self.persist(task)
        if g <= 0:
            task.hard_killed = True
            task.kill_deadline = now
            self._signal(task, signal.SIGKILL)
        elif task.kill_deadline is None:
            task.kill_deadline = now + g
            self._signal(task, signal.SIGTERM)
            if task.suspended_at is not None:
                self._signal(task, signal.SIGCONT)  # a stopped process takes SIGTERM only once continued
                # A command stopped between its shell's vfork and exec takes that SIGTERM in the
                # shell's own handler (the wrapper traps TERM), and its exec drops it: send it again
                # once the command has run on to its exec.
                task.term_again_at = now + TERM_AGAIN_S
        else:
            task.kill_deadline = min(task.kill_deadline, now + g)

    def warn(self, task: Task) -> None:
        """Send the job its warning signal, once (JobSpec.warn_to says to whom): its command alone
        (Slurm's ``B:``, the batch shell), the tasks srun or blaunch started in it (Slurm's default:
        the steps, not the batch shell), or all its processes (LSF's -wa; the wrapper takes it,
        TRAPPED, and lives on).  A holder share has no command of the job's: only its tasks."""
        assert task.warning is not None
        sig, _, to = task.warning
        task.warned = True
        self.persist(task)
        self.deliver(task, sig, to)

    def deliver(self, task: Task, sig: int, to: str) -> None:
        """``sig`` to whom ``to`` names (JobSpec.warn_to's words, KillRequest.to): the batch shell
        alone (the wrapper's child), the launched tasks (the steps), or "" every process."""
        if to == "steps" or task.holder:
            if to != "batch":
                signal_tasks(task, sig)
        elif to == "batch":
            for pid in child_pids(task.pid):  # the wrapper's child: the command it runs
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        else:
            self._signal(task, sig)

    def send_signal(self, task: Task, sig: int, to: str = "") -> bool:
        """Send ``sig`` to the job's processes here (``xce stop/resume``, ``kill -s``); whether it
        is suspended after.  A stop starts the pause of its run-limit clock, SIGCONT ends it;
        both are saved, so a restarted worker still knows (``adopt``).  ``to`` (scancel's
        steps or -b's batch shell) signals only those: the job as a whole is not stopped."""
        if task.ended is None and to:
            self.deliver(task, sig, to)
        elif task.ended is None:
            now = self.clock()
            self._signal(task, sig)
            if sig in STOP_SIGNALS and task.suspended_at is None:
                task.suspended_at = now
                self.persist(task)
            elif sig == signal.SIGCONT and task.suspended_at is not None:
                task.suspended_total += now - task.suspended_at
                task.suspended_at = None
                self.persist(task)
        return task.suspended_at is not None

    def _signal(self, task: Task, sig: int, leftovers: bool = False) -> list[int] | None:
        """Signal the process group and every process in the job's cgroup; those processes
        (None: its cgroup could not be read).

        ``leftovers``: the caller has established that the pid is not reused.
        """
        if not leftovers and task.adopted:
            st = proc_stat(task.pid)
            ok = st is None or st.start == task.proc_start
        else:
            ok = True
        if ok:
            try:
                os.killpg(task.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        in_cgroup = self._signal_cgroup(task, sig)
        signal_tasks(task, sig)
        return in_cgroup

    @staticmethod
    def _signal_cgroup(task: Task, sig: int) -> list[int] | None:
        members = getattr(task.meter, "members", None)
        pids: list[int] | None = members() if members is not None else getattr(task.meter, "pids", list)()
        for pid in pids or ():
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        return pids
