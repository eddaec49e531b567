"""The resource catalog: which resources exist, their kind, unit and wire name.

A resource is **real** (a gauge the workers measure, like ``mem``) or **virtual**
(a counter the configuration declares, like ``slots`` or a licence).  Real
resources are scheduled against the OS-reported figure minus reservation slack;
virtual ones against configured totals minus allocations (see accounting.py).

``WIRE_NAMES`` is the one table mapping worker report names to scheduler
resources.  Non-consumable resources (host attributes such as ``ncpus`` or
``type``) may appear in ``select[]`` and ``order[]`` but never in ``rusage[]``.
"""

from __future__ import annotations

from typing import Literal

import msgspec

Kind = Literal["real", "virtual", "attribute"]
Scope = Literal["host", "cluster"]


class ResourceDef(msgspec.Struct, frozen=True):
    name: str
    kind: Kind
    unit: Literal["bytes", "count", "string"] = "count"
    scope: Scope = "host"
    wire_name: str | None = None  # real resources only: the name workers report under
    description: str = ""

    @property
    def consumable(self) -> bool:
        return self.kind != "attribute"


BUILTIN: dict[str, ResourceDef] = {
    r.name: r
    for r in (
        ResourceDef("mem", "real", "bytes", wire_name="memory_rss",
                    description="memory; scheduled on OS-available minus reservation slack"),
        ResourceDef("slots", "virtual", "count", description="job slots (CPUs unless configured)"),
        ResourceDef("maxmem", "attribute", "bytes", description="host memory capacity"),
        ResourceDef("maxslots", "attribute", "count", description="host slot capacity"),
        ResourceDef("ncpus", "attribute", "count", description="CPUs the host has"),
        ResourceDef("type", "attribute", "string", description="host type"),
        ResourceDef("model", "attribute", "string", description="host model"),
        ResourceDef("hname", "attribute", "string", description="host name"),
    )
}

# Worker wire name -> scheduler resource.  The worker never names scheduler resources.
WIRE_NAMES: dict[str, str] = {r.wire_name: r.name for r in BUILTIN.values() if r.wire_name}


def catalog(site: dict[str, ResourceDef] | None = None) -> dict[str, ResourceDef]:
    """The builtin resources plus the site's own (from config); site entries may not redefine builtins."""
    out = dict(BUILTIN)
    for name, rdef in (site or {}).items():
        out[name] = rdef
    return out
