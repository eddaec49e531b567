"""Starting a job wrapper as the worker's own user: ``os.posix_spawn`` in place of ``Popen``.

``subprocess.Popen`` spent ~0.15-0.2 ms of the worker's CPU a launch in its own Python (its
checks, the environment's encoding, its error pipe) around a vfork that costs ~0.08 ms;
``posix_spawn`` does the same vfork and exec from C (docs/benchmarks.md, "Launch and reap").
What Popen did for the wrapper, this does too:

- the child's descriptors 0, 1, 2 are the given ones, and no other reaches the job (Popen's
  ``close_fds``): the worker's own are close-on-exec (Python opens them so, and libzmq its
  sockets), and any inheritable one (a library's, a test harness's) is closed in the child,
  found in /proc/self/fd (~15 us);
- a new session (``setsid``);
- SIGPIPE and SIGXFSZ back to their defaults (Python ignores both; Popen's
  ``restore_signals``), so a job in a pipeline dies of SIGPIPE as it would from a shell.
  (glibc's posix_spawn leaves its two internal signals, 32 and 33, ignored in the child, as
  in any program it starts; glibc programs set their own handlers for them);
- the working directory: Python 3.11's ``posix_spawn`` has no ``cwd``, so the worker changes
  its own directory around the call and back (it is single-threaded where it matters: no other
  thread of the worker uses a relative path).

A job run as another user still starts through Popen (user, group, supplementary groups).
"""

from __future__ import annotations

import os
import signal

RESET = (signal.SIGPIPE, signal.SIGXFSZ)


class Spawned:
    """The child, with the part of Popen's interface the runner uses."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return None
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int | None:
        if self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
                self.returncode = os.waitstatus_to_exitcode(status)
            except ChildProcessError:
                pass
        return self.returncode


def spawn(argv: list[str], env: dict[str, str], cwd: str, stdin: int, stdout: int, stderr: int) -> Spawned:
    """Start ``argv`` in ``cwd`` in a session of its own with the three descriptors; OSError as Popen."""
    home = os.open(".", os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECTORY)
    try:
        os.chdir(cwd)
        try:
            pid = os.posix_spawn(argv[0], argv, env, setsid=True, setsigdef=RESET, file_actions=[
                (os.POSIX_SPAWN_DUP2, stdin, 0), (os.POSIX_SPAWN_DUP2, stdout, 1), (os.POSIX_SPAWN_DUP2, stderr, 2),
                *((os.POSIX_SPAWN_CLOSE, fd) for fd in _inheritable())])
        finally:
            os.fchdir(home)
    finally:
        os.close(home)
    return Spawned(pid)


def _inheritable() -> list[int]:
    """This process's descriptors above 2 that an exec would pass on."""
    out = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd > 2 and os.get_inheritable(fd):
                out.append(fd)
        except OSError:  # the listing's own descriptor, closed by now
            pass
    return out
