"""`xce`: the command line, with LSF's habits (bsub/bjobs/bhosts/bkill/bwait).

Every error of the project's tree is caught once, in ``main``: the message goes
to stderr and the exit code is 2 for bad input, 1 for anything else.  Imports
are lazy so `xce submit` starts fast; `xce submit` first tries the local door
(xce/cli/quick.py), which loads neither argparse nor the wire stack, and comes
back here whenever it cannot serve.

Lazy imports: each subcommand loads only what it uses (`xce submit` in ~65 ms, `xce jobs` without Textual or Falcon).
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # not typing's: importing typing costs `xce submit` ~5 ms
if TYPE_CHECKING:
    import argparse
    from pathlib import Path
    from typing import Any


def _client(a: argparse.Namespace) -> Any:
    from xce.client import Client

    return Client(state_dir=_state_dir(a), timeout=a.timeout)


def _say_stale(c: Any) -> None:
    s = c.staleness
    if s is not None:
        age = max(0.0, time.time() - s.as_of) if s.as_of else float("nan")
        print(f"(stale-ok: served by {s.role} {s.served_by}; its newest change is {age:.1f} s old, "
              f"{s.lag_entries} Raft entries behind the leader; no live usage figures)", file=sys.stderr)


def element_text(jid: int) -> str:
    """``12`` or ``12[3]``: a job id as the user writes it (loaded when a command prints one)."""
    from xce.core.jobids import element_text as text

    return text(jid)


def _ids(values: list[str]) -> list[int]:
    """Job ids as given: ``12``, ``12[3]``, ``12[1-5,7]``, ``12_3`` (xce/cli/control.py's rule)."""
    from xce.cli.control import job_ids

    return job_ids(values)


def _state_dir(a: argparse.Namespace) -> Path:
    from pathlib import Path

    from xce.site.config import default_state_dir

    return Path(a.state_dir) if a.state_dir else default_state_dir()


# ---- commands ------------------------------------------------------------------------------

def cmd_submit(a: argparse.Namespace) -> int:
    """bsub: the job from the options, #BSUB lines and script (xce/cli/submit.py); -K waits, -I shows."""
    from xce.cli.fmt import print_json
    from xce.cli.submit import USAGE, follow_job, job_spec, split_args, wait_for_job
    from xce.proto import writes
    from xce.proto.opcodes import Op

    args = split_args(a.rest)
    if args.flags & {"-h", "--help"}:
        print(USAGE)
        return 0
    spec, built = job_spec(args)
    a.state_dir = args.values.get("--state-dir", a.state_dir)
    a.timeout = float(args.values.get("--timeout", a.timeout))
    a.json = "--json" in args.flags
    if "--dry-run" in args.flags:
        return _dry_run(a, spec)
    # One key for every retry; the fast path hands over the one it sent, if it sent one.
    key = getattr(a, "submit_key", "") or writes.new_key()
    with _client(a) as c:
        reply = c.request(Op.SUBMIT, writes.submit([spec], key=key))
        job_id, queue = reply.ids[0], reply.queues[0]
        if a.json and not (built.request.wait or built.request.interactive):
            print_json({"id": job_id, "queue": queue})
        else:
            print(f"Job <{job_id}> is submitted to queue <{queue}>.", flush=True)
        if built.request.interactive:
            return follow_job(c, job_id, spec, str(c.cfg.state_dir or _state_dir(a)))
        if built.request.wait:
            return wait_for_job(c, job_id)
    return 0


DRY_RUN_ASK_S = 2.0  # a dry run waits this long (at most --timeout) for a controller's checks


def _dry_run(a: argparse.Namespace, spec: Any) -> int:
    """Check the job here (spec, -R), then ask the controller if one answers; print what was checked."""
    from xce.cli.fmt import dry_run_text, print_json
    from xce.client import Client, cluster_config
    from xce.core.errors import Unavailable
    from xce.core.resources import catalog
    from xce.core.resreq import parse_resreq
    from xce.proto import writes
    from xce.proto.opcodes import Op

    res = catalog(cluster_config(_state_dir(a)).site_resources())
    req = parse_resreq(spec.resreq, res)  # fails here, with the caret, before any round trip
    queue = None
    try:
        with Client(state_dir=_state_dir(a), timeout=min(a.timeout, DRY_RUN_ASK_S)) as c:
            queue = c.request(Op.SUBMIT, writes.submit([spec], key=writes.new_key(), dry_run=True)).queues[0]
    except Unavailable:
        pass  # no controller: the local checks are all there is, and the output says so
    if a.json:
        print_json({"job": spec, "resreq": req, "queue": queue, "checked_by": "controller" if queue else "local"})
    else:
        print(dry_run_text(spec, req, res, queue, min(a.timeout, DRY_RUN_ASK_S)))
    return 0


def cmd_recommend(a: argparse.Namespace) -> int:
    """Right-sizing from the finished jobs' records (xce/core/recommend.py)."""
    from xce.cli.fmt import print_json, recommend_rows
    from xce.core.recommend import recommend

    with _client(a) as c:
        jobs = c.jobs(user=None if a.u == "all" else (a.u or None), all=True, states=["DONE", "EXIT"])
    rows = recommend(jobs, a.margin)
    if a.json:
        print_json(rows)
    else:
        print(recommend_rows(rows) if rows else "No finished job to learn from")
    return 0


def cmd_jobs(a: argparse.Namespace) -> int:
    from xce.cli.fmt import job_long, job_rows, print_json
    from xce.core.jobids import STATE_FILTERS

    from xce.cli.control import job_ids

    ids = job_ids(a.ids)
    if a.A:
        return _arrays(a, ids)
    flags = [f for f in STATE_FILTERS if getattr(a, f)]
    states = sorted(set().union(*(STATE_FILTERS[f] for f in flags)))
    with _client(a) as c:
        order = a.l and not a.stale_ok  # -l: each pending job's place in the order (the leader folds usage)
        jobs, missing = _jobs_by_id(c, ids, a.stale_ok, order) if ids else \
            (c.jobs(user=None if a.u == "all" else (a.u or None), all=a.a or "d" in flags, states=states,
                    stale_ok=a.stale_ok, order=order), [])
        _say_stale(c)
    if ids and states:
        jobs = [j for j in jobs if j.state in states]
    for jid in missing:  # as bjobs: name each, still print the found ones, exit non-zero
        print(f"Job <{element_text(jid)}> is not found", file=sys.stderr)
    if a.json:
        print_json(jobs)
    elif a.l and jobs:
        print("\n\n".join(job_long(j, time.time()) for j in jobs))
    elif jobs:
        print(job_rows(jobs, time.time(), reasons="p" in flags))
    elif not missing:
        print(_none_found(flags, a.a))
    return 1 if missing else 0


def _arrays(a: argparse.Namespace, ids: list[int]) -> int:
    """jobs -A: a summary per array."""
    from xce.cli.fmt import array_rows, print_json

    with _client(a) as c:
        arrays = c.arrays(ids, user=None if a.u in (None, "all") else a.u)
    if a.json:
        print_json(arrays)
    else:
        print(array_rows(arrays) if arrays else "No job array found")
    return 0


def _none_found(flags: list[str], all_jobs: bool) -> str:
    """bjobs' words for an empty listing."""
    words = {"p": "pending", "r": "running", "s": "suspended", "d": "done"}
    if flags:
        return f"No {'/'.join(words[f] for f in flags)} job found"
    return "No job found" if all_jobs else "No unfinished job found"


def _jobs_by_id(c: Any, ids: list[int], stale_ok: bool, order: bool = False) -> tuple[list[Any], list[int]]:
    """The jobs of ``ids`` that exist, and the ids that do not (finished jobs included)."""
    from xce.core.errors import NotFound

    try:
        jobs = c.jobs(ids=ids, all=True, stale_ok=stale_ok, order=order)
    except NotFound:  # the controller refuses a lone unknown id outright
        return [], ids
    found = {j.id for j in jobs} | {j.id >> 32 for j in jobs}  # an array's id is found as its elements
    return jobs, [i for i in dict.fromkeys(ids) if i not in found]


def cmd_hosts(a: argparse.Namespace) -> int:
    from xce.cli.fmt import host_rows, print_json

    a.action = a.names[0] if a.names and a.names[0] in HOST_ACTIONS else None
    if a.action:
        a.names = a.names[1:]
    with _client(a) as c:
        if a.action:
            if not a.names:
                raise _usage(f"hosts {a.action}: name at least one host")
            c.host_admin(a.names, a.action)
            print(f"Host(s) {', '.join(a.names)} {HOST_ACTIONS[a.action]}.")
            return 0
        hosts = c.hosts(a.names, stale_ok=a.stale_ok)
        _say_stale(c)
    if a.json:
        print_json(hosts)
    else:
        print(host_rows(hosts, a.l) if hosts else "No host registered")
    return 0


HOST_ACTIONS = {"close": "closed", "open": "opened", "remove": "removed"}


def cmd_queues(a: argparse.Namespace) -> int:
    from xce.cli.fmt import print_json, queue_long, table
    from xce.core.hostgroups import queue_says

    with _client(a) as c:
        r = c.queues()
    if a.names:
        unknown = [n for n in a.names if n not in {q.name for q in r.queues}]
        if unknown:
            from xce.core.errors import NotFound
            raise NotFound(f"no such queue: {', '.join(unknown)}")
        r.queues = [q for q in r.queues if q.name in a.names]
    if a.json:
        print_json(r)
        return 0
    if a.l:
        print("\n\n".join(queue_long(q, r.counts.get(q.name, {}), q.name == r.default,
                                     queue_says(q.hosts, q.hosts_not)) for q in r.queues))
        return 0
    rows = [[q.name + (" (default)" if q.name == r.default else ""), q.priority, "yes" if q.rerunnable else "no",
             r.counts.get(q.name, {}).get("PEND", 0), r.counts.get(q.name, {}).get("RUN", 0),
             queue_says(q.hosts, q.hosts_not)] for q in r.queues]
    print(table(["QUEUE", "PRIO", "RERUN", "PEND", "RUN", "HOSTS"], rows))
    return 0


def cmd_fairshare(a: argparse.Namespace) -> int:
    from xce.cli.fmt import print_json, share_rows

    with _client(a) as c:
        r = c.fairshare()
    if a.json:
        print_json(r)
    elif not r.enabled:
        print("Fairshare is off ([fairshare] enabled = false): pending work is ordered by queue and job "
              "priority, then submit time")
    else:
        print(f"Usage decayed to now with a half-life of {r.half_life / 3600:g} h; "
              f"weights: slots {r.slot_weight:g}, memory {r.mem_weight:g}")
        print(share_rows(r.rows) if r.rows else "No user has usage or pending work yet")
    return 0


def cmd_limits(a: argparse.Namespace) -> int:
    from xce.cli.fmt import limit_rows, print_json

    with _client(a) as c:
        rows = c.limits()
    if a.json:
        print_json(rows)
    else:
        print(limit_rows(rows) if rows else "No limit configured ([[limits]] in the site config)")
    return 0


def cmd_kill(a: argparse.Namespace) -> int:
    from xce.cli.fmt import print_json

    from xce.core.jobspec.signals import parse_signal

    sig = parse_signal(a.s) if a.s else None
    with _client(a) as c:
        res = c.kill(_ids(a.ids), signal=sig)
    if a.json:
        print_json(res)
        return 0
    rc = 0
    for jid, what in res.items():
        name = element_text(jid)
        if what.startswith(("signal ", "killed ")):  # "killed ": a whole array's ("killed 49, kill requested for 1")
            print(f"Job <{name}>: {what}")
        elif what in ("killed", "kill requested"):
            print(f"Job <{name}> is being terminated" if what == "kill requested" else f"Job <{name}> is killed")
        else:
            print(f"Job <{name}>: {what}", file=sys.stderr)
            rc = 1
    return rc


def cmd_launch(a: argparse.Namespace) -> int:
    """blaunch: run a task of this job on one of its hosts (or several, -z), relaying its output;
    the exit code is the task's (the highest of several)."""
    from xce.client.launch import TaskRun, exit_status, parse_blaunch, run_tasks, with_sigterm

    hosts, command = parse_blaunch(getattr(a, "rest", a.words))
    with _client(a) as c:
        return with_sigterm(lambda: exit_status(run_tasks(c, [TaskRun(h, command) for h in hosts])))


def cmd_peek(a: argparse.Namespace) -> int:
    """bpeek: the tail of a running job's stdout (and stderr, when it has a file of its own)."""
    from xce.cli.fmt import print_json

    with _client(a) as c:
        r = c.peek(_ids([a.id])[0], max_bytes=a.bytes)
    if a.json:
        print_json(r)
        return 0
    if r.note:
        print(r.note)
        return 0
    print(f"<< output from stdout ({r.stdout_path} on {r.host}) >>")
    sys.stdout.write(r.stdout)
    if r.stderr_path:
        print(f"<< output from stderr ({r.stderr_path}) >>")
        sys.stdout.write(r.stderr)
    return 0


def cmd_wait(a: argparse.Namespace) -> int:
    ids = _ids(a.ids)
    progress = None
    if sys.stderr.isatty():
        def progress(done: int, total: int) -> None:
            width = 30
            n = int(width * done / total) if total else width
            sys.stderr.write(f"\r[{'#' * n}{'.' * (width - n)}] {done}/{total} jobs ended")
            sys.stderr.flush()
    with _client(a) as c:
        try:
            views = c.wait(ids, timeout=a.timeout_wait, progress=progress)
        except TimeoutError as e:
            print(f"\nxce wait: {e}", file=sys.stderr)
            return 3
    if progress:
        sys.stderr.write("\n")
    bad = [v for v in views if v.state != "DONE"]
    for v in bad:
        print(f"Job <{element_text(v.id)}> ended {v.state}" + (f": {v.reason}" if v.reason else "")
              + (f" (exit code {v.exit_code})" if v.exit_code else ""), file=sys.stderr)
    return 0 if not bad else 1


def cmd_status(a: argparse.Namespace) -> int:
    from xce.cli.fmt import print_json, table
    from xce.core.units import fmt_bytes

    with _client(a) as c:
        s = c.status()
        s.controllers = _each_controller(c, s.controllers)
    if a.json:
        print_json(s)
        return 0
    lead = max((x.commit_index for x in s.controllers if x.role == "leader"), default=0)
    print(f"Cluster {s.cluster}: leader {s.leader or 'none'}, term {s.term}")
    print(table(["CONTROLLER", "ROLE", "TERM", "COMMIT", "APPLIED", "LAG", "PID"],
                [[x.address, x.role, x.term, x.commit_index, x.applied_index,
                  max(0, lead - x.applied_index) if x.role != "down" else "-", x.pid] for x in s.controllers]))
    print("Hosts: " + (", ".join(f"{k} {v}" for k, v in sorted(s.hosts_by_state.items())) or "none"))
    print("Jobs:  " + (", ".join(f"{k} {v}" for k, v in sorted(s.jobs_by_state.items())) or "none"))
    if s.mem:
        print("Memory: " + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in s.mem.items()))
    print("Endpoints: " + ", ".join(f"{k} {v}" for k, v in s.endpoints.items()))
    return 0


