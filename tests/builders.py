"""Small builders with valid defaults for the pure-core tests.

``host()``, ``job()``, ``queue()``, ``cap()`` and ``cluster_state()`` each build
one valid entity; tests override only what they are about, so a test reads as
the scenario it checks (``host(mem="2G")``, ``job(mem="1G", slots=2)``).
Memory is given as text ("8G", "500M") and stored in bytes, as the model does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from xce.core.model import Alloc, Host, Job, JobSpec, JobState, Queue
from xce.core.placement import HostCap
from xce.core.resources import BUILTIN, ResourceDef
from xce.core.resreq import parse_resreq
from xce.core.state import ClusterState, RegisterHost, SetQueues, Submit
from xce.core.units import parse_mem

T0 = 1_700_000_000.0  # a fixed "now": tests never read the clock
# The builtin catalog plus site resources: a host-level "gpu" and a cluster-wide "lic".
SITE = {**BUILTIN, "gpu": ResourceDef("gpu", "virtual", "count"),
        "lic": ResourceDef("lic", "virtual", "count", scope="cluster")}


def b(text: str | int) -> int:
    """Bytes from "8G"/"500M"/an int of bytes."""
    return text if isinstance(text, int) else parse_mem(text)


def host(name: str = "node1", mem: str | int = "8G", slots: int = 4, **kw: Any) -> Host:
    return Host(name=name, slots_total=slots, mem_total=b(mem), **kw)


def queue(name: str = "normal", priority: int = 30, rerunnable: bool = False, **kw: Any) -> Queue:
    return Queue(name=name, priority=priority, rerunnable=rerunnable, **kw)


def resreq_text(mem: str | None = "1G", resreq: str = "") -> str:
    """``rusage[mem=..]`` plus ``resreq``; a ``resreq`` with its own rusage[] is used as is."""
    if "rusage[" in resreq or not mem:
        return resreq
    return f"rusage[mem={mem}] {resreq}".strip()


def spec(mem: str | None = "1G", slots: int = 1, resreq: str = "", queue: str = "normal",
         **kw: Any) -> JobSpec:
    kw.setdefault("command", ["sleep", "1"])
    return JobSpec(slots=slots, resreq=resreq_text(mem, resreq), queue=queue, **kw)


def job(id: int = 1, mem: str | None = "1G", slots: int = 1, resreq: str = "", queue: str = "normal",
        state: JobState = JobState.PEND, resources: Mapping[str, ResourceDef] | None = None,
        **kw: Any) -> Job:
    """A job as the state machine would hold it; extra keywords go to Job, or to its JobSpec
    where they name a spec field (``user="alice"``, ``run_limit=600``).

    ``resources`` is the catalog the resreq is parsed against (default: the builtins).
    """
    s = spec(mem, slots, resreq, queue, **{k: kw.pop(k) for k in list(kw) if k in JobSpec.__struct_fields__})
    kw.setdefault("submit_time", T0)
    return Job(id=id, spec=s, req=parse_resreq(s.resreq, resources), state=state, **kw)


def alloc(host: str = "node1", slots: int = 1, mem: str | int = "1G") -> Alloc:
    return Alloc(host=host, slots=slots, mem=b(mem), virtual={"slots": slots})


def cap(name: str = "node1", mem: str | int = "8G", slots: int = 4, *, os_available: str | int | None = None,
        slack: str | int = 0, slots_free: int | None = None, schedulable: str | None = None,
        **kw: Any) -> HostCap:
    """One host as a scheduling round sees it (OS-available defaults to the whole host)."""
    total = b(mem)
    return HostCap(name=name, schedulable=schedulable, slots_total=slots,
                   slots_free=slots if slots_free is None else slots_free, mem_total=total,
                   os_available=total if os_available is None else b(os_available), slack=b(slack), **kw)


def caps(*cs: HostCap) -> dict[str, HostCap]:
    return {c.name: c for c in cs}


def cluster_state(*queues: Queue, default: str = "normal", hosts: tuple[Host, ...] = ()) -> ClusterState:
    """A fresh state with queues (default: one "normal" queue) and registered hosts."""
    st = ClusterState()
    st.apply(SetQueues(time=T0, queues=list(queues) or [queue()], default_queue=default))
    for h in hosts:
        st.apply(RegisterHost(time=T0, host=h))
    return st


def submit(st: ClusterState, *specs: JobSpec, time: float = T0) -> list[int]:
    specs = specs or (spec(),)
    return st.apply(Submit(time=time, specs=list(specs), reqs=[parse_resreq(s.resreq) for s in specs]))
