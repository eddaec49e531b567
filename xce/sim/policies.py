"""Named policies: configurations of the one replay engine, never engines of their own.

A policy says what memory a host offers the scheduler (one of accounting.MEM_VIEWS, the
same functions placement.host_caps applies in the daemons), which backfill stage of the
pure core runs (xce.core.sched.backfill: off = greedy, EASY, conservative), and whether
the queue is ordered by fairshare (xce.core.sched.fairshare, with the daemons' default
tree, weights and half-life: ``SitePolicy.from_config(Config())``), and which of issue
18's memory features run: reclamation (reclaiming jobs on settled slack, sent away by
xce/core/reclaim.py's rule), right-sizing (``rusage[mem=auto]`` through
xce/core/autosize.py, from the replay's own history) and retry with more memory
(xce/core/memretry.py, in the state machine).  ``Knobs`` holds their settings (the flags).
Adding a policy is one entry in POLICIES; the engine reads nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from xce.core.accounting import MEM_VIEWS, MemView
from xce.core.errors import InvalidRequest
from xce.core.sched.backfill import BackfillRules

GREEDY = BackfillRules(mode="off")  # queue priority, then submit; any job that fits starts
EASY = BackfillRules(mode="easy")   # the daemons' default: the first blocked job holds a reservation
CONSERVATIVE = BackfillRules(mode="conservative", depth=8)  # per round: the first 8 blocked jobs hold one each
FCFS = BackfillRules(mode="fcfs")  # strict first come, first served: the first job that waits holds all behind it


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    mem_view: MemView
    backfill: BackfillRules = GREEDY  # the core's backfill stage (xce.core.sched.backfill)
    about: str = ""
    fairshare: bool = False  # order by the daemons' default fairshare before submit order
    reclaim: bool = False    # reclaiming jobs run on settled slack (Knobs: which jobs, margin, policy)
    rightsize: bool = False  # reservations from history, p95 peak x (1 + margin), else the request
    retry: bool = False      # a job killed for its memory is requeued larger (its queue's mem_retries)
    shrink: bool = False     # a shrink-settled job's reservation is lowered to its peak + margin (accounting.shrunk)
    # Conservative backfill as the literature's: every job reserved at arrival on a profile kept
    # between rounds, compressed when a job ends early (xce.core.sched.conservative); ``backfill``
    # then gives only the expected run times.
    profile: bool = False


@dataclass(frozen=True, slots=True)
class Knobs:
    """The settings of reclamation, right-sizing and retry in a replay (``xce sim`` flags)."""

    reclaim_share: float = 0.25     # the seeded share of jobs that accept reclamation ...
    reclaim_queues: tuple[str, ...] = ()  # ... besides every job of these queues
    reclaim_margin: float = 0.1     # [reclaim] margin: the share of a lender's reservation kept back
    settle: float = 60.0            # [reclaim] min_run and window, seconds
    shrink_age: float = 0.6         # [reclaim] shrink_age: the share of its run a peak holds still before a shrink
    reclaim_policy: str = "requeue"  # what a reclaiming job sent away gets: requeue or kill
    size_margin: float = 0.1        # the queue's mem_auto_margin
    size_min_runs: int = 1          # the queue's mem_auto_min_runs (the daemons' default is 3; 1: as replayed before)
    history: int = 100              # right-sizing reads the last N finished runs of a (user, exe, queue)
    mem_retries: int = 2            # the queue's mem_retries under retry
    mem_retry_factor: float = 2.0   # the queue's mem_retry_factor (the daemons' default)
    seed: int = 1

    def __post_init__(self) -> None:
        if not 0.0 <= self.reclaim_share <= 1.0:
            raise InvalidRequest(f"--reclaim-share must be between 0 and 1, got {self.reclaim_share}")
        for name in ("reclaim_margin", "size_margin"):
            if not 0.0 <= getattr(self, name) < 10.0:
                raise InvalidRequest(f"--{name.replace('_', '-')} must be a share >= 0, got {getattr(self, name)}")
        if self.reclaim_policy not in ("requeue", "kill"):
            raise InvalidRequest(f"--reclaim-policy must be requeue or kill (the replay does not model "
                                 f"suspension), got {self.reclaim_policy!r}")
        if not 0.0 <= self.shrink_age:
            raise InvalidRequest(f"--shrink-age must be a share >= 0 (1 or more: never), got {self.shrink_age}")
        if self.history < 1 or self.size_min_runs < 1 or self.mem_retries < 0 or self.mem_retry_factor <= 1 or self.settle < 0:
            raise InvalidRequest("--history and --size-min-runs must be >= 1, --mem-retries >= 0, --mem-retry-factor > 1 and "
                                 "--settle >= 0")


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
    "xce-conservative": Policy("xce-conservative", MEM_VIEWS["xce"], CONSERVATIVE,
                               _VIEWS[2][1] + "; conservative backfill (reservations for the first 8 blocked jobs)"),
    "xce-conservative-kept": Policy("xce-conservative-kept", MEM_VIEWS["xce"], CONSERVATIVE,
                                    _VIEWS[2][1] + "; conservative backfill as the literature's: every job reserved "
                                    "at arrival, the reservations kept and compressed when a job ends early",
                                    profile=True),
    "xce-fcfs": Policy("xce-fcfs", MEM_VIEWS["xce"], FCFS,
                       _VIEWS[2][1] + "; strict FCFS: no job passes the first one that waits (no backfilling)"),
    "flat-fcfs": Policy("flat-fcfs", MEM_VIEWS["flat"], FCFS,
                        _VIEWS[0][1] + "; strict FCFS: no job passes the first one that waits (no backfilling)"),
    # Issue 18: memory reserved but unused goes back to work.
    "xce+reclaim": Policy("xce+reclaim", MEM_VIEWS["xce"], GREEDY, "xce; reclaiming jobs on settled slack",
                          reclaim=True),
    "xce+rightsize": Policy("xce+rightsize", MEM_VIEWS["xce"], GREEDY, "xce; rusage[mem=auto] from history",
                            rightsize=True),
    "xce+retry": Policy("xce+retry", MEM_VIEWS["xce"], GREEDY, "xce; memory kills retried larger", retry=True),
    "xce+all": Policy("xce+all", MEM_VIEWS["xce"], GREEDY, "xce; reclaim, right-size and retry",
                      reclaim=True, rightsize=True, retry=True),
    "xce+shrink": Policy("xce+shrink", MEM_VIEWS["xce"], GREEDY,
                         "xce; a shrink-settled job's reservation lowered to its peak + margin", shrink=True),
    "xce+rightsize+shrink": Policy("xce+rightsize+shrink", MEM_VIEWS["xce"], GREEDY,
                                   "xce+rightsize; a shrink-settled job's reservation lowered to its peak + margin",
                                   rightsize=True, shrink=True),
    "xce+all+shrink": Policy("xce+all+shrink", MEM_VIEWS["xce"], GREEDY, "xce+all; shrink-settled reservations lowered",
                             reclaim=True, rightsize=True, retry=True, shrink=True),
    "flat+retry": Policy("flat+retry", MEM_VIEWS["flat"], GREEDY, "flat; memory kills retried larger", retry=True),
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
