"""Configuration: TOML files read with tomllib into typed, validated structs.

An unknown key or a bad value fails at start with the file, the key and the
reason.  config/xce.toml documents every key with its default.  Sizes are
strings ("4G") parsed once here into bytes.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path

import msgspec

from xce.core.accounting import ReclaimRules
from xce.core.errors import ConfigError, XceError
from xce.core.hostgroups import ALL, HostListError, HostSet, resolve
from xce.core.jobspec.arrays import ARRAY_SIZE_CAP
from xce.core.model import PREEXEC_ACTIONS, RECLAIM_POLICIES, check_mem_limit
from xce.core.resources import BUILTIN, ResourceDef
from xce.core.sched.backfill import MODES
from xce.core.units import parse_mem
from xce.site.local import (  # one definition, shared with the fast CLI path
    CLUSTER_FILE,
    default_state_dir,
)


LOST_FACTOR = 3  # lost_after's default in unknown_afters: a hung host gets time to come back


class ClusterConf(msgspec.Struct, forbid_unknown_fields=True):
    name: str = "xce"
    mem_auto_fallback: str = ""  # what rusage[mem=auto] gives a job with no history in a queue without its own


class ControllerConf(msgspec.Struct, forbid_unknown_fields=True):
    address: str = "tcp://127.0.0.1:7700"      # ROUTER: workers, scheduler, clients
    pub_address: str = "tcp://127.0.0.1:7701"  # PUB: the event stream
    raft_address: str = "127.0.0.1:7702"       # private Raft port
    peers: list[str] = []                       # the other controllers' raft addresses
    peer_addresses: list[str] = []              # and their ROUTER endpoints, same order
    peer_pub_addresses: list[str] = []          # and their PUB endpoints, same order
    durability: str = "mmap"                    # "mmap": survives a process crash; "fsync": power loss too
    leader_fallback: float = 0.0                # a leader that hears no majority this long steps down (0: see Config.leader_fallback)
    raft_password: str = ""
    heartbeat_misses: int = 3
    unknown_after: float = 0.0                  # s silent before a host is unavail, its jobs UNKWN (0: misses x heartbeat)
    lost_after: float = 0.0                     # s silent before it is lost, its jobs requeued or EXIT (0: 3 x unknown_after)
    keep_finished: int = 100_000
    max_array_size: int = 1000                  # elements of a job array, and its largest index (LSF's default)
    append_period: float = 0.02
    tick_period: float = 0.01
    election_timeout: tuple[float, float] = (0.3, 0.8)
    compact_entries: int = 20_000               # the Raft journal is compacted into raft.dump past
    compact_seconds: float = 60.0               # this many entries, or this long after the last dump


class SchedulerConf(msgspec.Struct, forbid_unknown_fields=True):
    interval: float = 1.0
    debounce: float = 0.0


class WorkerConf(msgspec.Struct, forbid_unknown_fields=True):
    name: str = ""
    heartbeat: float = 1.0
    kill_grace: float = 5.0
    mem: str = ""       # capacity override, e.g. "4G"
    slots: int = 0      # 0: the number of CPUs
    mem_floor: str = ""  # kill the largest overage first when OS-available falls below this
    type: str = ""
    model: str = ""
    # Site host attributes, for select[] (each a [resources.NAME] kind = "attribute"): a string,
    # or a number where the resource is declared type = "numeric".
    attrs: dict[str, str | int | float] = {}


class HostConf(msgspec.Struct, forbid_unknown_fields=True):
    """One host's own settings, over the [worker] table's (LSF lsf.cluster's Host section):
    what its worker reports at registration, for select[]."""

    type: str = ""   # "" means worker.type
    model: str = ""  # "" means worker.model
    attrs: dict[str, str | int | float] = {}  # over worker.attrs, name by name


class SecurityConf(msgspec.Struct, forbid_unknown_fields=True):
    curve: bool = False   # ZeroMQ CURVE on every controller socket (docs/security.md)
    keys_dir: str = ""    # CURVE keys; "" is <state_dir>/keys
    key_name: str = ""    # this daemon's key pair NAME.key_secret; "" is the worker's host name or "scheduler"
    server_key: str = ""  # the controllers' public key (Z85), for a client without the keys directory
    bind_hosts: bool = True  # a worker's key speaks only for the host of the same name


class QueueConf(msgspec.Struct, forbid_unknown_fields=True):
    priority: int = 30
    rerunnable: bool = False
    default: bool = False
    description: str = ""
    run_limit: float = 0          # RUNLIMIT maximum, seconds (0: none): a longer -W is refused at submit
    run_limit_default: float = 0  # RUNLIMIT default, seconds (0: none), for a job without -W
    mem_limit: str = ""           # MEMLIMIT maximum ("": none): a larger -M is refused at submit, bswitch, bmod
    mem_limit_default: str = ""   # MEMLIMIT default ("": none), the -M of a job without one
    dep_never: str = "keep"                 # a job whose dependency can never be met: "keep" or "kill"
    preempt: list[str] = []          # lower-priority queues whose running jobs this queue's may preempt
    preempt_action: str = "suspend"  # how this queue's jobs are preempted: suspend (SSUSP) | requeue | kill
    max_preempt: int = 0             # times one of its jobs may be evicted, RECLAIMED too (LSF MAX_JOB_PREEMPT); 0: any
    reclaimable: bool = False                # its jobs run on reclaimable memory (docs/accounting.md)
    reclaim_policy: str = "requeue"          # when an owner wants it back: requeue, suspend or kill
    mem_retries: int = 0             # tries more for a job killed for its memory (MEMLIMIT, MEMPRESSURE, RECLAIMED)
    mem_retry_factor: float = 2.0    # each try's rusage[mem] and -M: the last one's times this
    mem_retry_max: str = ""          # size a try's reservation or -M may reach ("": no cap)
    mem_default: str = ""            # rusage mem of a job that names none: "" none, a size, or "auto"
    mem_auto_fallback: str = ""      # what auto gives a job with no history ("": the cluster's)
    mem_auto_margin: float = 0.1     # auto = p95 of the job's past peaks x (1 + margin)
    mem_auto_min_runs: int = 3       # finished runs of the same (user, job, queue) auto needs (fewer: the fallback)
    hosts: list[str] = []            # LSF HOSTS: hosts, host groups (NAME or NAME/), all, ~NAME; []: every host
    max_preexec_retry: int = 5       # -E failures before preexec_retry_action (LSF MAX_PREEXEC_RETRY's default)
    preexec_retry_action: str = "suspend"  # then: suspend (held, PSUSP) | exit (LSF LOCAL_MAX_PREEXEC_RETRY_ACTION)
    preexec_timeout: float = 0       # seconds an -E may run before it is killed, a failure (LSF JOB_PREPROC_TIMEOUT); 0: none


RECLAIM_QUEUE = "reclaim"  # the built-in reclaimable queue, added unless the site marks one of its own


def reclaim_queue() -> QueueConf:
    return QueueConf(priority=10, reclaimable=True, description="jobs that run on memory other jobs "
                     "reserved and do not use; the first to go when they want it back")


class ReclaimConf(msgspec.Struct, forbid_unknown_fields=True):
    """When a job's unused reservation may be lent (docs/accounting.md "Reclaimable memory")."""

    min_run: float = 60.0  # seconds a job must have run
    window: float = 60.0   # seconds its peak must have held still
    margin: float = 0.1    # share of its reservation kept back
    # The share of its run so far a running job's peak must hold still before the leader lowers its
    # reservation in force to its peak + margin (docs/accounting.md "Shrinking a settled reservation");
    # 1: never, the default -- a shrunk job that grows back past the host's room is over its
    # reservation, so shrinking takes back part of the promise made at placement: a site opts in.
    shrink_age: float = 1.0


class PreemptionConf(msgspec.Struct, forbid_unknown_fields=True):
    min_run_time: float = 60.0  # seconds a job runs before it may be preempted (LSF NO_PREEMPT_RUN_TIME)


class ResourceConf(msgspec.Struct, forbid_unknown_fields=True):
    kind: str = "virtual"
    scope: str = "host"
    total: int = 0
    description: str = ""
    type: str = ""  # an attribute's: "string" (the default) or "numeric" (LSF lsf.shared TYPE)

    @property
    def numeric(self) -> bool:
        return self.type == "numeric"


class ShareConf(msgspec.Struct, forbid_unknown_fields=True):
    """A node of a fairshare tree: its shares among its siblings; its members keyed on ``by``."""

    shares: int = 1
    by: str = "user"  # user | group | project: what the members' names are
    members: dict[str, int | ShareConf] = {}


class FairshareConf(msgspec.Struct, forbid_unknown_fields=True):
    enabled: bool = True
    half_life: float = 18_000.0  # seconds (LSF's HIST_HOURS = 5)
    slot_weight: float = 1.0
    mem_weight: float = 1.0
    tree: ShareConf = msgspec.field(default_factory=lambda: ShareConf(members={"default": 1}))
    queues: dict[str, ShareConf] = {}  # a queue's own tree (LSF queue-level FAIRSHARE)


class BackfillConf(msgspec.Struct, forbid_unknown_fields=True):
    mode: str = "easy"  # off (greedy) | easy | conservative | fcfs (strict, no backfilling)
    depth: int = 1      # conservative: how many blocked jobs hold a reservation
    default_run_limit: float = 0.0  # seconds a job without -W/-We is expected to run; 0: unknown
    queue_run_limit: dict[str, float] = {}


class LimitConf(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    per: str                 # user | group | project | queue | host
    members: list[str] = []  # empty: every one of them
    jobs: int | None = None  # running jobs
    slots: int | None = None
    mem: str = ""            # charged memory ("64G"); "": no cap
    pending: int | None = None


class CompatConf(msgspec.Struct, forbid_unknown_fields=True):
    """The LSF and Slurm front-ends (docs/compat.md)."""

    clean_period: float = 3600.0  # s a finished job stays listed by bjobs/squeue (LSF's CLEAN_PERIOD)


class Config(msgspec.Struct, forbid_unknown_fields=True):
    cluster: ClusterConf = msgspec.field(default_factory=ClusterConf)
    controller: ControllerConf = msgspec.field(default_factory=ControllerConf)
    scheduler: SchedulerConf = msgspec.field(default_factory=SchedulerConf)
    worker: WorkerConf = msgspec.field(default_factory=WorkerConf)
    security: SecurityConf = msgspec.field(default_factory=SecurityConf)
    queues: dict[str, QueueConf] = msgspec.field(
        default_factory=lambda: {"normal": QueueConf(default=True), RECLAIM_QUEUE: reclaim_queue()})
    reclaim: ReclaimConf = msgspec.field(default_factory=ReclaimConf)
    resources: dict[str, ResourceConf] = {}
    fairshare: FairshareConf = msgspec.field(default_factory=FairshareConf)
    backfill: BackfillConf = msgspec.field(default_factory=BackfillConf)
    limits: list[LimitConf] = []
    preemption: PreemptionConf = msgspec.field(default_factory=PreemptionConf)
    compat: CompatConf = msgspec.field(default_factory=CompatConf)
    host_groups: dict[str, list[str]] = {}  # LSF HostGroup (lsb.hosts): NAME = [hosts, groups, all, ~NAME]
    hosts: dict[str, HostConf] = {}  # a host's own type, model and attributes, by its worker's name
    state_dir: str = ""
    rest_url: str = ""
    source: str = ""

    def site_resources(self) -> dict[str, ResourceDef]:
        return {n: ResourceDef(n, "attribute", "count" if r.numeric else "string", description=r.description)
                if r.kind == "attribute"
                else ResourceDef(n, "virtual", "count", scope=r.scope, description=r.description)  # type: ignore[arg-type]
                for n, r in self.resources.items()}

    def cluster_totals(self) -> dict[str, int]:
        return {n: r.total for n, r in self.resources.items() if r.kind == "virtual" and r.scope == "cluster"}

    def host_virtual(self) -> dict[str, int]:
        """The host-level virtual resources a worker offers (its own copy of the file's totals)."""
        return {n: r.total for n, r in self.resources.items() if r.kind == "virtual" and r.scope == "host"}

    def host_attrs(self, name: str = "") -> dict[str, str | int | float]:
        """The attributes the worker ``name`` (default: worker.name) reports at registration, for
        select[]: type, model and the site's own, its [hosts.NAME] table's over [worker]'s."""
        w, own = self.worker, self.hosts.get(name or self.worker.name, HostConf())
        given = {"type": own.type or w.type, "model": own.model or w.model, **w.attrs, **own.attrs}
        return {k: v for k, v in given.items() if v or v == 0}

    def unknown_after(self) -> float:
        """Seconds a silent host takes to go unavail, its jobs UNKWN (LSF: the host stops answering)."""
        c = self.controller
        return c.unknown_after or c.heartbeat_misses * self.worker.heartbeat

    def leader_fallback(self) -> float:
        """Seconds a leader that hears from no majority keeps the office: 1 s, or the election
        timeout's minimum when that is longer.  A follower elects no one before its minimum, so
        a leader stepping down sooner only leaves the cluster without one: with a 2-4 s timeout
        for a large fleet, every 1-2 s a loaded follower took to answer was a second with no
        leader (docs/benchmarks.md, the fleet at 5,000 hosts)."""
        c = self.controller
        return c.leader_fallback or max(1.0, c.election_timeout[0])

    def lost_after(self) -> float:
        """Seconds a silent host takes to be lost: its jobs are then requeued or end EXIT."""
        return self.controller.lost_after or LOST_FACTOR * self.unknown_after()

    def reclaim_rules(self) -> ReclaimRules:
        r = self.reclaim
        return ReclaimRules(min_run=r.min_run, window=r.window, margin=r.margin, shrink_age=r.shrink_age)

    def queue_hosts(self, name: str) -> HostSet | None:
        """The hosts queue ``name`` may use (its ``hosts``, groups resolved); None: every host."""
        terms = self.queues[name].hosts
        return resolve(terms, self.host_groups) if terms else None

    def default_queue(self) -> str:
        defaults = [n for n, q in self.queues.items() if q.default]
        return defaults[0] if defaults else next(iter(self.queues))


def load(path: str | Path | None) -> Config:
    """Load and validate a config file; None gives the defaults."""
    if path is None:
        return Config()
    p = Path(path)
    return from_dict(read_toml(p), str(p))


def read_toml(p: Path) -> dict:
    """A TOML file's table, or a ConfigError naming the file and what is wrong with it."""
    try:
        return tomllib.loads(p.read_text())
    except OSError as e:
        raise ConfigError(f"{p}: cannot read: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML: {e}") from None


# What `xce up --config FILE` takes from a site's file: the policy, never the local cluster's
# own layout (addresses, state directory, security), which `xce up` makes itself.
SITE_KEYS = ("queues", "host_groups", "resources", "fairshare", "backfill", "limits", "preemption", "hosts",
             "worker")
# Of [worker], what a site says of its hosts (the rest is the local cluster's: heartbeat, slots, mem).
SITE_WORKER_KEYS = ("type", "model", "attrs")


def site_overlay(path: str | Path) -> dict:
    """The tables of a site configuration that `xce up --config` merges into the local
    cluster's; each replaces the local one whole (a site's queues are its queues).  A key
    outside SITE_KEYS is refused by name; the merged result is checked as any config is."""
    p = Path(path)
    data = read_toml(p)
    other = sorted(set(data) - set(SITE_KEYS))
    if other:
        raise ConfigError(f"{p}: key {other[0]}: not a site policy key; `xce up --config` merges only "
                          f"{', '.join(SITE_KEYS)} (the local cluster's addresses and security are its own)")
    for key in sorted(set(data.get("worker", {})) - set(SITE_WORKER_KEYS)):
        raise ConfigError(f"{p}: key worker.{key}: not a site setting of the workers; `xce up --config` takes only "
                          f"{', '.join('worker.' + k for k in SITE_WORKER_KEYS)} (and [hosts.NAME] for one host)")
    return data


def from_dict(data: dict, source: str = "<config>") -> Config:
    if "source" in data:  # where the config came from is set here, never by the file
        raise ConfigError(f"{source}: key source: unknown field (where the config came from is not configurable)")
    try:
        cfg = msgspec.convert(data, Config)
    except msgspec.ValidationError as e:
        raise ConfigError(f"{source}: {_key_message(str(e))}") from None
    cfg.source = source
    _check(cfg, source)
    if not any(q.reclaimable for q in cfg.queues.values()) and RECLAIM_QUEUE not in cfg.queues:
        cfg.queues[RECLAIM_QUEUE] = reclaim_queue()  # built in: a site that names its own queues keeps it
    return cfg


def _key_message(msg: str) -> str:
    # msgspec says "... - at `$.worker.heartbeat`"; operators read "key worker.heartbeat".
    if " - at `$." in msg:
        reason, where = msg.split(" - at `$.", 1)
        return f"key {where.rstrip('`')}: {reason}"
    return msg


def _check(cfg: Config, source: str) -> None:
    def bad(key: str, why: str) -> ConfigError:
        return ConfigError(f"{source}: key {key}: {why}")

    for key in ("mem", "mem_floor"):
        value = getattr(cfg.worker, key)
        if value:
            try:
                parse_mem(value)
            except XceError as e:
                raise bad(f"worker.{key}", e.message) from None
    positive = {"worker.heartbeat": cfg.worker.heartbeat, "worker.kill_grace": cfg.worker.kill_grace,
                "scheduler.interval": cfg.scheduler.interval, "controller.append_period": cfg.controller.append_period,
                "controller.tick_period": cfg.controller.tick_period,
                "controller.compact_seconds": cfg.controller.compact_seconds}
    positive["compat.clean_period"] = cfg.compat.clean_period
    for key, value in positive.items():
        if value <= 0:
            raise bad(key, f"must be > 0, got {value}")
    for key, value in (("worker.slots", cfg.worker.slots), ("scheduler.debounce", cfg.scheduler.debounce),
                       ("controller.keep_finished", cfg.controller.keep_finished),
                       ("controller.compact_entries", cfg.controller.compact_entries)):
        if value < 0:
            raise bad(key, f"must be >= 0, got {value}")
    lo, hi = cfg.controller.election_timeout
    if not 0 < lo < hi:
        raise bad("controller.election_timeout", f"needs 0 < min < max, got [{lo}, {hi}]")
    if lo <= 3 * cfg.controller.append_period:
        raise bad("controller.election_timeout", f"min {lo} must exceed 3 x append_period "
                  f"({cfg.controller.append_period}), or followers start elections between heartbeats")
    if cfg.controller.leader_fallback < 0:
        raise bad("controller.leader_fallback", f"must be >= 0 (0: the default), got {cfg.controller.leader_fallback}")
    if cfg.leader_fallback() <= cfg.controller.append_period:
        raise bad("controller.leader_fallback", "must exceed append_period")
    if cfg.controller.heartbeat_misses < 1:
        raise bad("controller.heartbeat_misses", "must be >= 1")
    _check_host_timeouts(cfg, bad)
    if not 1 <= cfg.controller.max_array_size <= ARRAY_SIZE_CAP:
        raise bad("controller.max_array_size", f"must be 1-{ARRAY_SIZE_CAP}, got {cfg.controller.max_array_size}")
    if not cfg.queues:
        raise bad("queues", "at least one queue is needed")
    if sum(q.default for q in cfg.queues.values()) > 1:
        raise bad("queues", "more than one queue has default = true")
    for qname, q in cfg.queues.items():
        _check_queue(qname, q, bad)
    _check_size("cluster.mem_auto_fallback", cfg.cluster.mem_auto_fallback, bad)
    if len(cfg.controller.peers) != len(cfg.controller.peer_addresses):
        raise bad("controller.peer_addresses", "needs one ROUTER endpoint per entry of controller.peers")
    if cfg.controller.peer_pub_addresses and len(cfg.controller.peer_pub_addresses) != len(cfg.controller.peers):
        raise bad("controller.peer_pub_addresses", "needs one PUB endpoint per entry of controller.peers")
    if cfg.controller.durability not in ("mmap", "fsync"):
        raise bad("controller.durability", f"must be 'mmap' or 'fsync', got {cfg.controller.durability!r}")
    for name, r in cfg.resources.items():
        if r.kind not in ("virtual", "attribute"):
            raise bad(f"resources.{name}.kind", "must be 'virtual' (a counter) or 'attribute' (a host attribute "
                      "for select[]); mem is the one real resource, measured by workers")
        if r.kind == "attribute" and (r.scope != "host" or r.total):
            raise bad(f"resources.{name}", "an attribute is a host's own value (worker.attrs): no scope or total")
        if r.type not in ("", "string", "numeric"):
            raise bad(f"resources.{name}.type", f"must be 'string' or 'numeric' (an attribute's), got {r.type!r}")
        if r.type and r.kind != "attribute":
            raise bad(f"resources.{name}.type", "only an attribute has a type: a virtual resource is a count")
        if r.scope not in ("host", "cluster"):
            raise bad(f"resources.{name}.scope", "must be 'host' or 'cluster'")
        if name in BUILTIN:
            raise bad(f"resources.{name}", "is a builtin resource")
    _check_policy(cfg, bad)
    _check_reclaim(cfg.reclaim, bad)
    _check_host_lists(cfg, bad)
    _check_worker_attrs(cfg, bad)


def _check_worker_attrs(cfg: Config, bad: Callable[[str, str], ConfigError]) -> None:
    """A worker's site attributes ([worker] and each [hosts.NAME]) are declared resources of kind
    attribute, as LSF's lsf.shared declares what lsf.cluster's hosts carry: a misspelt name is
    refused, not silently unmatched; a numeric one's value is a number, a string one's a string."""
    tables = [("worker", cfg.worker.attrs), *((f"hosts.{h}", c.attrs) for h, c in cfg.hosts.items())]
    for where, attrs in tables:
        for name, v in attrs.items():
            key, r = f"{where}.attrs.{name}", cfg.resources.get(name)
            if name in BUILTIN:
                raise bad(key, "is a builtin attribute" +
                          (f" (set {where}.{name})" if name in ("type", "model") else ""))
            if r is None or r.kind != "attribute":
                raise bad(key, f'not a declared attribute: add [resources.{name}] kind = "attribute"')
            if r.numeric and isinstance(v, str):
                raise bad(key, f"resources.{name} is numeric: give a number, got {v!r}")
            if not r.numeric and not isinstance(v, str):
                raise bad(key, f"resources.{name} is a string attribute: give a string, got {v!r} "
                          f'(or declare it type = "numeric")')


def _check_host_lists(cfg: Config, bad: Callable[[str, str], ConfigError]) -> None:
    """Every host group and queue host list resolves: an unknown group, a cycle or an empty list is named."""
    for key, terms in [*((f"host_groups.{g}", t) for g, t in cfg.host_groups.items()),
                       *((f"queues.{q}.hosts", c.hosts) for q, c in cfg.queues.items() if c.hosts)]:
        if key.startswith("host_groups.") and (not key[12:] or key[12:] == ALL or "/" in key[12:] or "~" in key[12:]):
            raise bad(key, "a host group's name must not be empty, `all`, or hold / or ~")
        try:
            resolve(terms, cfg.host_groups)
        except HostListError as e:
            raise bad(key, str(e)) from None


def _check_reclaim(r: ReclaimConf, bad: Callable[[str, str], ConfigError]) -> None:
    for key in ("min_run", "window"):
        if not 0 <= getattr(r, key) < float("inf"):
            raise bad(f"reclaim.{key}", f"must be a number of seconds >= 0, got {getattr(r, key)}")
    if not 0 <= r.margin < 1:
        raise bad("reclaim.margin", f"must be a share of a reservation in [0, 1), got {r.margin}")
    if not 0 <= r.shrink_age <= 1:
        raise bad("reclaim.shrink_age", f"must be a share of a job's run in [0, 1] (1: never shrink), got {r.shrink_age}")


def _check_host_timeouts(cfg: Config, bad: Callable[[str, str], ConfigError]) -> None:
    """controller.unknown_after and lost_after: a host is unknown before it is lost."""
    c = cfg.controller
    for key, value in (("unknown_after", c.unknown_after), ("lost_after", c.lost_after)):
        if value < 0:
            raise bad(f"controller.{key}", f"must be >= 0 seconds (0: the default), got {value}")
    if cfg.lost_after() <= cfg.unknown_after():
        raise bad("controller.lost_after", f"must exceed unknown_after ({cfg.unknown_after()} s), "
                  f"got {cfg.lost_after()}")


def _check_policy(cfg: Config, bad: Callable[[str, str], ConfigError]) -> None:
    """[fairshare], [backfill] and [[limits]] (docs/scheduling.md)."""
    fs = cfg.fairshare
    if fs.half_life <= 0:
        raise bad("fairshare.half_life", f"must be > 0 seconds, got {fs.half_life}")
    for key, w in (("slot_weight", fs.slot_weight), ("mem_weight", fs.mem_weight)):
        if w < 0:
            raise bad(f"fairshare.{key}", f"must be >= 0, got {w}")
    if fs.slot_weight + fs.mem_weight <= 0:
        raise bad("fairshare.slot_weight", "slot_weight and mem_weight are both 0: usage would count nothing")
    _check_tree(fs.tree, "fairshare.tree", bad)
    for q, tree in fs.queues.items():
        if q not in cfg.queues:
            raise bad(f"fairshare.queues.{q}", f"no such queue (queues: {', '.join(cfg.queues)})")
        _check_tree(tree, f"fairshare.queues.{q}", bad)
    bf = cfg.backfill
    if bf.mode not in MODES:
        raise bad("backfill.mode", f"must be one of {', '.join(map(repr, MODES))}, got {bf.mode!r}")
    if bf.depth < 1:
        raise bad("backfill.depth", f"must be >= 1, got {bf.depth}")
    if bf.default_run_limit < 0:
        raise bad("backfill.default_run_limit", f"must be >= 0 seconds, got {bf.default_run_limit}")
    for q, t in bf.queue_run_limit.items():
        if q not in cfg.queues or t <= 0:
            why = "no such queue" if q not in cfg.queues else f"must be > 0, got {t}"
            raise bad(f"backfill.queue_run_limit.{q}", why)
    names: set[str] = set()
    for i, lim in enumerate(cfg.limits):
        _check_limit(lim, f"limits[{i}]", names, bad)
    if cfg.preemption.min_run_time < 0:
        raise bad("preemption.min_run_time", f"must be >= 0 seconds, got {cfg.preemption.min_run_time}")
    for name, q in cfg.queues.items():
        _check_preempt(cfg, name, q, bad)


def _check_preempt(cfg: Config, name: str, q: QueueConf, bad: Callable[[str, str], ConfigError]) -> None:
    if q.max_preempt < 0:
        raise bad(f"queues.{name}.max_preempt", f"must be >= 0 (0: no cap), got {q.max_preempt}")
    if q.preempt_action not in ("suspend", "requeue", "kill"):
        raise bad(f"queues.{name}.preempt_action", f"must be 'suspend', 'requeue' or 'kill', got {q.preempt_action!r}")
    for low in q.preempt:
        other = cfg.queues.get(low)
        if other is None:
            raise bad(f"queues.{name}.preempt", f"no such queue {low!r} (queues: {', '.join(cfg.queues)})")
        if other.priority >= q.priority:
            raise bad(f"queues.{name}.preempt", f"queue {low!r} has priority {other.priority}, not below "
                      f"{name}'s {q.priority}: only lower-priority queues can be preempted")


def _check_size(key: str, size: str, bad: Callable[[str, str], ConfigError]) -> None:
    """A size key: "" (none) or a memory amount ("2G"; a bare number is MB)."""
    if size:
        try:
            parse_mem(size)
        except XceError as e:
            raise bad(key, e.message) from None


def _check_queue(name: str, q: QueueConf, bad: Callable[[str, str], ConfigError]) -> None:
    for key in ("run_limit", "run_limit_default", "preexec_timeout"):
        t = getattr(q, key)
        if not 0 <= t < float("inf"):
            raise bad(f"queues.{name}.{key}", f"must be a number of seconds (0: none), got {t}")
    if q.run_limit and q.run_limit_default > q.run_limit:
        raise bad(f"queues.{name}.run_limit_default",
                  f"{q.run_limit_default:g} s is above the queue's run_limit {q.run_limit:g} s")
    limits = {}
    for key in ("mem_limit", "mem_limit_default"):
        _check_size(f"queues.{name}.{key}", getattr(q, key), bad)
        limits[key] = parse_mem(getattr(q, key)) if getattr(q, key) else None
        try:
            check_mem_limit(limits[key])
        except XceError as e:
            raise bad(f"queues.{name}.{key}", e.message) from None
    if limits["mem_limit"] is not None and (limits["mem_limit_default"] or 0) > limits["mem_limit"]:
        raise bad(f"queues.{name}.mem_limit_default",
                  f"{q.mem_limit_default} is above the queue's mem_limit {q.mem_limit}")
    if q.dep_never not in ("keep", "kill"):
        raise bad(f"queues.{name}.dep_never", f"must be 'keep' or 'kill', got {q.dep_never!r}")
    if q.mem_retries < 0:
        raise bad(f"queues.{name}.mem_retries", f"must be >= 0, got {q.mem_retries}")
    if q.max_preexec_retry < 1:
        raise bad(f"queues.{name}.max_preexec_retry", f"must be >= 1, got {q.max_preexec_retry}")
    if q.preexec_retry_action not in PREEXEC_ACTIONS:
        raise bad(f"queues.{name}.preexec_retry_action", f"must be one of {', '.join(PREEXEC_ACTIONS)}, "
                  f"got {q.preexec_retry_action!r}")
    if not 1 < q.mem_retry_factor < float("inf"):
        raise bad(f"queues.{name}.mem_retry_factor", f"must be > 1 (each try asks more), got {q.mem_retry_factor}")
    if q.mem_retry_max:
        try:
            parse_mem(q.mem_retry_max)
        except XceError as e:
            raise bad(f"queues.{name}.mem_retry_max", e.message) from None
    if q.mem_default != "auto":
        _check_size(f"queues.{name}.mem_default", q.mem_default, bad)
    _check_size(f"queues.{name}.mem_auto_fallback", q.mem_auto_fallback, bad)
    if not 0 <= q.mem_auto_margin < float("inf"):
        raise bad(f"queues.{name}.mem_auto_margin", f"must be >= 0 (0.1 is 10 %), got {q.mem_auto_margin}")
    if q.mem_auto_min_runs < 1:
        raise bad(f"queues.{name}.mem_auto_min_runs", f"must be at least 1 run, got {q.mem_auto_min_runs}")
    if q.reclaim_policy not in RECLAIM_POLICIES:
        raise bad(f"queues.{name}.reclaim_policy", f"must be one of {', '.join(RECLAIM_POLICIES)}, "
                  f"got {q.reclaim_policy!r}")


def _check_tree(node: ShareConf, key: str, bad: Callable[[str, str], ConfigError]) -> None:
    if node.by not in ("user", "group", "project"):
        raise bad(f"{key}.by", f"must be 'user', 'group' or 'project', got {node.by!r}")
    for name, m in node.members.items():
        shares = m if isinstance(m, int) else m.shares
        if shares < 1:
            raise bad(f"{key}.members.{name}", f"shares must be >= 1, got {shares}")
        if not isinstance(m, int):
            _check_tree(m, f"{key}.members.{name}", bad)


def _check_limit(lim: LimitConf, key: str, names: set[str], bad: Callable[[str, str], ConfigError]) -> None:
    if lim.name in names:
        raise bad(f"{key}.name", f"limit {lim.name!r} is defined twice")
    names.add(lim.name)
    if lim.per not in ("user", "group", "project", "queue", "host"):
        raise bad(f"{key}.per", f"must be user, group, project, queue or host, got {lim.per!r}")
    caps = {"jobs": lim.jobs, "slots": lim.slots, "pending": lim.pending}
    if all(v is None for v in caps.values()) and not lim.mem:
        raise bad(key, f"limit {lim.name!r} caps nothing: give jobs, slots, mem or pending")
    for k, v in caps.items():
        if v is not None and v < 0:
            raise bad(f"{key}.{k}", f"must be >= 0, got {v}")
    if lim.per == "host" and lim.pending is not None:
        raise bad(f"{key}.pending", "a host has no pending jobs: cap pending per user, group, project or queue")
    if lim.mem:
        try:
            parse_mem(lim.mem)
        except XceError as e:
            raise bad(f"{key}.mem", e.message) from None


def cluster_config(state_dir: str | Path | None = None) -> Config:
    """The config of the local cluster in ``state_dir`` (or the defaults if there is none)."""
    sd = Path(state_dir) if state_dir else default_state_dir()
    f = sd / CLUSTER_FILE
    return load(f) if f.exists() else load(None)


def endpoints_of(cfg: Config) -> list[str]:
    return [cfg.controller.address, *cfg.controller.peer_addresses]
