"""LSF's commands over XCE: bsub, bjobs, bkill, bqueues, bhosts, bmod, lsid, ... (docs/compat.md).

``main(NAME, argv)`` is what each script in `xce compat path lsf` calls (bsub's script
calls xce/compat/lsf_submit.py's, which loads none of the other commands).  bsub's
options and ``#BSUB`` lines go through xce/core/jobspec (options.py, directives.py,
bsub.py): one parser for every door.  What the job model does not have yet is
refused by name (xce/core/jobspec/options.py, build.py).  Exit codes as LSF's: 0, or 255 for bad
input and for a job that is not found.

Lazy imports: each LSF command (one process per call from workflow tools) loads only what it uses.
"""

from __future__ import annotations

import sys

from xce.compat import mapping
from xce.compat.lsf_submit import BAD, bsub
from xce.compat.session import Refused, Session, job_ids, run

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: the commands start in ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


# ---- bjobs --------------------------------------------------------------------------------

_BJOBS_FLAGS = set("wlapdrsXW")
_BJOBS_VALUES = {"-u", "-J", "-q", "-o", "-m"}
_BJOBS_WORDS = {"-noheader", "-json", "-aJ"}
_USAGE = {"bjobs": "-a -d -p -r -s -w -l -u -J -q -o -noheader -json", "bhist": "-a -d -p -r -s -w -l -u -J -q"}


def _bjobs_args(argv: list[str], cmd: str = "bjobs") -> tuple[set[str], dict[str, str], list[str]]:
    """Flags (``-a -w`` and clusters such as ``-aw``), valued options, job ids (bjobs' grammar; bhist's)."""
    flags: set[str] = set()
    values: dict[str, str] = {}
    ids: list[str] = []
    i = 0
    while i < len(argv):
        w = argv[i]
        if w in _BJOBS_VALUES or w == "-aJ":
            if i + 1 >= len(argv):
                raise Refused(f"{w} needs a value")
            if w == "-aJ":
                flags.add("a")
            values["-J" if w == "-aJ" else w] = argv[i + 1]
            i += 2
            continue
        if w in _BJOBS_WORDS:
            flags.add(w)
        elif w.startswith("-") and len(w) > 1 and set(w[1:]) <= _BJOBS_FLAGS:
            flags.update(w[1:])
        elif w.startswith("-"):
            raise Refused(f"{w}: option not supported by this XCE's {cmd} ({_USAGE[cmd]})")
        else:
            ids.append(w)
        i += 1
    return flags, values, ids


def _selected(views: list[Any], flags: set[str], values: dict[str, str]) -> list[Any]:
    from fnmatch import fnmatchcase

    from xce.core.jobids import STATE_FILTERS

    wanted = set().union(*(STATE_FILTERS[f] for f in STATE_FILTERS if f in flags))
    out = [v for v in views if (v.state in wanted if wanted else
                                "a" in flags or v.state not in ("DONE", "EXIT"))]
    if "-J" in values:
        out = [v for v in out if fnmatchcase(v.name, values["-J"])]
    if "-q" in values:
        out = [v for v in out if v.queue == values["-q"]]
    return out


def _reads(cols: Any, flags: set[str], values: dict[str, str]) -> set[str]:
    """The JobView fields the listing (its columns, -l, and _selected) reads: all the read door sends."""
    from xce.compat import lsf_fmt as F

    shown = set(F.LONG_READS) if "l" in flags else F.reads_of(cols.names if cols else F.DEFAULT_FIELDS)
    return shown | {"id", "state"} | ({"name"} if "-J" in values else set()) | ({"queue"} if "-q" in values else set())


def _none_found(flags: set[str]) -> str:
    for flag, what in (("p", "pending"), ("r", "running"), ("s", "suspended"), ("d", "done")):
        if flag in flags:
            return f"No {what} job found"
    return "No job found" if "a" in flags else "No unfinished job found"