def _each_controller(c: Any, fallback: list[Any]) -> list[Any]:
    """Ask every controller for its own view (role, term, commit and applied index)."""
    from xce.core.errors import XceError
    from xce.proto import schema as S
    from xce.proto.opcodes import Op
    from xce.site.config import endpoints_of
    from xce.transport.connection import Connection

    out = []
    for ep in endpoints_of(c.cfg):
        conn = Connection([ep], token=c.conn.token, timeout=1.0, ctx=c.conn.ctx, curve=c.conn.curve)
        try:
            out.append(conn.request(Op.STATUS, S.Empty(), timeout=1.0).controllers[0])
        except XceError:
            out.append(S.ControllerInfo(address=ep, role="down", term=0, commit_index=0))
        finally:
            conn.close()
    return out or fallback


def cmd_modify(a: argparse.Namespace) -> int:
    """bmod: -M of any job; -R -n -q -J -W -sp -w of a pending one (xce/cli/control.py)."""
    from xce.cli import control
    from xce.cli.submit import split_args

    args = split_args(a.rest)  # the global options after `modify` too, as for submit
    a.state_dir = args.values.get("--state-dir", a.state_dir)
    a.timeout = float(args.values.get("--timeout", a.timeout))
    with _client(a) as c:
        return control.modify(c, args.options, args.command, json="--json" in args.flags)


