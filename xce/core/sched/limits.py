"""Limits, as LSF's lsb.resources: how much one user, group, project, queue or host may hold.

A limit names what it counts per principal (``per``: user, group, project, queue, host),
optionally only for some of them (``members``), and its caps: running ``jobs``, ``slots``,
charged memory ``mem`` (bytes, ``accounting`` charge: max(reserved, actual)), and
``pending`` jobs.  ``LimitBook`` holds what each principal uses now, built from running jobs
and the ledger, and is charged as a round places jobs.  Its reasons name the limit::

    limit user_slots: alice uses 8 of 8 slots

The scheduler asks ``job_reason`` before and after it picks hosts and ``host_reason`` for
each host; the leader's re-check asks ``check`` with the same book rules.  ``pending`` caps
are for the submit door (``pending_reason``): a round never holds a job for them.  Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

import msgspec

from xce.core import accounting
from xce.core.model import Alloc, Job, JobSpec
from xce.core.units import fmt_bytes, parse_mem


class LimitConf(Protocol):
    """What the core reads of a configured limit (xce.site.config.LimitConf is one)."""

    name: str
    per: str
    members: list[str]
    jobs: int | None
    slots: int | None
    mem: str
    pending: int | None

PER = ("user", "group", "project", "queue", "host")
COUNTS = ("jobs", "slots", "mem")
HELD = "limit "  # how every reason of a limit starts: "limit NAME: WHO ..."


@dataclass(frozen=True, slots=True)
class Limit:
    name: str
    per: str
    members: frozenset[str] = frozenset()  # empty: every principal of its kind
    jobs: int | None = None
    slots: int | None = None
    mem: int | None = None
    pending: int | None = None

    def covers(self, who: str) -> bool:
        return not self.members or who in self.members


def principal(job: Job, per: str) -> str:
    return who_of(job.spec, per)


def who_of(s: JobSpec, per: str) -> str:
    return {"user": s.user, "group": s.group, "project": s.project, "queue": s.queue}[per]


def limits_of(confs: Iterable[LimitConf]) -> tuple[Limit, ...]:
    """Limits from config (xce.site.config.LimitConf, already validated)."""

    out = []
    for c in confs:
        out.append(Limit(name=c.name, per=c.per, members=frozenset(c.members), jobs=c.jobs, slots=c.slots,
                         mem=parse_mem(c.mem) if c.mem else None, pending=c.pending))
    return tuple(out)


class LimitBook:
    """Use per (per, principal): [running jobs, slots, charged bytes]; pending jobs apart."""

    def __init__(self, limits: tuple[Limit, ...]) -> None:
        self.limits = limits
        self.job_limits = tuple(lim for lim in limits if lim.per != "host" and _caps_running(lim))
        self.host_limits = tuple(lim for lim in limits if lim.per == "host" and _caps_running(lim))
        self.used: dict[tuple[str, str], list[int]] = {}
        self.pending: dict[tuple[str, str], int] = {}

    @classmethod
    def build(cls, limits: tuple[Limit, ...], running: Iterable[Job], pending: Iterable[Job] = (),
              ledger: accounting.Ledger | None = None) -> LimitBook:
        book = cls(limits)
        for j in running:
            book.charge(j, j.allocs, _charged(j, ledger))
        for j in pending:
            book.add_pending(j.spec)
        return book

    def add_pending(self, spec: JobSpec, n: int = 1) -> None:
        """Count ``n`` more pending jobs of this spec's principals (an array's elements are many)."""
        for per in ("user", "group", "project", "queue"):
            k = (per, who_of(spec, per))
            self.pending[k] = self.pending.get(k, 0) + n

    def charge(self, job: Job, allocs: list[Alloc], mem_by_host: dict[str, int] | None = None) -> None:
        """Count a placed (or running) job: ``mem_by_host`` its charge, else its reservations."""
        mem = {a.host: a.mem for a in allocs} if mem_by_host is None else mem_by_host
        for per in ("user", "group", "project", "queue"):
            self._add((per, principal(job, per)), 1, sum(a.slots for a in allocs), sum(mem.values()))
        for a in allocs:
            self._add(("host", a.host), 1, a.slots, mem.get(a.host, 0))

    def _add(self, k: tuple[str, str], jobs: int, slots: int, mem: int) -> None:
        u = self.used.get(k)
        if u is None:
            u = self.used[k] = [0, 0, 0]
        u[0] += jobs
        u[1] += slots
        u[2] += mem

    def job_reason(self, job: Job, slots: int, mem: int) -> str | None:
        """Why placing ``job`` (``slots``, ``mem`` charged) would pass a limit; None if none."""
        for lim in self.job_limits:
            who = principal(job, lim.per)
            if lim.covers(who):
                why = _over(lim, who, self.used.get((lim.per, who)), (1, slots, mem))
                if why:
                    return why
        return None

    def host_reason(self, host: str, slots: int, mem: int) -> str | None:
        for lim in self.host_limits:
            if lim.covers(host):
                why = _over(lim, host, self.used.get(("host", host)), (1, slots, mem))
                if why:
                    return why
        return None

    def check(self, job: Job, allocs: list[Alloc]) -> str | None:
        """The leader's re-check of a proposed placement against the limits."""
        why = self.job_reason(job, sum(a.slots for a in allocs), sum(a.mem for a in allocs))
        for a in allocs:
            why = why or self.host_reason(a.host, a.slots, a.mem)
        return why

    def pending_reason(self, spec: JobSpec, more: int = 1) -> str | None:
        """Why ``more`` pending jobs of this spec's principals pass a ``pending`` cap (the submit door)."""
        for lim in self.limits:
            if lim.pending is None or lim.per == "host":
                continue
            who = who_of(spec, lim.per)
            n = self.pending.get((lim.per, who), 0)
            if lim.covers(who) and n + more > lim.pending:
                return f"{HELD}{lim.name}: {who} has {n} of {lim.pending} pending jobs"
        return None


    def rows(self, reasons: Mapping[int, str] | None = None) -> list[LimitRow]:
        """Each limit's use per principal it covers (its named members even when idle), and the
        pending jobs whose reason names it: what `xce limits` shows.  A limit nobody uses yet
        is one row, ``who`` "", so every configured limit shows (LSF's blimits -c)."""
        held: dict[tuple[str, str], list[int]] = {}
        for jid, why in (reasons or {}).items():
            if why.startswith(HELD):
                name, _, rest = why[len(HELD):].partition(": ")
                held.setdefault((name, rest.split(" ", 1)[0]), []).append(jid)
        out: list[LimitRow] = []
        for lim in self.limits:
            seen = {who for (per, who) in (*self.used, *self.pending) if per == lim.per and lim.covers(who)}
            for who in sorted(seen | lim.members) or [""]:
                u = self.used.get((lim.per, who), (0, 0, 0))
                out.append(LimitRow(name=lim.name, per=lim.per, who=who, jobs=u[0], slots=u[1], mem=u[2],
                                    pending=self.pending.get((lim.per, who), 0), max_jobs=lim.jobs,
                                    max_slots=lim.slots, max_mem=lim.mem, max_pending=lim.pending,
                                    held=sorted(held.get((lim.name, who), []))))
        return out


