"""A recording harness for the controller's reactors: a context over a built ClusterState, no sockets.

``kit()`` gives a ``Kit``: a ``Context`` whose Raft is a ``FakeRaft`` (leader or not, a
term, the Changes the test's commits produced) over ``cluster_state(...)``; ``kit.call``
serves one request into a fresh ``Outbox`` and returns it; ``kit.commit_all`` applies
what an outbox committed (as Raft would: one batch) and runs the continuations into a new
outbox, so a test follows a write from request to answer.  Soft state is the context's,
read back directly.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from builders import T0, alloc, cluster_state, host, spec
from xce.core.errors import Unauthenticated
from xce.core.model import Host, Job, Queue
from xce.core.resources import catalog
from xce.core.resreq import parse_resreq
from xce.core.state import Changes, ClusterState, Place, Submit
from xce.proto.opcodes import Op
from xce.reactors.after_apply import on_applied
from xce.reactors.context import Book, Context, Stream
from xce.reactors.outbox import Outbox, Request
from xce.reactors.table import serve
from xce.replica.live import Live
from xce.security.policy import Principal, load_policy
from xce.site.config import Config, ControllerConf

ALICE = Principal("alice", ("user",))
BOB = Principal("bob", ("user",))
OPERATOR = Principal("olga", ("operator",))
DAEMON = Principal("xce-daemon", ("daemon",))
TOKENS = {"tok-alice": ALICE, "tok-bob": BOB, "tok-olga": OPERATOR, "tok-daemon": DAEMON}


@dataclass
class FakeRaft:
    """What the reactors see of Raft: the state, the role, and the changes applied so far."""

    state: ClusterState
    leading: bool = True
    current_term: int = 3
    leader_address: str | None = "tcp://127.0.0.1:7700"
    changes: Changes = field(default_factory=Changes)
    info: dict[str, Any] = field(default_factory=lambda: {"state": 2, "commit_idx": 10, "last_applied": 10})
    inherited: bool = True  # the log it was elected with applied (caught_up)

    def is_leader(self) -> bool:
        return self.leading

    def term(self) -> int:
        return self.current_term

    def leader(self) -> str | None:
        return self.leader_address

    def status(self) -> dict[str, Any]:
        return self.info

    def caught_up(self) -> bool:
        return self.leading and self.inherited

    def take_changes(self) -> Changes:
        ch, self.changes = self.changes, Changes()
        return ch

    def pending_changes(self) -> bool:
        return bool(self.changes)


class FakeTokens:
    def verify(self, token: str) -> Principal:
        if token not in TOKENS:
            raise Unauthenticated("invalid token: Signature verification failed")
        return TOKENS[token]


class FakeRequestLog:
    def __init__(self, records: list[Any] | None = None) -> None:
        self.records = records or []
        self.asked: list[dict[str, Any]] = []

    def query(self, user: str | None = None, since: float = 0.0, after: int = 0, limit: int = 1000) -> list[Any]:
        self.asked.append({"user": user, "since": since, "after": after, "limit": limit})
        return self.records[:limit]


_keys = itertools.count(1)


def key() -> str:
    """A fresh idempotency key."""
    return f"test-key-{next(_keys):06d}"


@dataclass
class Kit:
    ctx: Context
    raft: FakeRaft
    now: float = T0 + 10

    @property
    def state(self) -> ClusterState:
        return self.raft.state

    def request(self, op: Op, token: str = "", peer: bytes = b"peer", **kw: Any) -> Request:
        return Request(peer, 7, op, self.now, token, **kw)

    def call(self, op: Op, body: Any, token: str = "", peer: bytes = b"peer", **kw: Any) -> Outbox:
        out = Outbox()
        serve(self.ctx, self.request(op, token, peer, **kw), body, out, mono=self.now)
        return out

    def commit_all(self, out: Outbox) -> Outbox:
        """Apply ``out``'s commands as one Raft batch and run their continuations into a new outbox."""
        results, changes = self.state.apply_batch([c for c, _ in out.commits])
        self.raft.changes.merge(changes)
        after = Outbox()
        for (_, then), result in zip(out.commits, results, strict=True):
            then(result, after)
        return after

    def applied(self) -> Outbox:
        """``on_applied`` for what was committed so far."""
        out = Outbox()
        on_applied(self.ctx, self.now, out)
        return out

    def run_job(self, *hosts: str, mem: str = "1G", slots: int = 1, **kw: Any) -> Job:
        """A job submitted and placed (one slot per host), its ledger synced, as after an apply."""
        s = spec(mem=mem, slots=slots * len(hosts or ("node1",)), **kw)
        (jid,) = self.state.apply(Submit(time=T0, specs=[s], reqs=[parse_resreq(s.resreq)]))
        allocs = [alloc(h, slots, mem) for h in hosts or ("node1",)]
        self.state.apply(Place(time=T0 + 1, job_id=jid, attempt=0, allocs=allocs))
        job = self.state.jobs[jid]
        self.ctx.live.sync_job(job, self.now)
        return job

    def pend_job(self, **kw: Any) -> Job:
        s = spec(**kw)
        (jid,) = self.state.apply(Submit(time=T0, specs=[s], reqs=[parse_resreq(s.resreq)]))
        return self.state.jobs[jid]

    def worker(self, name: str = "node1", peer: bytes | None = None, seen: float | None = None) -> None:
        """A registered worker: its identity known, a heartbeat seen now."""
        self.ctx.book.workers[name] = peer or name.encode()
        self.ctx.live.last_seen[name] = self.now if seen is None else seen
        self.ctx.live.os_available.setdefault(name, self.state.hosts[name].mem_total)


def kit(*hosts: Host, queues: tuple[Queue, ...] = (), default: str = "normal", tokens: bool = False,
        leading: bool = True, curve: bool = False, config: Config | None = None) -> Kit:
    """A leader (by default) over a cluster of ``hosts`` (default: node1, 8G, 4 slots)."""
    st = cluster_state(*queues, default=default, hosts=hosts or (host(),))
    raft = FakeRaft(st, leading=leading)
    cfg = config or Config(controller=ControllerConf(peers=["127.0.0.1:7712"], peer_addresses=["tcp://127.0.0.1:7710"]))
    resources = catalog(cfg.site_resources())
    epochs = (f"epoch{i}" for i in itertools.count(1))
    ctx = Context(cfg=cfg, raft=raft, live=Live(), book=Book(), stream=Stream(epoch="epoch0"),
                  policy=load_policy(), parse=lambda text: parse_resreq(text, resources),
                  new_epoch=lambda: next(epochs), tokens=FakeTokens() if tokens else None, curve=curve,
                  requests=FakeRequestLog(), pid=4242, known_state=st, was_leader=leading,
                  cluster_totals=cfg.cluster_totals(), leader_term=raft.current_term if leading else 0)
    return Kit(ctx, raft)