def cmd_control(a: argparse.Namespace) -> int:
    """bstop, bresume, brequeue."""
    from xce.cli import control

    with _client(a) as c:
        return control.control(c, a.cmd, a.ids, a.json, reason=getattr(a, "reason", "") or "")


def cmd_switch(a: argparse.Namespace) -> int:
    from xce.cli import control

    with _client(a) as c:
        return control.switch(c, a.queue, a.ids, a.json)


def cmd_bottom(a: argparse.Namespace) -> int:
    from xce.cli import control

    with _client(a) as c:
        return control.move(c, "bottom", a.id, a.json)


def cmd_hist(a: argparse.Namespace) -> int:
    from xce.cli import control

    with _client(a) as c:
        return control.hist(c, a.ids, a.json)


def cmd_requests(a: argparse.Namespace) -> int:
    from xce.cli.fmt import print_json, table

    with _client(a) as c:
        recs = c.request_log(user=a.user, since=a.since, limit=a.limit)
    if a.json:
        print_json(recs)
        return 0
    print(table(["SEQ", "TIME", "USER", "FROM", "OP", "TARGET", "RESULT"],
                [[r.seq, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.time)), r.user or "-", r.client,
                  r.op, r.target, r.result] for r in recs]))
    return 0


def cmd_audit(a: argparse.Namespace) -> int:
    from xce.cli.fmt import print_json

    with _client(a) as c:
        r = c.audit()
    if a.json:
        print_json(r)
    else:
        for p in r.problems:
            print(f"VIOLATION: {p}")
        print(f"audit: {len(r.problems)} violation(s); checked " +
              ", ".join(f"{v} {k}" for k, v in r.checked.items()))
    return 1 if r.problems else 0


