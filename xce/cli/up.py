"""`xce up` / `xce down`: a local cluster supervised like systemd's Restart=on-failure.

`up` picks free 127.0.0.1 ports, writes ``<state_dir>/cluster.toml`` (which every
client reads to find this cluster), starts the controller, the scheduler and
the workers as child processes with their logs under ``<state_dir>/logs``, and
restarts any of them that dies.  ``<state_dir>/up.json`` records the
supervisor's and the daemons' PIDs; `down` stops the supervisor by that PID and
the supervisor stops its children.

Lazy imports: the supervisor's heavier parts load only for the commands that need them.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import tomli_w

from xce.client import CLUSTER_FILE
from xce.site.config import from_dict

UP_FILE = "up.json"


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A free 127.0.0.1 port outside the kernel's ephemeral range.

    A port the kernel hands out for ``bind(0)`` comes from the same range as the source
    ports of outgoing connections, so between choosing it and the daemon binding it
    (a second later, or at a restart) some connection may take it, and the daemon fails
    with "address already in use".  Ports below the range are never taken that way.
    """
    low, high = _ephemeral_range()
    lo, hi = (10_000, low - 1) if low > 12_000 else (high + 1, 65_535)
    rnd = random.Random()
    for _ in range(200):
        port = rnd.randint(lo, hi)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    with socket.socket() as s:  # a crowded machine: the kernel's choice, as before
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32_768, 60_999  # Linux's default


def last_ports(state_dir: Path, controllers: int) -> list[tuple[int, int, int]] | None:
    """The previous run's (router, pub, raft) ports per controller, if it had as many and all are free.

    A state directory keeps its controllers' addresses from run to run, so clients and
    peers find it where it was; correctness does not depend on it (membership comes
    from configuration, xce/daemons/raft.py), so any other run may take new ports.
    """
    import tomllib

    try:
        c = tomllib.loads((state_dir / CLUSTER_FILE).read_text())["controller"]
        columns = ([c["address"], *c["peer_addresses"]], [c["pub_address"], *c["peer_pub_addresses"]],
                   [c["raft_address"], *c["peers"]])
        ports = [tuple(int(a.rsplit(":", 1)[1]) for a in row) for row in zip(*columns, strict=True)]
    except (OSError, ValueError, KeyError, TypeError, tomllib.TOMLDecodeError):
        return None
    flat = [p for row in ports for p in row]
    if len(ports) != controllers or len(set(flat)) != len(flat) or not all(map(_bindable, flat)):
        return None
    _HANDED_OUT.update(flat)
    return ports  # type: ignore[return-value]


def _bindable(port: int) -> bool:
    """Free for a listener: the daemons set SO_REUSEADDR, so the last run's TIME_WAIT is no obstacle."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


LOCAL_QUEUES: dict[str, Any] = {"normal": {"priority": 30, "default": True},
                                "high": {"priority": 50}, "rerun": {"priority": 30, "rerunnable": True}}


def check_site(site: dict[str, Any]) -> None:
    """A site overlay (config.site_overlay) against the local cluster's defaults: a ConfigError
    names the key before `xce up --detach` starts anything."""
    from_dict({"queues": LOCAL_QUEUES, **site}, "xce up --config")  # [worker] holds only site keys here


def write_cluster_file(state_dir: Path, controllers: int, mem: str, slots: int,
                       heartbeat: float, extra: dict[str, Any] | None = None,
                       site: dict[str, Any] | None = None) -> dict[str, Any]:
    """The local cluster's config file; ``site`` (config.site_overlay) replaces its policy
    tables whole, and the result is checked before any daemon reads it."""
    ports = last_ports(state_dir, controllers) or [(free_port(), free_port(), free_port())
                                                   for _ in range(controllers)]
    routers = [f"tcp://127.0.0.1:{r}" for r, _, _ in ports]
    pubs = [f"tcp://127.0.0.1:{p}" for _, p, _ in ports]
    rafts = [f"127.0.0.1:{x}" for _, _, x in ports]
    cfg: dict[str, Any] = {
        "state_dir": str(state_dir),
        "rest_url": f"http://127.0.0.1:{free_port()}",
        "cluster": {"name": "local"},
        "controller": {"address": routers[0], "pub_address": pubs[0], "raft_address": rafts[0],
                       "peers": rafts[1:], "peer_addresses": routers[1:], "peer_pub_addresses": pubs[1:],
                       "raft_password": os.urandom(16).hex()},
        "worker": {"heartbeat": heartbeat, "mem": mem, "slots": slots},
        "security": {"curve": True},  # keys: ensure_keys, before the daemons start
        "queues": LOCAL_QUEUES,
    }
    for k, v in (extra or {}).items():
        cfg.setdefault(k, {}).update(v) if isinstance(v, dict) else cfg.__setitem__(k, v)
    if site:
        # A site's tables replace the local ones whole, but for [worker]: the site says what
        # its hosts are (type, model, attrs), the local cluster how its workers run.
        cfg.update({k: v for k, v in site.items() if k != "worker"})
        cfg["worker"].update(site.get("worker", {}))
        from_dict(cfg, "xce up --config")  # a ConfigError names the key, before anything starts
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / CLUSTER_FILE).write_text(tomli_w.dumps(cfg))
    os.chmod(state_dir / CLUSTER_FILE, 0o600)  # it holds the Raft password
    cfg["_routers"], cfg["_pubs"], cfg["_rafts"] = routers, pubs, rafts
    return cfg


def layout(hosts: int, mem_per_host: str | None, slots_per_host: int | None) -> list[str]:
    """The hosts one run of `xce up` starts: the machine's name for a plain single host."""
    if hosts == 1 and not mem_per_host and not slots_per_host:
        return [socket.gethostname()]
    return [f"node{i + 1}" for i in range(hosts)]


