"""Slurm's commands over XCE: sbatch, squeue, sacct, scancel, sinfo, scontrol, srun (docs/compat.md).

``main(NAME, argv)`` is what each script in `xce compat path slurm` calls (sbatch's script
calls xce/compat/slurm_submit.py's, which maps sbatch's options onto JobSpec fields and
loads none of the other commands); the rest of XCE never sees a Slurm word.  Exit codes: 0, or 1 for any failure, as
Slurm's commands.

Lazy imports: each Slurm command (one process per call from workflow tools) loads only what it uses.
"""

from __future__ import annotations

import os
import sys

from xce.compat import mapping
from xce.compat import slurm_fmt as F
from xce.compat.session import Refused, Session, job_ids, run
from xce.compat.slurm_submit import BAD, sbatch, sbatch_spec

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: the commands start in ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


# ---- squeue, sacct -------------------------------------------------------------------------

def _long_opts(argv: list[str], short: dict[str, str], valued: set[str], flags: set[str], cmd: str
               ) -> tuple[dict[str, str], set[str], list[str]]:
    """Slurm's spellings: ``--opt=v``, ``--opt v``, ``-Xv``, ``-X v``; short names map to long."""
    values: dict[str, str] = {}
    seen: set[str] = set()
    rest: list[str] = []
    i = 0
    while i < len(argv):
        w = argv[i]
        if w.startswith("--"):
            name, eq, value = w.partition("=")
        elif w.startswith("-") and len(w) > 1:
            name, eq, value = short.get(w[1], w[:2]), "", w[2:]
            eq = "=" if value else ""
        else:
            rest.append(w)
            i += 1
            continue
        if name in flags:
            seen.add(name)
        elif name in valued:
            if not eq:
                if i + 1 >= len(argv):
                    raise Refused(f"option {name} requires an argument")
                i += 1
                value = argv[i]
            # -j 12 -j 13 (submitit's sacct) lists both, as Slurm's list options add up
            values[name] = f"{values[name]},{value}" if name in values and name in _LISTS else value
        else:
            raise Refused(f"{w}: option not supported by this XCE's {cmd}")
        i += 1
    return values, seen, rest


_LISTS = {"--jobs", "--user", "--states", "--state", "--partition", "--name"}  # comma lists that add up


def _ids(text: str) -> list[int]:
    """``-j 12,13_2`` -> job ids (an element ``A_I``; an array's own id lists its elements)."""
    try:
        return job_ids([part.strip() for part in text.split(",") if part.strip()])
    except Refused:
        raise Refused(f"Invalid job id specified: {text}") from None


def squeue(s: Session, argv: list[str]) -> int:
    from xce.site.local import unix_user

    values, flags, _ = _long_opts(
        argv, {"h": "--noheader", "o": "--format", "O": "--Format", "t": "--states", "u": "--user",
               "j": "--jobs", "r": "--array", "p": "--partition", "l": "--long", "a": "--all"},
        {"--format", "--Format", "--states", "--user", "--jobs", "--partition", "--name"},
        {"--noheader", "--me", "--array", "--long", "--all"}, "squeue")
    ids = _ids(values["--jobs"]) if "--jobs" in values else []
    states = _states(values.get("--states") or ("all" if ids else "PD,R,S"))
    user = unix_user() if "--me" in flags else values.get("--user")
    finished = bool(states & {"DONE", "EXIT"})  # else the controller need not send its finished jobs
    fmt = values.get("--format") or (F.SQUEUE_LONG if "--long" in flags else None)
    reads = F.squeue_reads(fmt, values.get("--Format")) | {"id", "state"}  # id: arrays fold by it
    reads |= {"queue"} if "--partition" in values else set()
    reads |= {"name"} if "--name" in values else set()
    views = [v for v in s.jobs(ids=ids, user=user, finished=finished, reads=reads) if v.state in states]
    if "PEND" in states:  # pending elements fold into one row per array (-r: a row each), as Slurm's
        views = F.fold_arrays(views, s.arrays(ids, user), each="--array" in flags, only=set(ids) if ids else None)
    if ids and not views:
        print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
        return BAD
    views = [v for v in views if ("--partition" not in values or v.queue in values["--partition"].split(","))
             and ("--name" not in values or v.name in values["--name"].split(","))]
    header = "--noheader" not in flags
    if "--Format" in values:
        print(F.squeue_fields(views, values["--Format"], header), end="")
        return 0
    long = "--long" in flags and "--format" not in values
    if long and header:  # -l: the time of the listing first, as Slurm's (ctime: "Thu Dec  3 19:50:48 2026")
        import time

        print(time.ctime())
    print(F.squeue_format(views, values.get("--format") or (F.SQUEUE_LONG if long else F.SQUEUE_DEFAULT), header),
          end="")
    return 0