def bjobs(s: Session, argv: list[str]) -> int:
    from xce.compat import lsf_fmt as F
    from xce.site.local import unix_user

    flags, values, id_words = _bjobs_args(argv)
    cols = F.parse_o(values["-o"]) if "-o" in values else None
    user = values.get("-u") or unix_user()
    reads = _reads(cols, flags, values)
    if id_words:
        views, missing = _by_ids(s, id_words, reads)
    else:
        finished = bool({"a", "d"} & flags)  # else the controller need not send its finished jobs
        views = _selected(s.jobs(user=None if user == "all" else user, finished=finished, reads=reads), flags, values)
        missing = []
    if "-json" in flags:
        names = cols.names if cols else F.DEFAULT_FIELDS
        records = [F.json_record(v, names) for v in views]
        records += [{"JOBID": w, "ERROR": f"Job <{w}> is not found"} for w in missing]
        print(F.to_json(records))
        return 0
    for w in missing:
        print(f"Job <{w}> is not found", file=sys.stderr)
    if views:
        header = "-noheader" not in flags
        if "l" in flags:
            print(("\n" + "-" * 78 + "\n\n").join(F.long_listing(v) for v in views))
        elif cols:
            print(F.columns(views, cols, header))
        else:
            print(F.default_listing(views, "w" in flags, header))
    elif not missing:
        print(_none_found(flags), file=sys.stderr)
    return BAD if missing else 0


def _by_ids(s: Session, words: list[str], reads: set[str]) -> tuple[list[Any], list[str]]:
    """The jobs ``12``, ``12[3]``, ``12[1-5]`` name (an array's id: its elements), and the words
    that name none."""
    from xce.core.jobids import split_id

    wanted: dict[str, set[int]] = {}
    for w in words:
        try:
            wanted[w] = set(job_ids([w]))
        except Refused:
            wanted[w] = set()
    views = s.jobs(ids=sorted(set().union(*wanted.values())), reads=reads)
    views = list({v.id: v for v in views}.values())
    hit = {w: [v for v in views if v.id in ids or split_id(v.id)[0] in ids] for w, ids in wanted.items()}
    return views, [w for w, found in hit.items() if not found]


# ---- bkill, bmod --------------------------------------------------------------------------

def bkill(s: Session, argv: list[str]) -> int:
    from xce.core.jobspec.signals import ENDING, parse_signal
    from xce.site.local import unix_user

    opts, words = _simple_opts(argv, {"-u", "-J", "-q", "-s"}, "bkill")
    sig = parse_signal(opts["-s"], "bkill -s") if "-s" in opts else None
    user = opts.get("-u") or unix_user()
    if words == ["0"] or (not words and ("-J" in opts or "-q" in opts or "-u" in opts)):
        views = _selected(s.jobs(user=None if user == "all" else user, finished=False,
                                 reads={"id", "state", "name", "queue"}), set(), opts)
        if not views:
            print("No unfinished job found", file=sys.stderr)
            return BAD
        ids = [v.id for v in views]
    elif not words:
        raise Refused("give job ids, or 0 for all your jobs (bkill [-s SIGNAL] [-J name] [-u user] [ID ...])")
    else:
        ids = job_ids(words)
    if sig is None or sig in ENDING:  # LSF's bkill ends the job with INT, TERM, KILL: XCE's kill
        return _kill_report(s.client.kill(ids))
    return _kill_report(s.client.kill(ids, signal=sig))


def _kill_report(results: dict[int, str]) -> int:
    rc = 0
    for jid, what in results.items():
        outcome = mapping.kill_outcome(what)
        if outcome == mapping.ENDING:
            print(f"Job <{mapping.lsf_job(jid)}> is being terminated")
        elif outcome == mapping.SIGNALED:
            print(f"Job <{mapping.lsf_job(jid)}> is being signaled")
        elif outcome == mapping.FINISHED:
            print(f"Job <{mapping.lsf_job(jid)}>: Job has already finished", file=sys.stderr)
            rc = BAD
        else:
            print(f"Job <{mapping.lsf_job(jid)}>: No matching job found", file=sys.stderr)
            rc = BAD
    return rc


def _simple_opts(argv: list[str], valued: set[str], cmd: str) -> tuple[dict[str, str], list[str]]:
    opts: dict[str, str] = {}
    words: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in valued and i + 1 < len(argv):
            opts[argv[i]] = argv[i + 1]
            i += 2
        elif argv[i].startswith("-") and argv[i] != "-":
            raise Refused(f"{argv[i]}: option not supported by this XCE's {cmd} ({' '.join(sorted(valued))})")
        else:
            words.append(argv[i])
            i += 1
    return opts, words


