"""The controller's decisions as pure reactors: functions of (context, request, body) writing to an Outbox.

The controller daemon (xce/daemons/controller.py) is a thin shell: it decodes a message,
builds a ``Request``, calls ``serve`` (table.py) with its long-lived ``Context``
(context.py) and carries out the ``Outbox`` (outbox.py): replies, errors, commands to
commit with their continuations, orders to workers, events, request-log lines.  Nothing
here opens a socket, imports zmq, the transport, the client or the daemons, or writes a
file (import-linter's contracts in pyproject.toml and tests/test_reactors_layer.py).

    access.py       daemon keys, the token policy, the request-log entry
    clients.py      PING SUBMIT JOBS HOSTS QUEUES KILL MODIFY HOST_ADMIN STATUS SNAPSHOT AUDIT REQUEST_LOG
                    FAIRSHARE LIMITS (the policy's figures, by the scheduler's own PolicyState)
    workers.py      PLACE REGISTER HEARTBEAT JOB_STARTED JOB_FINISHED
    control.py      STOP RESUME REQUEUE SWITCH MOVE MODIFY_SPEC HIST (job control)
    jobrun.py       KILL with a signal, JOB_SIGNALLED, PEEK, JOB_OUTPUT (peeks wait under a ticket)
    launch.py       LAUNCH, LAUNCH_POLL, TASK_STATE (xce launch: the token checked, forwarded under a ticket)
    orders.py       RUN_JOB / KILL_JOB to workers, re-sent until confirmed; kills chased
    after_apply.py  after Raft applied: leadership, ledger sync, events, orders (``on_applied``)
    timers.py       the leader's periodic work: hosts lost, re-dispatch, prune, cleanup (``on_tick``)

Adding a request kind:
1. its opcode in xce/proto/opcodes.py and its body in xce/proto/schema.py;
2. its permission in xce/security/policy.py ``OP_PERMISSIONS`` (REST and this door share it);
3. a reactor ``on_x(ctx, req, body, out)`` in clients.py or workers.py: read ``ctx``, raise an
   XceError to refuse, ``out.reply`` to answer at once, or ``out.commit(cmd, then)`` where
   ``then(result, out)`` answers when the command has committed (``clients.replier``);
4. one line in ``ROUTES`` (table.py): ``Route(reactor, audited=True)`` if it changes state;
5. unit tests in tests/test_reactors_*.py with the builders of tests/reactor_kit.py.
"""
