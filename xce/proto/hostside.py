"""A host's side of the daemon door: the rules by which a worker speaks, without its sockets.

What the real worker (xce/daemons/worker.py) and the simulated fleet (xce/sim/fleet.py)
both follow, so a simulated host loads the controller the way a real one does:
- ``register_delay``: the spread and back-off of registration retries;
- ``ACK_EVERY``: which heartbeats ask for a reply (how a worker notices a silent leader);
- ``usage_moved`` and ``add_report``: which tasks a heartbeat reports, and in which columns.
Pure: no clock (times are arguments), no sockets, no random draws of its own.
"""

from __future__ import annotations

from xce.proto import schema as S

# Every ACK_EVERY-th heartbeat asks for a reply: how a worker hears that a controller went
# quiet (a dead one drops the connection, which the socket monitor sees at once).  Each
# reply costs the controller a send at thousands of hosts; 4 keeps that small and a hung
# leader still noticed within (ACK_EVERY + 1) heartbeats.
ACK_EVERY = 4
REPORT_STEP = 1 << 20  # usage moves smaller than this (or 1 %) are not worth a report
QUIET_BEATS = 10       # a task whose usage stands still is still reported this often (heartbeats)

# (rss, peak, time) last reported for a task
Reported = tuple[int, int, float]


def register_delay(failures: int, draw: float) -> float:
    """Seconds before registering again after ``failures`` attempts in a row went unanswered:
    1 s doubling up to 8 s, scaled by 0.5 + ``draw`` (``draw`` in [0, 1)).

    Thousands of workers lose a controller at the same moment; retrying on a fixed second
    keeps them in step, so every retry would arrive as one burst at a leader that is busy
    taking over.  The spread scatters them, and the doubling spares a controller that
    cannot keep up.
    """
    return min(8.0, 2.0 ** failures) * (0.5 + draw)


def usage_moved(prev: Reported | None, rss: int, peak: int, now: float, heartbeat: float) -> bool:
    """Whether a task's usage is worth a report: it moved by 1 MiB or 1 %, reached a new
    peak, or has not been reported for QUIET_BEATS heartbeats (or ever).

    A steady job costs the controller nothing; a changing one is seen within a heartbeat.
    """
    if prev is None:
        return True
    p_rss, p_peak, p_at = prev
    return abs(rss - p_rss) >= max(REPORT_STEP, p_rss // 100) or peak > p_peak \
        or now - p_at >= QUIET_BEATS * heartbeat


def add_report(cols: S.UsageColumns, job_id: int, attempt: int, rss: int, peak: int, cpu_time: float) -> None:
    """Append one task's figures to a heartbeat's usage columns (index i is one task)."""
    cols.job_id.append(job_id)
    cols.attempt.append(attempt)
    cols.memory_rss.append(rss)
    cols.memory_peak.append(peak)
    cols.cpu_time.append(cpu_time)


def ack_wanted(beat: int) -> bool:
    """Whether heartbeat number ``beat`` (counted from 1) asks for a reply."""
    return beat % ACK_EVERY == 0
