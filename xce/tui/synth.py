"""Synthetic event streams: the test fixtures and the benchmark's big cluster.

``demo_records()`` is a 90-second recording of a small cluster in which every
colour of the console appears (under, at, above and across reservations, a
decaying reservation, a multi-host job, pending, done and failed jobs, full,
closed and unavailable hosts); ``jobmodel_records()`` a short one of the job
model's rows (an array, held, suspended and unknown jobs, dependencies, run limits).  ``big_snapshot``/``one_second`` build 1,000
hosts x 20,000 jobs and one second of their updates for bench/tui_bench.py.
Deterministic: fixed times, no randomness.  Regenerate the fixture with

    python -m xce.tui.synth tests/fixtures/demo.xcerec
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import msgspec

from xce.core.arrays import element_id
from xce.core.jobspec.arrays import parse_lsf_job_name
from xce.core.jobspec.depend import parse_depend
from xce.core.model import Alloc, Host, HostUsage, Job, JobSpec, JobState, Queue
from xce.core.resreq import parse_resreq
from xce.proto.schema import Event, HostLive, JobSample, Snapshot
from xce.replica.live import columns, host_mem
from xce.replica.mirror import Mirror
from xce.tui.record import Hello, Record, Recorder

T0 = 1_700_000_000.0
M, G = 2**20, 2**30
EPOCH = "synth0000001"
_enc = msgspec.msgpack.Encoder()


def job(jid: int, name: str, user: str, resreq: str, state: JobState = JobState.RUN,
        hosts: tuple[tuple[str, int], ...] = (), start: float | None = None, queue: str = "normal",
        slots: int = 1, **kw: object) -> Job:
    req = parse_resreq(resreq)
    mem = req.rusage[0].amount if req.rusage else 0
    allocs = [Alloc(h, n, mem * n if "/task" in resreq else mem, {"slots": n}) for h, n in hosts]
    spec = JobSpec(command=["python", "-m", "xce.jobs.memhog", name], name=name, user=user, queue=queue,
                   slots=slots, resreq=resreq)
    return Job(id=jid, spec=spec, req=req, state=state, submit_time=(start or T0) - 5, start_time=start,
               allocs=allocs, attempt=1 if allocs else 0, **kw)  # type: ignore[arg-type]


def _ramp(*steps: tuple[float, int]) -> Callable[[float], int]:
    """Actual memory (MB) as a step function of seconds since T0."""
    return lambda s: next((mb for until, mb in steps if s < until), steps[-1][1]) * M


DEMO_HOSTS = [Host(name="node1", slots_total=8, mem_total=16 * G, ncpus=8),
              Host(name="node2", slots_total=2, mem_total=8 * G, ncpus=2),
              Host(name="node3", slots_total=4, mem_total=8 * G, ncpus=4, closed=True),
              Host(name="node4", slots_total=4, mem_total=8 * G, ncpus=4, unavail=True)]
# job id -> (host, actual over time) for every running job
USAGE: dict[int, list[tuple[str, Callable[[float], int]]]] = {
    1: [("node1", _ramp((1e9, 60)))], 2: [("node1", _ramp((1e9, 190)))], 3: [("node1", _ramp((1e9, 300)))],
    4: [("node2", _ramp((20, 50), (40, 150), (1e9, 350)))], 5: [("node2", _ramp((1e9, 100)))],
    6: [("node1", _ramp((1e9, 20)))], 7: [("node1", _ramp((1e9, 450))), ("node3", _ramp((1e9, 520)))],
    11: [("node1", _ramp((25, 30), (1e9, 45)))],
}


def demo_jobs() -> list[Job]:
    run = JobState.RUN
    return [
        job(1, "under", "alice", "rusage[mem=400M]", run, (("node1", 1),), T0 - 300),
        job(2, "at", "alice", "rusage[mem=200M]", run, (("node1", 1),), T0 - 200),
        job(3, "above", "bob", "rusage[mem=100M]", run, (("node1", 1),), T0 - 150),
        job(4, "across", "bob", "rusage[mem=250M]", run, (("node2", 1),), T0 - 10),
        job(5, "decay", "carol", "rusage[mem=300M:duration=2m:decay=1]", run, (("node2", 1),), T0 - 10),
        job(6, "idle", "carol", "rusage[mem=1G]", run, (("node1", 1),), T0 - 600, queue="high"),
        job(7, "mpi", "alice", "rusage[mem=500M] span[ptile=1]", run, (("node1", 1), ("node3", 1)),
            T0 - 120, slots=2),
        job(8, "huge", "bob", "rusage[mem=64G]", JobState.PEND, reason="mem: needs 64.0G, no host has that much"),
        job(9, "done", "alice", "rusage[mem=100M]", JobState.DONE, (("node1", 1),), T0 - 900, end_time=T0 - 800,
            exit_code=0, usage=[HostUsage(host="node1", reserved=100 * M, actual=80 * M, peak=90 * M,
                                          charged_peak=100 * M)]),
        job(10, "oom", "bob", "rusage[mem=300M]", JobState.EXIT, (("node1", 1),), T0 - 700, end_time=T0 - 650,
            exit_code=137, reason="killed: memory limit 300M exceeded",
            usage=[HostUsage(host="node1", reserved=300 * M, actual=310 * M, peak=320 * M, charged_peak=320 * M)]),
        job(11, "short", "carol", "rusage[mem=50M]"),
        job(12, "waiting", "carol", "rusage[mem=2G]", JobState.PEND, queue="high"),
    ]


def demo_records(seconds: int = 90) -> list[Record]:
    jobs = {j.id: j for j in demo_jobs()}
    snap = Snapshot(seq=0, epoch=EPOCH, time=T0, jobs=list(jobs.values()), hosts=DEMO_HOSTS,
                    queues=[Queue(name="normal"), Queue(name="high", priority=50)], default_queue="normal",
                    live=[HostLive(h.name, h.mem_total - 2 * G, T0) for h in DEMO_HOSTS[:3]],
                    samples=[], reasons={12: "slots: node2 full; node3 closed; node4 unavailable"},
                    leader="tcp://127.0.0.1:7700", term=1)
    out = [Record(T0 - 0.5, "hello", msgspec.Raw(_enc.encode(Hello(cluster="demo", heartbeat=1.0,
                                                                   source="synth")))),
           Record(T0 + 0.02, "snapshot", msgspec.Raw(_enc.encode(snap)), 1)]
    seq = 0
    leader = Mirror()  # plays the controller: its ledger gives each heartbeat's host totals
    leader.apply_snapshot(snap)

    def emit(t: float, **kw: object) -> None:
        nonlocal seq
        seq += 1
        ev = Event(seq=seq, epoch=EPOCH, time=t, **kw)  # type: ignore[arg-type]
        leader.apply_event(ev)
        stamp(leader, ev)
        out.append(Record(t + 0.01, "event", msgspec.Raw(_enc.encode(ev)), 1))

    for k in range(1, seconds + 1):
        t = T0 + k
        if k == 20:
            jobs[11] = msgspec.structs.replace(jobs[11], state=JobState.RUN, start_time=t,
                                               allocs=[Alloc("node1", 1, 50 * M, {"slots": 1})], attempt=1)
            emit(t, jobs=[jobs[11]], reasons={11: ""})
        if k == 50:
            jobs[11] = msgspec.structs.replace(jobs[11], state=JobState.DONE, end_time=t, exit_code=0, usage=[
                HostUsage(host="node1", reserved=50 * M, actual=45 * M, peak=45 * M, charged_peak=50 * M)])
            emit(t, jobs=[jobs[11]])
        for h in DEMO_HOSTS[:3]:
            samples = [JobSample(jid, host, f(k), f(k), float(k)) for jid, uses in USAGE.items()
                       for host, f in uses if host == h.name and jobs[jid].state == JobState.RUN]
            used = sum(s.actual for s in samples)
            emit(t + 0.1, live=[HostLive(h.name, h.mem_total - 1 * G - used, t + 0.1)], samples=samples)
    return out


# ---- the job model: arrays, held, suspended and unknown states, dependencies, run limits ------

ARRAY = 20  # the array's id; its elements are element_id(ARRAY, INDEX)
SCRIPT = "#!/bin/sh\n#BSUB -J limited\n#BSUB -W 10\n#BSUB -R rusage[mem=200M]\nset -e\nfor i in 1 2 3; do\n  ./step $i\ndone\n"


def jobmodel_jobs() -> list[Job]:
    """An array of 8 (6 elements materialised: 2 running, 1 stopped by its user, done, failed,
    pending; 2 not yet materialised), a job held by its user (PSUSP), one waiting on a
    dependency and one whose dependency can never be met, one stopped by the system (SSUSP),
    one whose host went silent (UNKWN), a job script with a run limit, one ended by it."""
    run, sweep = JobState.RUN, parse_lsf_job_name("sweep[1-8]%4")[1]

    def el(i: int, state: JobState, hosts: tuple[tuple[str, int], ...] = (), start: float | None = None,
           **kw: object) -> Job:
        j = job(element_id(ARRAY, i), "sweep", "dave", "rusage[mem=100M]", state, hosts, start, **kw)
        return msgspec.structs.replace(j, spec=msgspec.structs.replace(j.spec, array=sweep, index=i))

    done = [HostUsage(host="node1", reserved=100 * M, actual=70 * M, peak=80 * M, charged_peak=100 * M)]
    limited = job(24, "limited", "erin", "rusage[mem=200M]", run, (("node1", 1),), T0 - 30)
    limited.spec = msgspec.structs.replace(limited.spec, run_limit=600.0, script=SCRIPT, command=["job.sh"])
    waiting = job(22, "after", "erin", "rusage[mem=100M]", JobState.PEND, held=True,
                  reason="waiting for done(21): job 21 is PSUSP")
    waiting.spec = msgspec.structs.replace(waiting.spec, depend=parse_depend("done(21)"))
    return [
        el(1, run, (("node1", 1),), T0 - 40), el(2, run, (("node2", 1),), T0 - 40),
        el(3, JobState.USUSP, (("node1", 1),), T0 - 40),
        el(4, JobState.DONE, (("node1", 1),), T0 - 100, end_time=T0 - 60, exit_code=0, usage=done),
        el(5, JobState.EXIT, (("node1", 1),), T0 - 100, end_time=T0 - 50, exit_code=1, usage=done),
        el(6, JobState.PEND),
        job(21, "held", "erin", "rusage[mem=100M]", JobState.PSUSP, reason="held by its user (xce stop)"),
        waiting,
        job(23, "sysstop", "frank", "rusage[mem=300M]", JobState.SSUSP, (("node2", 1),), T0 - 20),
        limited,
        job(25, "lost", "frank", "rusage[mem=100M]", JobState.UNKWN, (("node3", 1),), T0 - 20),
        job(26, "orphan", "erin", "rusage[mem=100M]", JobState.PEND, held=True,
            reason="never satisfied: job 10 ended EXIT"),
        job(27, "timeout", "frank", "rusage[mem=100M]", JobState.EXIT, (("node1", 1),), T0 - 700, end_time=T0 - 100,
            exit_code=None, signal=15, reason="TERM_RUNLIMIT: job killed after reaching its run limit", usage=done),
    ]


JOBMODEL_USAGE: dict[int, list[tuple[str, Callable[[float], int]]]] = {
    element_id(ARRAY, 1): [("node1", _ramp((1e9, 60)))], element_id(ARRAY, 2): [("node2", _ramp((1e9, 150)))],
    element_id(ARRAY, 3): [("node1", _ramp((1e9, 90)))], 23: [("node2", _ramp((1e9, 280)))],
    24: [("node1", _ramp((1e9, 120)))],
}


def jobmodel_records(seconds: int = 10) -> list[Record]:
    """A short recording of ``jobmodel_jobs`` on the demo's hosts: heartbeats with samples only."""
    jobs = jobmodel_jobs()
    snap = Snapshot(seq=0, epoch=EPOCH, time=T0, jobs=jobs, hosts=DEMO_HOSTS, queues=[Queue(name="normal")],
                    default_queue="normal", live=[HostLive(h.name, h.mem_total - 2 * G, T0) for h in DEMO_HOSTS[:3]],
                    samples=[], reasons={}, leader="tcp://127.0.0.1:7700", term=1)
    out = [Record(T0 - 0.5, "hello", msgspec.Raw(_enc.encode(Hello(cluster="jobmodel", heartbeat=1.0,
                                                                   source="synth")))),
           Record(T0 + 0.02, "snapshot", msgspec.Raw(_enc.encode(snap)), 1)]
    leader = Mirror()
    leader.apply_snapshot(snap)
    for k in range(1, seconds + 1):
        for h in DEMO_HOSTS[:3]:
            samples = [JobSample(jid, host, f(k), f(k), float(k)) for jid, uses in JOBMODEL_USAGE.items()
                       for host, f in uses if host == h.name]
            ev = Event(seq=len(out) - 1, epoch=EPOCH, time=T0 + k + 0.1, samples=samples,
                       live=[HostLive(h.name, h.mem_total - 1 * G - sum(s.actual for s in samples), T0 + k + 0.1)])
            leader.apply_event(ev)
            stamp(leader, ev)
            out.append(Record(T0 + k + 0.11, "event", msgspec.Raw(_enc.encode(ev)), 1))
    return out


