"""Named policies: configurations of the one replay engine, never engines of their own.

A policy says what memory a host offers the scheduler (one of accounting.MEM_VIEWS, the
same functions placement.host_caps applies in the daemons), which backfill stage of the
pure core runs (xce.core.sched.backfill: off = greedy, EASY, conservative), and whether
the queue is ordered by fairshare (xce.core.sched.fairshare, with the daemons' default
tree, weights and half-life: ``SitePolicy.from_config(Config())``).  Reclaimable memory
(issue 18) is still to come as a further entry.  Adding a policy is one entry in
POLICIES; the engine reads nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from xce.core.accounting import MEM_VIEWS, MemView
from xce.core.errors import InvalidRequest
from xce.core.sched.backfill import BackfillRules

GREEDY = BackfillRules(mode="off")  # queue priority, then submit; any job that fits starts
EASY = BackfillRules(mode="easy")   # the daemons' default: the first blocked job holds a reservation


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    mem_view: MemView
    backfill: BackfillRules = GREEDY  # the core's backfill stage (xce.core.sched.backfill)
    about: str = ""
    fairshare: bool = False  # order by the daemons' default fairshare before submit order


_VIEWS = (("flat", "Slurm, PBS, Kubernetes: capacity - sum of requests"),
          ("lsf", "LSF: live OS-available - sum of full reservations"),
          ("xce", "XCE: OS-available - sum of slack; charge max(reserved, actual)"))
POLICIES: dict[str, Policy] = {
    **{v: Policy(v, MEM_VIEWS[v], GREEDY, about) for v, about in _VIEWS},
    **{f"{v}-easy": Policy(f"{v}-easy", MEM_VIEWS[v], EASY, about + "; EASY backfill on the requested times")
       for v, about in _VIEWS},
    # The daemons' own default stages: fairshare, with and without EASY backfill.
    "xce-fair": Policy("xce-fair", MEM_VIEWS["xce"], GREEDY, _VIEWS[2][1] + "; fairshare", fairshare=True),
    "xce-fair-easy": Policy("xce-fair-easy", MEM_VIEWS["xce"], EASY,
                            _VIEWS[2][1] + "; fairshare and EASY backfill (the daemons' defaults)", fairshare=True),
}


def policies(names: str) -> list[Policy]:
    """``flat,lsf,xce`` as policies, in the order given; an unknown name is an error naming it."""
    out = []
    for name in (n.strip() for n in names.split(",")):
        if not name:
            continue
        p = POLICIES.get(name)
        if p is None:
            raise InvalidRequest(f"unknown policy {name!r} (known: {', '.join(POLICIES)})")
        out.append(p)
    if not out:
        raise InvalidRequest("--policy names no policy")
    return out
