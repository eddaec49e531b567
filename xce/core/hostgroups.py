"""Host groups and per-queue host lists (LSF's HostGroup in lsb.hosts, HOSTS in lsb.queues).

Pure: names in, a ``HostSet`` out.  A list of terms is resolved once, at config load:

    NAME       a host, or the host group of that name (a group's name wins)
    NAME/      the host group NAME, which must exist (LSF writes groups with a trailing slash)
    all        every host, registered now or later
    ~TERM      not these: taken out of the union of the other terms

A ``HostSet`` is either "every host but ``names``" or "just ``names``", so ``all ~node4``
holds for a host that registers tomorrow.  A group may name other groups; a cycle, an
unknown ``NAME/``, a list of exclusions alone, a list that names no host, or LSF's
``others``, ``none`` and ``host+N`` preferences (not yet here) are refused, with the term named.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

ALL = "all"
NOT_YET = ("others", "none")  # LSF keywords refused by name: never taken for host names


class HostListError(ValueError):
    """A host list or group that cannot be resolved; the message names the term."""


@dataclass(frozen=True, slots=True)
class HostSet:
    everyone: bool             # True: every host but ``names``; False: just ``names``
    names: frozenset[str] = frozenset()

    def __contains__(self, host: object) -> bool:
        return (host not in self.names) if self.everyone else (host in self.names)

    def union(self, other: HostSet) -> HostSet:
        a, b = self, other
        if a.everyone and b.everyone:
            return HostSet(True, a.names & b.names)
        if a.everyone or b.everyone:
            every, some = (a, b) if a.everyone else (b, a)
            return HostSet(True, every.names - some.names)
        return HostSet(False, a.names | b.names)

    def minus(self, other: HostSet) -> HostSet:
        a, b = self, other
        if not a.everyone:
            return HostSet(False, a.names & b.names if b.everyone else a.names - b.names)
        return HostSet(False, b.names - a.names) if b.everyone else HostSet(True, a.names | b.names)

    def says(self) -> str:
        """The set as an operator writes it: ``node1 node2`` or ``all ~node4``."""
        if self.everyone:
            return ALL + "".join(f" ~{n}" for n in sorted(self.names))
        return " ".join(sorted(self.names))


NOBODY = HostSet(False)


def resolve(terms: Iterable[str], groups: Mapping[str, Iterable[str]]) -> HostSet:
    """The hosts ``terms`` name, groups expanded; HostListError naming the bad term."""
    return _resolve(list(terms), groups, ())


def _resolve(terms: list[str], groups: Mapping[str, Iterable[str]], within: tuple[str, ...]) -> HostSet:
    pos, neg, any_pos = NOBODY, NOBODY, False
    for raw in terms:
        term = raw.strip()
        negated = term.startswith("~")
        one = _term(term[1:] if negated else term, groups, within)
        if negated:
            neg = neg.union(one)
        else:
            pos, any_pos = pos.union(one), True
    if not any_pos:
        raise HostListError("names no host to take exclusions (~) from: add `all` or hosts")
    out = pos.minus(neg)
    if out == NOBODY:
        raise HostListError(f"names no host ({' '.join(terms)})")
    return out


def _term(name: str, groups: Mapping[str, Iterable[str]], within: tuple[str, ...]) -> HostSet:
    if not name:
        raise HostListError("an empty host name")
    if name == ALL:
        return HostSet(True)
    if name in NOT_YET or "+" in name:
        raise HostListError(f"{name}: LSF's `others`, `none` and host preferences (+N) are not supported by this "
                            "XCE yet; name the hosts, or `all ~NAME`")
    group = name[:-1] if name.endswith("/") else name
    if group in groups:
        if group in within:
            raise HostListError(f"host group {group} contains itself ({' -> '.join((*within, group))})")
        return _resolve(list(groups[group]), groups, (*within, group))
    if name.endswith("/"):
        known = ", ".join(sorted(groups)) or "none defined"
        raise HostListError(f"unknown host group {group} (host_groups: {known})")
    return HostSet(False, frozenset((name,)))


def queue_fields(hosts: HostSet | None) -> dict[str, tuple[str, ...]]:
    """A resolved host list as the Queue model holds it (model.Queue.hosts / hosts_not)."""
    if hosts is None:
        return {}
    names = tuple(sorted(hosts.names))
    return {"hosts_not": names} if hosts.everyone else {"hosts": names}


def of_queue(hosts: tuple[str, ...], hosts_not: tuple[str, ...]) -> HostSet | None:
    """The HostSet a queue's model fields stand for; None: every host."""
    if hosts:
        return HostSet(False, frozenset(hosts))
    return HostSet(True, frozenset(hosts_not)) if hosts_not else None


def queue_says(hosts: tuple[str, ...], hosts_not: tuple[str, ...]) -> str:
    """A queue's hosts as `xce queues` and bqueues -l (HOSTS:) show them: ``all`` when unlimited."""
    return (of_queue(hosts, hosts_not) or HostSet(True)).says()