def bmod(s: Session, argv: list[str]) -> int:
    """bmod [options] ID: -M any time; -R -n -q -J -W -sp -w while the job pends, as `xce modify`
    (the same grammar, xce/core/jobspec/modify.py, and the same two client calls)."""
    from xce.core.jobspec.modify import bmod_changes
    from xce.core.jobspec.options import parse_bsub_args

    opts, words = parse_bsub_args(argv)
    if len(words) != 1:
        raise Refused("give the options, then one job id: bmod [-M LIMIT] [-R ..] [-n N] [-q Q] [-J NAME] "
                      "[-W LIMIT] [-sp N] [-w DEP] JOBID")
    ids = job_ids(words)
    changes, mem, mem_given = bmod_changes(opts, mem_unit=mapping.LSF_UNIT_FOR_LIMITS)
    if not changes and not mem_given:
        raise Refused("no change given (bmod [options] JOBID)")
    for jid in ids:
        if mem_given:
            s.client.modify(jid, mem)
        if changes:
            s.client.modify_spec(jid, **changes)
        print(f"Parameters of job <{mapping.lsf_job(jid)}> are being changed")
    return 0


def bpeek(s: Session, argv: list[str]) -> int:
    """The tail of a running job's output, as LSF prints it."""
    opts, words = _simple_opts(argv, set(), "bpeek")
    if len(words) != 1 or not words[0].isdigit():
        raise Refused("give one job id: bpeek JOBID")
    r = s.client.peek(int(words[0]))
    if r.note:
        print(r.note)
        return 0
    print("<< output from stdout >>")
    sys.stdout.write(r.stdout)
    if r.stderr_path:
        print("<< output from stderr >>")
        sys.stdout.write(r.stderr)
    return 0


# ---- job control: bstop, bresume, brequeue, bswitch, btop, bbot, bhist -------------------

def _ids_of(argv: list[str], cmd: str) -> list[int]:
    _, words = _simple_opts(argv, set(), cmd)
    if not words:
        raise Refused(f"give job ids ({cmd} ID ...)")
    return job_ids(words)


def _control(verb: str) -> Callable[[Session, list[str]], int]:
    """bstop/bresume/brequeue: one request; the controller refuses a job it cannot change, by name."""
    call = {"stopped": "stop", "resumed": "resume", "requeued": "requeue"}[verb]

    def command(s: Session, argv: list[str]) -> int:
        ids = _ids_of(argv, f"b{call}")
        for jid in getattr(s.client, call)(ids):
            print(f"Job <{mapping.lsf_job(jid)}> is being {verb}")
        return 0

    return command


def bswitch(s: Session, argv: list[str]) -> int:
    _, words = _simple_opts(argv, set(), "bswitch")
    if len(words) < 2:
        raise Refused("give the queue and job ids: bswitch QUEUE ID ...")
    for jid, queue in s.client.switch(job_ids(words[1:]), words[0]).items():
        print(f"Job <{mapping.lsf_job(jid)}> is switched to queue <{queue}>")
    return 0


def _move(to: str) -> Callable[[Session, list[str]], int]:
    def command(s: Session, argv: list[str]) -> int:
        ids = _ids_of(argv, f"b{to[:3]}")
        for jid in ids:
            s.client.move(jid, to)
            print(f"Job <{mapping.lsf_job(jid)}> has been moved to position 1 from {to}.")
        return 0

    return command


def bhist(s: Session, argv: list[str]) -> int:
    """bhist [-a|-d|-p|-r|-s] [-w] [-l] [-u USER|all] [-J NAME] [-q QUEUE] [ID ...]: LSF's summary of
    the seconds each job spent in each state, or with -l each job's events and that summary; both
    from the job's history, folded by xce/core/jobtimes.py."""
    import time

    from xce.compat import lsf_acct as A
    from xce.core.jobtimes import state_times
    from xce.site.local import unix_user

    flags, values, id_words = _bjobs_args(argv, "bhist")
    if flags - set("lwapdrs") or set(values) - {"-u", "-J", "-q"}:
        bad = sorted({f"-{f}" for f in flags - set("lwapdrs")} | (set(values) - {"-u", "-J", "-q"}))[0]
        raise Refused(f"{bad}: option not supported by this XCE's bhist ({_USAGE['bhist']})")
    reads = {"id", "name", "user", "state", "queue"}
    if id_words:
        views, missing = _by_ids(s, id_words, reads)
    else:
        user = values.get("-u") or unix_user()
        views = _selected(s.jobs(user=None if user == "all" else user, finished=bool({"a", "d"} & flags),
                                 reads=reads), flags, values)
        missing = []
    for w in missing:
        print(f"{w}: No matching job found", file=sys.stderr)
    if not views:
        if not missing:
            print("No matching job found", file=sys.stderr)
        return BAD if missing else 0
    now = time.time()
    events = {v.id: s.client.hist(v.id) for v in views}
    if "l" in flags:
        print(("\n" + "-" * 78 + "\n").join(_hist_long(v.id, events[v.id], state_times(events[v.id], now))
                                            for v in views))
    else:
        print(A.BHIST_HEAD)
        for v in views:
            print(A.bhist_row(v, state_times(events[v.id], now), "w" in flags))
    return BAD if missing else 0


