"""`xce up` and the tests pick ports no outgoing connection can take before a daemon binds them."""

from __future__ import annotations

import socket

from pathlib import Path

from xce.cli.up import _ephemeral_range, free_port, last_ports, write_cluster_file


def test_ports_are_free_distinct_and_outside_the_ephemeral_range() -> None:
    low, high = _ephemeral_range()
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    assert not any(low <= p <= high for p in ports)
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[-1]))  # still free


def test_a_state_directory_keeps_its_controller_ports_while_they_are_free(tmp_path: Path) -> None:
    first = write_cluster_file(tmp_path, 3, "1G", 1, 1.0)
    assert write_cluster_file(tmp_path, 3, "1G", 1, 1.0)["_rafts"] == first["_rafts"]
    assert last_ports(tmp_path, 1) is None  # another number of controllers: new ports
    with socket.socket() as s:
        s.bind(("127.0.0.1", int(first["_rafts"][1].rsplit(":", 1)[1])))
        s.listen()
        assert last_ports(tmp_path, 3) is None  # one is taken: all new
        moved = write_cluster_file(tmp_path, 3, "1G", 1, 1.0)
    assert set(moved["_rafts"]).isdisjoint(first["_rafts"])
