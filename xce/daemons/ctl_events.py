"""What the controller does after Raft applied a batch: sync the ledger, publish, dispatch, answer."""

from __future__ import annotations

import logging
import queue
import time
import uuid
from typing import TYPE_CHECKING

import msgspec
import zmq

from xce.core.errors import NotLeader, XceError
from xce.core.model import Host, Job, Queue
from xce.core.result import Err
from xce.core.state import SetQueues
from xce.proto import schema as S
from xce.proto.codec import encode
from xce.proto.opcodes import Op

if TYPE_CHECKING:
    from xce.daemons.controller import Controller

log = logging.getLogger("xce.controller")


SOFT_PERIOD = 0.05  # seconds between soft events (see publish_soft)


def public(job: Job) -> Job:
    """A job as the event stream and snapshots show it: without its environment (secrets)."""
    if not job.spec.env:
        return job
    return msgspec.structs.replace(job, spec=msgspec.structs.replace(job.spec, env={}))


class Publisher:
    """Mixed into Controller: the event stream and leadership changes."""

    # ---- after Raft applied something -------------------------------------------------------

    def after_apply(self: Controller) -> None:
        now = time.time()
        self.leadership(now)
        events_jobs: list[Job] = []
        events_hosts: list[Host] = []
        with self.raft.lock:
            st = self.state
            if st is not self.state_obj:  # a snapshot was installed: rebuild everything
                self.state_obj = st
                self.live.rebuild(st.jobs.values(), now)
                self.epoch = uuid.uuid4().hex[:12]
                self.raft.take_changes()
            changes = self.raft.take_changes()
            leading = self.raft.is_leader()
            for jid in changes.jobs:
                job = st.jobs.get(jid)
                if job is None:
                    continue
                if leading:  # a follower's ledger is rebuilt when it takes over
                    self.live.sync_job(job, now)
                events_jobs.append(job)
            for name in changes.hosts:
                if name in st.hosts:
                    events_hosts.append(st.hosts[name])
            forgotten, removed = changes.forgotten, changes.removed_hosts
            for jid in forgotten:
                self.live.forget_job(jid)
            if removed:
                self.forget_hosts(removed)
            if (events_jobs or events_hosts or forgotten or removed) and self.subscribers:
                # Job environments stay in the journal; the event stream does not carry them.
                self.emit(S.Event(seq=0, epoch=self.epoch, time=now, jobs=[public(j) for j in events_jobs],
                                  hosts=events_hosts, forget=forgotten))
            elif events_jobs or events_hosts or forgotten or removed:
                self.seq += 1  # nobody listens: skip the encoding, keep the sequence honest
            if leading:
                for job in events_jobs:
                    self.orders(job, now)  # the real job: its environment goes to the worker
        while True:
            try:
                token, res, err = self.done.get_nowait()
            except queue.Empty:
                break
            replies = self.inflight.pop(token, [])
            if err != 0 or res is None:
                exc = NotLeader(self.leader_router()) if not self.raft.is_leader() else \
                    XceError(f"commit failed (pysyncobj reason {err}); retry")
                for r in replies:
                    r(Err(exc))
                continue
            for r, result in zip(replies, res, strict=True):
                r(result)

    def forget_hosts(self: Controller, names: list[str]) -> None:
        """Removed hosts: drop their soft state, and start a new event epoch.

        Events carry whole entities but no host removal, so every follower of the stream
        (scheduler, console, REST) re-snapshots, as after a failover; removals are rare.
        """
        for name in names:
            self.live.os_available.pop(name, None)
            self.live.last_seen.pop(name, None)
            self.workers.pop(name, None)
            self._lost_sent.discard(name)
        self.epoch = uuid.uuid4().hex[:12]

    def count_subscribers(self: Controller) -> None:
        while True:
            try:
                msg = self.pub.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            if msg[:1] == b"\x01":
                self.subscribers += 1
            elif msg[:1] == b"\x00":
                self.subscribers = max(0, self.subscribers - 1)

    def emit(self: Controller, ev: S.Event) -> None:
        self.seq += 1
        ev.seq = self.seq
        self.pub.send_multipart([b"ev", encode(Op.EVENT, 0, ev, term=self.raft.term())])

    def publish_soft(self: Controller, now: float, force: bool = False) -> None:
        """Soft news (heartbeats, samples, reasons) goes out at most every SOFT_PERIOD.

        A loop turn often handles one heartbeat; an event per turn would cost an encode
        and a send per heartbeat.  50 ms is far inside the console's 1 s budget.
        """
        if not force and now < self.next_soft:
            return
        self.next_soft = now + SOFT_PERIOD
        p = self.pending_soft
        if (p["live"] or p["samples"] or p["reasons"]) and not self.subscribers:
            self.seq += 1
            self.pending_soft = {"live": [], "samples": [], "reasons": {}}
        elif p["live"] or p["samples"] or p["reasons"]:
            self.emit(S.Event(seq=0, epoch=self.epoch, time=now, live=p["live"],
                              host_samples=p["samples"], reasons=p["reasons"]))
            self.pending_soft = {"live": [], "samples": [], "reasons": {}}

    def leadership(self: Controller, now: float) -> None:
        leader = self.raft.is_leader()
        if leader and not self.was_leader:
            log.info("became leader (term %d)", self.raft.term())
            self.epoch = uuid.uuid4().hex[:12]
            with self.raft.lock:
                self.live.rebuild(self.state.jobs.values(), now)
                # A grace period of one more timeout: workers find the new leader and re-register.
                grace = self.cfg.controller.heartbeat_misses * self.cfg.worker.heartbeat + 5.0
                for name in self.state.hosts:
                    self.live.last_seen[name] = now + grace
                queues = [Queue(name=n, priority=q.priority, rerunnable=q.rerunnable, description=q.description,
                                run_limit_default=q.run_limit_default or None, run_limit_max=q.run_limit or None,
                                dep_never=q.dep_never) for n, q in self.cfg.queues.items()]
                changed = (sorted(self.state.queues.values(), key=lambda q: q.name)
                           != sorted(queues, key=lambda q: q.name)
                           or self.state.default_queue != self.cfg.default_queue())
            if changed:
                self.commit(SetQueues(time=now, queues=queues, default_queue=self.cfg.default_queue()),
                            lambda r: None)
            self.unconfirmed.clear()
            self.confirmed.clear()
            self.unstarted_kills.clear()
            self.registered_at.clear()
        self.was_leader = leader