def _hist_long(jid: int, events: list[Any], spent: Any) -> str:
    from xce.compat.lsf_acct import bhist_long_summary
    from xce.compat.lsf_fmt import lsf_long_time

    lines = [f"Job <{mapping.lsf_job(jid)}>:"]
    lines += [f"{lsf_long_time(e.time)}: {e.event.capitalize()}" + (f" by <{e.by}>" if e.by else "")
              + (f"; {e.detail}" if e.detail else "") + ";" for e in events]
    return "\n".join(lines) + "\n\n" + bhist_long_summary(spent)


# The JobView fields bacct reads (-l included); the controller sends only these.
_ACCT_READS = ("id", "name", "user", "state", "queue", "project", "command", "submit_time", "start_time", "end_time",
               "submit_host", "cwd", "slots", "hosts", "reason", "mem_peak", "cpu_time")
_ACCT_WINDOWS = {"-C": "completed", "-S": "submitted", "-D": "dispatched"}
_ACCT_TIMES = {"-C": "end_time", "-S": "submit_time", "-D": "start_time"}


def _bacct_args(argv: list[str]) -> tuple[set[str], dict[str, list[str]], list[str]]:
    flags: set[str] = set()
    values: dict[str, list[str]] = {}
    words: list[str] = []
    i = 0
    while i < len(argv):
        w = argv[i]
        if w in ("-u", "-q", "-P", "-C", "-S", "-D"):
            if i + 1 >= len(argv):
                raise Refused(f"{w} needs a value")
            values.setdefault(w, []).extend(argv[i + 1].replace(",", " ").split() if w in "-u -q -P" else [argv[i + 1]])
            i += 2
            continue
        if w in ("-l", "-d", "-e"):
            flags.add(w[1])
        elif w.startswith("-"):
            raise Refused(f"{w}: option not supported by this XCE's bacct (-l -d -e -u -q -P -C -S -D, job ids)")
        else:
            words.append(w)
        i += 1
    return flags, values, words


def bacct(s: Session, argv: list[str]) -> int:
    """bacct [-l] [-d|-e] [-u USER ...|all] [-q QUEUE] [-P PROJECT] [-C|-S|-D time0,time1] [ID ...]:
    LSF's accounting summary (and -l each job's record) of the finished jobs the controller keeps."""
    import time

    from xce.compat import lsf_acct as A
    from xce.compat.lsf_fmt import DEFAULT_PROJECT
    from xce.site.local import unix_user

    flags, values, id_words = _bacct_args(argv)
    now = time.time()
    windows = [(_ACCT_WINDOWS[o], *A.parse_window(values[o][-1], now)) for o in ("-C", "-S", "-D") if o in values]
    users = values.get("-u") or [unix_user()]
    if id_words:
        views = s.jobs(job_ids(id_words), reads=_ACCT_READS, aged=False)
    else:
        views = s.jobs(user=None if "all" in users or len(users) > 1 else users[0], reads=_ACCT_READS, aged=False)
        views = [v for v in views if "all" in users or v.user in users]
    views = [v for v in views if v.state in ("DONE", "EXIT") and v.end_time is not None
             and (not ({"d", "e"} & flags) or ("d" in flags) == (v.state == "DONE"))
             and (not values.get("-q") or v.queue in values["-q"])
             and (not values.get("-P") or (v.project or DEFAULT_PROJECT) in values["-P"])]
    for o, (_, t0, t1) in zip([o for o in ("-C", "-S", "-D") if o in values], windows):
        views = [v for v in views if (t := getattr(v, _ACCT_TIMES[o])) is not None and t0 <= t <= t1]
    sel = A.Selection(users=None if "all" in users or id_words else users, projects=values.get("-P", []),
                      queues=values.get("-q", []), status="".join(sorted({"d", "e"} & flags)) if len({"d", "e"} & flags) == 1 else "",
                      windows=windows)
    print(A.acct_header(sel))
    if not views:
        print("No matching job found")
        return 0
    views.sort(key=lambda v: v.end_time)
    accts = [A.acct_of(v) for v in views]
    if "l" in flags:
        print("")
        print("\n\n".join(A.acct_long(v, a) for v, a in zip(views, accts)))
    print("")
    print(A.acct_summary(accts, [v.end_time for v in views]))
    return 0


