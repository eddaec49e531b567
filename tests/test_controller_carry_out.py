"""The controller's shell carries out a turn's outbox in the order the idle path wants: a
worker's orders before the events (an event wakes the scheduler and every waiting client,
which took the CPUs the worker needed to start the job: docs/benchmarks.md, "Session 10: idle
latency"), and the events before the replies (an answer never runs ahead of the stream).

The reactors' real outbox for a committed placement, carried out by ``Controller.carry_out``
over recording sockets."""

from __future__ import annotations

from types import SimpleNamespace

from builders import T0, alloc, spec
from reactor_kit import kit

from xce.core.resreq import parse_resreq
from xce.core.state import Place, Submit
from xce.daemons.controller import Controller
from xce.proto.codec import decode_envelope
from xce.proto.opcodes import Op
from xce.reactors.outbox import Outbox, Request


def _carry_out(k, out: Outbox) -> list[tuple[str, Op]]:
    """What the shell sends for ``out``, in order: (where, opcode)."""
    sent: list[tuple[str, Op]] = []
    shell = SimpleNamespace(
        out=out, raft=SimpleNamespace(term=lambda: 3), rc=k.ctx, batch=[], requests=None,
        pub=SimpleNamespace(send_multipart=lambda parts: sent.append(("pub", Op(decode_envelope(parts[1]).op)))),
        send=lambda ident, payload: sent.append((ident.decode(), Op(decode_envelope(payload).op))))
    Controller.carry_out(shell)  # type: ignore[arg-type]
    assert not out
    return sent


def test_a_placement_is_sent_to_its_worker_before_it_is_published() -> None:
    k = kit()
    k.ctx.stream.subscribers = 1
    k.worker("node1")
    s = spec()
    (jid,) = k.state.apply(Submit(time=T0, specs=[s], reqs=[parse_resreq(s.resreq)]))
    _, ch = k.state.apply_batch([Place(time=T0 + 1, job_id=jid, attempt=0, allocs=[alloc("node1")])])
    k.raft.changes.merge(ch)
    out = k.applied()
    out.reply(Request(b"scheduler", 9, Op.PLACE, k.now, ""), None)  # the PLACE's answer, in the same turn
    assert _carry_out(k, out) == [("node1", Op.RUN_JOB), ("pub", Op.EVENT), ("scheduler", Op.OK)]


def test_a_submit_is_published_before_it_is_answered() -> None:
    k = kit()
    k.ctx.stream.subscribers = 1
    s = spec()
    _, ch = k.state.apply_batch([Submit(time=T0, specs=[s], reqs=[parse_resreq(s.resreq)])])
    k.raft.changes.merge(ch)
    out = k.applied()
    out.reply(Request(b"client", 7, Op.SUBMIT, k.now, ""), None)
    assert _carry_out(k, out) == [("pub", Op.EVENT), ("client", Op.OK)]


def test_a_wake_up_sent_while_the_loop_takes_them_is_never_lost(monkeypatch) -> None:
    """The Raft thread skips a wake-up while one is pending (``Controller._wake``).  One sent
    while the loop empties the wake-up socket must leave the loop woken again or its news read
    by the turn: the flag is never left set with nothing queued, which skipped every later
    wake-up (the loop then woke only for requests or its 100 ms poll)."""
    import zmq

    from xce.daemons import controller as ctl

    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    pull.bind("inproc://wake-test")
    push.connect("inproc://wake-test")
    shell = SimpleNamespace(wake_pending=False, wake_push=push, wake_pull=pull)
    wake = lambda: Controller._wake(shell)  # noqa: E731 - the Raft thread's call
    drain = ctl.readable

    def readable_with_a_wake_up(sock, most):  # noqa: ANN001, ANN202
        for i, part in enumerate(drain(sock, most)):
            if i == 0:
                wake()  # the Raft thread, between two reads of the loop
            yield part
    monkeypatch.setattr(ctl, "readable", readable_with_a_wake_up)
    try:
        for _ in range(3):
            wake()
            assert shell.wake_pending and pull.poll(1000)
            Controller.take_wakeups(shell)  # type: ignore[arg-type]
            assert not shell.wake_pending or pull.poll(0), "the flag is set and no wake-up is queued"
            assert not shell.wake_pending  # the skipped one's news is this turn's to read
    finally:
        ctx.destroy(linger=0)