def write(path: str, records: list[Record]) -> None:
    rec = Recorder(path)
    for r in records:
        rec.write(r.t, r.kind, bytes(r.body), r.term)
    rec.close()


# ---- the benchmark's cluster -------------------------------------------------------------------

def big_snapshot(hosts: int = 1000, jobs: int = 20000) -> Snapshot:
    hs = [Host(name=f"n{i:04d}", slots_total=32, mem_total=256 * G, ncpus=32) for i in range(hosts)]
    per = jobs // hosts
    js = [job(i + 1, f"job{i}", f"user{i % 40}", "rusage[mem=4G]", JobState.RUN,
              ((hs[i % hosts].name, 1),), T0 - 3600 + i % 600, queue=("normal", "high")[i % 2])
          for i in range(jobs)]
    samples = [JobSample(j.id, j.allocs[0].host, (3 + (j.id % 3)) * G, 5 * G, 1.0) for j in js]
    return Snapshot(seq=0, epoch=EPOCH, time=T0, jobs=js, hosts=hs,
                    queues=[Queue(name="normal"), Queue(name="high", priority=50)], default_queue="normal",
                    live=[HostLive(h.name, 256 * G - per * 4 * G, T0) for h in hs], samples=samples, reasons={},
                    leader="tcp://127.0.0.1:7700", term=1)