def cmd_config_show(a: argparse.Namespace) -> int:
    import msgspec
    import tomli_w

    from xce.client import cluster_config

    cfg = cluster_config(_state_dir(a))
    data = msgspec.to_builtins(cfg)
    data.get("controller", {}).pop("raft_password", None)
    print(tomli_w.dumps({k: v for k, v in data.items() if v not in ("", None)}))
    return 0


def cmd_up(a: argparse.Namespace) -> int:
    from xce.cli import up as U

    sd = _state_dir(a).resolve()
    existing = U.read_up(sd)
    if existing and U.alive(existing["pid"]):
        raise _usage(f"a cluster is already running in {sd} (pid {existing['pid']}); `xce down` first")
    if a.detach:
        import subprocess

        args = [sys.executable, "-m", "xce.cli.main", "--state-dir", str(sd), "up",
                "--hosts", str(a.hosts), "--controllers", str(a.controllers),
                "--heartbeat", str(a.heartbeat)]
        if a.mem_per_host:
            args += ["--mem-per-host", a.mem_per_host]
        if a.slots_per_host:
            args += ["--slots-per-host", str(a.slots_per_host)]
        if a.demo:
            args += ["--demo"]
        if a.mem_floor:
            args += ["--mem-floor", a.mem_floor]
        if a.reclaim_settle is not None:
            args += ["--reclaim-settle", str(a.reclaim_settle)]
        if a.shrink_age is not None:
            from xce.site.config import from_dict

            from_dict({"reclaim": {"shrink_age": a.shrink_age}}, "xce up --shrink-age")  # refused here, by its key
            args += ["--shrink-age", str(a.shrink_age)]
        if a.durability:
            args += ["--durability", a.durability]
        if a.config:
            from xce.site.config import site_overlay

            U.check_site(site_overlay(a.config))  # refused here, not after a minute of waiting
            args += ["--config", os.path.abspath(a.config)]
        args += _compaction_args(a)
        sd.mkdir(parents=True, exist_ok=True)
        with open(sd / "up.log", "ab") as log:
            sup = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
        rc = _wait_ready(a, sd, U.layout(a.hosts, a.mem_per_host, a.slots_per_host))
        if rc:
            n = U.stop_failed_up(sd, sup)
            print(f"xce up: stopped the supervisor and the {n} daemon(s) it had started", file=sys.stderr)
        return rc
    if a.demo and not a.slots_per_host:
        a.slots_per_host = 8  # room for the whole demo mix at once
    if a.mem_per_host:
        from xce.core.units import parse_mem

        parse_mem(a.mem_per_host)
    extra: dict[str, Any] = {}
    if a.mem_floor:
        extra["worker"] = {"mem_floor": a.mem_floor}
    if a.reclaim_settle is not None:
        extra["reclaim"] = {"min_run": a.reclaim_settle, "window": a.reclaim_settle}
    if a.shrink_age is not None:
        extra.setdefault("reclaim", {})["shrink_age"] = a.shrink_age
    if a.durability:
        extra["controller"] = {"durability": a.durability}
    extra.setdefault("controller", {}).update(_compaction_conf(a))
    from xce.site.config import site_overlay

    site = site_overlay(a.config) if a.config else None
    cfg = U.write_cluster_file(sd, a.controllers, a.mem_per_host or "", a.slots_per_host or 0, a.heartbeat,
                               extra, site)
    names = U.layout(a.hosts, a.mem_per_host, a.slots_per_host)
    from xce.security.auth import ensure_daemon_token, ensure_local_admin

    ensure_local_admin(sd)   # the user who runs `xce up` is its admin: nothing changes for them
    ensure_daemon_token(sd)  # what the local scheduler and workers show the controller
    U.ensure_keys(sd, ["scheduler", *names[:a.hosts]])  # their CURVE keys, on the allow-list
    sup = U.Supervisor(sd, cfg, a.hosts, names)
    print(f"xce: starting a local cluster in {sd} ({a.controllers} controller(s), {a.hosts} host(s)); "
          "Ctrl-C or `xce down` stops it", flush=True)
    print(_compat_hint(sd), flush=True)
    import threading

    from xce.cli.upkeep import retire_hosts

    # Hosts of an earlier layout go once their jobs have ended (docs/cli.md).
    until = time.monotonic() + 60 + 15 * a.heartbeat  # past a new leader's grace and lost_after
    threading.Thread(target=retire_hosts, args=(sd, names, until), daemon=True).start()
    if a.demo:
        from xce.cli.demo import run_demo

        threading.Thread(target=run_demo, args=(sd,), daemon=True).start()
    sup.run()
    return 0


