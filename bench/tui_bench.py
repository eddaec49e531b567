"""xce-top at scale: 1,000 hosts x 20,000 jobs, and latency on a real local cluster.

    .venv/bin/python bench/tui_bench.py [--hosts 1000] [--jobs 20000] [--seconds 5] [--soak 0] [--no-live]

Measures (median over ``--seconds`` synthetic seconds; CPU time of the process,
so other load on the machine does not count; the frame's wall time is printed too):
  apply   one second of updates (every host's heartbeat, all 20,000 samples moved,
          ``--per-event`` hosts to an event as the controller gathers them in its
          50 ms soft period, plus ``--changes`` jobs that end and as many that
          start), from the frames as the controller publishes them: decoded, then
          through Sync into the model in LiveFeed's chunks, as its receiver thread
          does (until session 4 the bench handed over objects: no decode).  The console keeps
          samples until a frame reads them (xce/tui/model.py), so the samples' ledger
          work lands in the redraw for the rows a frame shows;
  bare    the same events through a bare xce.replica.mirror.Mirror, which applies every
          sample (the shared Live/Ledger path, as the scheduler's Mirror takes them)
          and plays the leader: each heartbeat event gets the host's totals from its
          ledger (``HostLive.mem``), as the controller sends them;
  redraw  one frame in a headless App (take the changes, update row sets and the
          header, repaint the changed visible rows, let the compositor paint):
          the UI thread's work; for the jobs view sorted by STATE (hard column)
          and by ACTUAL (a usage column: every changed view is recomputed).
          Measured as render_frame + two Pilot.pauses (which let Textual paint, and
          take any work the frame left behind), minus twice a Pilot.pause on the idle
          frame right after: the pause alone costs ~4 ms of CPU (a callback on every
          widget), which is the harness, not the console;
          "redraw_raw" is the figure before that correction (as measured until 2026-11-30);
  total   apply + redraw of the same synthetic second (median), against the goal;
  RSS     of the process at that size (and, with ``--soak N``, after N more
          synthetic seconds with a frame each, finished jobs forgotten past
          ``--keep-finished`` as the controller does: after ~500 s the histories are at
          their bound, and after ~340 s at 300 changes a second the finished jobs too);
  array   with ``--array N``: the cluster also holds an array of N elements, of which the console
          holds 200 (50 running, 150 pending: the controller's window), and each second one
          element ends, one starts and one is materialised, in an event that carries the
          array's summary (Event.arrays) where the console's schema has it (an older checkout,
          given by PYTHONPATH, counts the elements it holds); ``array_row_us`` is the cost of
          the array's row (its counts and summed figures), what a frame pays when it is on screen;
  latency from a heartbeat's arrival at the controller (HostLive.last_seen, ~1 ms
          after the worker's sample on one machine) to the end of the frame that
          shows it, on a real `xce up` cluster (2 hosts, heartbeat 0.5 s, 4 fps).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections import deque
from pathlib import Path

import msgspec
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from xce.client.follow import Sync  # noqa: E402
from xce.core.model import JobState  # noqa: E402
from xce.reactors.after_apply import SOFT_PERIOD  # noqa: E402
from xce.proto.codec import decode_envelope, encode  # noqa: E402
from xce.proto.opcodes import Op  # noqa: E402
from xce.proto.schema import Event, Snapshot  # noqa: E402
from xce.replica.mirror import Mirror  # noqa: E402
from xce.site.config import Config  # noqa: E402
from xce.tui import synth  # noqa: E402
from xce.tui.app import XceTop, tune_gc  # noqa: E402
from xce.client.follow import CHUNK  # noqa: E402
from xce.tui.model import ConsoleModel  # noqa: E402

EVENT = msgspec.msgpack.Decoder(Event)
ARRAY_ID = 2**31 - 1  # a plain id no synthetic job reaches; its elements are ARRAY_ID << 32 | INDEX
SUMMARIES = "arrays" in Event.__struct_fields__  # False on a checkout from before arrays were on the stream


def array_part(snap: Snapshot, n: int) -> Snapshot:
    """``snap`` with an array of ``n`` elements: 50 running (on the first hosts), 150 pending."""
    from xce.core.jobspec.arrays import parse_lsf_job_name

    spec = parse_lsf_job_name(f"sweep[1-{n}]", max_size=n)[1]
    running, held = min(50, n), min(200, n)
    jobs = [array_element(snap, spec, i, JobState.RUN if i <= running else JobState.PEND) for i in range(1, held + 1)]
    extra = {"arrays": [array_summary(n, {"RUN": running, "PEND": n - running})]} if SUMMARIES else {}
    return msgspec.structs.replace(snap, jobs=[*snap.jobs, *jobs], **extra)


def array_element(snap: Snapshot, spec: object, i: int, state: JobState, t: float = synth.T0) -> object:
    host = ((snap.hosts[i % len(snap.hosts)].name, 1),) if state != JobState.PEND else ()
    j = synth.job(ARRAY_ID << 32 | i, "sweep", "user1", "rusage[mem=1G]", state, host,
                  t - 60 if host else None, end_time=t if state == JobState.DONE else None)
    return msgspec.structs.replace(j, spec=msgspec.structs.replace(j.spec, array=spec, index=i))


def array_summary(n: int, counts: dict[str, int]) -> object:
    from xce.core.views import ArrayView

    return ArrayView(id=ARRAY_ID, name="sweep", user="user1", queue="normal", indices=f"1-{n}", limit=None,
                     elements=n, counts=counts)


def array_second(snap: Snapshot, n: int, k: int, seq: int, t: float) -> Event:
    """Second ``k``: element k ends DONE, element 50 + k starts, element 200 + k is materialised."""
    from xce.core.jobspec.arrays import parse_lsf_job_name

    spec = parse_lsf_job_name(f"sweep[1-{n}]", max_size=n)[1]
    jobs = [array_element(snap, spec, k, JobState.DONE, t), array_element(snap, spec, 50 + k, JobState.RUN, t),
            array_element(snap, spec, 200 + k, JobState.PEND, t)]
    extra = {"arrays": [array_summary(n, {"RUN": 50, "PEND": n - 50 - k, "DONE": k})]} if SUMMARIES else {}
    return Event(seq=seq, epoch=snap.epoch, time=t, jobs=jobs, **extra)


def receive(sync: Sync, frames: list[bytes], now: float) -> None:
    """What LiveFeed's receiver does with the frames a SUB socket gives it: decode, then hand
    the events over in chunks (each chunk one hold of the model's lock)."""
    chunk: list[tuple[Event, float, int]] = []
    for data in frames:
        env = decode_envelope(data)
        chunk.append((EVENT.decode(env.body), now, env.term))
        if len(chunk) >= CHUNK:
            sync.on_events(chunk)
            chunk = []
    if chunk:
        sync.on_events(chunk)


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


async def scale(hosts: int, jobs: int, seconds: int, changes: int, soak: int, per_event: int,
                keep_finished: int, array: int = 0) -> dict[str, float]:
    tune_gc()  # as xce-top's main() does
    base = rss_mb()
    snap = synth.big_snapshot(hosts, jobs)
    m = ConsoleModel()
    sync = Sync(m, m.lock)
    t = time.perf_counter()
    sync.requested()
    sync.on_snapshot(array_part(snap, array) if array else snap, synth.T0)
    out = {"snapshot_apply_s": time.perf_counter() - t}
    bare = Mirror()  # the shared Mirror/Ledger path alone, for comparison
    bare.apply_snapshot(snap)
    bare_applies = []
    now = [synth.T0]
    app = XceTop(m, clock=lambda: now[0], view="jobs", deterministic=True, fps=0.001)
    applies, redraws, redraws_live, walls, totals, idles, nets, nets_live = [], [], [], [], [], [], [], []
    rows: list[float] = []
    seq = 0
    ended: deque[int] = deque()  # finished jobs, oldest first: the controller forgets them too
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause(0.5)
        app.render_frame()
        await pilot.pause()
        for k in range(1, 2 * seconds + 1):
            now[0] = synth.T0 + k
            evs = synth.one_second(snap, seq, now[0], changes, per_event)
            seq += len(evs)
            if array:  # the bare Mirror does not hold the array: its event is the console's alone
                seq += 1
                arr_ev = array_second(snap, array, k, seq, now[0])
            t = time.process_time()
            for ev in evs:
                bare.apply_event(ev)
                synth.stamp(bare, ev)
            both = time.process_time() - t
            t = time.process_time()
            for ev in evs:  # the stamping alone (the same values again), to take off
                synth.stamp(bare, ev)
            bare_applies.append(both - (time.process_time() - t))
            ended.extend(j.id for j in evs[-1].jobs if j.state == JobState.DONE)
            frames = [encode(Op.EVENT, 0, ev, term=1) for ev in [*evs, *([arr_ev] if array else [])]]
            t = time.process_time()
            receive(sync, frames, now[0])
            applies.append(time.process_time() - t)
            assert sync.state == "LIVE", "the synthetic second did not follow"
            if array:
                t = time.process_time()
                with m.lock:
                    row = m.row_view(ARRAY_ID)
                rows.append(time.process_time() - t)
                assert row is not None and (not SUMMARIES or str(array) in row.reason.replace(",", ""))
            t, w = time.process_time(), time.perf_counter()
            app.render_frame()
            await pilot.pause()
            raw = time.process_time() - t
            walls.append(time.perf_counter() - w)
            await pilot.pause()  # any work the frame left behind counts as the frame's
            two = time.process_time() - t
            # The Pilot's pause itself costs CPU (it queues a callback on every widget and
            # waits for all of them): measured on the idle frame after, and taken off for
            # each of the two pauses above.
            t = time.process_time()
            await pilot.pause()
            idles.append(time.process_time() - t)
            (redraws if k <= seconds else redraws_live).append(raw)
            (nets if k <= seconds else nets_live).append(two - 2 * idles[-1])
            if k <= seconds:
                totals.append(applies[-1] + nets[-1])
            if k == seconds:  # second half: sorted by a usage column
                app.main_screen().sort_by("actual")
                await pilot.pause()
        out["rss_mb"] = rss_mb()
        out["rss_growth_mb"] = out["rss_mb"] - base
        for k in range(2 * seconds + 1, 2 * seconds + 1 + soak):
            now[0] = synth.T0 + k
            evs = synth.one_second(snap, seq, now[0], changes, per_event)
            seq += len(evs)
            done = [j.id for j in evs[-1].jobs if j.state == JobState.DONE]
            ended.extend(done)
            if len(ended) > keep_finished + 1000:  # the controller's Cleanup, at the same threshold
                gone = [ended.popleft() for _ in range(len(ended) - keep_finished)]
                seq += 1
                evs.append(Event(seq=seq, epoch=snap.epoch, time=now[0], forget=gone))
            for ev in evs:
                bare.apply_event(ev)
                synth.stamp(bare, ev)
            for jid in done:  # the leader stand-in needs its ledger, not a second copy of the ended jobs
                bare.jobs.pop(jid, None)
            receive(sync, [encode(Op.EVENT, 0, ev, term=1) for ev in evs], now[0])
            app.render_frame()
            await pilot.pause()
        if soak:
            out["rss_after_soak_mb"] = rss_mb()
            out["jobs_after_soak"] = len(m.mirror.jobs)
    out["apply_ms"] = statistics.median(applies) * 1000
    out["bare_mirror_ms"] = statistics.median(bare_applies) * 1000
    out["redraw_raw_ms"] = statistics.median(redraws) * 1000
    out["pilot_pause_idle_ms"] = statistics.median(idles) * 1000
    out["redraw_ms"] = statistics.median(nets) * 1000
    out["apply_plus_redraw_ms"] = statistics.median(totals) * 1000
    out["redraw_sorted_by_actual_ms"] = statistics.median(nets_live) * 1000
    out["redraw_wall_ms"] = statistics.median(walls) * 1000
    if array:
        out["array_row_us"] = statistics.median(rows) * 1e6
    return out


async def latency(duration: float) -> dict[str, float]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # conftest: local_cluster
    import tempfile

    from conftest import local_cluster

    from xce.tui.live import LiveFeed

    lat: list[float] = []
    with tempfile.TemporaryDirectory() as td, local_cluster(Path(td), "--hosts", "2", "--heartbeat", "0.5") as c:
        for _ in range(4):
            c.client.submit([sys.executable, "-m", "xce.jobs.memhog", "100:60"], resreq="rusage[mem=200M]",
                            env=dict(os.environ))
        m = ConsoleModel()
        app = XceTop(m, feed=LiveFeed(m, c.state_dir), view="hosts")
        seen: dict[str, float] = {}
        orig = app.render_frame

        def timed(only: object = None) -> None:
            orig(only)  # type: ignore[arg-type]
            done = time.time()
            with m.lock:
                for h, last in m.mirror.live.last_seen.items():
                    if seen.get(h) != last and m.mirror.live.ledger.totals.get(h) is not None:
                        if h in seen:
                            lat.append(done - last)
                        seen[h] = last
        app.render_frame = timed  # type: ignore[method-assign]
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.pause(duration)
    return {"latency_median_ms": statistics.median(lat) * 1000, "latency_p95_ms":
            sorted(lat)[int(0.95 * (len(lat) - 1))] * 1000, "latency_samples": len(lat)}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--hosts", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=20000)
    p.add_argument("--seconds", type=int, default=5)
    p.add_argument("--changes", type=int, default=300)
    p.add_argument("--soak", type=int, default=0, help="more synthetic seconds before a last RSS reading")
    p.add_argument("--keep-finished", type=int, default=Config().controller.keep_finished,
                   help="finished jobs kept (the controller's setting): the soak forgets older ones as it does")
    p.add_argument("--per-event", type=int, default=0,
                   help="hosts' heartbeats per event (default: what the controller's 50 ms soft period "
                        "gathers at one heartbeat a second, hosts / 20; 1 = an event per heartbeat)")
    p.add_argument("--array", type=int, default=0, help="also an array of this many elements (200 held)")
    p.add_argument("--no-summaries", action="store_true",
                   help="with --array: events without the array's summary, as before they were on the stream")
    p.add_argument("--no-live", action="store_true", help="skip the real-cluster latency run")
    p.add_argument("--live-seconds", type=float, default=20.0)
    a = p.parse_args()
    global SUMMARIES
    SUMMARIES = SUMMARIES and not a.no_summaries
    per_event = a.per_event or max(1, round(a.hosts * SOFT_PERIOD))
    print(f"console at {a.hosts} hosts x {a.jobs} jobs, {a.changes} job changes/s, "
          f"{per_event} heartbeats an event, {f'an array of {a.array:,}, ' if a.array else ''}"
          f"summaries on the stream: {SUMMARIES}, "
          f"python {sys.version.split()[0]}, {os.cpu_count()} cpus")
    for k, v in asyncio.run(scale(a.hosts, a.jobs, a.seconds, a.changes, a.soak, per_event, a.keep_finished,
                                      a.array)).items():
        print(f"  {k:28} {v:10.1f}")
    if not a.no_live:
        for k, v in asyncio.run(latency(a.live_seconds)).items():
            print(f"  {k:28} {v:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
