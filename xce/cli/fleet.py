"""`xce sim-fleet`: simulated hosts against a running cluster's real controllers and scheduler.

Registered into `xce` through xce.cli.main.EXTENSIONS.  It reads the cluster's config from
``--state-dir`` (the one `xce up` wrote), gives each simulated host its own CURVE key on
the allow-list (``<keys_dir>/NAME.key_secret``, as `xce up` does for its workers) and the
cluster's daemon token, and runs until SIGINT/SIGTERM.  The model and the loop are
xce/sim/fleet.py and xce/sim/fleet_loop.py; usage in docs/simulation.md.

Lazy imports: zmq, the wire and the fleet load only when `xce sim-fleet` runs (an extension
every `xce` run registers).
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path
from typing import Any

from xce.core.errors import InvalidRequest


def register(sub: Any) -> None:
    s = sub.add_parser("sim-fleet", help="simulated hosts (no processes) against a running cluster",
                       description="Run many simulated hosts in one process against the cluster in "
                                   "--state-dir: real CURVE connections, registrations, heartbeats and "
                                   "jobs that 'run' for their `sleep N` or --run-time (docs/simulation.md).")
    s.add_argument("--hosts", type=int, default=100, help="simulated hosts (100)")
    s.add_argument("--slots", type=int, default=20, help="slots per host (20)")
    s.add_argument("--mem", default="64G", help="memory per host (64G)")
    s.add_argument("--prefix", default="sim", help="host names: PREFIX00001, ... (sim)")
    s.add_argument("--first", type=int, default=1, help="number of the first host (1): several fleets side by side")
    s.add_argument("--run-time", type=float, default=30.0,
                   help="seconds a job runs when its command is not `sleep N` (30)")
    s.add_argument("--use-ratio", type=float, default=0.8,
                   help="a job's memory level as a share of its reservation (0.8)")
    s.add_argument("--ramp", type=float, default=0.1, help="share of the run over which memory ramps up (0.1)")
    s.add_argument("--steps", type=int, default=4, help="usage steps along the ramp (4)")
    s.add_argument("--noise", type=float, default=0.0, help="seeded noise on each job's memory level (0)")
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--stats", help="write the fleet's counters to this JSON file every second")
    s.add_argument("--log-level", default="WARNING")
    s.set_defaults(func=cmd_sim_fleet)


def _hosts(a: argparse.Namespace) -> list[str]:
    if a.hosts < 1 or a.first < 0:
        raise InvalidRequest(f"--hosts must be at least 1 and --first not negative, got {a.hosts} and {a.first}")
    return [f"{a.prefix}{i:05d}" for i in range(a.first, a.first + a.hosts)]


def cmd_sim_fleet(a: argparse.Namespace) -> int:
    import logging

    from xce.core.units import parse_mem
    from xce.security.auth import daemon_token
    from xce.security.curve import KeyStore, check_name, keys_root
    from xce.sim.fleet import FleetModel, SimHost
    from xce.sim.fleet_loop import Fleet, host_keys
    from xce.sim.model import UsageModel
    from xce.site.config import cluster_config, default_state_dir, endpoints_of
    from xce.site.local import CLUSTER_FILE

    logging.basicConfig(level=a.log_level, format="%(asctime)s sim-fleet %(levelname)s %(message)s")
    if a.slots < 1 or a.run_time < 0 or a.use_ratio < 0:
        raise InvalidRequest("--slots must be at least 1, --run-time and --use-ratio not negative")
    names = [check_name(n) for n in _hosts(a)]
    sd = Path(a.state_dir) if a.state_dir else default_state_dir()
    if not (sd / CLUSTER_FILE).exists():
        raise InvalidRequest(f"no cluster in {sd} (no {CLUSTER_FILE}): start one with `xce up`, "
                             "or name its directory with --state-dir")
    cfg = cluster_config(sd)
    model = FleetModel(slots=a.slots, mem=parse_mem(a.mem), run_time=a.run_time, use_ratio=a.use_ratio,
                       usage=UsageModel(ramp=a.ramp, steps=a.steps, noise=a.noise, seed=a.seed))
    keys = host_keys(KeyStore(keys_root(cfg)), names) if cfg.security.curve else {}
    token = daemon_token(cfg.state_dir)
    hosts = [SimHost(n, token, model, heartbeat=cfg.worker.heartbeat) for n in names]
    fleet = Fleet(endpoints_of(cfg), hosts, keys, Path(a.stats) if a.stats else None)

    def stop(*_: Any) -> None:
        fleet.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"xce sim-fleet: {len(hosts)} simulated host(s) {names[0]}..{names[-1]} "
          f"({a.slots} slots, {a.mem} each) against {', '.join(endpoints_of(cfg))}", flush=True)
    fleet.run()
    return 0
