"""How much memory and CPU a running job uses, measured on this host.

This module owns the choice of *how* a job is measured, so the runner and the
worker daemon never care whether the kernel gives us a cgroup or only /proc:

* ``cgroup2`` / ``cgroup1``: the job's session leader is moved into a fresh
  cgroup ``<worker's own cgroup>/xce-<worker>/<job key>`` before the command
  runs, so every descendant is counted, including ones that double-fork out of
  the session, and the kernel keeps a high-water mark between our samples.
* ``proc``: no writable memory cgroup (non-root, or a controller we may not
  touch): walk the session's process tree through
  ``/proc/<pid>/task/<tid>/children``, one ``/proc/<pid>/stat`` read per
  process.

"rss" means the same thing for every method: memory the job holds that the
kernel cannot simply drop, comparable to the sum of the processes' RSS, and
free of page cache (a job writing a 10 GB file must not look 10 GB big; that
cache is reclaimable and already counted in MemAvailable):

* cgroup1: ``total_rss + total_mapped_file`` of memory.stat (anonymous incl.
  swap cache and THP, plus mapped files/shmem).  Swap is not counted.
* cgroup2: ``anon + file_mapped`` of memory.stat (same meaning).
* proc:    sum of field 24 (rss) of /proc/<pid>/stat over the tree; pages
  shared between the job's processes (forked copy-on-write, shared libraries)
  count once per process, so this reads somewhat higher than a cgroup would.

"peak" is the maximum of the sampled rss, and for cgroups also the kernel's
high-water mark (memory.max_usage_in_bytes / memory.peak) minus the unmapped
page cache present now; this catches spikes between samples without charging
page cache (it can overestimate if cache was reclaimed after the spike).

"cpu_time" is user+system seconds of the whole job so far: cpuacct.usage
(cgroup1, when the cpuacct hierarchy is writable) or cpu.stat usage_usec
(cgroup2); otherwise utime+stime+cutime+cstime of the live processes of the
tree (children's times arrive when their parent reaps them), kept monotonic.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import signal
from pathlib import Path
from typing import NamedTuple, Protocol

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = float(os.sysconf("SC_CLK_TCK"))


class Sample(NamedTuple):
    rss: int         # bytes
    peak: int        # bytes, max so far
    cpu_time: float  # seconds, user+system, whole job so far
    method: str      # "cgroup2" | "cgroup1" | "proc"


class Meter(Protocol):
    method: str

    def sample(self) -> Sample | None:
        """Current usage; None when the job's processes are all gone."""

    def close(self) -> None:
        """Remove the cgroup made for the job, if any (killing stragglers in it)."""


# --------------------------------------------------------------------------- host

