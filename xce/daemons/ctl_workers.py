"""The controller's daemon door: the scheduler's placements, workers' registrations, heartbeats and ends, and orders to workers."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from xce.core.errors import InvalidRequest
from xce.core.limits import HOST_NAME, body_limit, check_text
from xce.core.arrays import split_id
from xce.core.model import ACTIVE, TERMINAL, Host, HostUsage, Job, JobState
from xce.core.placement import build_allocs, check_placement, demand_of, host_caps
from xce.core.resources import WIRE_NAMES
from xce.core.result import Err, Result
from xce.core.state import Finish, Place, RegisterHost
from xce.daemons.ctl_jobrun import release_order
from xce.proto import schema as S
from xce.proto.codec import encode
from xce.proto.opcodes import Op
from xce.replica.live import host_mem

if TYPE_CHECKING:
    from xce.daemons.controller import Controller

log = logging.getLogger("xce.controller")


# The usage column that carries `mem`: named through the one wire-name table.
MEM_WIRE = next(w for w, r in WIRE_NAMES.items() if r == "mem")
assert MEM_WIRE in S.UsageColumns.__struct_fields__, "UsageColumns lacks the worker's mem column"


class WorkerDoor:
    """Mixed into Controller: the handlers of daemon requests and the orders sent back."""

    # ---- orders to workers -------------------------------------------------------------------

    def orders(self: Controller, job: Job, now: float) -> None:
        if job.state in ACTIVE and (job.kill_requested or release_order(job)):
            # Killed or requeued (also when suspended), or its command ended on its first host:
            # the other shares end too.
            for host in job.hosts:
                if host not in job.finished_hosts:
                    self.order_kill(job, host, now)
        elif job.state == JobState.RUN:
            for a in job.allocs:
                key = (job.id, a.host)
                u = self.unconfirmed.get(key)
                if self.confirmed.get(key) != job.attempt and (u is None or u[0] != job.attempt):
                    self.dispatch(job, a.host, now)

    def dispatch(self: Controller, job: Job, host: str, now: float) -> None:
        """Send RUN_JOB for the job's share on ``host``; an order over its limit ends that share."""
        if job.kill_requested:
            return  # a killed job is never started: the kill's orders end it (order_kill)
        alloc = next(a for a in job.allocs if a.host == host)
        from xce.replica.live import mem_decay

        duration, decay = mem_decay(job)
        self.unconfirmed[(job.id, host)] = (job.attempt, now)
        ident = self.workers.get(host)
        if ident is None:
            return
        data = encode(Op.RUN_JOB, 0, S.RunJob(
            job_id=job.id, attempt=job.attempt, spec=job.spec, alloc=alloc, hosts=job.hosts,
            mem_duration_s=duration, mem_decay=decay, slots=[a.slots for a in job.allocs],
            element=array_element(job)),
            term=self.raft.term())
        limit = body_limit(Op.RUN_JOB.name)
        if len(data) > limit:  # a worker would refuse it: end the share now, not re-send it forever
            self.end_share(job, host, now, f"cannot dispatch to {host}: its RUN_JOB order is {len(data):,} "
                                           f"bytes, over the limit of {limit:,} bytes")
            return
        self.send(ident, data)

    def order_kill(self: Controller, job: Job, host: str, now: float) -> None:
        reason = job.reason or ("killed by user" if job.kill_requested
                                else f"the job's command ended on {job.hosts[0]}")
        self.send_worker(host, Op.KILL_JOB, S.KillJob(job_id=job.id, attempt=job.attempt, reason=reason))
        if host in self.registered_at and self.confirmed.get((job.id, host)) != job.attempt:
            # Its worker listed its tasks to this leader and never confirmed this one: chase_kills
            # re-sends, then ends the share.  (An unregistered host's worker tells at registration.)
            first, _ = self.unstarted_kills.get((job.id, host), (now, now))
            self.unstarted_kills[(job.id, host)] = (first, now)

    def chase_kills(self: Controller, jobs: dict[int, Job], now: float) -> None:
        """Kills of shares no worker confirmed started: re-sent every 2 s, and after ``kill_wait``
        the share is ended, so a job no worker runs cannot stay RUN (the worker, which gets the
        kill after any order for the same job, reports a task it never started as ended)."""
        for key, (first, sent) in list(self.unstarted_kills.items()):
            job = jobs.get(key[0])
            if job is None or job.state != JobState.RUN or key[1] in job.finished_hosts \
                    or self.confirmed.get(key) == job.attempt:
                del self.unstarted_kills[key]
            elif now - first > self.kill_wait:
                self.end_share(job, key[1], now, f"killed before it started: {key[1]} never confirmed it")
            elif now - sent > 2.0:
                self.order_kill(job, key[1], now)

    def end_share(self: Controller, job: Job, host: str, now: float, reason: str) -> None:
        """Commit the end of the job's share on ``host``, which no worker runs."""
        log.warning("job %d on %s: %s", job.id, host, reason)
        self.unstarted_kills.pop((job.id, host), None)
        reserved = next((a.mem for a in job.allocs if a.host == host), 0)
        self.commit(Finish(time=now, job_id=job.id, attempt=job.attempt, host=host, reason=reason,
                           usage=HostUsage(host=host, reserved=reserved)), lambda r: None)

    def send_worker(self: Controller, host: str, op: Op, body: Any) -> None:
        ident = self.workers.get(host)
        if ident is not None:
            self.send(ident, encode(op, 0, body, term=self.raft.term()))

    # ---- scheduler ------------------------------------------------------------------------------

    def h_place(self: Controller, ident: bytes, rid: int, body: S.PlaceRequest) -> None:
        rejected: dict[int, str] = {}
        cmds: list[Place] = []
        now = time.time()
        with self.raft.lock:
            st = self.state
            caps = host_caps(st.hosts.values(), self.live.ledger, self.live.os_available)
            for p in body.placements:
                job = st.jobs.get(p.job_id)
                if job is None or job.state != JobState.PEND or job.attempt != p.attempt:
                    rejected[p.job_id] = "job is no longer pending at that attempt"
                    continue
                d = demand_of(job.spec.slots, job.req, self.cluster_totals)
                why = check_placement(d, p.allocs, caps)
                if why is not None:
                    rejected[p.job_id] = why
                    continue
                # Built from the job's own request, never taken as sent (they are equal once checked).
                allocs = build_allocs(d, [(a.host, a.slots) for a in p.allocs])
                for a in allocs:
                    caps[a.host].charge(a.slots, a.mem, a.virtual.items())
                cmds.append(Place(time=now, job_id=p.job_id, attempt=p.attempt, allocs=allocs))
            changed = {j: r for j, r in body.reasons.items() if self.live.reasons.get(j) != r}
            self.live.reasons.update(body.reasons)
        self.pending_soft["reasons"].update(changed)
        self.last_round_ms = body.round_ms
        if not cmds:
            self.ok(ident, rid, S.PlaceReply(accepted=[], rejected=rejected))
            return
        accepted: list[int] = []
        for i, cmd in enumerate(cmds):
            last = i == len(cmds) - 1

            def reply(result: Result, cmd: Place = cmd, last: bool = last) -> None:
                if isinstance(result, Err):
                    rejected[cmd.job_id] = result.error.message
                else:
                    accepted.append(cmd.job_id)
                if last:
                    self.ok(ident, rid, S.PlaceReply(accepted=accepted, rejected=rejected))
            self.commit(cmd, reply)

    # ---- workers --------------------------------------------------------------------------------

    def refresh_allow_list(self: Controller, now: float) -> None:
        before = self.allow.keys if self.allow is not None else {}
        assert self.allow is not None
        self.allow.refresh(now)
        if self.allow.keys is before:
            return
        names = set(self.allow.keys.values())
        for host, key in list(self.worker_keys.items()):
            if key not in names:
                # Revoked: no more orders to it; its next heartbeat is refused, so the host
                # goes unavail after the usual misses and its jobs follow queue policy.
                log.warning("key %r of host %s was revoked: the worker is cut off", key, host)
                del self.worker_keys[host]
                self.workers.pop(host, None)
                self.registered_at.pop(host, None)

    def h_register(self: Controller, ident: bytes, rid: int, body: S.RegisterRequest) -> None:
        why = check_text(HOST_NAME, body.host)
        if why is not None:
            raise InvalidRequest(why)
        now = time.time()
        self.workers[body.host] = ident
        self.live.os_available[body.host] = body.os_available
        self.live.last_seen[body.host] = now
        self._lost_sent.discard(body.host)
        host = Host(name=body.host, slots_total=body.slots, mem_total=body.mem_total, ncpus=body.ncpus,
                    registered_time=now, version=body.version,
                    attrs={**body.attrs, "measure": body.measure}, virtual=body.virtual)
        known = {(t.job_id, t.attempt) for t in body.running}

        def registered(result: Result) -> None:
            kill: list[S.RunningTask] = []
            with self.raft.lock:
                for t in body.running:
                    job = self.state.jobs.get(t.job_id)
                    if job is None or job.attempt != t.attempt or job.state in TERMINAL \
                            or job.state == JobState.PEND or body.host not in job.hosts:
                        kill.append(t)
                    else:
                        self.unconfirmed.pop((t.job_id, body.host), None)
                        self.confirmed[(t.job_id, body.host)] = t.attempt
                self.registered_at[body.host] = now
                for job in self.state.jobs.values():
                    if job.state in ACTIVE and body.host in job.hosts \
                            and body.host not in job.finished_hosts and (job.id, job.attempt) not in known:
                        if self.confirmed.get((job.id, body.host)) == job.attempt:
                            # It was started there and the worker no longer has it.
                            self.commit(Finish(time=now, job_id=job.id, attempt=job.attempt, host=body.host,
                                               reason="lost: the worker no longer has the job"), lambda r: None)
                        elif job.kill_requested:  # killed, and the worker (which lists all it runs) never started it
                            self.end_share(job, body.host, now, f"killed before it started on {body.host}")
                        else:
                            self.dispatch(job, body.host, now)
                    elif job.state in ACTIVE and job.kill_requested and body.host in job.hosts:
                        self.orders(job, now)
            self.ok(ident, rid, S.RegisterReply(heartbeat_interval=self.cfg.worker.heartbeat,
                                                term=self.raft.term(), kill=kill))
        self.commit(RegisterHost(time=now, host=host), registered)
        self.pending_soft["live"].append(S.HostLive(body.host, body.os_available, now))

    def h_heartbeat(self: Controller, ident: bytes, rid: int, body: S.Heartbeat) -> None:
        now = time.time()
        with self.raft.lock:
            host = self.state.hosts.get(body.host)
            if host is None or host.unavail or self.workers.get(body.host) is None:
                self.ok(ident, rid, S.HeartbeatReply(known=False))
                return
            self.workers[body.host] = ident
            self.live.os_available[body.host] = body.os_available
            self.live.last_seen[body.host] = now
            self.apply_usage(body.host, body.usage)
            mem = host_mem(self.live.ledger.host_totals(body.host))
        self.pending_soft["live"].append(S.HostLive(body.host, body.os_available, now, mem))
        if body.ack:  # workers ask now and then, to know the controller still listens
            self.ok(ident, rid, S.HeartbeatReply(known=True))

    def apply_usage(self: Controller, host: str, u: S.UsageColumns) -> None:
        """Reconcile one host's reports (``Ledger.observe_host``); publish those that moved."""
        if not u.job_id:
            return
        moved = self.live.ledger.observe_host(host, u.job_id, u.attempt, getattr(u, MEM_WIRE), u.memory_peak,
                                              u.cpu_time)
        if moved is not None:
            self.pending_soft["samples"].append(S.HostSamples(host, *moved))

    def h_job_started(self: Controller, ident: bytes, rid: int, body: S.JobStarted) -> None:
        key = (body.job_id, body.host)
        u = self.unconfirmed.get(key)
        if u is not None and u[0] == body.attempt:
            del self.unconfirmed[key]
            self.confirmed[key] = body.attempt
        self.ok(ident, rid, S.Ack())

    def h_job_finished(self: Controller, ident: bytes, rid: int, body: S.JobFinished) -> None:
        # ``confirmed`` keeps the entry (the periodic prune drops it): the share is known to have
        # run until its Finish commits, so the audit does not call it "RUN with no task" meanwhile.
        self.unconfirmed.pop((body.job_id, body.host), None)
        self.unstarted_kills.pop((body.job_id, body.host), None)
        self.commit(Finish(time=body.time, job_id=body.job_id, attempt=body.attempt, host=body.host,
                           exit_code=body.exit_code, signal=body.signal, reason=body.reason,
                           usage=body.usage),
                    self.replier(ident, rid, lambda r: S.Ack(True, str(r))))


def array_element(job: Job) -> S.ArrayElement | None:
    """Where an array element sits (LSB_JOBINDEX, _STEP, _END), from its id and spec."""
    array_id, index = split_id(job.id)
    if index is None or job.spec.array is None:
        return None
    return S.ArrayElement(array_id=array_id, index=index, step=job.spec.array.step_of(index),
                          end=job.spec.array.end)