# ---- cluster information ------------------------------------------------------------------

def bqueues(s: Session, argv: list[str]) -> int:
    opts, names = _simple_opts([a for a in argv if a not in ("-l", "-w")], set(), "bqueues")
    r = s.client.queues()
    queues = [q for q in r.queues if not names or q.name in names]
    for n in names:
        if n not in {q.name for q in r.queues}:
            print(f"{n}: No such queue", file=sys.stderr)
    if "-l" in argv:
        print("\n".join(_queue_long(q, r) for q in queues))
        return 0
    print("QUEUE_NAME      PRIO STATUS          MAX JL/U JL/P JL/H NJOBS  PEND   RUN  SUSP")
    for q in queues:
        c = _slots(r, q.name)
        pend, runs = c.get("PEND", 0) + c.get("PSUSP", 0), c.get("RUN", 0) + c.get("UNKWN", 0)
        susp = c.get("USUSP", 0) + c.get("SSUSP", 0)
        print(f"{q.name:<15} {q.priority:>4}  {'Open:Active':<15} {'-':>4} {'-':>4} {'-':>4} {'-':>4} "
              f"{pend + runs + susp:>5} {pend:>5} {runs:>5} {susp:>5}")
    return 0 if len(queues) == len(names) or not names else BAD


def _slots(r: Any, queue: str) -> dict[str, int]:
    """The queue's slots by state, as LSF's bqueues counts (a job of -n 4 is 4); a controller that
    predates the slot counts answers jobs, which are the slots of one-slot jobs."""
    return (r.slots or r.counts).get(queue, {})


def _queue_long(q: Any, r: Any) -> str:
    from xce.core.hostgroups import queue_says

    c = _slots(r, q.name)
    pend, runs = c.get("PEND", 0) + c.get("PSUSP", 0), c.get("RUN", 0) + c.get("UNKWN", 0)
    ssusp, ususp = c.get("SSUSP", 0), c.get("USUSP", 0)
    return (f"QUEUE: {q.name}\n  -- {q.description or 'XCE queue'}"
            f"{' (default)' if q.name == r.default else ''}\n\n"
            f"PARAMETERS/STATISTICS\nPRIO NICE STATUS          MAX JL/U JL/P JL/H NJOBS  PEND   RUN SSUSP USUSP  RSV\n"
            f"{q.priority:>4}    0  Open:Active       -    -    -    - {pend + runs + ssusp + ususp:>5} {pend:>5} "
            f"{runs:>5} {ssusp:>5} {ususp:>5}    0\n\n"
            f"RERUNNABLE :  {'yes' if q.rerunnable else 'no'}\n\n"
            f"HOSTS:  {queue_says(q.hosts, q.hosts_not)}\n")


def bhosts(s: Session, argv: list[str]) -> int:
    _, names = _simple_opts([a for a in argv if a not in ("-w", "-l")], set(), "bhosts")
    hosts = s.client.hosts(names)
    print("HOST_NAME          STATUS       JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV")
    for h in hosts:
        print(f"{h.name:<18} {mapping.lsf_host_status(h.state):<12} {'-':>4} {h.slots_total:>6} {h.slots_used:>6} {h.slots_used:>6} "
              f"{0:>6} {0:>6} {0:>6}")
    return 0


def lshosts(s: Session, argv: list[str]) -> int:
    print("HOST_NAME      type    model  cpuf ncpus maxmem maxswp server RESOURCES")
    for h in s.client.hosts():
        print(f"{h.name:<14} {'X86_64':<7} {'-':<6} {'1.0':>4} {h.ncpus:>5} {h.mem_total // mapping.MB:>5}M "
              f"{'-':>6} {'Yes':>6} ()")
    return 0


def lsload(s: Session, argv: list[str]) -> int:
    print("HOST_NAME       status  r15s   r1m  r15m   ut    pg  ls    it   tmp   swp   mem")
    for h in s.client.hosts():
        status = "ok" if h.state in ("ok", "full") else "unavail"
        print(f"{h.name:<15} {status:<7} {'-':>5} {'-':>5} {'-':>5} {'-':>4} {'-':>5} {'-':>3} {'-':>5} "
              f"{'-':>5} {'-':>5} {h.mem_os_available // mapping.MB:>5}M")
    return 0


