"""xce.client: the Python scripting API over ZeroMQ (also what the CLI uses).

    from xce.client import Client
    with Client() as c:                       # finds a local `xce up` by itself
        ids = c.submit_many([{"command": ["true"], "resreq": "rusage[mem=10]"}] * 100)
        c.wait(ids)
        for ev in c.events(): ...

Endpoints come from, in order: the ``endpoint`` argument, ``XCE_CONTROLLER``
(comma-separated for several controllers), the cluster file a local ``xce up``
wrote in the state directory (``--state-dir``/``XCE_STATE_DIR``), the defaults.
Requests follow the Raft leader by themselves (xce.transport.connection).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec

from xce.client.follow import EventFollower
from xce.client.waiting import Waiting
from xce.core.errors import InvalidRequest
from xce.core.jobspec.build import STDIN_NAME
from xce.core.model import TERMINAL, HistEvent, JobSpec, check_spec, spec_bytes
from xce.core.units import parse_mem
from xce.core.views import ArrayView, HostView, JobView
from xce.proto import schema as S
from xce.proto import writes
from xce.proto.opcodes import Op
from xce.security.curve import client_keys
from xce.site.config import cluster_config, default_state_dir, endpoints_of
from xce.site.local import CLUSTER_FILE, stored_token_if_fresh, unix_user
from xce.transport.connection import Connection

ARRAY_RECHECK = 0.1  # s after an element's end before its array's summary is asked (bounds the asks)
SETTLE_MS = 500  # the most ``wait`` waits for its subscription to be live before it reads the states

__all__ = ["CLUSTER_FILE", "Client", "Connection", "cluster_config", "endpoints_of", "make_spec", "unix_user"]


class Client:
    def __init__(self, endpoint: str | Sequence[str] | None = None, state_dir: str | Path | None = None,
                 token: str | None = None, timeout: float = 10.0) -> None:
        self.cfg = cluster_config(state_dir)
        if endpoint is None:
            env = os.environ.get("XCE_CONTROLLER")
            endpoints = env.split(",") if env else endpoints_of(self.cfg)
        else:
            endpoints = [endpoint] if isinstance(endpoint, str) else list(endpoint)
        self.events_endpoint = self.cfg.controller.pub_address
        if token is None:
            sd = self.cfg.state_dir or (state_dir if state_dir else default_state_dir())
            token = stored_token_if_fresh(sd)
            if token is None:
                # JWT and crypto, ~150 ms of imports: only when a token must be minted
                from xce.security.auth import cli_token

                token = cli_token(sd)
        tok = token

        self.curve = client_keys(self.cfg)  # None when the cluster runs without CURVE
        self.conn = Connection(endpoints, tok, timeout, curve=self.curve)
        self.staleness: S.Staleness | None = None  # of the last stale_ok read; None when fresh

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    def request(self, op: Op, body: Any = None, timeout: float | None = None) -> Any:
        return self.conn.request(op, body if body is not None else S.Empty(), timeout)

    # ---- jobs ----

    def submit(self, command: Sequence[str] | str, **fields: Any) -> int:
        return self.submit_many([{"command": command, **fields}])[0]

    def submit_script(self, script: str, args: Sequence[str] = (), **fields: Any) -> int:
        """A job script, kept as submitted and run under its ``#!`` line or /bin/sh with ``args``
        (its ``#BSUB`` lines are not read here: ``fields`` are the job's; `xce submit` reads them)."""

        return self.submit([STDIN_NAME, *args], script=script, **fields)

    def submit_many(self, jobs: Sequence[JobSpec | dict[str, Any]], dry_run: bool = False,
                    key: str | None = None) -> list[int]:
        """Submit jobs at once (all or none); ``key`` to make a retry of your own safe too."""
        # asked once for the batch, not once a job (gethostname is a system call)
        defaults = {"user": unix_user(), "cwd": os.getcwd(), "submit_host": socket.gethostname()}
        specs = _specs(jobs, defaults)
        return self.request(Op.SUBMIT, writes.submit(specs, key=key or writes.new_key(), dry_run=dry_run)).ids

    def jobs(self, ids: Sequence[int] = (), user: str | None = None, all: bool = False,
             states: Sequence[str] = (), queue: str | None = None, after: int = 0,
             limit: int = 0, stale_ok: bool = False, order: bool = False) -> list[JobView]:
        """Jobs as the leader sees them; ``stale_ok``: any controller may answer (see ``staleness``);
        ``order``: each pending job's place in the order of pending work (``JobView.order``)."""
        r = self.request(Op.JOBS, S.JobsRequest(ids=list(ids), user=user, all=all, states=list(states),
                                                queue=queue, after=after, limit=limit, stale_ok=stale_ok,
                                                order=order))
        self.staleness = r.stale
        return r.jobs

    def arrays(self, ids: Sequence[int] = (), user: str | None = None, queue: str | None = None) -> list[ArrayView]:
        """Each job array's summary (xce jobs -A): elements by state, the not yet materialised as PEND."""
        r = self.request(Op.JOBS, S.JobsRequest(ids=list(ids), user=user, queue=queue, arrays=True, arrays_only=True))
        return r.arrays

    def _states(self, ids: Sequence[int]) -> list[tuple[int, str]]:
        """(id, state) of each job: what ``wait`` re-asks each second, without building full views."""
        r = self.request(Op.JOBS, S.JobsRequest(ids=list(ids), fields=["id", "state"]))
        return [(row[0], row[1]) for row in r.rows]

    def job(self, job_id: int) -> JobView:
        return self.jobs([job_id])[0]

    def kill(self, ids: Sequence[int], reason: str = "", key: str | None = None,
             signal: int | None = None, to: str = "") -> dict[int, str]:
        """End the jobs; with ``signal``, send them that signal instead (``xce kill -s``): to every
        process of each (``to=""``), its steps alone (``"steps"``) or its batch shell (``"batch"``)."""
        return self.request(Op.KILL, writes.kill(ids, key=key or writes.new_key(), reason=reason,
                                                 signal=signal, to=to)).results

    def peek(self, job_id: int, max_bytes: int = 10 * 1024) -> S.PeekReply:
        """The tail of a running job's stdout and stderr, read on its first host (bpeek)."""
        return self.request(Op.PEEK, S.PeekRequest(id=job_id, max_bytes=max_bytes))

    def modify(self, job_id: int, mem_limit: int | None, key: str | None = None) -> None:
        self.request(Op.MODIFY, writes.modify(job_id, mem_limit, key=key or writes.new_key()))

    def stop(self, ids: Sequence[int], key: str | None = None) -> dict[int, str]:
        """bstop: a pending job is held (PSUSP), a running one suspended (USUSP); job id -> new state."""
        return self.request(Op.STOP, writes.control(ids, key=key or writes.new_key())).results

    def resume(self, ids: Sequence[int], key: str | None = None) -> dict[int, str]:
        return self.request(Op.RESUME, writes.control(ids, key=key or writes.new_key())).results

    def requeue(self, ids: Sequence[int], reason: str = "", key: str | None = None) -> dict[int, str]:
        """brequeue: an ended job is PEND at once; a running one once its processes are killed."""
        return self.request(Op.REQUEUE, writes.control(ids, key=key or writes.new_key(), reason=reason)).results

    def switch(self, ids: Sequence[int], queue: str, key: str | None = None) -> dict[int, str]:
        return self.request(Op.SWITCH, writes.switch(ids, queue, key=key or writes.new_key())).results

    def move(self, job_id: int, to: str, key: str | None = None) -> str:
        """btop (``to="top"``) / bbot (``"bottom"``); returns the job's new priority as the controller says it."""
        return self.request(Op.MOVE, writes.move(job_id, to, key=key or writes.new_key())).detail

    def modify_spec(self, job_id: int, key: str | None = None, **changes: Any) -> None:
        """bmod of a pending job: resreq, slots, queue, name, run_limit, priority, depend (-w text)."""
        self.request(Op.MODIFY_SPEC, writes.modify_spec(job_id, key=key or writes.new_key(), **changes))

    def hist(self, job_id: int) -> list[HistEvent]:
        """bhist: the job's events (time, event, who caused it, detail), oldest first."""
        return self.request(Op.HIST, S.HistRequest(id=job_id)).events

    def wait(self, ids: Sequence[int], timeout: float | None = None, poll: float = 1.0,
             progress: Any = None) -> list[JobView]:
        """Block until every job ended (DONE or EXIT); returns their final views.

        An array's id waits for all its elements, materialised yet or not (its summary counts
        them), and stands in the result for the views of its elements the controller keeps.
        Follows the event stream (no polling load on the controller) and asks the
        controller again every ``poll`` seconds and at once after a gap in the stream,
        which covers events missed while the subscription was connecting or the leader
        changed; an element's end makes it ask its array's summary within ARRAY_RECHECK s.
        ``timeout`` is the total time allowed.  ``progress(done, total)`` counts elements.
        """

        deadline = None if timeout is None else time.monotonic() + timeout
        w = Waiting.of(ids, self._chunked(self.arrays, ids))
        with EventFollower(self.conn, self.events_endpoint, silence=max(3.0, 3 * poll)) as follower:
            # The states are read once the subscription is live: an end published before it
            # was otherwise lost and seen only by the re-read ``poll`` s later (half the waits
            # of a job started just before, docs/benchmarks.md "Session 10: idle latency").
            follower.settle(SETTLE_MS)
            next_check, gaps = 0.0, 0
            while True:
                if time.monotonic() >= next_check or follower.gaps != gaps:
                    gaps = follower.gaps
                    w.states_seen(self._chunked(self._states, [i for i in ids if i in w.plain]))
                    if w.arrays:
                        w.arrays_seen(self.arrays(list(w.arrays)))
                    next_check = time.monotonic() + poll
                if progress:
                    progress(w.done, w.total)
                if w.finished:
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"{w.total - w.done} job(s) still running after {timeout}s")
                wait_s = max(0.0, next_check - time.monotonic())
                if deadline is not None:
                    wait_s = min(wait_s, max(0.0, deadline - time.monotonic()))
                for ev in follower.step(int(wait_s * 1000) + 1):
                    w.jobs_seen(j for j in ev.jobs if j.id in w.plain)
                    if any(j.state in TERMINAL and w.element_of(j.id) for j in ev.jobs):
                        next_check = min(next_check, time.monotonic() + ARRAY_RECHECK)
        final = {v.id: v for v in self._chunked(self.jobs, [i for i in ids if i not in w.ended_in])}
        arrays = {a: self.jobs([a]) for a in w.ended_in}
        return [v for i in ids for v in (arrays[i] if i in arrays else [final[i]])]

    @staticmethod
    def _chunked(ask: Any, ids: Sequence[int], size: int = 5000) -> list[Any]:
        """One request per ``size`` ids (a request's body is bounded)."""
        return [x for at in range(0, len(ids), size) for x in ask(ids[at:at + size])]

    # ---- cluster ----

    def hosts(self, names: Sequence[str] = (), stale_ok: bool = False) -> list[HostView]:
        r = self.request(Op.HOSTS, S.HostsRequest(names=list(names), stale_ok=stale_ok))
        self.staleness = r.stale
        return r.hosts

    def host_admin(self, names: Sequence[str], action: str, key: str | None = None) -> None:
        self.request(Op.HOST_ADMIN, writes.host_admin(names, action, key=key or writes.new_key()))

    def queues(self) -> S.QueuesReply:
        return self.request(Op.QUEUES)

    def fairshare(self) -> S.FairshareReply:
        """The share trees with decayed usage and priority, as the scheduler's round computes them."""
        return self.request(Op.FAIRSHARE)

    def limits(self) -> list[S.LimitRow]:
        """Each limit's use per principal, and the pending jobs it holds."""
        return self.request(Op.LIMITS).rows

    def status(self) -> S.StatusReply:
        return self.request(Op.STATUS)

    def audit(self) -> S.AuditReply:
        return self.request(Op.AUDIT)

    def request_log(self, user: str | None = None, since: float = 0.0, after: int = 0,
                    limit: int = 1000) -> list[S.RequestRecord]:
        """The leader's log of state-changing requests at the ZeroMQ door (needs audit.read)."""
        return self.request(Op.REQUEST_LOG, S.RequestLogQuery(user=user, since=since, after=after,
                                                              limit=limit)).records

    def snapshot(self) -> S.Snapshot:
        return self.request(Op.SNAPSHOT, timeout=30)

    def events(self, timeout: float | None = None) -> Iterator[S.Event]:
        """Live events from the leader's stream (no snapshot; see xce.client.follow), until
        ``timeout`` seconds have passed in all (None: for as long as the caller reads)."""

        deadline = None if timeout is None else time.monotonic() + timeout
        with EventFollower(self.conn, self.events_endpoint) as follower:
            while True:
                left = 1000.0 if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    return
                yield from follower.step(int(min(left, 1.0) * 1000) + 1)


