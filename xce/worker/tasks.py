"""Tasks that `xce launch` (blaunch, srun inside a job) starts inside a job's share on this host.

A task belongs to its share (``runner.Task.launched``): it runs as the job's user with the
job's environment on this host (xce/worker/jobenv.py, plus what the launch adds, such as
SLURM_PROCID), and its usage is the share's, so it lands on this host's account:

- with a job cgroup, the task's session leader is moved into the *share's* cgroup before
  it runs anything (the same go pipe as a job's wrapper holds it until then), and the
  share's cgroup sample holds the task and everything it forks;
- with the /proc walk, the share's sample adds each task's own tree (``share_sample``);
  a holder share (a parallel job's host other than the first) reports 0 of its own, so
  there the tasks are the whole of it.

A task ends with its share: every signal the runner sends the share (kill, stop, the
SIGKILL of leftovers when the share's process exits) also reaches each task's process
group (``signal_tasks``).  A killed share's end waits for its tasks within the kill's grace
(``tasks_in_grace``), so a task that takes its SIGTERM to clean up has the time a job has,
even on a holder host, whose own ``sleep`` dies at once.  Its stdout and stderr go to two files in the job's private
directory (``<job_dir>/tasks/<n>.out|.err``), read from offsets by the worker for the
caller (``read_output``) and removed with the share (``Runner.forget``); its exit code is
the wrapper's status line, as a job's.

Across a worker restart: each task's record (``<n>.rec``: a JSON line written before its
go, then the wrapper's status line) lets the new worker re-attach to it with its share
(``adopt``): its output and exit code are served again, it is measured and signalled with
the share, and its end is seen when its pid is gone or a zombie (it is no longer our child,
so the code comes from the record; a task killed without writing one reads as lost).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from xce.core.errors import InvalidRequest, NoShare
from xce.worker.measure import CgroupMeter, ProcMeter, Sample, proc_stat

if TYPE_CHECKING:
    from xce.worker.runner import Runner, Task


@dataclass(eq=False)
class Launched:
    """One task started in a share; ``n`` numbers it within the share from 1."""

    n: int
    key: str                 # the caller's idempotency key: a retried start returns this task
    pid: int                 # its wrapper: session leader and process group
    stdout: str
    stderr: str
    record: str              # the wrapper writes the exit status here
    meter: ProcMeter
    in_cgroup: bool          # moved into the share's cgroup (measured there)
    proc_start: int = 0      # /proc start time of ``pid``: guards an adopted task against pid reuse
    adopted: bool = False    # re-attached by a restarted worker: not our child, never reaped here
    cpu_ended: float = 0.0   # its CPU seconds once it ended (its /proc tree is gone then)
    ended: bool = False
    exit_code: int | None = None
    signal: int | None = None
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)


KEEP_S = 60.0  # seconds an ended share's tasks' output is kept for callers still relaying it


@dataclass(eq=False)
class Kept:
    """The tasks of a share that ended, their output moved out of its directory, until ``until``."""

    launched: list[Launched]
    path: str
    until: float


def find(share: Task, n: int) -> Launched | None:
    return next((t for t in share.launched if t.n == n), None)


def keep(runner: Runner, share: Task) -> None:
    """Before the share's directory goes: move its tasks' files aside for KEEP_S, so output the
    caller had not polled when the share ended (its job killed, its command ended) still reaches it."""
    _prune(runner)
    src = Path(runner.jobs_dir) / share.key / "tasks"
    dst = runner.state_dir / "ended-tasks" / share.key
    if not runner.kept and dst.parent.is_dir():  # what an earlier worker kept and did not live to drop
        shutil.rmtree(dst.parent, ignore_errors=True)
    try:
        dst.parent.mkdir(exist_ok=True)
        os.replace(src, dst)
    except OSError:
        return  # no task files (or no room): nothing to keep
    for t in share.launched:
        t.stdout, t.stderr = (str(dst / Path(p).name) for p in (t.stdout, t.stderr))
    runner.kept[(share.job_id, share.attempt)] = Kept(list(share.launched), str(dst), runner.clock() + KEEP_S)


def kept_task(runner: Runner, job_id: int, attempt: int, n: int) -> Launched | None:
    """Task ``n`` of a share that ended, while its output is kept."""
    _prune(runner)
    k = runner.kept.get((job_id, attempt))
    return next((t for t in k.launched if t.n == n), None) if k is not None else None


def _prune(runner: Runner) -> None:
    if not runner.kept:
        return
    now = runner.clock()
    for key, k in list(runner.kept.items()):
        if now >= k.until:
            del runner.kept[key]
            shutil.rmtree(k.path, ignore_errors=True)


def start_task(runner: Runner, share: Task, key: str, command: list[str], cwd: str,
               env: dict[str, str], user: str) -> Launched:
    """Start ``command`` in ``share``; the same ``key`` again returns the task it started."""
    # here, not at the top: the runner imports this module (a task runs the runner's own wrapper)
    from xce.worker.runner import DEFAULT_PATH, GO, _script

    for t in share.launched:
        if t.key == key:
            return t
    if share.ended is not None or share.kill_reason is not None:
        raise NoShare(f"job {share.job_id}'s share on {runner.worker_name} is ending")
    pw = runner._job_user(user)
    cwd = cwd or (pw.pw_dir if pw is not None else os.path.expanduser("~")) or "/"
    note = ""
    if not os.path.isdir(cwd):  # as LSF runs a job whose cwd its host lacks: in /tmp, saying so
        note = f"xce launch: directory {cwd} does not exist on host {runner.worker_name}: the task runs in /tmp\n"
        cwd = "/tmp"
    env.setdefault("PATH", DEFAULT_PATH)
    if pw is not None:
        env.setdefault("HOME", pw.pw_dir)
        env.setdefault("USER", pw.pw_name)
        env.setdefault("LOGNAME", pw.pw_name)
    runner._check_command(command[0], cwd, env["PATH"])
    n = len(share.launched) + 1
    d = task_dir(runner, share, pw)
    out, err, rec = (str(d / f"{n}.{x}") for x in ("out", "err", "rec"))
    if note:
        _note(err, note, pw)
    proc, go_w, rec_fd = _spawn(["/bin/sh", "-c", GO + _script(out, err, os.devnull),
                                 f"xce-task[{share.key}.{n}]", out, err, *command], cwd, env, rec, pw)
    in_cgroup = join_cgroup(share, proc.pid)
    st = proc_stat(proc.pid)
    task = Launched(n=n, key=key, pid=proc.pid, stdout=out, stderr=err, record=rec, proc_start=st.start if st else 0,
                    meter=ProcMeter(proc.pid, st.start if st else None), in_cgroup=in_cgroup, _proc=proc)
    try:  # the record first (what a restarted worker re-attaches by), then the go
        os.write(rec_fd, json.dumps({"n": n, "key": key, "pid": task.pid, "proc_start": task.proc_start,
                                     "in_cgroup": in_cgroup}).encode() + b"\n")
        os.write(go_w, b"\n")  # the command may run now
    finally:
        os.close(go_w)
        os.close(rec_fd)
    share.launched.append(task)
    return task


def _note(path: str, text: str, pw: object) -> None:
    """Start a task's stderr file with ``text``, the file the job's user then appends to."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, text.encode())
        if pw is not None:
            os.fchown(fd, pw.pw_uid, pw.pw_gid)  # type: ignore[attr-defined]
    finally:
        os.close(fd)