def _readb(path: str | Path) -> bytes:
    """Read a small kernel file with bare syscalls (about a third of open().read())."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunk = os.read(fd, 65536)
        if len(chunk) < 65536:
            return chunk
        parts = [chunk]
        while chunk:
            chunk = os.read(fd, 65536)
            parts.append(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)


def _meminfo(field: bytes) -> int:
    for line in _readb("/proc/meminfo").splitlines():
        if line.startswith(field):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/meminfo has no {field!r}")


def os_available() -> int:
    """MemAvailable in bytes: what the kernel could hand out without swapping."""
    return _meminfo(b"MemAvailable:")


@functools.cache
def mem_total() -> int:
    return _meminfo(b"MemTotal:")


# --------------------------------------------------------------------- /proc tree

class ProcStat(NamedTuple):
    state: str
    threads: int
    cpu_ticks: int   # utime + stime + cutime + cstime
    start: int       # field 22, clock ticks after boot: guards against PID reuse
    rss: int         # bytes


def proc_stat(pid: int) -> ProcStat | None:
    """Parse /proc/<pid>/stat; None if the process is gone."""
    try:
        data = _readb(f"/proc/{pid}/stat")
    except OSError:
        return None
    # comm (field 2) may hold spaces and parentheses: split after the last ')'
    rest = data[data.rindex(b")") + 2:].split()
    # rest[0] is field 3 (state); field n is rest[n - 3]
    return ProcStat(
        state=chr(rest[0][0]),
        threads=int(rest[17]),
        cpu_ticks=int(rest[11]) + int(rest[12]) + int(rest[13]) + int(rest[14]),
        start=int(rest[19]),
        rss=int(rest[21]) * PAGE,
    )


def proc_start_time(pid: int) -> int | None:
    st = proc_stat(pid)
    return None if st is None else st.start


def _children(pid: int, threads: int) -> list[int]:
    names = [str(pid)] if threads <= 1 else _listdir(f"/proc/{pid}/task")
    out: list[int] = []
    for tid in names:
        try:
            out.extend(map(int, _readb(f"/proc/{pid}/task/{tid}/children").split()))
        except OSError:
            pass
    return out


def child_pids(pid: int) -> list[int]:
    """The children of a single-threaded process (a job's wrapper shell)."""
    return _children(pid, 1)


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


class ProcMeter:
    """Measures the process tree below a session leader by walking /proc."""

    method = "proc"

    def __init__(self, pid: int, start: int | None = None) -> None:
        self.pid = pid
        self.start = start if start is not None else proc_start_time(pid)
        self.peak = 0
        self.cpu_time = 0.0
        self.closed = True

    def sample(self) -> Sample | None:
        lead = proc_stat(self.pid)
        if lead is None or lead.start != self.start or lead.state in "ZX":
            return None
        rss, ticks = 0, 0
        stack, seen = [(self.pid, lead)], {self.pid}
        while stack:
            pid, st = stack.pop()
            rss += st.rss
            ticks += st.cpu_ticks
            for child in _children(pid, st.threads):
                if child not in seen:
                    seen.add(child)
                    cst = proc_stat(child)
                    if cst is not None:
                        stack.append((child, cst))
        self.cpu_time = max(self.cpu_time, ticks / TICK)
        self.peak = max(self.peak, rss)
        return Sample(rss, self.peak, self.cpu_time, self.method)

    def final(self) -> Sample | None:
        return None

    def pids(self) -> list[int]:
        return []

    def close(self) -> None:
        pass


# ------------------------------------------------------------------------ cgroups

def _read(path: Path) -> str:
    return _readb(path).decode()


def _stat_fields(text: str, *names: str) -> list[int]:
    vals = dict.fromkeys(names, 0)
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if k in vals:
            vals[k] = int(v)
    return [vals[n] for n in names]


def _mounts() -> list[tuple[str, str, str, str]]:
    """(mount root, mount point, fs type, super options) of cgroup mounts."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            parts, fs = pre.split(), post.split()
            if fs and fs[0] in ("cgroup", "cgroup2"):
                out.append((parts[3], parts[4].replace("\\040", " "), fs[0], fs[2] if len(fs) > 2 else ""))
    return out


def _own_cgroups() -> dict[str, str]:
    """controller (or "" for v2) -> this process's cgroup path."""
    out = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            for c in ctrls.split(",") if ctrls else [""]:
                out[c] = path
    return out


def _join(mount_root: str, mount_point: str, cg_path: str) -> Path | None:
    if mount_root != "/":
        if cg_path != mount_root and not cg_path.startswith(mount_root + "/"):
            return None
        cg_path = cg_path[len(mount_root):] or "/"
    p = Path(mount_point + cg_path.rstrip("/")) if cg_path != "/" else Path(mount_point)
    return p if p.is_dir() else None


def _v1_dir(controller: str) -> Path | None:
    own = _own_cgroups()
    if controller not in own:
        return None
    for root, point, fs, opts in _mounts():
        if fs == "cgroup" and controller in opts.split(","):
            return _join(root, point, own[controller])
    return None


@functools.cache
def detect_cgroup() -> tuple[str, Path] | None:
    """The worker's own memory cgroup, if we may create job cgroups below it.

    cgroup2 is preferred when its memory controller is enabled for our children;
    we never enable controllers on our own cgroup (that is the admin's or
    systemd's, e.g. Delegate=yes).  Else a writable cgroup-v1 memory hierarchy.
    """
    own = _own_cgroups()
    if "" in own:
        for root, point, fs, _ in _mounts():
            if fs != "cgroup2":
                continue
            d = _join(root, point, own[""])
            try:
                if d is not None and os.access(d, os.W_OK) and \
                        "memory" in _read(d / "cgroup.subtree_control").split():
                    return ("cgroup2", d)
            except OSError:
                pass
    d = _v1_dir("memory")
    if d is not None and os.access(d, os.W_OK) and (d / "memory.stat").exists():
        return ("cgroup1", d)
    return None


@functools.cache
def _cpuacct_dir() -> Path | None:
    d = _v1_dir("cpuacct")
    return d if d is not None and os.access(d, os.W_OK) else None


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@-]", "_", name) or "_"


