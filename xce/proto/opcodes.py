"""Every opcode of the XCE wire protocol, in one place.

Requests carry their opcode; a reply echoes the request id with ``OK`` or
``ERROR``.  Events on the PUB socket use ``EVENT``.  Numbers never change
meaning; new ones are appended.
"""

from enum import IntEnum


class Op(IntEnum):
    OK = 1            # reply; body type depends on the request
    ERROR = 2         # reply; body is ErrorReply
    PING = 3

    # clients (CLI, xce.client, REST, console)
    SUBMIT = 10
    JOBS = 11
    HOSTS = 12
    QUEUES = 13
    KILL = 14
    STATUS = 15
    SNAPSHOT = 16
    MODIFY = 17
    HOST_ADMIN = 18
    AUDIT = 19
    REQUEST_LOG = 20  # the controller's log of state-changing requests (admins)
    PEEK = 21         # bpeek: the tail of a job's output, fetched from its first host's worker
    STOP = 22         # bstop: PEND -> PSUSP, RUN/SSUSP -> USUSP
    RESUME = 23       # bresume: PSUSP -> PEND, USUSP -> RUN
    REQUEUE = 24      # brequeue: running (killed first) or ended -> PEND
    SWITCH = 25       # bswitch: another queue
    MOVE = 26         # btop / bbot
    MODIFY_SPEC = 27  # bmod of a pending job: -R -n -q -J -W -sp -w
    HIST = 28         # bhist: a job's events
    FAIRSHARE = 29    # the share trees with usage and priority (bqueues -l, sshare)

    # scheduler -> controller
    PLACE = 30

    # worker -> controller
    REGISTER = 40
    HEARTBEAT = 41
    JOB_STARTED = 42
    JOB_FINISHED = 43
    JOB_SIGNALLED = 44  # the answer to SIGNAL_JOB: sent, and suspended or not
    JOB_OUTPUT = 45     # the answer to PEEK_JOB
    TASK_STATE = 46     # the answer to LAUNCH_TASK and POLL_TASK

    # controller -> worker
    RUN_JOB = 50
    KILL_JOB = 51
    SIGNAL_JOB = 52   # a signal to the job's processes (stop, continue, any)
    PEEK_JOB = 53     # read the tail of the job's output files
    LAUNCH_TASK = 54  # start a task inside the job's share (xce launch)
    POLL_TASK = 55    # a launched task's new output and, once it ended, its exit code

    # controller PUB
    EVENT = 60

    # clients, continued (10-29 are taken)
    LIMITS = 70       # each limit's use and the jobs it holds (blimits)
    LAUNCH = 71       # blaunch: start a task of a running job on one of its hosts
    LAUNCH_POLL = 72  # a launched task's new output, its exit code once it ended; or signal it