def one_second(snap: Snapshot, seq: int, t: float, changes: int = 300, per_event: int = 1) -> list[Event]:
    """Second ``t`` of a steady cluster: a heartbeat from every host with the samples of every
    job it runs (all moved: the worst case), then ``changes`` jobs that end and as many that
    start in their place.  ``per_event`` hosts' heartbeats share an event (the controller
    publishes what 50 ms brought: 50 hosts of 1,000 a second).

    Stateless, so any second can be built again: the snapshot's jobs are slots, and at each
    second the next ``changes`` slots (round the ring) turn over to a new job (id + N per
    turn).  A host lists its jobs in the order they started, as a worker does.
    """
    n, k = len(snap.jobs), round(t - T0)
    by_host: dict[str, list[tuple[int, int]]] = {}  # host -> (start position, slot)
    for i, j in enumerate(snap.jobs):
        g = _turns(i, k - 1, n, changes)
        by_host.setdefault(j.allocs[0].host, []).append(((g - 1) * n + i, i))
    evs: list[Event] = []
    for h, slots in by_host.items():
        slots.sort()
        samples = []
        for _, i in slots:
            jid = snap.jobs[i].id + n * _turns(i, k - 1, n, changes)
            samples.append(JobSample(jid, h, (3 + (jid + k) % 3) * G, 5 * G, 2.0))
        if evs and len(evs[-1].live) < per_event:
            evs[-1].live.append(HostLive(h, 100 * G, t))
            evs[-1].host_samples += columns(samples)
        else:
            evs.append(Event(seq=seq + len(evs) + 1, epoch=snap.epoch, time=t, live=[HostLive(h, 100 * G, t)],
                             host_samples=columns(samples)))
    moved = []
    for r in range(min(changes, n)):
        i = ((k - 1) * changes + r) % n
        j, g = snap.jobs[i], _turns(i, k - 1, n, changes)
        moved.append(msgspec.structs.replace(j, id=j.id + n * g, state=JobState.DONE, end_time=t, exit_code=0))
        moved.append(msgspec.structs.replace(j, id=j.id + n * (g + 1), start_time=t))
    evs.append(Event(seq=seq + len(evs) + 1, epoch=snap.epoch, time=t, jobs=moved))
    return evs


def stamp(leader: Mirror, ev: Event) -> None:
    """Give each heartbeat entry of ``ev`` its host's totals (``HostLive.mem``) as the controller
    does, from ``leader``, a Mirror that has just applied ``ev``: the same ledger arithmetic."""
    for hl in ev.live:
        hl.mem = host_mem(leader.live.ledger.host_totals(hl.host))


def _turns(i: int, k: int, n: int, changes: int) -> int:
    """How often slot ``i`` of ``n`` has turned over after ``k`` seconds of ``changes`` each."""
    return max(0, (k * changes - i + n - 1) // n) if k > 0 else 0


if __name__ == "__main__":
    write(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/demo.xcerec", demo_records())