def worker_cgroup_dirs(worker_name: str) -> list[Path]:
    """Existing ``xce-<worker>`` directories (memory, and cpuacct for v1)."""
    det = detect_cgroup()
    if det is None:
        return []
    bases = [det[1]]
    cpu = _cpuacct_dir() if det[0] == "cgroup1" else None
    if cpu is not None:
        bases.append(cpu)
    dirs = [b / f"xce-{_safe(worker_name)}" for b in bases]
    return [d for d in dirs if d.is_dir()]


def _procs(d: Path) -> list[int]:
    try:
        return [int(x) for x in _read(d / "cgroup.procs").split()]
    except (OSError, ValueError):
        return []


def _rmdir(d: Path) -> bool:
    """Remove a cgroup directory; if busy, SIGKILL what is in it and say False (retry later)."""
    try:
        os.rmdir(d)
    except FileNotFoundError:
        return True
    except OSError as e:
        if e.errno != errno.EBUSY:
            raise
        for pid in _procs(d):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return False
    return True


class CgroupMeter:
    """Measures one job cgroup (plus, for v1, its cpuacct twin)."""

    def __init__(self, method: str, mem: Path, cpu: Path | None, pid: int) -> None:
        self.method = method
        self.mem = mem
        self.cpu = cpu
        self.name = mem.name  # the job cgroup's name, which the task record keeps for re-attach
        self.pid = pid
        self.peak = 0
        self.cpu_time = 0.0
        self.closed = False
        self._v1 = method == "cgroup1"
        # Paths as strings, made once: a Path join per read was a tenth of a launch's Python.
        self._stat = f"{mem}/memory.stat"
        self._procs = f"{mem}/cgroup.procs"
        self._peak_file = f"{mem}/memory.max_usage_in_bytes" if self._v1 else f"{mem}/memory.peak"
        self._cpu_file = f"{cpu}/cpuacct.usage" if cpu is not None else None
        self._has_peak = os.path.exists(self._peak_file)

    def pids(self) -> list[int]:
        return self.members() or []

    def members(self) -> list[int] | None:
        """The processes in the cgroup; None: it could not be read (not: it is empty)."""
        try:
            return [int(x) for x in _readb(self._procs).split()]
        except (OSError, ValueError):
            return None

    def _read_counters(self) -> Sample:
        text = _readb(self._stat).decode()
        if self._v1:
            anon, mapped, cache = _stat_fields(text, "total_rss", "total_mapped_file", "total_cache")
        else:
            anon, mapped, cache = _stat_fields(text, "anon", "file_mapped", "file")
        rss = anon + mapped
        peak = max(self.peak, rss)
        if self._has_peak:
            try:
                peak = max(peak, int(_readb(self._peak_file)) - max(0, cache - mapped))
            except (OSError, ValueError):
                pass
        self.peak = peak
        cpu = self._cpu()
        if cpu is not None:
            self.cpu_time = max(self.cpu_time, cpu)
        return Sample(rss, peak, self.cpu_time, self.method)

    def _cpu(self) -> float | None:
        try:
            if not self._v1:
                return _stat_fields(_read(self.mem / "cpu.stat"), "usage_usec")[0] / 1e6
            if self._cpu_file is not None:
                return int(_readb(self._cpu_file)) / 1e9
        except (OSError, ValueError):
            return None
        ticks = 0
        for pid in self.pids():
            st = proc_stat(pid)
            if st is not None:
                ticks += st.cpu_ticks
        return ticks / TICK

    def sample(self) -> Sample | None:
        try:
            os.kill(self.pid, 0)  # the session leader is alive (or a zombie): skip cgroup.procs
        except ProcessLookupError:
            if not self.pids():
                return None
        except PermissionError:
            pass
        try:
            return self._read_counters()
        except (OSError, ValueError):
            return None

    def final(self) -> Sample | None:
        """Counters after the job ended: the kernel peak and total CPU survive it."""
        try:
            return self._read_counters()
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        if self.closed:
            return
        done = _rmdir(self.mem)
        if self.cpu is not None:
            done = _rmdir(self.cpu) and done
        self.closed = done

    def reset(self) -> None:
        """Zero what the kernel counts for a job (v1: the high-water mark, back to the few pages
        still charged, and the CPU), so that the emptied cgroup can measure the next one."""
        _write(self._peak_file, "0")
        if self._cpu_file is not None:
            _write(self._cpu_file, "0")

    def take(self, pid: int) -> None:
        """Move the held session leader ``pid`` in: this cgroup now measures its job."""
        _write(self._procs, str(pid))
        if self.cpu is not None:
            _write(f"{self.cpu}/cgroup.procs", str(pid))
        self.pid, self.peak, self.cpu_time = pid, 0, 0.0


