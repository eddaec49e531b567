"""What a reactor may read: the hard state, the soft state, the configuration and a view of Raft.

``Context`` is built once by the shell and lives as long as it: no request allocates one.
The hard state (``ctx.state``, the replicated ClusterState) is read-only here: it changes
only through commands a reactor commits (``Outbox.commit``).  The soft state is the
reactors' own memory, changed in place: ``live`` (usage, OS-available memory, last
heartbeats, pending reasons), ``book`` (which worker runs what, orders not yet
confirmed) and ``stream`` (the event stream's sequence number, epoch and pending soft news).
Keeping it outside the outbox is deliberate: a heartbeat's usage lands in the Ledger on the
hot path (thousands a second), and tests read it back directly.

The shell holds the Raft lock while a reactor runs, so the hard state cannot move under it.
``RaftView`` and ``RequestLog`` are narrow ports: the shell passes the real pysyncobj
adapter and the log file, tests small fakes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from xce.core.resreq import ResReq
from xce.core.sched.site import SitePolicy
from xce.core.state import Changes, ClusterState
from xce.proto import schema as S
from xce.proto.opcodes import Op
from xce.replica.live import Live
from xce.security.auth import TokenService
from xce.security.launch import derive_key
from xce.security.policy import Policy
from xce.site.config import Config


class RaftView(Protocol):
    """What reactors see of Raft (xce/daemons/raft.py's ReplicatedState, through the shell)."""

    @property
    def state(self) -> ClusterState: ...
    def is_leader(self) -> bool: ...
    def term(self) -> int: ...
    def leader(self) -> str | None:  # the leader's ROUTER address, not its Raft address
        ...
    def status(self) -> dict[str, Any]: ...
    def caught_up(self) -> bool:  # a leader that has applied the log it was elected with (table.serve)
        ...
    def take_changes(self) -> Changes: ...
    def pending_changes(self) -> bool: ...


class RequestLog(Protocol):
    def query(self, user: str | None = None, since: float = 0.0, after: int = 0,
              limit: int = 1000) -> list[Any]: ...


class Peek(NamedTuple):
    """A client's peek, forwarded to the job's first host and waiting for its answer."""

    client: Any  # the client's Request (xce.reactors.outbox), answered when JOB_OUTPUT comes
    job_id: int
    state: str
    sent: float


@dataclass(eq=False)
class Gather:
    """A LAUNCH_POLL of several tasks: one POLL_TASK each, one answer once all came back."""

    client: Any                          # the client's Request
    answers: list[Any]                   # a TaskState per task, None until it came
    done: bool = False                   # answered (or refused): later TaskStates are dropped

    def claim(self) -> Any:
        """The client, the first time only (an error or the answer goes out once)."""
        if self.done:
            return None
        self.done = True
        return self.client


class Slot(NamedTuple):
    """Task ``index`` of a Gather, as ``Peek.client`` under its POLL_TASK's ticket."""

    gather: Gather
    index: int

    def claim(self) -> Any:
        return self.gather.claim()


@dataclass
class Book:
    """The leader's dispatch bookkeeping (soft): which worker is where, and what it confirmed.

    Only the unconfirmed orders are rescanned for re-sending (timers.redispatch).
    """

    workers: dict[str, bytes] = field(default_factory=dict)  # host -> its worker's ROUTER identity
    worker_keys: dict[str, str] = field(default_factory=dict)  # host -> the allowed key it registered with
    unconfirmed: dict[tuple[int, str], tuple[int, float]] = field(default_factory=dict)  # -> (attempt, sent)
    confirmed: dict[tuple[int, str], int] = field(default_factory=dict)  # (job, host) -> attempt
    # job -> (attempt, time, host) its first host confirmed starting it: `xce hist`'s "started" of a
    # running job (a job's Finish commits it, docs/jobmodel.md); dropped when its first Finish comes.
    started: dict[int, tuple[int, float, str]] = field(default_factory=dict)
    # Kills of shares no worker confirmed started: (job, host) -> (first sent, last sent).
    unstarted_kills: dict[tuple[int, str], tuple[float, float]] = field(default_factory=dict)
    # host -> when its worker registered with this leader listing every task it runs: from then
    # on ``confirmed`` is complete for that host (the audit and chase_kills rely on it).
    registered_at: dict[str, float] = field(default_factory=dict)
    lost_sent: set[str] = field(default_factory=set)  # hosts whose HostUnknown or HostLost is in flight
    # When a worker last came to register with this leader: while they keep coming, the hosts
    # still to come back are not timed (timers.hosts_silent: the re-registration wave).
    wave: float = 0.0
    # Unavail hosts not yet lost (their jobs UNKWN): HostLost once silent past lost_after.  Filled when
    # HostUnknown commits, and by a new leader from the state (timers.undecided_hosts).
    undecided: set[str] = field(default_factory=set)
    daemon_grants: dict[tuple[str, Op], float] = field(default_factory=dict)  # (token, op) -> until (monotonic)
    suspended: dict[tuple[int, str], bool] = field(default_factory=dict)  # (job, host) -> its worker's last word
    # (job, host) -> (attempt, stop?, sent): a SIGSTOP/SIGCONT the state wants and no worker confirmed yet
    signals: dict[tuple[int, str], tuple[int, bool, float]] = field(default_factory=dict)
    peeks: dict[int, Peek] = field(default_factory=dict)  # ticket -> the client waiting for a JOB_OUTPUT
    launches: dict[int, Peek] = field(default_factory=dict)  # ticket -> the client waiting for a TASK_STATE
    # (job, attempt) -> when reclaim sent it away; (job, -1) -> when it resumed it (reclaim.py)
    reclaimed: dict[tuple[int, int], float] = field(default_factory=dict)
    # (job, host) -> (attempt, reservation in force, sent): a shrink or restore committed and not yet
    # seen applied, so a heartbeat meanwhile does not decide it again (reactors/shrink.py)
    resized: dict[tuple[int, str], tuple[int, int, float]] = field(default_factory=dict)
    last_ticket: int = 0

    def ticket(self) -> int:
        self.last_ticket += 1
        return self.last_ticket

    def forget_leadership(self) -> None:
        """A new leader starts with no orders in flight: workers re-register and tell."""
        self.unconfirmed.clear()
        self.confirmed.clear()
        self.started.clear()
        self.unstarted_kills.clear()
        self.registered_at.clear()
        self.suspended.clear()
        self.signals.clear()
        self.resized.clear()
        self.wave = 0.0


def _no_news() -> dict[str, Any]:
    return {"live": [], "samples": [], "reasons": {}}


@dataclass
class Stream:
    """The event stream's counters and the soft news waiting for its next soft event."""

    epoch: str
    seq: int = 0
    subscribers: int = 0  # counted by the shell from the XPUB's (un)subscriptions
    news: dict[str, Any] = field(default_factory=_no_news)  # HostLive, HostSamples, reasons
    next_soft: float = 0.0

    def emit(self, ev: S.Event, out: Any) -> None:
        """Number the event and record it; with nobody listening skip it, keeping the count honest."""
        self.seq += 1
        if self.subscribers:
            ev.seq = self.seq
            out.event(ev)

    def take_news(self) -> dict[str, Any]:
        news, self.news = self.news, _no_news()
        return news


@dataclass
class Context:
    cfg: Config
    raft: RaftView
    live: Live
    book: Book
    stream: Stream
    policy: Policy
    parse: Callable[[str], ResReq]   # cached `-R` parser against the site's resources
    new_epoch: Callable[[], str]     # a fresh event-stream epoch (random: the shell's)
    tokens: TokenService | None = None  # None: access control off
    curve: bool = False              # the daemon key allow-list is on
    requests: RequestLog | None = None
    pid: int = 0
    known_state: ClusterState | None = None  # the state object last seen (a snapshot install swaps it)
    was_leader: bool = False
    leader_term: int = 0  # the term in which this controller last took office
    # The loop read as many messages as it may in one turn: more wait unread, heartbeats and
    # registrations among them, so no host is timed until it has caught up (timers.hosts_silent).
    behind: bool = False
    last_round_ms: float | None = None
    next_check: float = 0.0
    next_prune: float = 0.0
    cluster_totals: dict[str, int] = field(default_factory=dict)
    # The key of the launch tokens (xce/security/launch.py); the shell sets the cluster's own.
    launch_key: bytes = field(default_factory=lambda: derive_key(b""))
    site: SitePolicy = field(init=False)  # the scheduling policy from cfg: the views the scheduler's figures

    def __post_init__(self) -> None:
        self.site = SitePolicy.from_config(self.cfg)

    @property
    def state(self) -> ClusterState:
        return self.raft.state

    @property
    def kill_wait(self) -> float:
        """How long a silent host takes to go unavail (its jobs UNKWN): an unconfirmed killed
        share ends after it."""
        return self.cfg.unknown_after()

    @property
    def reregister_grace(self) -> float:
        """A new leader's wait before it times any host: one more timeout, so workers find it
        and re-register."""
        return self.kill_wait + 5.0