def _master(s: Session) -> str:
    st = s.client.status()
    return (st.leader or "-").split("//")[-1].split(":")[0]


def lsid(s: Session, argv: list[str]) -> int:
    from xce import __version__

    st = s.client.status()
    print(f"XCE {__version__}, an LSF-compatible front-end (IBM Spectrum LSF 10.1 commands)\n\n"
          f"My cluster name is {st.cluster}\nMy master name is {_master(s)}")
    return 0


def lsclusters(s: Session, argv: list[str]) -> int:
    from xce.site.local import unix_user

    st = s.client.status()
    hosts = sum(st.hosts_by_state.values())
    print("CLUSTER_NAME   STATUS   MASTER_HOST               ADMIN    HOSTS  SERVERS")
    print(f"{st.cluster:<14} {'ok':<8} {_master(s):<25} {unix_user():<8} {hosts:>5} {hosts:>8}")
    return 0


def _params(s: Session) -> dict[str, str]:
    """What bparams and showconf print: lsb.params' keys and where LSF_ENVDIR's files are."""
    from pathlib import Path

    from xce.compat import shims

    cfg = s.cfg
    conf = shims.envdir(Path(s.state_dir))
    return {"DEFAULT_QUEUE": cfg.default_queue(), "CLEAN_PERIOD": str(int(cfg.compat.clean_period)),
            "MBD_SLEEP_TIME": str(max(1, round(cfg.scheduler.interval))),
            "LSF_UNIT_FOR_LIMITS": mapping.LSF_UNIT_FOR_LIMITS, "MAX_JOB_ARRAY_SIZE": "1000",
            "LSF_ENVDIR": str(conf), "LSF_CONFDIR": str(conf), "LSB_SHAREDIR": str(shims.sharedir(conf))}


def bparams(s: Session, argv: list[str]) -> int:
    p = _params(s)
    print("System default parameters:")
    for k, v in p.items():
        print(f"    {k} = {v}")
    return 0


def badmin(s: Session, argv: list[str]) -> int:
    if argv[:2] != ["showconf", "mbd"]:
        raise Refused(f"badmin {' '.join(argv)}: only `badmin showconf mbd` is served by XCE's badmin "
                      "(use `xce hosts close|open`)")
    return _showconf("MBD", s)


def lsadmin(s: Session, argv: list[str]) -> int:
    if argv[:2] != ["showconf", "lim"]:
        raise Refused(f"lsadmin {' '.join(argv)}: only `lsadmin showconf lim` is served by XCE's lsadmin")
    return _showconf("LIM", s)


def _showconf(daemon: str, s: Session) -> int:
    import time

    from xce.compat.lsf_acct import full_time

    print(f"{daemon} configuration at {full_time(time.time())}")
    for k, v in _params(s).items():  # "    KEY = VALUE": Snakemake's LSF executor splits on " = "
        print(f"    {k} = {v}")
    return 0


def blaunch(s: Session, argv: list[str]) -> int:
    """blaunch [-n] [-z "host ..."] [-u hostfile] host command: `xce launch` (xce/client/launch.py)."""
    from xce.client.launch import TaskRun, exit_status, parse_blaunch, run_tasks, with_sigterm

    hosts, command = parse_blaunch(argv)
    return with_sigterm(lambda: exit_status(run_tasks(s.client, [TaskRun(h, command) for h in hosts])))


COMMANDS: dict[str, Callable[[Session, list[str]], int]] = {
    "bsub": bsub, "bjobs": bjobs, "bkill": bkill, "bmod": bmod, "bqueues": bqueues, "bhosts": bhosts,
    "lshosts": lshosts, "lsload": lsload, "lsid": lsid, "lsclusters": lsclusters, "bparams": bparams,
    "badmin": badmin, "lsadmin": lsadmin,
    "bhist": bhist, "bacct": bacct, "bpeek": bpeek,
    "bstop": _control("stopped"), "bresume": _control("resumed"), "brequeue": _control("requeued"),
    "bswitch": bswitch, "btop": _move("top"), "bbot": _move("bottom"), "blaunch": blaunch,
}


def main(name: str, argv: list[str]) -> int:
    return run(name, COMMANDS[name], argv, BAD)


if __name__ == "__main__":  # python -m xce.compat.lsf bsub ...
    sys.exit(main(sys.argv[1], sys.argv[2:]))