class Supervisor:
    def __init__(self, state_dir: Path, cfg: dict[str, Any], hosts: int, names: list[str]) -> None:
        self.state_dir = state_dir
        self.cfg = cfg
        self.logs = state_dir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.specs: dict[str, list[str]] = {}
        self.restarts: dict[str, int] = {}
        self.stopping = False
        cluster = str(state_dir / CLUSTER_FILE)
        py = [sys.executable, "-m"]
        n = len(cfg["_routers"])
        for i in range(n):
            cdir = state_dir / f"controller-{i + 1}"
            cdir.mkdir(exist_ok=True)
            conf = cdir / "controller.toml"
            mine = json.loads(json.dumps({k: v for k, v in cfg.items() if not k.startswith("_")}))
            others = [j for j in range(n) if j != i]
            mine["controller"].update(
                address=cfg["_routers"][i], pub_address=cfg["_pubs"][i], raft_address=cfg["_rafts"][i],
                peers=[cfg["_rafts"][j] for j in others], peer_addresses=[cfg["_routers"][j] for j in others],
                peer_pub_addresses=[cfg["_pubs"][j] for j in others])
            conf.write_text(tomli_w.dumps(mine))
            os.chmod(conf, 0o600)
            self.specs[f"controller-{i + 1}"] = py + ["xce.daemons.controller", "--config", str(conf),
                                                      "--state-dir", str(cdir)]
        self.specs["scheduler"] = py + ["xce.daemons.scheduler", "--config", cluster]
        if cfg.get("rest_url"):
            self.specs["rest"] = py + ["xce.rest.server", "--state-dir", str(state_dir),
                                       "--listen", cfg["rest_url"].split("//", 1)[1]]
        for name in names[:hosts]:
            self.specs[f"worker-{name}"] = py + ["xce.daemons.worker", "--config", cluster,
                                                 "--state-dir", str(state_dir), "--name", name]

    def start(self, name: str) -> None:
        log = open(self.logs / f"{name}.log", "ab")
        # cwd is the state directory: `python -m` puts the cwd on sys.path, and a stray
        # module in the user's directory must not shadow a daemon's imports.
        self.procs[name] = subprocess.Popen(self.specs[name], stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True,
                                            cwd=self.state_dir)
        log.close()

    def record(self) -> None:
        data = {"pid": os.getpid(), "daemons": {n: p.pid for n, p in self.procs.items()},
                "restarts": self.restarts}
        tmp = self.state_dir / (UP_FILE + ".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(self.state_dir / UP_FILE)

    def run(self) -> None:
        for name in self.specs:
            self.start(name)
        self.record()
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        while not self.stopping:
            time.sleep(0.2)  # supervision poll; nothing waits on this loop's timing
            for name, p in list(self.procs.items()):
                if p.poll() is not None and not self.stopping:
                    self.restarts[name] = self.restarts.get(name, 0) + 1
                    self.start(name)
                    self.record()
        self.shutdown()

    def _stop(self, *_: Any) -> None:
        self.stopping = True

    def shutdown(self) -> None:
        # Workers first (their jobs keep running and are re-attached on the next `up`),
        # then the scheduler, then the controllers.
        order = sorted(self.procs, key=lambda n: (n.startswith("controller"), n.startswith("scheduler")))
        for name in order:
            p = self.procs[name]
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 10
        for p in self.procs.values():
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        try:
            (self.state_dir / UP_FILE).unlink()
        except FileNotFoundError:
            pass


def ensure_keys(state_dir: Path, daemons: list[str]) -> None:
    """The local cluster's CURVE keys: kept across `up`s, so running clients stay valid."""
    from xce.security.curve import KeyStore

    store = KeyStore(state_dir / "keys")
    store.ensure_server()
    for name in daemons:
        store.ensure_daemon(name)


def read_up(state_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((state_dir / UP_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def stop_failed_up(state_dir: Path, sup: subprocess.Popen[bytes], timeout: float = 20.0) -> int:
    """Stop a detached `up` that never became ready: its supervisor, then by PID each daemon it ran.

    The supervisor stops its children when told (``Supervisor.shutdown``); the PIDs it
    recorded are killed as well, for a supervisor that died or was stopped before it
    could.  Returns how many daemons it had recorded.
    """
    up = read_up(state_dir)
    daemons = list(up["daemons"].values()) if up and up.get("pid") == sup.pid else []
    sup.terminate()
    try:
        sup.wait(timeout)
    except subprocess.TimeoutExpired:
        sup.kill()
        sup.wait()
    for pid in daemons:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    if read_up(state_dir) == up:  # a supervisor killed before its shutdown leaves its record
        (state_dir / UP_FILE).unlink(missing_ok=True)
    return len(daemons)


def running(state_dir: Path) -> bool:
    up = read_up(state_dir)
    return up is not None and alive(up["pid"])


def down(state_dir: Path, timeout: float = 20.0) -> bool:
    up = read_up(state_dir)
    if up is None or not alive(up["pid"]):
        return False
    os.kill(up["pid"], signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while alive(up["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(up["pid"])
