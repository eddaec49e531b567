"""LSF's accounting reports: bhist's time-per-state table and bacct's summary and ``-l``; pure.

The figures come from the one core fold (xce/core/jobtimes.py: ``state_times`` over a job's
history, ``finished_times`` from its times); this module only lays them out as LSF 10.1 does.
bacct's hog factor is CPU time over turnaround, its expansion factor turnaround over run time
(a run under a second counts as one, as LSF's figures for 0 s runs show); SWAP is ``-``: XCE
does not measure a job's swap.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from xce.compat import mapping
from xce.compat.session import Refused
from xce.compat.lsf_fmt import DEFAULT_PROJECT, cut, lsf_long_time, lsf_time
from xce.core.jobtimes import StateTimes, finished_times

RULE = "-" * 78


def full_time(t: float) -> str:
    """``Thu Jan  2 16:08:05 2025``: ctime, as LSF's 'by' and 'configuration at' lines write it."""
    return time.strftime("%a %b %e %H:%M:%S %Y", time.localtime(t))


def parse_window(text: str, now: float) -> tuple[float, float]:
    """bacct's ``-C|-S|-D time0,time1`` -> (from, to), seconds.  A time is ``[[[year/]month/]day/]H:M``
    or ``[[year/]month/]day`` (a whole day: from its 00:00, to its 23:59), ``.`` now, ``.-N`` N days
    ago; missing year and month are this one's; an empty side is open (``time0,`` up to now).
    A single time is ``time0,``."""
    first, _, second = text.partition(",")
    t0 = _when(first, now, end=False) if first.strip() else 0.0
    t1 = _when(second, now, end=True) if second.strip() else now
    if t1 < t0:
        raise Refused(f"{text}: the window ends before it begins")
    return t0, t1


def _when(text: str, now: float, end: bool) -> float:
    t = text.strip()
    if t.startswith("."):
        days = t[1:]
        if days and not (days.startswith("-") and days[1:].isdigit()):
            raise Refused(f"{text}: not a time (.-N is N days ago)")
        return now - 86400 * int(days[1:] or 0)
    parts = t.split("/")
    clock = parts.pop() if ":" in parts[-1] else None
    if not all(p.isdigit() for p in parts) or len(parts) > 3 or (clock is None and not parts):
        raise Refused(f"{text}: not a time ([[[year/]month/]day/]hour:minute, or [[year/]month/]day)")
    today = time.localtime(now)
    day = [today.tm_year, today.tm_mon, today.tm_mday]
    day[3 - len(parts):] = [int(p) for p in parts]
    if clock is None:
        hour, minute = (23, 59) if end else (0, 0)
    else:
        h, _, m = clock.partition(":")
        if not (h.isdigit() and (m.isdigit() or m == "")):
            raise Refused(f"{text}: not a time (hour:minute)")
        hour, minute = int(h), int(m or 0)
    try:
        return time.mktime((day[0], day[1], day[2], hour, minute, 0, 0, 0, -1))
    except (OverflowError, ValueError):
        raise Refused(f"{text}: not a time") from None


# ---- bhist ----------------------------------------------------------------------------------

BHIST_HEAD = ("Summary of time in seconds spent in various states:\n"
              "JOBID   USER    JOB_NAME  PEND    PSUSP   RUN     USUSP   SSUSP   UNKWN   TOTAL")


def bhist_row(v: Any, t: StateTimes, wide: bool) -> str:
    """One job's line: its id, user and name (cut as LSF cuts them unless ``-w``), then seconds."""
    jid, name = mapping.lsf_job(v.id), mapping.lsf_name(v.id, v.name)
    head = f"{jid:<7} {v.user:<7} {name:<9} " if wide else f"{jid[:7]:<7} {v.user[:7]:<7} {cut(name, 8):<9} "
    return head + "".join(f"{s:<8.0f}" for s in t[:6]) + f"{t.total:<10.0f}"


def bhist_long_summary(t: StateTimes) -> str:
    """bhist -l's last lines."""
    return (f"Summary of time in seconds spent in various states by  {full_time(t.as_of)}\n"
            "  PEND     PSUSP    RUN      USUSP    SSUSP    UNKWN    TOTAL\n"
            "  " + "".join(f"{s:<9.0f}" for s in t[:6]) + f"{t.total:<12.0f}")


# ---- bacct ----------------------------------------------------------------------------------

class Acct(NamedTuple):
    """One finished job's figures, as bacct reports them."""

    done: bool
    cpu: float
    wait: float
    turnaround: float
    run: float

    @property
    def hog(self) -> float:
        return self.cpu / self.turnaround if self.turnaround else 0.0

    @property
    def expansion(self) -> float:
        return self.turnaround / max(self.run, 1.0)


def acct_of(v: Any) -> Acct:
    t = finished_times(v.submit_time, v.start_time, v.end_time)
    return Acct(v.state == "DONE", v.cpu_time or 0.0, t.wait, t.turnaround, t.run)


class Selection(NamedTuple):
    """What the jobs were chosen by, for bacct's header (each None or empty: all)."""

    users: Sequence[str] | None
    projects: Sequence[str]
    queues: Sequence[str]
    status: str                                   # "", "d" (DONE only) or "e" (EXIT only)
    windows: Sequence[tuple[str, float, float]]   # ("completed" | "submitted" | "dispatched", from, to)