class CgroupPool:
    """Emptied job cgroups of this worker, kept for its next jobs (cgroup v1 only).

    Making a job's two cgroups (memory, cpuacct) and removing them after cost ~0.35 ms of the
    worker's CPU a job, plus the kernel's own teardown, against ~0.08 ms to reset the counters
    of an empty one (docs/benchmarks.md, "Launch and reap").  A cgroup comes back only when
    its job left no process in it (``give_back``): nothing of the last job is measured in the
    next but the page cache it left charged, which rss and peak leave out (the module's
    docstring).  v2's ``memory.peak`` cannot be reset on every kernel, so v2 cgroups are never
    pooled.  The record of a task names the cgroup it runs in, so re-attach finds it by name.
    """

    def __init__(self, worker_name: str, keep: int = 8) -> None:
        self.worker_name = worker_name
        self.keep = keep
        self.free: dict[str, CgroupMeter] = {}

    def meter(self, job_key: str, pid: int) -> Meter:
        """A meter for ``pid``'s session: an emptied cgroup if one waits, else a new one
        (``make_meter``).  A free cgroup named ``job_key`` itself is taken first: a new one of
        that name would be the same directory."""
        while self.free:
            m = self.free.pop(job_key, None) or self.free.pop(next(iter(self.free)))
            try:
                m.take(pid)
                return m
            except OSError:  # removed meanwhile (a sweep): drop it, try the next
                m.close()
        return make_meter(job_key, pid, self.worker_name)

    def give_back(self, meter: Meter) -> bool:
        """Keep an emptied job's cgroup for the next job; False: the caller closes it."""
        if not isinstance(meter, CgroupMeter) or not meter._v1 or meter.closed or len(self.free) >= self.keep:
            return False
        try:
            meter.reset()
        except OSError:
            return False
        self.free[meter.name] = meter
        return True

    def drain(self) -> list[Meter]:
        """Remove every kept cgroup (the worker stops); the ones still busy, to close again."""
        kept, self.free = list(self.free.values()), {}
        for m in kept:
            m.close()
        return [m for m in kept if not m.closed]