class LimitRow(msgspec.Struct, kw_only=True):
    """One limit's use by one principal, as `xce limits` and /v1/limits show it."""

    name: str
    per: str                 # user | group | project | queue | host
    who: str                 # "": nobody uses the limit yet
    jobs: int                # running jobs
    slots: int
    mem: int                 # bytes charged: max(reserved, actual)
    pending: int
    max_jobs: int | None     # None: not capped
    max_slots: int | None
    max_mem: int | None
    max_pending: int | None
    held: list[int] = []     # pending jobs the last round held with this limit's reason


def _caps_running(lim: Limit) -> bool:
    return lim.jobs is not None or lim.slots is not None or lim.mem is not None


def _over(lim: Limit, who: str, used: list[int] | None, more: tuple[int, int, int]) -> str | None:
    have = used or (0, 0, 0)
    for i, (cap, what) in enumerate(((lim.jobs, "running jobs"), (lim.slots, "slots"), (lim.mem, "mem"))):
        if cap is not None and have[i] + more[i] > cap:
            if what == "mem":
                return f"{HELD}{lim.name}: {who} uses {fmt_bytes(have[i])} of {fmt_bytes(cap)} mem (charged)"
            return f"{HELD}{lim.name}: {who} uses {have[i]} of {cap} {what}"
    return None


def _charged(job: Job, ledger: accounting.Ledger | None) -> dict[str, int] | None:
    """A running job's charge per host (max(reserved, actual)) from the ledger, if it has one."""
    if ledger is None or job.id not in ledger.by_job:
        return None
    return {acc.host: acc.charged for acc in ledger.by_job[job.id]}
