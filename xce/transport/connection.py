"""The request connection to the controllers: one DEALER per endpoint, one request at a time,
following the Raft leader by itself ("not leader, try X" redirects; silent controllers are
retried with backoff and jitter until the request's deadline).  Every write carries an
idempotency key, so a retry after a lost reply is safe.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import zmq

from xce.core.errors import NotLeader, Unavailable, XceError
from xce.proto.codec import MAX_REPLY, decode_envelope, decode_reply, encode
from xce.proto.opcodes import Op
from xce.transport.sockets import dealer

if TYPE_CHECKING:
    from xce.security.curve import ClientKeys


class Connection:
    """One DEALER per controller endpoint, used one request at a time."""

    def __init__(self, endpoints: Sequence[str], token: str = "", timeout: float = 10.0,
                 ctx: zmq.Context | None = None, curve: ClientKeys | None = None) -> None:
        if not endpoints:
            raise Unavailable("no controller endpoint configured")
        self.endpoints = list(endpoints)
        self.token = token
        self.timeout = timeout
        self.ctx = ctx or zmq.Context.instance()
        self.current = 0
        self.sock: zmq.Socket | None = None
        self.rid = random.randrange(1 << 30)
        self.term = 0
        self.curve = curve

    def _socket(self) -> zmq.Socket:
        if self.sock is None:

            self.sock = dealer(self.ctx, self.endpoints[self.current], curve=self.curve)
        return self.sock

    def _switch(self, endpoint: str | None = None) -> None:
        if self.sock is not None:
            self.sock.close(0)
            self.sock = None
        if endpoint and endpoint not in self.endpoints:
            self.endpoints.append(endpoint)
        self.current = self.endpoints.index(endpoint) if endpoint else (self.current + 1) % len(self.endpoints)

    def request(self, op: Op, body: Any, timeout: float | None = None) -> Any:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        backoff = 0.05
        attempt_timeout = 0.75
        heard: XceError | None = None  # the last thing a controller said: the truest error to give
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise heard or Unavailable(f"no answer from the controller at {self.endpoints[self.current]} "
                                           f"within {self.timeout if timeout is None else timeout:.0f}s")
            # With several controllers, give up on a silent one quickly (it may be dead) and
            # try the next; every write carries an idempotency key, so a retry is safe.
            per_try = left if len(self.endpoints) == 1 else min(left, attempt_timeout)
            try:
                return self._once(op, body, per_try)
            except NotLeader as e:
                if e.leader and e.leader != self.endpoints[self.current]:
                    self._switch(e.leader)
                    continue
                err: XceError = e
                heard = e
                # This one knows no leader (a candidate, or cut off from the others): another
                # controller may be the leader, so ask the next rather than this one again.
                self._switch()
            except Unavailable as e:
                err = e
                attempt_timeout = min(attempt_timeout * 2, 8.0)
            if deadline - time.monotonic() <= backoff:
                raise heard or err
            time.sleep(backoff * (0.5 + random.random()))
            backoff = min(backoff * 2, 1.0)

    def _once(self, op: Op, body: Any, timeout: float) -> Any:
        sock = self._socket()
        self.rid += 1
        rid = self.rid
        sock.send(encode(op, rid, body, token=self.token))
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0 or not sock.poll(int(left * 1000) + 1):
                silent = self.endpoints[self.current]
                self._switch()  # drop the socket: a late reply must not be read as another's
                raise Unavailable(f"controller at {silent} did not answer")
            env = decode_envelope(sock.recv(), MAX_REPLY)
            if env.rid != rid:
                continue
            self.term = max(self.term, env.term)
            return decode_reply(env, op)

    def at(self, endpoint: str, timeout: float = 2.0) -> Connection:
        """A connection to one controller, with this one's token and keys."""
        return Connection([endpoint], self.token, timeout, self.ctx, self.curve)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close(0)
            self.sock = None