def _states(text: str) -> frozenset[str]:
    out: set[str] = set()
    for name in text.split(","):
        try:
            out |= mapping.xce_states_of_slurm(name)
        except ValueError as e:
            raise Refused(str(e)) from None
    return frozenset(out)


def sacct(s: Session, argv: list[str]) -> int:
    from xce.site.local import unix_user

    values, flags, _ = _long_opts(
        argv, {"X": "--allocations", "n": "--noheader", "P": "--parsable2", "p": "--parsable",
               "o": "--format", "j": "--jobs", "u": "--user", "a": "--allusers", "S": "--starttime",
               "E": "--endtime", "s": "--state", "b": "--brief", "L": "--allclusters"},
        {"--format", "--jobs", "--user", "--starttime", "--endtime", "--state", "--name"},
        {"--allocations", "--noheader", "--parsable2", "--parsable", "--allusers", "--brief",
         "--allclusters", "--array"}, "sacct")
    ids = _ids(values["--jobs"]) if "--jobs" in values else []
    user = None if "--allusers" in flags or ids else values.get("--user") or unix_user()
    fmt = "JobID,State,ExitCode" if "--brief" in flags else values.get("--format") or F.SACCT_DEFAULT
    reads = F.sacct_reads(fmt) | {"id", "state"} | ({"name"} if "--name" in values else set())
    views = s.jobs(ids=ids, user=user, reads=reads)
    wanted = _states(values.get("--state") or "all")
    views = [v for v in views if v.state in wanted
             and ("--name" not in values or v.name in values["--name"].split(","))]
    if "PEND" in wanted:  # an array's pending elements on one line, as Slurm's (--array: one each)
        views = F.fold_arrays(views, s.arrays(ids, user), each="--array" in flags, only=set(ids) if ids else None)
    sep = "|" if {"--parsable2", "--parsable"} & flags else None
    print(F.sacct_rows(views, fmt, "--noheader" not in flags, sep, trailing="--parsable" in flags), end="")
    return 0


# ---- scancel, scontrol, sinfo, srun --------------------------------------------------------

def scancel(s: Session, argv: list[str]) -> int:
    from xce.site.local import unix_user

    values, flags, words = _long_opts(
        argv, {"Q": "--quiet", "s": "--signal", "u": "--user", "n": "--name", "p": "--partition",
               "t": "--state", "f": "--full", "b": "--batch", "v": "--verbose"},
        {"--signal", "--user", "--name", "--partition", "--state"},
        {"--quiet", "--full", "--batch", "--verbose"}, "scancel")
    from xce.core.jobspec.signals import parse_signal

    sig = parse_signal(values["--signal"], "scancel --signal") if "--signal" in values else None
    if words:
        ids = [i for w in words for i in _ids(w)]
    elif {"--user", "--name", "--partition"} & set(values):
        views = s.jobs(user=values.get("--user") or unix_user(), finished=False, reads={"id", "name", "queue"})
        ids = [v.id for v in views if ("--name" not in values or v.name == values["--name"])
               and ("--partition" not in values or v.queue == values["--partition"])]
    else:
        raise Refused("No job identification provided")
    rc = 0
    signal, to = _scancel_signal(sig, flags)
    for jid, what in s.client.kill(ids, signal=signal, to=to).items() if ids else ():
        outcome = mapping.kill_outcome(what)
        if outcome not in (mapping.ENDING, mapping.SIGNALED) and "--quiet" not in flags:
            done = outcome == mapping.FINISHED
            more = "Job/step already completing or completed" if done else "Invalid job id specified"
            print(f"scancel: error: Kill job error on job id {jid}: {more}", file=sys.stderr)
            rc = rc if done else BAD
    return rc


def _scancel_signal(sig: int | None, flags: set[str]) -> tuple[int | None, str]:
    """(signal, KillRequest.to) of scancel: without --signal, or with KILL, the job is cancelled
    (every process); any other signal goes, as Slurm's, to the job's steps only (not the batch
    shell, which would die of one it does not trap), with -b to the batch shell alone (not its
    children), with -f (--full) to every process of the job (-b is then ignored)."""
    from _signal import SIGKILL  # (not ``signal``: it loads enum, which sbatch's start-up avoids)

    if sig is None or sig == SIGKILL:
        return None, ""
    return sig, "" if "--full" in flags else "batch" if "--batch" in flags else "steps"