def _compat_hint(sd: Path) -> str:
    return (f'xce: LSF and Slurm commands (bsub, bjobs, sbatch, squeue, ...; docs/compat.md): '
            f'eval "$(xce --state-dir {sd} compat env lsf)" (or slurm)')


_RAFT_TUNING = (("--compact-entries", "compact_entries"), ("--compact-seconds", "compact_seconds"),
                ("--election-timeout", "election_timeout"))


def _compaction_args(a: argparse.Namespace) -> list[str]:
    out: list[str] = []
    for flag, key in _RAFT_TUNING:
        v = getattr(a, key)
        if v is not None:
            out += [flag, ",".join(map(str, v)) if isinstance(v, tuple) else str(v)]
    return out


def _compaction_conf(a: argparse.Namespace) -> dict[str, Any]:
    return {key: list(v) if isinstance(v, tuple) else v for _, key in _RAFT_TUNING
            if (v := getattr(a, key)) is not None}


def _election_timeout(text: str) -> tuple[float, float]:
    import argparse

    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"needs MIN,MAX in seconds (e.g. 2,4), got {text!r}")
    if not 0 < lo < hi:
        raise argparse.ArgumentTypeError(f"needs 0 < MIN < MAX, got {text!r}")
    return lo, hi


def _wait_ready(a: argparse.Namespace, sd: Path, names: list[str]) -> int:
    from xce.cli.upkeep import stale_hosts
    from xce.client import Client
    from xce.core.errors import XceError

    deadline = time.monotonic() + a.ready_timeout
    while time.monotonic() < deadline:
        try:
            with Client(state_dir=sd, timeout=2) as c:
                hv = c.hosts()
                if sum(1 for h in hv if h.state in ("ok", "full") and h.name in names) == len(names):
                    old = stale_hosts((h.name for h in hv), names)
                    print(f"xce: cluster up in {sd}: {len(names)} host(s) ok"
                          + (f"; retiring the earlier layout's {', '.join(old)}" if old else ""))
                    print(_compat_hint(sd))
                    return 0
        except (XceError, FileNotFoundError):
            pass
        time.sleep(0.2)
    print(f"xce up: the cluster did not become ready within {a.ready_timeout:g} s; see {sd}/logs", file=sys.stderr)
    return 1


