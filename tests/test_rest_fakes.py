"""Test support for the REST tests: a recording fake controller and an app builder.

``FakeController`` answers the client opcodes from in-memory JobViews/HostViews
the way the controller does (filters, cursor, kill results, NotFound), and
records every call with the token it carried.  ``make_app()`` builds the real
app (real chain, real policy, real tokens) around it.  Also holds a smoke test
of the fake itself so this file is a valid test module.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import falcon.testing
import msgspec
from argon2 import PasswordHasher

from xce.core.errors import Conflict, NotFound, XceError
from xce.core.model import Queue
from xce.core.views import HostView, JobView
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.rest.app import create_app
from xce.rest.auditlog import AuditLog
from xce.rest.backend import Services
from xce.rest.config import RestConf
from xce.rest.users import Authenticator, UserStore
from xce.security.auth import KeyRing, TokenService
from xce.security.policy import DEFAULT_FILE, Principal, load_policy

FAST_HASH = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)


def jobview(id: int = 1, user: str = "alice", state: str = "RUN", **kw: Any) -> JobView:
    d: dict[str, Any] = dict(id=id, name=f"j{id}", user=user, queue="normal", state=state, slots=1,
                             hosts=["node1"] if state != "PEND" else [], command=["sleep", "10"],
                             resreq="rusage[mem=100]", mem_reserved=100 << 20, mem_actual=50 << 20,
                             mem_peak=60 << 20, mem_charged=100 << 20, mem_limit=None, efficiency=0.6,
                             reason="", exit_code=None, signal=None, submit_time=1.7e9, start_time=1.7e9,
                             end_time=None)
    d.update(kw)
    return JobView(**d)


def hostview(name: str = "node1", **kw: Any) -> HostView:
    d: dict[str, Any] = dict(name=name, state="ok", slots_total=4, slots_used=1, mem_total=8 << 30,
                             mem_os_available=6 << 30, mem_reserved=1 << 30, mem_actual=512 << 20,
                             mem_slack=512 << 20, mem_overage=0, mem_charged=1 << 30,
                             mem_available=5 << 30)
    d.update(kw)
    return HostView(**d)


class FakeController:
    def __init__(self) -> None:
        self.jobs: dict[int, JobView] = {}
        self.hosts: dict[str, HostView] = {"node1": hostview("node1"), "node2": hostview("node2")}
        self.calls: list[tuple[str, Op, Any]] = []
        self.fail: XceError | None = None

    async def call(self, token: str, op: Op, body: Any = None, timeout: float | None = None) -> Any:
        self.calls.append((token, op, body))
        await asyncio.sleep(0)
        if self.fail is not None:
            raise self.fail
        return getattr(self, f"op_{op.name.lower()}")(body)

    def close(self) -> None:
        pass

    def op_ping(self, body: Any) -> S.Empty:
        return S.Empty()

    def op_submit(self, body: S.SubmitRequest) -> S.SubmitReply:
        q = body.jobs[0].queue or "normal"
        if body.dry_run:
            return S.SubmitReply(ids=[], queues=[q])
        jid = max(self.jobs, default=0) + 1
        spec = body.jobs[0]
        self.jobs[jid] = jobview(jid, spec.user, "PEND", command=spec.command, queue=q,
                                 mem_limit=spec.mem_limit, name=spec.name)
        return S.SubmitReply(ids=[jid], queues=[q])

    def op_jobs(self, r: S.JobsRequest) -> S.JobsReply:
        if r.ids:
            arrays = {a.id for a in self.arrays}
            if len(r.ids) == 1 and r.ids[0] not in self.jobs and r.ids[0] not in arrays:
                raise NotFound(f"job {r.ids[0]} is not known")
            sel = [j for i in r.ids for j in ([self.jobs[i]] if i in self.jobs else  # an array: its elements
                                               [e for k, e in sorted(self.jobs.items()) if k >> 32 == i])]
        else:
            sel = [j for i, j in sorted(self.jobs.items()) if i > r.after]
        out = []
        for j in sel:
            if (r.user and j.user != r.user) or (r.queue and j.queue != r.queue) \
                    or (r.states and j.state not in r.states) \
                    or (not r.ids and not r.all and not r.states and j.state in ("DONE", "EXIT")):
                continue
            out.append(j)
            if r.limit and len(out) >= r.limit:
                break
        return S.JobsReply(jobs=out, next_after=out[-1].id if r.limit and len(out) >= r.limit else None,
                           arrays=[a for a in self.arrays if r.arrays and (not r.ids or a.id in r.ids)])

    def op_kill(self, r: S.KillRequest) -> S.KillReply:
        res = {}
        for i in r.ids:
            j = self.jobs.get(i)
            if j is None:
                res[i] = "not found"
            elif j.state in ("DONE", "EXIT"):
                res[i] = f"already {j.state}"
            elif r.signal is not None:
                res[i] = f"signal {r.signal} sent" if j.state != "PEND" else "not running"
            elif j.state == "PEND":
                self.jobs[i] = jobview(i, j.user, "EXIT", reason=r.reason)
                res[i] = "killed"
            else:
                res[i] = "kill requested"
        return S.KillReply(results=res)

    def op_modify(self, r: S.ModifyRequest) -> S.Ack:
        j = self.jobs[r.id]
        if j.state in ("DONE", "EXIT"):
            raise Conflict(f"job {r.id} has already ended ({j.state})")
        self.jobs[r.id] = jobview(r.id, j.user, j.state, mem_limit=r.mem_limit)
        return S.Ack()

    def op_modify_spec(self, r: S.ModifySpecRequest) -> S.Ack:
        j = self.jobs[r.id]
        if j.state != "PEND":
            raise Conflict(f"job {r.id}: cannot modify a job in state {j.state}")
        fields = {f: getattr(r, f) for f in ("name", "queue", "slots", "resreq", "run_limit", "priority")
                  if getattr(r, f) is not msgspec.UNSET}
        self.jobs[r.id] = msgspec.structs.replace(j, **fields)
        return S.Ack()

    def _control(self, ids: list[int], to: str) -> S.ControlReply:
        return S.ControlReply(results={i: to for i in ids if i in self.jobs})

    def op_stop(self, r: S.ControlRequest) -> S.ControlReply:
        return self._control(r.ids, "PSUSP")

    def op_resume(self, r: S.ControlRequest) -> S.ControlReply:
        return self._control(r.ids, "PEND")

    def op_requeue(self, r: S.ControlRequest) -> S.ControlReply:
        return self._control(r.ids, "requeued")

    def op_switch(self, r: S.SwitchRequest) -> S.ControlReply:
        return self._control(r.ids, r.queue)

    def op_move(self, r: S.MoveRequest) -> S.Ack:
        return S.Ack(True, "priority 1")

    arrays: list[Any] = []

    def op_hist(self, r: S.HistRequest) -> S.HistReply:
        return S.HistReply(id=r.id, events=[])

    def op_hosts(self, r: S.HostsRequest) -> S.HostsReply:
        for n in r.names:
            if n not in self.hosts:
                raise NotFound(f"host {n} is not known")
        return S.HostsReply(hosts=[self.hosts[n] for n in (r.names or sorted(self.hosts))])

    def op_host_admin(self, r: S.HostAdminRequest) -> S.Ack:
        for n in r.names:
            if r.action == "remove":
                del self.hosts[n]
            else:
                self.hosts[n] = hostview(n, state="closed" if r.action == "close" else "ok")
        return S.Ack()

    def op_queues(self, body: Any) -> S.QueuesReply:
        return S.QueuesReply(queues=[Queue(name="normal")], default="normal", counts={"normal": {"RUN": 1}})

    def op_fairshare(self, body: Any) -> S.FairshareReply:
        return S.FairshareReply(enabled=True, half_life=18_000.0, slot_weight=1.0, mem_weight=1.0, time=1.7e9,
                                rows=[S.ShareRow(tree="", path=["alice"], by="user", shares=1, share=1.0,
                                                 slot_seconds=3600.0, mem_seconds=3.6e12, usage=1.0,
                                                 priority=0.5, leaf=True)])

    def op_limits(self, body: Any) -> S.LimitsReply:
        return S.LimitsReply(rows=[S.LimitRow(name="user_slots", per="user", who="alice", jobs=1, slots=8, mem=0,
                                              pending=1, max_jobs=None, max_slots=8, max_mem=None,
                                              max_pending=None, held=[4])])

    def op_status(self, body: Any) -> S.StatusReply:
        return S.StatusReply(cluster="test", controllers=[S.ControllerInfo(address="tcp://x", role="leader",
                                                                            term=3, commit_index=9)],
                             leader="tcp://x", term=3, hosts_by_state={"ok": 2}, jobs_by_state={"RUN": 1},
                             endpoints={}, last_round_ms=1.5)


class Harness:
    """The real app around a FakeController, with tokens for each default role."""

    def __init__(self, tmp: Path, **conf: Any) -> None:
        ring = KeyRing()
        ring.add("EdDSA")
        self.tokens = TokenService(ring)
        self.fake = FakeController()
        self.store = UserStore(tmp / "users.toml", FAST_HASH)
        self.conf = RestConf(**conf)
        self.audit = AuditLog(tmp / "audit.jsonl")
        self.svc = Services(conf=self.conf, backend=self.fake, policy=load_policy(DEFAULT_FILE),
                            tokens=self.tokens, authn=Authenticator(self.store), audit=self.audit,
                            anonymous_token="anon-token")
        self.app = create_app(self.svc)
        self.client = falcon.testing.TestClient(self.app)

    def token(self, user: str = "alice", role: str = "user") -> str:
        return self.tokens.issue(Principal(user, (role,)))

    def auth(self, user: str = "alice", role: str = "user") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(user, role)}"}

    def req(self, method: str, path: str, as_: tuple[str, str] | None = ("alice", "user"),
            **kw: Any) -> falcon.testing.Result:
        headers = dict(kw.pop("headers", {}))
        if as_ is not None:
            headers.update(self.auth(*as_))
        return self.client.simulate_request(method, path, headers=headers, **kw)


def test_fake_controller_filters_like_the_controller() -> None:
    f = FakeController()
    f.jobs = {i: jobview(i, state="DONE" if i % 2 else "RUN") for i in range(1, 11)}
    assert [j.id for j in f.op_jobs(S.JobsRequest()).jobs] == [2, 4, 6, 8, 10]
    page = f.op_jobs(S.JobsRequest(all=True, limit=3, after=4))
    assert [j.id for j in page.jobs] == [5, 6, 7] and page.next_after == 7
