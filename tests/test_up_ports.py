"""`xce up` and the tests pick ports no outgoing connection can take before a daemon binds them."""

from __future__ import annotations

import socket

from xce.cli.up import _ephemeral_range, free_port


def test_ports_are_free_distinct_and_outside_the_ephemeral_range() -> None:
    low, high = _ephemeral_range()
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    assert not any(low <= p <= high for p in ports)
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[-1]))  # still free