def acct_header(sel: Selection) -> str:
    lines = ["Accounting information about jobs that are: ",
             f"  - submitted by users {', '.join(sel.users)}, " if sel.users else "  - submitted by all users.",
             f"  - accounted on projects {', '.join(sel.projects)}, " if sel.projects else
             "  - accounted on all projects.",
             {"d": "  - completed normally.", "e": "  - exited."}.get(sel.status, "  - completed normally or exited")]
    for what, t0, t1 in sel.windows:
        lines += [f"  - {what} between  {full_time(t0)}", f"                 ,and   {full_time(t1)}"]
    lines += ["  - executed on all hosts.",
              f"  - submitted to queues {', '.join(sel.queues)}, " if sel.queues else "  - submitted to all queues.",
              "  - accounted on all service classes.", RULE]
    return "\n".join(lines)


def acct_long(v: Any, a: Acct) -> str:
    """bacct -l: one job's lines and its accounting row."""
    hosts = " ".join(f"<{h}>" for h in v.hosts)
    out = [f"Job <{mapping.lsf_job(v.id)}>, Job Name <{mapping.lsf_name(v.id, v.name)}>, User <{v.user}>, "
           f"Project <{v.project or DEFAULT_PROJECT}>, Status <{v.state}>, Queue <{v.queue}>, "
           f"Command <{_command(v.command)}>",
           f"{lsf_long_time(v.submit_time)}: Submitted from host <{v.submit_host or '-'}>, CWD <{v.cwd or '-'}>;"]
    if v.start_time:
        out.append(f"{lsf_long_time(v.start_time)}: Dispatched {v.slots} Task(s) on Host(s) {hosts}, "
                   f"Allocated {v.slots} Slot(s) on Host(s) {hosts};")
    term = mapping.lsf_term(v.state, v.reason)
    end = "done" if a.done else "exit"
    out.append(f"{lsf_long_time(v.end_time)}: Completed <{end}>" + (f"; {term}: {v.reason}." if term else "."))
    mem = f"{round(v.mem_peak / mapping.MB)}M" if v.mem_peak else "0M"
    out += ["", "Accounting information about this job:",
            "     CPU_T     WAIT     TURNAROUND   STATUS     HOG_FACTOR    MEM    SWAP",
            f"{a.cpu:10.2f} {a.wait:8.0f} {a.turnaround:14.0f} {end:>8} {a.hog:14.4f} {mem:>6} {'-':>7}", RULE]
    return "\n".join(out)


def _command(words: Sequence[str]) -> str:
    return " ".join(words[2:] if list(words[:2]) == ["/bin/sh", "-c"] else words)


def _pair(left: tuple[str, str], right: tuple[str, str] | None = None) -> str:
    """`` Label:   value      Label:   value``: each value ends at LSF's column (35, then 34 on)."""
    (l1, v1) = left
    text = f" {l1}{v1:>{max(0, 34 - len(l1))}}"
    if right is None:
        return text
    (l2, v2) = right
    return f"{text}      {l2}{v2:>{max(0, 34 - len(l2))}}"


def acct_summary(accts: Sequence[Acct], ends: Sequence[float]) -> str:
    """The SUMMARY block over the selected jobs (``ends``: their end times, for the throughput)."""
    n = len(accts)
    cpu = [a.cpu for a in accts]
    wait = [a.wait for a in accts]
    turn = [a.turnaround for a in accts]
    hog = [a.hog for a in accts]
    exp = [a.expansion for a in accts]
    run = [a.run for a in accts]
    begin, finish = min(ends), max(ends)
    hours = (finish - begin) / 3600
    done = sum(a.done for a in accts)
    return "\n".join([
        "SUMMARY:      ( time unit: second ) ",
        _pair(("Total number of done jobs:", f"{done}"), ("Total number of exited jobs:", f"{n - done}")),
        _pair(("Total CPU time consumed:", f"{sum(cpu):.1f}"), ("Average CPU time consumed:", f"{sum(cpu) / n:.1f}")),
        _pair(("Maximum CPU time of a job:", f"{max(cpu):.1f}"), ("Minimum CPU time of a job:", f"{min(cpu):.1f}")),
        _pair(("Total wait time in queues:", f"{sum(wait):.1f}")),
        _pair(("Average wait time in queue:", f"{sum(wait) / n:.1f}")),
        _pair(("Maximum wait time in queue:", f"{max(wait):.1f}"), ("Minimum wait time in queue:", f"{min(wait):.1f}")),
        _pair(("Average turnaround time:", f"{sum(turn) / n:.0f}")) + " (seconds/job)",
        _pair(("Maximum turnaround time:", f"{max(turn):.0f}"), ("Minimum turnaround time:", f"{min(turn):.0f}")),
        _pair(("Average hog factor of a job:", f"{sum(hog) / n:.2f}")) + " ( cpu time / turnaround time )",
        _pair(("Maximum hog factor of a job:", f"{max(hog):.2f}"), ("Minimum hog factor of a job:", f"{min(hog):.2f}")),
        f" Average expansion factor of a job:  {sum(exp) / n:.2f} ( turnaround time / run time )",
        f" Maximum expansion factor of a job:  {max(exp):.2f}",
        f" Minimum expansion factor of a job:  {min(exp):.2f}",
        _pair(("Total Run time consumed:", f"{sum(run):.0f}"), ("Average Run time consumed:", f"{sum(run) / n:.0f}")),
        _pair(("Maximum Run time of a job:", f"{max(run):.0f}"), ("Minimum Run time of a job:", f"{min(run):.0f}")),
        _pair(("Total throughput:", f"{n / hours if hours > 0 else 0.0:.2f}")) + f" (jobs/hour)  during {hours:7.2f} hours",
        _pair(("Beginning time:", lsf_time(begin)), ("Ending time:", lsf_time(finish))),
    ])
