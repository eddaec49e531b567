"""REST throughput and latency: the full middleware chain against the same handlers without it.

    python bench/rest_bench.py [--seconds 5] [--conns 8]

Starts a local cluster (1 host, closed so submitted jobs stay pending and nothing
runs), submits 100 jobs, then starts two xce-rest servers on the same cluster:
``chain``  — Audit + WhitelistURL -> WhitelistIP -> RateLimit -> JWT -> CORS -> RBAC
(rate limit raised so nothing is refused, a CORS origin configured and sent),
``bare``   — ``chain = false``: one step sets a fixed principal; same handlers.
A keep-alive asyncio HTTP/1.1 client with N connections drives each scenario for
a fixed time, alternating servers.  Prints a Markdown table (req/s, p50, p99).
The load generator shares the machine's cores with the server and the controller.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def xce(sd: Path, *args: str) -> str:
    return subprocess.run([sys.executable, "-m", "xce.cli.main", "--state-dir", str(sd), *args],
                          check=True, capture_output=True, text=True).stdout


def start_rest(sd: Path, port: int, conf: str) -> subprocess.Popen[bytes]:
    f = sd / f"bench-rest-{port}.toml"
    f.write_text(conf)
    p = subprocess.Popen([sys.executable, "-m", "xce.rest.server", "--state-dir", str(sd), "--config", str(f),
                          "--listen", f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).read()
            return p
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"xce-rest on {port} did not start")


def request(method: str, path: str, token: str, body: bytes = b"") -> bytes:
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Authorization: Bearer {token}",
            "Origin: https://ui.example"]
    if body:
        head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def one_conn(port: int, req: bytes, until: float, lat: list[float], codes: dict[int, int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    while time.perf_counter() < until:
        t0 = time.perf_counter()
        writer.write(req)
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        length = next(int(x.split(":", 1)[1]) for x in lines if x.lower().startswith("content-length:"))
        await reader.readexactly(length)
        lat.append(time.perf_counter() - t0)
        code = int(lines[0].split()[1])
        codes[code] = codes.get(code, 0) + 1
    writer.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (the server's own cost, whatever else loads the machine)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


Result = tuple[float, float, float, float, dict[int, int]]


async def drive(port: int, pid: int, req: bytes, seconds: float, conns: int) -> Result:
    lat: list[float] = []
    codes: dict[int, int] = {}
    until = time.perf_counter() + seconds
    t0, c0 = time.perf_counter(), cpu_seconds(pid)
    await asyncio.gather(*(one_conn(port, req, until, lat, codes) for _ in range(conns)))
    wall, cpu = time.perf_counter() - t0, cpu_seconds(pid) - c0
    q = statistics.quantiles(lat, n=100)
    return len(lat) / wall, q[49] * 1000, q[98] * 1000, cpu / len(lat) * 1e6, codes


class CannedBackend:
    """Answers JOBS with 100 jobs and SUBMIT with an id: the REST layer alone, no controller."""

    def __init__(self) -> None:
        from xce.core.views import JobView
        from xce.proto import schema as S

        job = dict(name="j", user="bench", queue="normal", state="PEND", slots=1, hosts=[], command=["true"],
                   resreq="rusage[mem=10]", mem_reserved=10 << 20, mem_actual=None, mem_peak=0,
                   mem_charged=10 << 20, mem_limit=None, efficiency=None, reason="", exit_code=None,
                   signal=None, submit_time=1.7e9, start_time=None, end_time=None)
        self.jobs = S.JobsReply(jobs=[JobView(id=i, **job) for i in range(1, 101)], next_after=100)  # type: ignore[arg-type]
        self.submit = S.SubmitReply(ids=[101], queues=["normal"])

    async def call(self, token: str, op: object, body: object = None, timeout: float | None = None) -> object:
        return self.submit if getattr(op, "name", "") == "SUBMIT" else self.jobs

    def close(self) -> None:
        pass


def in_process(rounds: int = 15, n: int = 500) -> list[str]:
    """Per-request cost of the app (ASGI call, no HTTP, canned controller) with and without the chain."""
    from xce.rest.app import create_app
    from xce.rest.auditlog import AuditLog
    from xce.rest.backend import Services
    from xce.rest.config import RestConf
    from xce.security.auth import KeyRing, TokenService
    from xce.security.policy import Principal, load_policy

    ring = KeyRing()
    ring.add("EdDSA")
    tokens = TokenService(ring)
    token = tokens.issue(Principal("bench", ("admin",)))
    apps = {}
    for kind, chain in (("chain", True), ("bare", False)):
        conf = RestConf(rate=1e9, burst=10**9, cors_origins=["https://ui.example"], chain=chain)
        apps[kind] = create_app(Services(conf=conf, backend=CannedBackend(), policy=load_policy(), tokens=tokens,
                                         authn=None, audit=AuditLog(None)))
    body = json.dumps({"command": ["true"], "resreq": "rusage[mem=10]"}).encode()

    async def once(app: object, method: str, path: str, data: bytes) -> None:
        headers = [(b"authorization", f"Bearer {token}".encode()), (b"origin", b"https://ui.example")]
        if data:
            headers += [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
                 "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"limit=100",
                 "root_path": "", "headers": headers, "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 80)}

        async def receive() -> dict[str, object]:
            return {"type": "http.request", "body": data, "more_body": False}

        async def send(message: dict[str, object]) -> None:
            pass
        await app(scope, receive, send)  # type: ignore[operator]

    async def timed(app: object, method: str, path: str, data: bytes) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            await once(app, method, path, data)
        return (time.perf_counter() - t0) / n

    rows = []
    for name, method, path, data in (("GET /v1/jobs (100 jobs)", "GET", "/v1/jobs", b""),
                                     ("POST /v1/jobs", "POST", "/v1/jobs", body)):
        best = {k: min(asyncio.run(timed(app, method, path, data)) for _ in range(rounds)) for k, app in apps.items()}
        rows.append(f"| {name} | {best['chain'] * 1e6:.0f} µs | {best['bare'] * 1e6:.0f} µs | "
                    f"{(best['chain'] - best['bare']) * 1e6:.0f} µs ({100 * (best['chain'] / best['bare'] - 1):+.0f}%) |")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--conns", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2, help="alternating runs per scenario; best kept")
    ap.add_argument("--in-process-only", action="store_true")
    a = ap.parse_args()
    print("In process (ASGI calls, canned controller replies; best of 15 x 500):")
    print("| request | with chain | chain off | chain cost |")
    print("|---|---:|---:|---:|")
    print("\n".join(in_process()))
    print()
    if a.in_process_only:
        return 0
    sd = Path(tempfile.mkdtemp(prefix="xce-rest-bench-")) / "xce"
    xce(sd, "up", "--detach", "--hosts", "1", "--slots-per-host", "2", "--mem-per-host", "2G")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        xce(sd, "hosts", "close", "node1")
        from xce.client import Client

        with Client(state_dir=sd) as c:
            c.submit_many([{"command": ["true"], "resreq": "rusage[mem=10]"}] * 100)
        token = xce(sd, "token").strip()
        common = 'rate = 1e9\nburst = 1000000000\ncors_origins = ["https://ui.example"]\npool = 4\n'
        ports = {"chain": 17990, "bare": 17991}
        procs.append(start_rest(sd, ports["chain"], common))
        procs.append(start_rest(sd, ports["bare"], common + "chain = false\n"))
        pids = {"chain": procs[0].pid, "bare": procs[1].pid}
        scenarios = {
            "GET /v1/auth/whoami (no controller call)": request("GET", "/v1/auth/whoami", token),
            "GET /v1/jobs (100 jobs)": request("GET", "/v1/jobs?limit=100", token),
            "POST /v1/jobs": request("POST", "/v1/jobs", token,
                                     json.dumps({"command": ["true"], "resreq": "rusage[mem=10]"}).encode()),
        }
        rows = []
        for name, req in scenarios.items():
            best: dict[str, Result] = {}
            cpu: dict[str, list[float]] = {"chain": [], "bare": []}
            for _ in range(a.rounds):
                for kind, port in ports.items():
                    asyncio.run(drive(port, pids[kind], req, 0.5, a.conns))  # warm-up
                    res = asyncio.run(drive(port, pids[kind], req, a.seconds, a.conns))
                    cpu[kind].append(res[3])
                    if kind not in best or res[0] > best[kind][0]:
                        best[kind] = res
            med = {k: statistics.median(v) for k, v in cpu.items()}
            for kind in ("chain", "bare"):
                rps, p50, p99, _, codes = best[kind]
                rows.append(f"| {name} | {kind} | {rps:,.0f} | {p50:.2f} | {p99:.2f} | {med[kind]:.0f} | {codes} |")
            b_rps, c_rps = best["bare"][0], best["chain"][0]
            rows.append(f"| {name} | chain overhead | {100 * (b_rps - c_rps) / b_rps:+.1f}% | | | "
                        f"{100 * (med['chain'] - med['bare']) / med['bare']:+.1f}% | |")
        print(f"{os.cpu_count()} CPUs, {a.conns} keep-alive connections, {a.seconds:g} s per run, best of {a.rounds}")
        print("| request | server | req/s (best) | p50 ms | p99 ms | server CPU µs/req (median) | statuses |")
        print("|---|---|---:|---:|---:|---:|---|")
        print("\n".join(rows))
    finally:
        for p in procs:
            p.terminate()
            p.wait(20)
        xce(sd, "down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
