"""What `xce up` and `xce down` ask of the running local cluster, as any client would.

``kill_running_jobs``: `xce down --kill-jobs` kills every job that has processes (RUN and
the suspended states) and waits until each has ended, so none is left an orphan; pending
jobs stay queued for the next `up`.  ``retire_hosts``: `xce up` removes the hosts of an
earlier layout (``xce hosts remove``), each once no job runs there any more.

Both talk to the controller through xce.client with the local admin's token; neither
touches a process or a file of the cluster.

Lazy imports: the client loads only when `xce up`/`down` talk to the cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path

from xce.client import Client
from xce.core.errors import Conflict, NotFound, XceError
from xce.core.model import ACTIVE

WITH_PROCESSES = sorted(s.value for s in ACTIVE)  # PSUSP is pending: it has no process
KILL_REASON = "killed by xce down --kill-jobs"


def kill_running_jobs(state_dir: Path, timeout: float = 30.0) -> list[int]:
    """Kill the jobs that have processes and wait until each has ended; their ids.

    Raises Conflict naming the jobs that had not ended by ``timeout``.
    """
    with Client(state_dir=state_dir, timeout=10) as c:
        ids = [j.id for j in c.jobs(states=list(WITH_PROCESSES))]
        if not ids:
            return []
        c.kill(ids, reason=KILL_REASON)
        deadline = time.monotonic() + timeout
        left = ids
        while left and time.monotonic() < deadline:
            time.sleep(0.1)  # a poll with a deadline: the kill travels to the workers and back
            left = [j.id for j in c.jobs(left, all=True) if j.state not in ("DONE", "EXIT")]
    if left:
        raise Conflict(f"job(s) {' '.join(map(str, left))} still running after {timeout:g} s "
                               "of being killed; the cluster is left up")
    return ids


def stale_hosts(registered: Iterable[str], layout: Iterable[str]) -> list[str]:
    """The registered hosts this run of `xce up` did not start: an earlier layout's."""
    keep = set(layout)
    return sorted(h for h in registered if h not in keep)


def retire_hosts(state_dir: Path, layout: list[str], until: float,
                 say: Callable[[str], None] = lambda m: print(m, flush=True)) -> list[str]:
    """Remove every host registered at the start and outside ``layout``, each once.

    A host of an earlier layout with jobs on it is lost ``controller.lost_after`` after the
    controller's grace, and its jobs are requeued or end EXIT (queue policy); it is
    removable then, so such hosts are retried.  Each is removed once: a worker that
    registers again afterwards was started by someone on purpose.  Gives up at ``until``
    (monotonic) and returns the hosts left.
    """
    left: list[str] | None = None  # None: not known yet
    while time.monotonic() < until:
        try:
            with Client(state_dir=state_dir, timeout=5) as c:
                if left is None:
                    left = _stale_once_applied(c, layout)
                for name in list(left or ()):
                    try:
                        c.host_admin([name], "remove")
                        say(f"xce: retired host {name} (not in this layout)")
                    except NotFound:
                        pass  # removed meanwhile
                    except Conflict:
                        continue  # jobs still run there: next pass
                    left.remove(name)
        except XceError:
            pass  # the controller is not ready yet
        if left == []:
            return []
        time.sleep(0.5)  # poll with a deadline: the old hosts' jobs end on the controller's clock
    return left or []


def _stale_once_applied(c: Client, layout: list[str]) -> list[str] | None:
    """The stale hosts, once the leader has applied every entry it has committed; None before.

    Right after a restart the leader may still be applying the restored log, and a host
    list read then could miss hosts of the earlier layout.
    """
    s = c.status()
    me = next((x for x in s.controllers if x.role == "leader"), None)
    if me is None or me.applied_index < me.commit_index:
        return None
    return stale_hosts((h.name for h in c.hosts()), layout)
