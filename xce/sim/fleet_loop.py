"""The simulated fleet's shell: one process, one CURVE DEALER per simulated host, one loop.

Each host has its own socket with its own key pair on the controller's allow-list (the
key named after the host, as `xce up` gives each worker: ``security.bind_hosts`` holds),
so the controller sees N real connections, N CURVE sessions and N routing ids.  The
conversation of each host is xce/sim/fleet.py's ``SimHost``; this module owns the
sockets, the clock, the timers (a heap of heartbeats and job ends) and a stats file.

Failover: as a worker's socket monitor hears its controller drop the connection, one
probe socket per controller endpoint (an ephemeral client key, a monitor) tells every host
on that endpoint to move to the next one when its established connection drops; a follower answers "not
leader, try X" and the host moves there.  A host that hears nothing for
(ACK_EVERY + 1) heartbeats moves on too, as the worker does.

Pacing: polling N sockets costs O(N) per call (~1 ms at 5,000), so a turn of the loop
takes at least TURN seconds; a host's answer to an order waits at most that long.
"""

from __future__ import annotations

import heapq
import json
import logging
import os
import random
import time
from pathlib import Path

import zmq
import zmq.utils.monitor

from xce.core.errors import ProtocolError
from xce.proto.codec import decode_envelope
from xce.proto.hostside import ACK_EVERY
from xce.security.curve import ClientKeys, KeyStore, ephemeral
from xce.sim.fleet import SimHost
from xce.transport.sockets import dealer

log = logging.getLogger("xce.sim.fleet")
TURN = 0.01         # seconds: the shortest turn of the loop (see Pacing)
STATS_EVERY = 1.0   # seconds between writes of the stats file


def host_keys(store: KeyStore, names: list[str]) -> dict[str, ClientKeys]:
    """Each host's key pair, made and allowed where missing (as `xce up` does for its workers)."""
    server = store.server_public()
    out = {}
    for name in names:
        store.ensure_daemon(name)
        public, secret = store.daemon(name)
        out[name] = ClientKeys(server, public, secret)
    return out