def scontrol(s: Session, argv: list[str]) -> int:
    if argv[:2] == ["show", "hostnames"]:
        text = argv[2] if len(argv) > 2 else os.environ.get("SLURM_JOB_NODELIST") \
            or os.environ.get("LSB_HOSTS", "").replace(" ", ",")
        if not text:
            raise Refused("show hostnames: no hostlist given and SLURM_JOB_NODELIST is not set")
        from xce.core.hostlist import expand

        try:
            names = expand(text)
        except ValueError as e:
            raise Refused(str(e)) from None
        print("\n".join(dict.fromkeys(names)))
        return 0
    if argv[:2] == ["show", "job"] or argv[:1] == ["show"] and argv[1:2] == ["jobid"]:
        ids = _ids(argv[2]) if len(argv) > 2 else []
        views = s.jobs(ids=ids)
        if ids and not views:
            print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
            return BAD
        print("\n\n".join(F.scontrol_job(v) for v in views))
        return 0
    if argv[:1] == ["update"]:
        return _update(s, argv[1:])
    control = {"hold": "stop", "release": "resume", "requeue": "requeue"}
    if argv[:1] and argv[0] in control and len(argv) > 1:  # silent on success, as Slurm's
        getattr(s.client, control[argv[0]])(_ids(",".join(argv[1:])))
        return 0
    raise Refused(f"scontrol {' '.join(argv)}: only `show job [ID]`, `show hostnames`, `update JobId=ID ...`, "
                  "`hold`, `release` and `requeue` are served by this XCE")


def _update(s: Session, words: list[str]) -> int:
    """scontrol update JobId=ID[,ID] Key=value ...: what `xce modify` changes of a pending job, by the
    same client call (xce/core/jobspec/modify.py maps the keys); silent on success, as Slurm's."""
    from xce.core.jobspec.modify import scontrol_changes

    given = [w for w in words if w.partition("=")[0].lower() in ("jobid", "job")]
    if len(given) != 1:
        raise Refused("update: name the job once: scontrol update JobId=ID Key=value ...")
    ids = _ids(given[0].partition("=")[2])
    rest = [w for w in words if w is not given[0]]
    if not rest:
        raise Refused("update: no change given (TimeLimit=, Partition=, JobName=, NumTasks=, Priority=, Dependency=)")
    singleton = any(w.lower().startswith("dependency=") and "singleton" in w for w in rest)
    tasks = any(w.lower().startswith("numtasks=") for w in rest)
    for jid in ids:
        job = s.client.job(jid) if singleton or tasks else None  # its name, its -c
        changes = scontrol_changes(rest, job.name if job and singleton else "", job.cpus_per_task if job else 1)
        s.client.modify_spec(jid, **changes)
    return 0


def sinfo(s: Session, argv: list[str]) -> int:
    values, flags, _ = _long_opts(argv, {"h": "--noheader", "N": "--Node", "p": "--partition"},
                                  {"--partition"}, {"--noheader", "--Node"}, "sinfo")
    queues, hosts = s.client.queues(), s.client.hosts()
    parts = values["--partition"].split(",") if "--partition" in values else None
    show = F.sinfo_nodes if "--Node" in flags else F.sinfo_rows
    print(show(queues, hosts, "--noheader" not in flags, parts), end="")
    return 0


def srun(s: Session, argv: list[str]) -> int:
    """Outside a job: submit the command as a batch job, wait, relay its output and exit code.
    Inside one: a step of tasks on the job's hosts (xce/compat/steps.py)."""
    if os.environ.get("XCE_LAUNCH_TOKEN"):
        from xce.compat.steps import srun_step

        return srun_step(s, argv)
    if os.environ.get("SLURM_JOB_ID") or os.environ.get("LSB_JOBID"):
        raise Refused("srun inside a job needs XCE_LAUNCH_TOKEN, which XCE sets in every job it runs")
    from xce.core.jobspec.slurm import parse_sbatch_args

    cli, command = parse_sbatch_args(argv, srun=True)
    if not command:
        raise Refused("srun: no command given")
    import shlex
    import tempfile

    out = tempfile.NamedTemporaryFile(prefix="srun-", suffix=".out", delete=False)
    out.close()
    script = "#!/bin/sh\nexec " + " ".join(shlex.quote(w) for w in command) + "\n"
    words = [f"{k}={v}" if v is not True else k for k, v in cli.values.items() if k not in ("--output", "--unbuffered")]
    fields, _ = sbatch_spec([*words, f"--output={out.name}"], lambda _: (script, command[0]))
    from xce.client import make_spec

    job_id = s.client.submit_many([make_spec(**fields)])[0]
    view = s.client.wait([job_id])[0]
    with open(out.name, encoding="utf-8", errors="replace") as f:
        sys.stdout.write(f.read())
    os.unlink(out.name)
    return 0 if view.state == "DONE" else (view.exit_code or 1)


def salloc(s: Session, argv: list[str]) -> int:
    raise Refused(mapping.SLURM_REFUSED["salloc"])


COMMANDS: dict[str, Callable[[Session, list[str]], int]] = {
    "sbatch": sbatch, "squeue": squeue, "sacct": sacct, "scancel": scancel, "scontrol": scontrol,
    "sinfo": sinfo, "srun": srun, "salloc": salloc,
}


def main(name: str, argv: list[str]) -> int:
    return run(name, COMMANDS[name], argv, BAD)


if __name__ == "__main__":  # python -m xce.compat.slurm sbatch ...
    sys.exit(main(sys.argv[1], sys.argv[2:]))
