"""Host groups and per-queue host lists alone: terms -> the hosts they name, and refusals naming the term."""

from __future__ import annotations

import re

import pytest

from xce.core.hostgroups import HostListError, HostSet, of_queue, queue_fields, resolve

GROUPS = {"gpu": ["node3", "node4"], "cpu": ["all", "~gpu/"], "big": ["gpu", "node9"], "loop": ["node1", "pool"],
          "pool": ["loop/"]}


@pytest.mark.parametrize("terms, inside, outside", [
    (["node1", "node2"], ["node1", "node2"], ["node3"]),
    (["gpu"], ["node3", "node4"], ["node1"]),
    (["gpu/", "node1"], ["node1", "node3"], ["node2"]),
    (["all", "~node4"], ["node1", "node3", "node99"], ["node4"]),  # a host that registers later is in
    (["all", "~gpu"], ["node1"], ["node3", "node4"]),
    (["cpu"], ["node1"], ["node3"]),                               # a group with an exclusion
    (["cpu", "node3"], ["node1", "node3"], ["node4"]),             # a union puts a host back
    (["big", "~node3"], ["node4", "node9"], ["node3", "node1"]),   # nested groups
])
def test_resolve(terms, inside, outside) -> None:
    hs = resolve(terms, GROUPS)
    assert all(h in hs for h in inside) and not any(h in hs for h in outside)
    assert of_queue(**({"hosts": (), "hosts_not": ()} | queue_fields(hs))) == hs  # as the Queue model holds it


@pytest.mark.parametrize("terms, message", [
    (["gpus/"], "unknown host group gpus (host_groups: big, cpu, gpu, loop, pool)"),
    (["~node1"], "names no host to take exclusions (~) from"),
    (["node1", "~node1"], "names no host (node1 ~node1)"),
    (["loop"], "host group loop contains itself (loop -> pool -> loop)"),
    ([""], "an empty host name"),
    (["others"], "others: LSF's `others`, `none` and host preferences (+N) are not supported"),
    (["node1+2"], "node1+2: LSF's `others`"),
])
def test_resolve_refuses_naming_the_term(terms, message) -> None:
    with pytest.raises(HostListError, match=re.escape(message)):
        resolve(terms, GROUPS)


def test_a_host_set_reads_as_written() -> None:
    assert resolve(["all", "~gpu"], GROUPS).says() == "all ~node3 ~node4"
    assert resolve(["gpu"], GROUPS) == HostSet(False, frozenset({"node3", "node4"}))