def task_dir(runner: Runner, share: Task, pw: object) -> Path:
    d = runner.job_dir(share.job_id, share.attempt) / "tasks"
    if not d.is_dir():
        d.mkdir()
        if pw is not None:  # the wrapper opens the output files as the job's user
            os.chown(d, pw.pw_uid, pw.pw_gid)  # type: ignore[attr-defined]
    return d


def _spawn(argv: list[str], cwd: str, env: dict[str, str], rec: str,
           pw: object) -> tuple[subprocess.Popen[bytes], int, int]:
    """The task's wrapper, in a session of its own, held on its go pipe; (process, the pipe's write end,
    its record's descriptor)."""
    extra: dict[str, object] = {}
    if pw is not None:
        extra = {"user": pw.pw_uid, "group": pw.pw_gid,  # type: ignore[attr-defined]
                 "extra_groups": os.getgrouplist(pw.pw_name, pw.pw_gid)}  # type: ignore[attr-defined]
    rec_fd = os.open(rec, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC, 0o644)
    go_r, go_w = os.pipe()
    try:
        proc = subprocess.Popen(argv, stdin=go_r, stdout=rec_fd, stderr=subprocess.DEVNULL, cwd=cwd, env=env,
                                start_new_session=True, **extra)  # type: ignore[call-overload]
    except OSError as e:
        os.close(go_w)
        os.close(rec_fd)
        raise InvalidRequest(f"cannot start the task: {e}") from None
    finally:
        os.close(go_r)
    return proc, go_w, rec_fd