def cmd_down(a: argparse.Namespace) -> int:
    from xce.cli import up as U

    sd = _state_dir(a)
    if a.kill_jobs and U.running(sd):
        from xce.cli.upkeep import kill_running_jobs

        killed = kill_running_jobs(sd)
        print(f"xce: killed {len(killed)} running job(s)" + (f": {' '.join(map(str, killed))}" if killed else ""))
    if U.down(sd):
        print(f"xce: cluster in {sd} stopped")
        return 0
    print(f"xce down: no running cluster in {sd}", file=sys.stderr)
    return 1


def cmd_top(a: argparse.Namespace) -> int:
    """`xce top ID` is btop (and `--json` with it); anything else is the console."""
    if a.passed and a.passed[0].isdigit():
        from xce.cli import control

        with _client(a) as c:
            return control.move(c, "top", a.passed[0], json="--json" in a.passed[1:])
    from xce.tui.app import main as top_main

    return top_main(["--state-dir", str(_state_dir(a)), *a.passed])


# ---- the parser ----------------------------------------------------------------------------

EXTENSIONS = ("xce.rest.cli", "xce.cli.keys", "xce.compat.cli", "xce.sim.cli", "xce.cli.fleet")


class UsageError(Exception):
    pass


def _usage(msg: str) -> UsageError:
    return UsageError(msg)


