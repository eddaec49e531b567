"""The controller's client door: submit, read, kill, modify, administer (CLI, REST, scripts, console)."""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING, Any

import msgspec

from xce.core.errors import InvalidRequest, NotFound, XceError
from xce.core.limits import KILL_REASON, check_text
from xce.core.model import ACTIVE, TERMINAL, check_mem_limit, check_spec
from xce.core.placement import demand_of, host_caps, never_fits
from xce.core.result import Ok, Result
from xce.core.views import array_view
from xce.core.arrays import SHIFT
from xce.core.jobspec.depend import parse_depend
from xce.core.state import (
    Kill,
    Modify,
    ModifySpec,
    Move,
    RemoveHosts,
    Requeue,
    Resume,
    SetHostAdmin,
    SpecPatch,
    Stop,
    Submit,
    Switch,
)
from xce.proto import schema as S
from xce.proto.codec import encode
from xce.proto.opcodes import Op

if TYPE_CHECKING:
    from xce.daemons.controller import Controller

from xce.daemons.ctl_events import public


class ClientDoor:
    """Mixed into Controller: the handlers of client requests."""

    # ---- client requests ----------------------------------------------------------------------

    def h_ping(self: Controller, ident: bytes, rid: int, body: S.Empty) -> None:
        self.ok(ident, rid, S.Empty())

    def h_submit(self: Controller, ident: bytes, rid: int, body: S.SubmitRequest) -> None:
        if not body.jobs:
            raise InvalidRequest("submit: no jobs given")
        specs, reqs = [], []
        with self.raft.lock:
            queues = self.state.queues
            default = self.state.default_queue
            caps = host_caps(self.state.hosts.values(), self.live.ledger, {})
        verdicts: dict[tuple[int, str], tuple[Any, str | None]] = {}  # a batch repeats itself
        for i, spec in enumerate(body.jobs):
            where = f"job {i}: " if len(body.jobs) > 1 else ""
            try:
                check_spec(spec)
            except InvalidRequest as e:
                raise InvalidRequest(where + e.message) from None
            q = spec.queue or default
            if q not in queues:
                raise InvalidRequest(f"{where}queue {q!r} does not exist (queues: {', '.join(sorted(queues))})")
            key = (spec.slots, spec.resreq)
            if key not in verdicts:
                try:
                    req = self.parse(spec.resreq)
                except XceError as e:
                    raise type(e)(where + e.message) from None
                d = demand_of(spec.slots, req, self.cluster_totals)
                verdicts[key] = (req, never_fits(d, caps.values()) if caps else None)
            req, never = verdicts[key]
            if never:
                from xce.core.errors import Infeasible

                raise Infeasible(f"{where}{never}")
            specs.append(msgspec.structs.replace(spec, queue=q) if spec.queue != q else spec)
            reqs.append(req)
        if body.dry_run:
            self.ok(ident, rid, S.SubmitReply(ids=[], queues=[s.queue for s in specs]))
            return
        self.commit(Submit(time=time.time(), specs=specs, reqs=reqs, key=body.key, by=self.key_owner()),
                    self.replier(ident, rid, lambda ids: S.SubmitReply(ids=ids, queues=[s.queue for s in specs])))

    def h_jobs(self: Controller, ident: bytes, rid: int, body: S.JobsRequest) -> None:
        out = []
        states = set(body.states)
        with self.raft.lock:
            jobs, arrays = self.state.jobs, self.state.arrays
            if body.ids:
                missing = [i for i in body.ids if i not in jobs and i not in arrays]
                if missing and len(body.ids) == 1:
                    raise NotFound(f"job {missing[0]} is not known")
                selected = [j for i in body.ids for j in ([jobs[i]] if i in jobs else
                                                          [e for e in jobs.values() if e.id >> SHIFT == i]
                                                          if i in arrays else [])]  # an array: its elements
            else:
                selected = (j for j in jobs.values() if j.id > body.after)
            for job in selected:
                if body.user and job.spec.user != body.user:
                    continue
                if body.queue and job.spec.queue != body.queue:
                    continue
                if states and job.state.value not in states:
                    continue
                if not body.ids and not body.all and not states and job.state in TERMINAL:
                    continue
                out.append(self.live.job_view(job))
                if body.limit and len(out) >= body.limit:
                    break
            summaries = [array_view(a) for a in arrays.values()
                         if (not body.ids or a.id in body.ids) and (not body.user or a.spec.user == body.user)
                         and (not body.queue or a.spec.queue == body.queue)] if body.arrays else []
            reply = S.JobsReply(jobs=out, next_after=out[-1].id if body.limit and len(out) >= body.limit else None,
                                stale=self.staleness(), arrays=summaries)
            data = encode(Op.OK, rid, reply, term=self.raft.term())
        self.send(ident, data)

    def h_hosts(self: Controller, ident: bytes, rid: int, body: S.HostsRequest) -> None:
        with self.raft.lock:
            hosts = self.state.hosts
            for n in body.names:
                if n not in hosts:
                    raise NotFound(f"host {n} is not known")
            names = body.names or sorted(hosts)
            views = [self.live.host_view(hosts[n]) for n in names]
        self.ok(ident, rid, S.HostsReply(hosts=views, stale=self.staleness()))

    def staleness(self: Controller) -> S.Staleness | None:
        """None on the leader (fresh); on a follower, how far behind its answer may be."""
        if self.raft.is_leader():
            return None
        st = self.raft.status()
        role = {0: "follower", 1: "candidate", 2: "leader"}.get(st.get("state", 0), "unknown")
        lag = max(0, int(st.get("leader_commit_idx") or 0) - int(st.get("last_applied", 0)))
        return S.Staleness(served_by=self.cfg.controller.address, role=role,
                           as_of=self.state.last_time, lag_entries=lag)

    def h_queues(self: Controller, ident: bytes, rid: int, body: S.Empty) -> None:
        with self.raft.lock:
            counts: dict[str, dict[str, int]] = {q: {} for q in self.state.queues}
            for job in self.state.jobs.values():
                c = counts.setdefault(job.spec.queue, {})
                c[job.state.value] = c.get(job.state.value, 0) + 1
            reply = S.QueuesReply(queues=sorted(self.state.queues.values(), key=lambda q: -q.priority),
                                  default=self.state.default_queue, counts=counts)
        self.ok(ident, rid, reply)

    def h_kill(self: Controller, ident: bytes, rid: int, body: S.KillRequest) -> None:
        if not body.ids:
            raise InvalidRequest("kill: no job ids given")
        too_long = check_text(KILL_REASON, body.reason)
        if too_long is not None:
            raise InvalidRequest(too_long)
        if body.signal is not None:
            self.h_signal(ident, rid, body)
            return
        self.commit(Kill(time=time.time(), job_ids=body.ids, reason=body.reason or "killed by user",
                         key=body.key, by=self.key_owner()),
                    self.replier(ident, rid, lambda res: S.KillReply(results=res)))

    def h_modify(self: Controller, ident: bytes, rid: int, body: S.ModifyRequest) -> None:
        check_mem_limit(body.mem_limit)
        reply = self.replier(ident, rid, lambda r: S.Ack(True, r))

        def modified(result: Result) -> None:
            if isinstance(result, Ok):  # running: the workers enforce the new limit from now on
                with self.raft.lock:
                    job = self.state.jobs.get(body.id)
                    if job is not None and job.state in ACTIVE:
                        for host in job.hosts:
                            if host not in job.finished_hosts:
                                self.dispatch(job, host, time.time())
            reply(result)

        self.commit(Modify(time=time.time(), job_id=body.id, mem_limit=body.mem_limit, key=body.key,
                           by=self.key_owner()), modified)

    # ---- job control (the transitions are xce/core/state.py's) -----------------------------------

    def h_stop(self: Controller, ident: bytes, rid: int, body: S.ControlRequest) -> None:
        self._control(ident, rid, Stop(time=time.time(), job_ids=_ids(body.ids, "stop"), key=body.key,
                                       by=self.key_owner()), signal_when={"USUSP": signal.SIGSTOP})

    def h_resume(self: Controller, ident: bytes, rid: int, body: S.ControlRequest) -> None:
        self._control(ident, rid, Resume(time=time.time(), job_ids=_ids(body.ids, "resume"), key=body.key,
                                         by=self.key_owner()), signal_when={"RUN": signal.SIGCONT})

    def h_requeue(self: Controller, ident: bytes, rid: int, body: S.ControlRequest) -> None:
        too_long = check_text(KILL_REASON, body.reason)
        if too_long is not None:
            raise InvalidRequest(too_long)
        self._control(ident, rid, Requeue(time=time.time(), job_ids=_ids(body.ids, "requeue"), reason=body.reason,
                                          key=body.key, by=self.key_owner()))

    def h_switch(self: Controller, ident: bytes, rid: int, body: S.SwitchRequest) -> None:
        self._control(ident, rid, Switch(time=time.time(), job_ids=_ids(body.ids, "switch"), queue=body.queue,
                                         key=body.key, by=self.key_owner()))

    def _control(self: Controller, ident: bytes, rid: int, cmd: Any, signal_when: dict[str, int] | None = None) -> None:
        """Commit ``cmd``; then, for each job whose new state is in ``signal_when``, that signal goes
        to its running shares (SIGSTOP for USUSP, SIGCONT back to RUN) as a SIGNAL_JOB order."""
        reply = self.replier(ident, rid, lambda res: S.ControlReply(results=res))

        def done(result: Result) -> None:
            if isinstance(result, Ok) and signal_when:
                with self.raft.lock:
                    for jid, state in result.value.items():
                        job = self.state.jobs.get(jid)
                        if state in signal_when and job is not None and job.state in ACTIVE:
                            for host in job.hosts:
                                if host not in job.finished_hosts:
                                    self.send_worker(host, Op.SIGNAL_JOB, S.SignalJob(
                                        job_id=jid, attempt=job.attempt, signal=signal_when[state]))
            reply(result)

        self.commit(cmd, done)

    def h_move(self: Controller, ident: bytes, rid: int, body: S.MoveRequest) -> None:
        if body.to not in ("top", "bottom"):
            raise InvalidRequest(f"move: 'to' must be 'top' or 'bottom', got {body.to!r}")
        self.commit(Move(time=time.time(), job_id=body.id, to=body.to, key=body.key, by=self.key_owner()),
                    self.replier(ident, rid, lambda prio: S.Ack(True, f"priority {prio}")))

    def h_modify_spec(self: Controller, ident: bytes, rid: int, body: S.ModifySpecRequest) -> None:
        changes = {f: getattr(body, f) for f in SpecPatch.__struct_fields__
                   if getattr(body, f) is not msgspec.UNSET}
        req = None
        if "resreq" in changes:
            req = self.parse(changes["resreq"])
        if "depend" in changes:  # parsed once, here; the state keeps the tree
            changes["depend"] = parse_depend(changes["depend"]) if changes["depend"].strip() else None
        self.commit(ModifySpec(time=time.time(), job_id=body.id, patch=SpecPatch(**changes), req=req,
                               key=body.key, by=self.key_owner()),
                    self.replier(ident, rid, lambda r: S.Ack(True, r)))

    def h_hist(self: Controller, ident: bytes, rid: int, body: S.HistRequest) -> None:
        with self.raft.lock:
            if body.id not in self.state.jobs:
                raise NotFound(f"job {body.id} is not known")
            events = list(self.state.history.get(body.id, ()))
        self.ok(ident, rid, S.HistReply(id=body.id, events=events))

    def h_host_admin(self: Controller, ident: bytes, rid: int, body: S.HostAdminRequest) -> None:
        if body.action not in ("open", "close", "remove"):
            raise InvalidRequest(f"host action must be 'open', 'close' or 'remove', got {body.action!r}")
        if not body.names:
            raise InvalidRequest(f"host {body.action}: no host names given")
        now, by = time.time(), self.key_owner()
        cmd = RemoveHosts(time=now, names=body.names, key=body.key, by=by) if body.action == "remove" else \
            SetHostAdmin(time=now, names=body.names, closed=body.action == "close", key=body.key, by=by)
        self.commit(cmd, self.replier(ident, rid, lambda r: S.Ack(True, r)))

    def h_status(self: Controller, ident: bytes, rid: int, body: S.Empty) -> None:
        st = self.raft.status()
        role = {0: "follower", 1: "candidate", 2: "leader"}.get(st.get("state", 0), "unknown")
        me = S.ControllerInfo(address=self.cfg.controller.address, role=role, term=self.raft.term(),
                              commit_index=int(st.get("commit_idx", 0)),
                              applied_index=int(st.get("last_applied", 0)),
                              leader=self.leader_router(), pid=os.getpid())
        others = [S.ControllerInfo(address=self.router_by_raft.get(p, p), role="peer", term=0,
                                   commit_index=0) for p in self.cfg.controller.peers]
        with self.raft.lock:
            hosts: dict[str, int] = {}
            mem = {"capacity": 0, "reserved": 0, "actual": 0, "slack": 0, "overage": 0}
            for h in self.state.hosts.values():
                v = self.live.host_view(h)
                hosts[v.state] = hosts.get(v.state, 0) + 1
                if h.unavail:
                    continue  # its memory is not there to use; the host still counts as unavail
                mem["capacity"] += v.mem_total
                mem["reserved"] += v.mem_reserved
                mem["actual"] += v.mem_actual
                mem["slack"] += v.mem_slack
                mem["overage"] += v.mem_overage
            jobs: dict[str, int] = {}
            for j in self.state.jobs.values():
                jobs[j.state.value] = jobs.get(j.state.value, 0) + 1
        self.ok(ident, rid, S.StatusReply(
            cluster=self.cfg.cluster.name, controllers=[me, *others], leader=self.leader_router(),
            term=self.raft.term(), hosts_by_state=hosts, jobs_by_state=jobs,
            endpoints={"controller": self.cfg.controller.address, "events": self.cfg.controller.pub_address},
            rest_url=self.cfg.rest_url or None, mem=mem, last_round_ms=self.last_round_ms))

    def h_snapshot(self: Controller, ident: bytes, rid: int, body: S.Empty) -> None:
        self.publish_soft(time.time(), force=True)
        with self.raft.lock:
            self.after_apply_locked_guard()
            st = self.state
            snap = S.Snapshot(
                seq=self.seq, epoch=self.epoch, time=time.time(), jobs=[public(j) for j in st.jobs.values()],
                hosts=list(st.hosts.values()), queues=list(st.queues.values()),
                default_queue=st.default_queue, live=self.live.lives(), samples=self.live.samples(),
                reasons=dict(self.live.reasons), leader=self.leader_router(), term=self.raft.term())
            data = encode(Op.OK, rid, snap, term=self.raft.term())
        self.send(ident, data)

    def after_apply_locked_guard(self: Controller) -> None:
        # Applied-but-unpublished changes must go out before a snapshot claims their seq.
        if self.raft.changes:
            self.after_apply()

    def h_audit(self: Controller, ident: bytes, rid: int, body: S.Empty) -> None:
        from xce.replica.audit import Dispatch, audit

        dispatch = Dispatch(started=self.confirmed, registered=self.registered_at, now=time.time(),
                            grace=self.cfg.worker.heartbeat)
        with self.raft.lock:
            problems, checked = audit(self.state, self.live, self.cluster_totals, dispatch)
        self.ok(ident, rid, S.AuditReply(problems=problems, checked=checked))

    def h_request_log(self: Controller, ident: bytes, rid: int, body: S.RequestLogQuery) -> None:
        records = self.requests.query(user=body.user, since=body.since, after=body.after,
                                      limit=max(0, min(body.limit, 10_000)))
        self.ok(ident, rid, S.RequestLogReply(records=records))


def _ids(ids: list[int], action: str) -> list[int]:
    if not ids:
        raise InvalidRequest(f"{action}: no job ids given")
    return ids