def _write(path: Path, data: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, data.encode())
    finally:
        os.close(fd)


def _job_dir(base: Path, worker_name: str, job_key: str, v2: bool) -> tuple[Path, bool]:
    """``base/xce-<worker>/<job>``, made if missing; True if this call made it."""
    wdir = base / f"xce-{_safe(worker_name)}"
    d = wdir / _safe(job_key)
    try:
        d.mkdir()
        return d, True
    except FileExistsError:
        return d, False
    except FileNotFoundError:  # first job of this worker: make its own cgroup first
        wdir.mkdir(exist_ok=True)
        if v2 and "memory" not in _read(wdir / "cgroup.subtree_control").split():
            _write(wdir / "cgroup.subtree_control", "+memory")
        d.mkdir(exist_ok=True)
        return d, True


def _enter(base: Path, worker_name: str, job_key: str, pid: int, v2: bool) -> Path:
    d, made = _job_dir(base, worker_name, job_key, v2)
    try:
        _write(d / "cgroup.procs", str(pid))
    except OSError:
        if made:
            _rmdir(d)
        raise
    return d


def make_meter(job_key: str, pid: int, worker_name: str) -> Meter:
    """A meter for the session led by ``pid``; moves it into a job cgroup if we can.

    Call before the session leader forks anything (the runner holds it on a pipe
    until this returns), since moving a process does not move its children.  An
    existing job cgroup of the same key (re-attaching after a restart) is reused.
    Falls back to a /proc meter when any cgroup step fails.
    """
    det = detect_cgroup()
    if det is not None:
        method, base = det
        try:
            mem = _enter(base, worker_name, job_key, pid, method == "cgroup2")
        except OSError:
            return ProcMeter(pid)
        cpu = None
        cbase = _cpuacct_dir() if method == "cgroup1" else None
        if cbase is not None:
            try:
                cpu = _enter(cbase, worker_name, job_key, pid, False)
            except OSError:
                pass  # CPU then comes from /proc for the processes in the memory cgroup
        return CgroupMeter(method, mem, cpu, pid)
    return ProcMeter(pid)


def attach_meter(job_key: str, pid: int, worker_name: str, method: str, start: int) -> Meter:
    """Re-attach to a job measured by ``method`` before a worker restart, moving nothing."""
    det = detect_cgroup()
    if det is not None and det[0] == method:
        mem = det[1] / f"xce-{_safe(worker_name)}" / _safe(job_key)
        if mem.is_dir():
            cbase = _cpuacct_dir() if method == "cgroup1" else None
            cpu = cbase / f"xce-{_safe(worker_name)}" / _safe(job_key) if cbase is not None else None
            return CgroupMeter(method, mem, cpu if cpu is not None and cpu.is_dir() else None, pid)
    return ProcMeter(pid, start)


class StaleCgroup:
    """A job cgroup whose job is over but whose processes were still dying."""

    method = "stale"

    def __init__(self, d: Path) -> None:
        self.d = d
        self.closed = False

    def sample(self) -> Sample | None:
        return None

    def close(self) -> None:
        self.closed = self.closed or _rmdir(self.d)


def sweep_cgroups(worker_name: str, keep: set[str]) -> list[StaleCgroup]:
    """Remove job cgroups of this worker whose key is not in ``keep``; their jobs are over.

    Returns the ones still busy (their processes were just SIGKILLed): close()
    them again later.
    """
    busy = []
    keep_names = {_safe(k) for k in keep}
    for wdir in worker_cgroup_dirs(worker_name):
        for d in wdir.iterdir():
            if d.is_dir() and d.name not in keep_names and not _rmdir(d):
                busy.append(StaleCgroup(d))
    return busy