def parser() -> argparse.ArgumentParser:
    import argparse

    from xce.cli.parsing import Parser, add_global_options

    p = Parser(prog="xce", description="XCE cluster manager")
    add_global_options(p, top=True)  # every subcommand takes them after its name too
    sub = p.add_subparsers(dest="cmd", required=True)

    # Its words are xce/cli/submit.py's (bsub's options, FILE, stdin): _run hands them over unparsed.
    s = sub.add_parser("submit", help="submit a job, a job script or a script on stdin (bsub)", add_help=False)
    s.set_defaults(func=cmd_submit)

    s = sub.add_parser("jobs", help="list jobs (bjobs)")
    s.add_argument("-a", action="store_true", help="include finished jobs")
    s.add_argument("-u", help="user (or 'all')")
    s.add_argument("-l", action="store_true", help="long format")
    s.add_argument("-p", action="store_true", help="pending jobs (PEND, PSUSP)")
    s.add_argument("-r", action="store_true", help="running jobs")
    s.add_argument("-s", action="store_true", help="suspended jobs (USUSP, SSUSP, PSUSP)")
    s.add_argument("-d", action="store_true", help="finished jobs (DONE, EXIT)")
    s.add_argument("-A", action="store_true", help="a summary per job array: its elements by state")
    s.add_argument("--json", action="store_true")
    s.add_argument("--stale-ok", action="store_true", help="any controller may answer (says how old)")
    s.add_argument("ids", nargs="*")
    s.set_defaults(func=cmd_jobs)

    s = sub.add_parser("recommend", help="right-sizing: requested vs peak memory of finished jobs, and the waste")
    s.add_argument("-u", help="user (or 'all'; default: yours)")
    s.add_argument("--margin", type=float, default=0.1, help="recommended = p95 peak x (1 + margin)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_recommend)

    s = sub.add_parser("hosts", help="list hosts (bhosts); `hosts close|open|remove NAME` (badmin)")
    s.add_argument("-l", action="store_true")
    s.add_argument("--json", action="store_true")
    s.add_argument("--stale-ok", action="store_true", help="any controller may answer (says how old)")
    s.add_argument("names", nargs="*", metavar="[close|open|remove] NAME")
    s.set_defaults(func=cmd_hosts)

    s = sub.add_parser("queues", help="list queues (bqueues; -l: every limit and policy of each)")
    s.add_argument("names", nargs="*", metavar="QUEUE")
    s.add_argument("-l", action="store_true", help="long form: run and memory limits, sizing, retries, reclaim")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_queues)

    s = sub.add_parser("fairshare", help="the share trees: shares, decayed usage, priority (bqueues -l, sshare)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_fairshare)

    s = sub.add_parser("limits", help="each limit's use and the pending jobs it holds (blimits)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_limits)

    s = sub.add_parser("kill", help="kill jobs (bkill); -s sends a signal instead")
    s.add_argument("--json", action="store_true")
    s.add_argument("-s", metavar="SIGNAL", help="send this signal (STOP, CONT, USR1, 10, ...) to the running jobs")
    s.add_argument("ids", nargs="+")
    s.set_defaults(func=cmd_kill)

    s = sub.add_parser("launch", help="inside a job: run a task on one of its hosts (blaunch [-n] [-z \"H ...\"] "
                                      "HOST CMD...)")
    s.add_argument("words", nargs=argparse.REMAINDER, metavar="[-z \"HOST ...\"] HOST CMD")
    s.set_defaults(func=cmd_launch)

    s = sub.add_parser("peek", help="the tail of a running job's output (bpeek)")
    s.add_argument("--json", action="store_true")
    s.add_argument("--bytes", type=int, default=10 * 1024, help="how much of each file (default 10 KB)")
    s.add_argument("id")
    s.set_defaults(func=cmd_peek)

    s = sub.add_parser("wait", help="wait for jobs to end; exit 0 only if all DONE")
    s.add_argument("--timeout", dest="timeout_wait", type=float)
    s.add_argument("ids", nargs="+")
    s.set_defaults(func=cmd_wait)

    # Its words are bsub's (-sp, -We ...), which argparse cannot read: _run hands them over unparsed.
    s = sub.add_parser("modify", help="change a job (bmod): -M, and -R -n -q -J -W -sp -w -E/-En of a pending job",
                       add_help=False)
    s.set_defaults(func=cmd_modify)

    for name, what in (("stop", "stop jobs: pending ones are held (PSUSP), running ones suspended (bstop)"),
                       ("resume", "resume stopped jobs (bresume)"),
                       ("requeue", "requeue jobs: running ones are killed first, then PEND again (brequeue)")):
        s = sub.add_parser(name, help=what)
        s.add_argument("--json", action="store_true")
        if name == "requeue":
            s.add_argument("--reason", help="why (kept in the job's history)")
        s.add_argument("ids", nargs="+", metavar="ID")
        s.set_defaults(func=cmd_control)

    s = sub.add_parser("switch", help="move jobs to another queue (bswitch)")
    s.add_argument("--json", action="store_true")
    s.add_argument("queue")
    s.add_argument("ids", nargs="+", metavar="ID")
    s.set_defaults(func=cmd_switch)

    s = sub.add_parser("bottom", help="move a pending job to the bottom of its queue (bbot); `xce top ID` is btop")
    s.add_argument("--json", action="store_true")
    s.add_argument("id")
    s.set_defaults(func=cmd_bottom)

    s = sub.add_parser("hist", help="every event of jobs, with its time and who caused it (bhist -l)")
    s.add_argument("--json", action="store_true")
    s.add_argument("ids", nargs="+", metavar="ID")
    s.set_defaults(func=cmd_hist)

    s = sub.add_parser("status", help="controllers, leader, hosts and jobs by state")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_status)

    s = sub.add_parser("config", help="configuration")
    cs = s.add_subparsers(dest="sub", required=True)
    c = cs.add_parser("show")
    c.set_defaults(func=cmd_config_show)

    s = sub.add_parser("admin", help="administration")
    ad = s.add_subparsers(dest="sub", required=True)
    c = ad.add_parser("audit", help="check the accounting invariants on the live cluster")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_audit)
    c = ad.add_parser("requests", help="who changed what through the CLI and scripts (the ZeroMQ door)")
    c.add_argument("-u", "--user", help="only this user's requests")
    c.add_argument("--since", type=float, default=0.0, help="Unix seconds")
    c.add_argument("--limit", type=int, default=1000)
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_requests)

    s = sub.add_parser("up", help="start a local cluster")
    s.add_argument("--hosts", type=int, default=1)
    s.add_argument("--controllers", type=int, default=1, choices=[1, 3, 5])
    s.add_argument("--mem-per-host")
    s.add_argument("--slots-per-host", type=int)
    s.add_argument("--heartbeat", type=float, default=1.0)
    s.add_argument("--durability", choices=["mmap", "fsync"], help="Raft journal policy (docs/ha.md)")
    s.add_argument("--mem-floor", help="kill the largest overage first when a host's OS-available "
                   "memory falls below this (e.g. 300M)")
    s.add_argument("--reclaim-settle", type=float, metavar="SECONDS",
                   help="reclaim.min_run and reclaim.window: how long a job runs, and its peak holds "
                   "still, before its slack is lent to reclaiming jobs (docs/accounting.md)")
    s.add_argument("--shrink-age", type=float, metavar="SHARE",
                   help="reclaim.shrink_age: lower a running job's reservation to its peak + margin once its peak "
                   "held still this share of its run (1, the default: never; docs/accounting.md)")
    s.add_argument("--compact-entries", type=int, help="controller.compact_entries (docs/ha.md)")
    s.add_argument("--compact-seconds", type=float, help="controller.compact_seconds (docs/ha.md)")
    s.add_argument("--election-timeout", type=_election_timeout, metavar="MIN,MAX",
                   help="controller.election_timeout in seconds (default 0.3,0.8); wider for fleets of "
                   "thousands of hosts on few cores (docs/ha.md)")
    s.add_argument("--detach", action="store_true", help="return once the cluster is ready")
    s.add_argument("--ready-timeout", type=float, default=60.0,
                   help="with --detach: seconds to wait for the cluster; past them it stops what it started")
    s.add_argument("--demo", action="store_true", help="submit a demo mix of jobs")
    s.add_argument("--config", metavar="FILE", help="a site configuration to try: its queues, resources, "
                   "[fairshare], [backfill], [[limits]] and [preemption] replace the local cluster's")
    s.set_defaults(func=cmd_up)

    s = sub.add_parser("down", help="stop the local cluster (running jobs keep running; see --kill-jobs)")
    s.add_argument("--kill-jobs", action="store_true",
                   help="kill the running jobs first (they end EXIT), rather than leave them to a later `up`")
    s.set_defaults(func=cmd_down)

    # Areas that own their own subcommands register them here (REST users, tokens, keys).
    import importlib

    for mod in EXTENSIONS:
        try:
            importlib.import_module(mod).register(sub)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise

    # Every option it does not know goes to xce-top, --help included (main() lets them through).
    s = sub.add_parser("top", help="the live console (xce-top; `xce top --help` lists its options); "
                       "`xce top ID` moves a pending job to the top of its queue (btop)",
                       add_help=False)
    s.set_defaults(func=cmd_top, passes_options=True)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one command; a reader that went away (`xce jobs | head`) ends it quietly, exit 141."""
    try:
        try:
            return _run(sys.argv[1:] if argv is None else list(argv))
        finally:
            sys.stdout.flush()  # what is still buffered fails here, inside the handler, not at exit
    except BrokenPipeError:
        # As Python's docs advise (signal module, "Note on SIGPIPE"): stdout goes to devnull so the
        # interpreter's last flush cannot fail again; 141 = 128 + SIGPIPE, as for a killed `cat`.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _run(args: list[str]) -> int:
    submit_key = ""
    if "submit" in args:
        from xce.cli.quick import Fallback, submit

        try:
            done = submit(args)
        except KeyboardInterrupt:
            return 130
        _debug_path("door" if not isinstance(done, Fallback) else f"full ({done.reason})")
        if not isinstance(done, Fallback):
            return done
        submit_key = done.key
    from xce.core.errors import InvalidRequest, XceError

    p = parser()
    at = _raw_at(args)
    if at is not None:  # these commands' words are bsub's, which argparse cannot read (-oo, -sp, -J after -n)
        a, a.passed, a.rest = p.parse_args(args[:at + 1]), [], args[at + 1:]
    else:
        a, a.passed = p.parse_known_args(args)
    if a.passed and not getattr(a, "passes_options", False):
        p.error(f"unrecognized arguments: {' '.join(a.passed)}")
    a.submit_key = submit_key
    try:
        return a.func(a)
    except UsageError as e:
        print(f"xce: {e}", file=sys.stderr)
        return 2
    except InvalidRequest as e:
        print(f"xce {a.cmd}: {e.message}", file=sys.stderr)
        return 2
    except XceError as e:
        print(f"xce {a.cmd}: {e.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


RAW_COMMANDS = ("submit", "modify", "launch")  # their words are read by xce/cli/submit.py, control.py, launch


def _raw_at(args: list[str]) -> int | None:
    """Where ``submit`` or ``modify`` is, when only global options come before it."""
    from xce.cli.quick import GLOBAL_OPTIONS

    i = 0
    while i < len(args):
        if args[i] in RAW_COMMANDS:
            return i
        if args[i] in GLOBAL_OPTIONS:
            i += 2
        elif args[i].partition("=")[0] in GLOBAL_OPTIONS:
            i += 1
        else:
            return None
    return None


def _debug_path(path: str) -> None:
    """With XCE_DEBUG_PATH set, say which path served `xce submit` and what it had loaded by then."""
    if os.environ.get("XCE_DEBUG_PATH"):
        loaded = [m for m in ("zmq", "msgspec", "argparse") if m in sys.modules]
        print(f"xce: submit path {path}; loaded: {', '.join(loaded) or 'none of zmq, msgspec, argparse'}",
              file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