def make_spec(command: Sequence[str] | str, **fields: Any) -> JobSpec:
    spec = _built(command, **fields)
    check_spec(spec)  # refused here as the controller would refuse it
    return spec


def _specs(jobs: Sequence[JobSpec | dict[str, Any]], defaults: dict[str, Any]) -> list[JobSpec]:
    """The batch's specs, each refused before sending as ``make_spec`` refuses it (the same error).

    A batch repeats itself: a dict given again at once (``[spec] * 5000``) is not built again,
    a spec equal to the one before it is not checked again, and each distinct spec (by
    ``spec_bytes``, as the controller's door counts them) is checked once.
    """
    checked: set[bytes] = set()
    out: list[JobSpec] = []
    given: object = None
    spec: JobSpec | None = None
    for j in jobs:
        if isinstance(j, JobSpec):
            out.append(j)
            continue
        if j is not given:
            built = _built(**{**defaults, **j})
            if built != spec:  # typed fields: equal specs are the same values
                shape = spec_bytes(built)
                if shape not in checked:
                    check_spec(built, shape)
                    checked.add(shape)
                spec = built
            given = j
        out.append(spec)  # type: ignore[arg-type]  # set with ``given``
    return out


def _built(command: Sequence[str] | str, **fields: Any) -> JobSpec:
    if isinstance(command, str):
        command = ["/bin/sh", "-c", command]
    if "user" not in fields:
        fields["user"] = unix_user()
    if "cwd" not in fields:
        fields["cwd"] = os.getcwd()
    if "submit_host" not in fields:  # LSB_SUB_HOST (not setdefault: that asks the kernel every time)
        fields["submit_host"] = socket.gethostname()
    if isinstance(fields.get("mem_limit"), str):

        fields["mem_limit"] = parse_mem(fields["mem_limit"])
    try:
        spec = msgspec.convert({"command": list(command), **fields}, JobSpec)
    except msgspec.ValidationError as e:

        raise InvalidRequest(f"bad job field: {e}") from None
    return spec
