"""Prometheus text exposition (format 0.0.4) of the cluster, from STATUS and HOSTS.

Owns only formatting: every figure comes from the controller's views (the one
accounting module computed them).  Every job and host state is always present
(0 when empty) so series do not appear and vanish.
"""

from __future__ import annotations

from xce.core.model import HostState, JobState
from xce.core.views import HostView
from xce.proto.schema import StatusReply

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

HOST_GAUGES = [
    ("xce_host_mem_capacity_bytes", "mem_total", "Memory capacity of the host."),
    ("xce_host_mem_os_available_bytes", "mem_os_available", "Memory the OS reports available."),
    ("xce_host_mem_reserved_bytes", "mem_reserved", "Memory reserved by jobs on the host."),
    ("xce_host_mem_actual_bytes", "mem_actual", "Memory jobs on the host actually use."),
    ("xce_host_mem_slack_bytes", "mem_slack", "Reserved but unused memory (max(0, reserved - actual))."),
    ("xce_host_mem_reclaimable_bytes", "mem_reclaimable",
     "Settled jobs' slack less the safety margin: what reclaiming jobs may run on."),
    ("xce_host_mem_overage_bytes", "mem_overage", "Memory used beyond reservations (max(0, actual - reserved))."),
    ("xce_host_mem_available_bytes", "mem_available", "Memory available for scheduling."),
    ("xce_host_slots_total", "slots_total", "Slots of the host."),
    ("xce_host_slots_used", "slots_used", "Slots allocated to jobs."),
]


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _num(v: float | int) -> str:
    return repr(float(v)) if isinstance(v, float) else str(v)


def render(status: StatusReply, hosts: list[HostView]) -> str:
    out: list[str] = []

    def family(name: str, help_: str, samples: list[tuple[str, float | int]]) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} gauge")
        out.extend(f"{name}{labels} {_num(v)}" for labels, v in samples)

    family("xce_hosts", "Hosts by state.",
           [(f'{{state="{s.value}"}}', status.hosts_by_state.get(s.value, 0)) for s in HostState])
    family("xce_jobs", "Jobs by state (finished jobs the controller still holds included).",
           [(f'{{state="{s.value}"}}', status.jobs_by_state.get(s.value, 0)) for s in JobState])
    for name, attr, help_ in HOST_GAUGES:
        family(name, help_, [(f'{{host="{_label(h.name)}"}}', getattr(h, attr)) for h in hosts])
    if status.last_round_ms is not None:
        family("xce_scheduler_round_seconds", "Duration of the last scheduling round.",
               [("", status.last_round_ms / 1000.0)])
    family("xce_controller_term", "Raft term of the answering controller.", [("", status.term)])
    family("xce_controller_has_leader", "1 if the cluster has a leader.", [("", int(bool(status.leader)))])
    return "\n".join(out) + "\n"
