"""bhist's time per state and bacct's report: the core fold (xce/core/jobtimes.py) and LSF's
layouts (xce/compat/lsf_acct.py), against lines LSF 10.1 prints."""

from __future__ import annotations

import time
from typing import Any

import pytest

from xce.compat import lsf_acct as A
from xce.compat.session import Refused
from xce.core.jobtimes import StateTimes, finished_times, state_times
from xce.core.model import HistEvent as H


def test_the_fold_gives_each_state_the_time_until_the_next_state_event() -> None:
    events = [H(100, "submitted"), H(101, "modified"), H(103, "suspended"), H(104, "resumed"),
              H(106, "dispatched"), H(107, "suspended"), H(110, "resumed"), H(111, "suspended by system"),
              H(113, "resumed by system"), H(114, "host unknown"), H(116, "host back"), H(120, "ended DONE")]
    t = state_times(events, now=999)
    assert t == StateTimes(pend=5, psusp=1, run=7, ususp=3, ssusp=2, unkwn=2, as_of=120)
    assert t.total == 20


def test_an_unfinished_job_counts_up_to_now_and_a_requeue_pends_again() -> None:
    events = [H(0, "submitted"), H(2, "dispatched"), H(5, "requeued"), H(6, "dispatched")]
    assert state_times(events, now=10) == StateTimes(pend=3, psusp=0, run=7, ususp=0, ssusp=0, unkwn=0, as_of=10)


def test_a_cut_history_skips_what_cannot_follow() -> None:
    """state.HIST_KEPT drops the oldest events but "submitted": a resume with no suspend before it
    could have been to PEND or to RUN, so it is skipped; an end is an end whatever came before."""
    events = [H(0, "submitted"), H(50, "resumed"), H(60, "ended EXIT")]
    assert state_times(events, now=99) == StateTimes(pend=60, psusp=0, run=0, ususp=0, ssusp=0, unkwn=0, as_of=60)


def test_killed_while_pending_and_finished_times() -> None:
    assert state_times([H(0, "submitted"), H(4, "killed")], now=9).pend == 4
    assert finished_times(10, 15, 40) == (5, 30, 25)
    assert finished_times(10, None, 40) == (30, 30, 0)  # never ran: waited until it ended


def row(**kw: Any) -> Any:
    base = dict(id=223, user="test", name="mpirun.lsf ./cpi-openmpi")
    base.update(kw)
    return type("V", (), base)()


def test_bhist_rows_as_lsf_prints_them() -> None:
    t = StateTimes(6, 0, 5, 0, 0, 0, as_of=0)
    assert A.BHIST_HEAD.splitlines()[1] == "JOBID   USER    JOB_NAME  PEND    PSUSP   RUN     USUSP   SSUSP   UNKWN   TOTAL"
    assert A.bhist_row(row(), t, wide=False) == "223     test    *openmpi  6       0       5       0       0       0       11        "
    assert A.bhist_row(row(), t, wide=True).startswith("223     test    mpirun.lsf ./cpi-openmpi 6       0       5")
    long = A.bhist_long_summary(StateTimes(1, 0, 4601, 0, 0, 0, as_of=time.mktime((2025, 1, 2, 16, 8, 5, 0, 0, -1))))
    assert long.splitlines() == ["Summary of time in seconds spent in various states by  Thu Jan  2 16:08:05 2025",
                                 "  PEND     PSUSP    RUN      USUSP    SSUSP    UNKWN    TOTAL",
                                 "  1        0        4601     0        0        0        4602        "]


def test_bacct_summary_lines_as_lsf_prints_them() -> None:
    """The job of an LSF bacct -l sample: 0.08 s CPU, 50 s waiting, 117 s turnaround, 67 s run."""
    a = A.Acct(done=True, cpu=0.08, wait=50, turnaround=117, run=67)
    lines = A.acct_summary([a], [1_700_000_000.0]).splitlines()
    assert lines[:11] == [
        "SUMMARY:      ( time unit: second ) ",
        " Total number of done jobs:       1      Total number of exited jobs:     0",
        " Total CPU time consumed:       0.1      Average CPU time consumed:     0.1",
        " Maximum CPU time of a job:     0.1      Minimum CPU time of a job:     0.1",
        " Total wait time in queues:    50.0",
        " Average wait time in queue:   50.0",
        " Maximum wait time in queue:   50.0      Minimum wait time in queue:   50.0",
        " Average turnaround time:       117 (seconds/job)",
        " Maximum turnaround time:       117      Minimum turnaround time:       117",
        " Average hog factor of a job:  0.00 ( cpu time / turnaround time )",
        " Maximum hog factor of a job:  0.00      Minimum hog factor of a job:  0.00"]
    assert lines[11] == " Average expansion factor of a job:  1.75 ( turnaround time / run time )"
    assert lines[14:16] == [" Total Run time consumed:        67      Average Run time consumed:      67",
                            " Maximum Run time of a job:      67      Minimum Run time of a job:      67"]
    assert lines[16].startswith(" Total throughput:") and lines[17].startswith(" Beginning time:")


def test_bacct_long_row_as_lsf_prints_it() -> None:
    v = row(id=7, name="sleep", state="DONE", queue="normal", project="", command=["/bin/sh", "-c", "sleep 60"],
            submit_time=1_700_000_000.0, start_time=1_700_000_050.0, end_time=1_700_000_117.0, submit_host="h",
            cwd="/tmp", slots=1, hosts=["a3201"], reason="", mem_peak=5 * 1024 * 1024, cpu_time=0.08)
    text = A.acct_long(v, A.acct_of(v))
    assert "      0.08       50            117     done         0.0007     5M       -" in text.splitlines()
    assert text.splitlines()[0] == ("Job <7>, Job Name <sleep>, User <test>, Project <default>, Status <DONE>, "
                                    "Queue <normal>, Command <sleep 60>")


def test_bacct_header_names_the_selection() -> None:
    sel = A.Selection(users=["abc123"], projects=["project123"], queues=[], status="",
                      windows=[("dispatched", 0.0, 1.0)])
    lines = A.acct_header(sel).splitlines()
    assert lines[:4] == ["Accounting information about jobs that are: ", "  - submitted by users abc123, ",
                         "  - accounted on projects project123, ", "  - completed normally or exited"]
    assert lines[4].startswith("  - dispatched between  ") and lines[5].startswith("                 ,and   ")


def test_time_windows() -> None:
    now = time.mktime((2026, 12, 3, 18, 0, 0, 0, 0, -1))
    assert A.parse_window("2026/12/01/10:30,2026/12/02", now) == (
        time.mktime((2026, 12, 1, 10, 30, 0, 0, 0, -1)), time.mktime((2026, 12, 2, 23, 59, 0, 0, 0, -1)))
    assert A.parse_window("8:00,", now) == (time.mktime((2026, 12, 3, 8, 0, 0, 0, 0, -1)), now)
    assert A.parse_window(".-2,.", now) == (now - 2 * 86400, now)
    for bad in ("yesterday,", "2026/12/01/xx:00,", "5:00,4:00"):
        with pytest.raises(Refused):
            A.parse_window(bad, now)