def join_cgroup(share: Task, pid: int) -> bool:
    """Move the held task into the share's cgroup; False when the share has none (or the move failed)."""
    m = share.meter
    if not isinstance(m, CgroupMeter):
        return False
    try:
        for d in (m.mem, m.cpu):
            if d is not None:
                fd = os.open(d / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
                try:
                    os.write(fd, str(pid).encode())
                finally:
                    os.close(fd)
    except OSError:
        return False
    return True


def signal_tasks(share: Task, sig: int) -> None:
    """Send ``sig`` to every running task's process group (the share's signals reach its tasks)."""
    for t in share.launched:
        signal_task(t, sig)


def signal_task(t: Launched, sig: int) -> None:
    """Send ``sig`` to the task's process group, if it still runs (LAUNCH_POLL's ``signal``)."""
    if not t.ended and _ours(t):
        try:
            os.killpg(t.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _ours(t: Launched) -> bool:
    """Whether ``t.pid`` still names the task's group (an adopted task's pid may have been reused)."""
    if not t.adopted:
        return True  # our child: its pid stays ours until we reap it
    st = proc_stat(t.pid)
    return st is None or st.start == t.proc_start


def reap(launched: list[Launched]) -> None:
    """Collect the tasks that ended: their exit status; what they left is killed."""
    for t in launched:
        if t.ended:
            continue
        if t.adopted:
            _reap_adopted(t)
            continue
        try:
            info = os.waitid(os.P_PID, t.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            info = None
            status = None
        else:
            if info is None:
                continue
            try:  # the zombie holds its pid, so the group id is still the task's
                os.killpg(t.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            _, status = os.waitpid(t.pid, 0)
        if t._proc is not None and status is not None:
            t._proc.returncode = status  # reaped here: Popen must never wait on the pid
        _finish(t, status)


def _reap_adopted(t: Launched) -> None:
    """An adopted task (another worker process started it): ended once its pid is gone or a zombie."""
    st = proc_stat(t.pid)
    if st is not None and st.start == t.proc_start and st.state not in "ZX":
        return
    if st is None or st.start == t.proc_start:
        try:
            os.killpg(t.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    _finish(t, None)


def _finish(t: Launched, status: int | None) -> None:
    t.ended = True
    t.cpu_ended = t.meter.cpu_time
    try:
        status_line = Path(t.record).read_text().partition("\n")[2].strip()
        code = int(status_line.split()[0]) if status_line else None
    except (OSError, ValueError):
        code = None
    if code is None and status is not None:
        code = os.waitstatus_to_exitcode(status)
        code = 128 - code if code < 0 else code
    t.exit_code = code
    t.signal = code - 128 if code is not None and 128 < code < 128 + signal.NSIG else None


def adopt(runner: Runner, share: Task) -> None:
    """Re-attach a restarted worker to the tasks of ``share`` from their records (their output and
    exit code are served again; they are signalled and measured with the share)."""
    d = runner.state_dir / "jobs" / share.key / "tasks"
    recs = []
    for path in d.glob("*.rec") if d.is_dir() else ():
        try:
            head = json.loads(path.read_text().partition("\n")[0])
            recs.append((int(head["n"]), str(head["key"]), int(head["pid"]), int(head["proc_start"]),
                         bool(head.get("in_cgroup")), path))
        except (OSError, ValueError, KeyError):
            continue  # torn: the worker died before the task's go, so it never ran
    cgroup = isinstance(share.meter, CgroupMeter)
    for n, key, pid, start, in_cgroup, path in sorted(recs):
        t = Launched(n=n, key=key, pid=pid, stdout=str(d / f"{n}.out"), stderr=str(d / f"{n}.err"),
                     record=str(path), meter=ProcMeter(pid, start), in_cgroup=in_cgroup and cgroup,
                     proc_start=start, adopted=True)
        share.launched.append(t)
    reap(share.launched)


def tasks_in_grace(share: Task, now: float) -> bool:
    """Whether the share is being killed and some task still runs within the kill's grace: its end
    (and the SIGKILL of what is left, tasks included) waits until they ended or the grace ran out."""
    return share.ended is None and share.kill_deadline is not None and now < share.kill_deadline \
        and not share.hard_killed and any(not t.ended for t in share.launched)


def share_sample(share: Task) -> Sample | None:
    """The share's usage with its tasks': its cgroup holds them, or their /proc trees are added."""
    method = share.meter.method
    if not share.launched:
        return Sample(0, 0, 0.0, method) if share.holder else share.meter.sample()
    cgroup = isinstance(share.meter, CgroupMeter)
    base = share.meter.sample() if cgroup or not share.holder else Sample(0, 0, 0.0, method)
    if base is None:
        return None
    rss, cpu = base.rss, base.cpu_time
    for t in share.launched:
        if t.in_cgroup:
            continue
        if t.ended:
            cpu += t.cpu_ended
            continue
        s = t.meter.sample()
        if s is not None:
            rss += s.rss
            cpu += s.cpu_time
    return Sample(rss, max(base.peak, rss, share.peak), cpu, method)


def read_output(t: Launched, out_at: int, err_at: int, max_bytes: int) -> tuple[bytes, bytes, bool]:
    """(stdout past ``out_at``, stderr past ``err_at``, and whether the task ended and both reads
    reached the end of their files: the caller then has everything)."""
    ended = t.ended  # read first: output written before the end is in the files when they are read
    out, out_all = _read_from(t.stdout, out_at, max_bytes)
    err, err_all = _read_from(t.stderr, err_at, max_bytes)
    return out, err, ended and out_all and err_all


def _read_from(path: str, offset: int, max_bytes: int) -> tuple[bytes, bool]:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(max_bytes)
            return data, not f.read(1)
    except OSError:
        return b"", True