class Fleet:
    def __init__(self, endpoints: list[str], hosts: list[SimHost], keys: dict[str, ClientKeys],
                 stats: Path | None = None) -> None:
        self.endpoints = list(endpoints)
        self.hosts = {h.name: h for h in hosts}
        self.keys = keys
        self.stats_path = stats
        self.ctx = zmq.Context(io_threads=1)
        # Room for every host's socket, the probes and their monitors, and the sockets a
        # failover replaces while the closed ones are still being reaped.
        self.ctx.set(zmq.MAX_SOCKETS, 4 * len(hosts) + 1024)
        self.sock: dict[str, zmq.Socket] = {}
        self.owner: dict[zmq.Socket, SimHost] = {}
        self.at: dict[str, str] = {}                # host -> endpoint it is connected to
        self.poller = zmq.Poller()
        self.timers: list[tuple[float, int, str]] = []  # (when, seq, host): its next beat or job end
        self.seq = 0
        self.next_beat: dict[str, float] = {}
        self.heard: dict[str, float] = {}           # host -> monotonic time of its last message
        self.probes: dict[zmq.Socket, tuple[str, zmq.Socket]] = {}  # monitor -> (endpoint, probe)
        self.up: dict[zmq.Socket, bool] = {}        # monitor -> its probe's connection is up
        self.stopping = False
        self.counts = {"beats": 0, "moves": 0}
        self.last_registered = 0.0

    # ---- sockets ----

    def connect(self, h: SimHost, endpoint: str) -> None:
        old = self.sock.pop(h.name, None)
        if old is not None:
            self.poller.unregister(old)
            del self.owner[old]
            old.close(0)
        s = dealer(self.ctx, endpoint, limit_input=True, curve=self.keys.get(h.name))
        self.sock[h.name], self.owner[s], self.at[h.name] = s, h, endpoint
        self.poller.register(s, zmq.POLLIN)
        h.registered = False
        self.heard[h.name] = time.monotonic()

    def probe(self, endpoint: str) -> None:
        keys = next(iter(self.keys.values()), None)
        s = dealer(self.ctx, endpoint, curve=ephemeral(keys.server_public) if keys else None)
        mon = s.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
        self.probes[mon] = (endpoint, s)
        self.up[mon] = False
        self.poller.register(mon, zmq.POLLIN)

    def move_on(self, h: SimHost, endpoint: str | None = None) -> None:
        """Connect ``h`` to ``endpoint``, else to the endpoint after its current one."""
        if endpoint is None:
            i = self.endpoints.index(self.at[h.name]) if self.at[h.name] in self.endpoints else -1
            endpoint = self.endpoints[(i + 1) % len(self.endpoints)]
        elif endpoint not in self.endpoints:
            self.endpoints.append(endpoint)
        self.counts["moves"] += 1
        self.connect(h, endpoint)

    def send(self, h: SimHost, frames: list[bytes]) -> None:
        s = self.sock[h.name]
        for f in frames:
            try:
                s.send(f, zmq.NOBLOCK)
            except zmq.Again:
                log.warning("%s: controller queue full; dropping a message", h.name)

    # ---- timers ----

    def at_time(self, when: float, h: SimHost) -> None:
        self.seq += 1
        heapq.heappush(self.timers, (when, self.seq, h.name))

    def due(self, now: float) -> None:
        """Heartbeats and job ends whose time has come."""
        mono = time.monotonic()
        while self.timers and self.timers[0][0] <= now:
            when, _, name = heapq.heappop(self.timers)
            h = self.hosts[name]
            h.end_due(now)
            self.send(h, h.flush(mono))
            if h.registered and self.next_beat.get(name) == when:
                self.send(h, [h.beat(now)])
                self.counts["beats"] += 1
                self.next_beat[name] = when + h.heartbeat
                self.at_time(when + h.heartbeat, h)
            silent = mono - self.heard[name]
            if silent > (ACK_EVERY + 1) * h.heartbeat + 0.5 and len(self.endpoints) > 1:
                self.move_on(h)

    # ---- the loop ----

    def register_due(self) -> None:
        mono = time.monotonic()
        for h in self.hosts.values():
            if not h.registered and mono >= h.next_register:
                self.send(h, [h.register(mono, random.random())])

    def receive(self, s: zmq.Socket, now: float) -> None:
        h = self.owner[s]
        while True:
            try:
                data = s.recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            self.heard[h.name] = time.monotonic()
            try:
                env = decode_envelope(data)
            except ProtocolError as e:
                log.warning("%s: bad message from the controller: %s", h.name, e.message)
                continue
            was, started = h.registered, h.started
            self.send(h, h.receive(env, now))
            if h.started > started:  # the new tasks are the last ones in (insertion order)
                for t in list(h.tasks.values())[started - h.started:]:
                    self.at_time(t.ends(), h)
            if h.registered and not was:
                self.last_registered = now
                self.next_beat[h.name] = now
                self.at_time(now, h)
        if h.leader is not None:
            leader, h.leader = h.leader, None
            self.move_on(h, leader)

    def lost(self, mon: zmq.Socket) -> None:
        """A controller dropped its connections: every host on it moves to the next endpoint.

        Only a connection that was up counts: a handshake that failed (a busy controller's
        CURVE check timing out) would otherwise move every host at once, where a worker's
        own monitor moves only that worker.
        """
        event = zmq.utils.monitor.parse_monitor_message(mon.recv_multipart())["event"]
        was, self.up[mon] = self.up[mon], event == zmq.EVENT_HANDSHAKE_SUCCEEDED
        if event != zmq.EVENT_DISCONNECTED or not was:
            return
        endpoint = self.probes[mon][0]
        log.info("lost the controller at %s; moving its hosts on", endpoint)
        for h in list(self.hosts.values()):
            if self.at[h.name] == endpoint:
                self.move_on(h)

    def run(self) -> None:
        for ep in self.endpoints:
            self.probe(ep)
        for h in self.hosts.values():
            self.connect(h, self.endpoints[0])
        next_stats = 0.0
        while not self.stopping:
            turn = time.monotonic()
            self.register_due()
            wait = max(0.0, min(self.timers[0][0] - time.time(), 0.2)) if self.timers else 0.2
            for s, _ in self.poller.poll(int(wait * 1000) + 1):
                if s in self.probes:
                    self.lost(s)
                elif s in self.owner:
                    self.receive(s, time.time())
            self.due(time.time())
            if time.monotonic() >= next_stats:
                self.write_stats()
                next_stats = time.monotonic() + STATS_EVERY
            rest = TURN - (time.monotonic() - turn)
            if rest > 0:
                time.sleep(rest)  # pacing (see the module docstring), not a wait for an event
        self.close()

    def stats(self) -> dict[str, float]:
        hosts = self.hosts.values()
        cpu = os.times()
        return {"hosts": len(self.hosts), "registered": sum(1 for h in hosts if h.registered),
                "registrations": sum(h.registrations for h in hosts), "last_registered": self.last_registered,
                "running": sum(len(h.tasks) for h in hosts), "started": sum(h.started for h in hosts),
                "ended": sum(h.ended for h in hosts), "reports": sum(h.reports for h in hosts), **self.counts,
                "refused": sum(1 for h in hosts if h.refused), "cpu_s": cpu.user + cpu.system,
                "time": time.time(), "pid": os.getpid()}

    def write_stats(self) -> None:
        if self.stats_path is None:
            return
        tmp = self.stats_path.with_name(self.stats_path.name + ".tmp")
        tmp.write_text(json.dumps(self.stats()))
        tmp.replace(self.stats_path)

    def close(self) -> None:
        self.write_stats()
        for mon, (_, s) in self.probes.items():
            s.disable_monitor()
            mon.close(0)
            s.close(0)
        for s in self.sock.values():
            s.close(0)
        self.ctx.destroy(linger=0)
