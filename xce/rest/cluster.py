"""/v1/hosts, /v1/queues, /v1/fairshare, /v1/limits, /v1/status: the cluster as the CLI's --json shows it.

Hosts are HostView (reserved, actual, slack, reclaimable, overage, available for scheduling,
all from xce/core/accounting.py through the controller); close/open are admin actions
and answer with the host's new view; DELETE removes a host (204), refused (409)
while jobs run there.  Status is the controller's StatusReply,
with ``rest_url`` filled in with this server's URL when the cluster file has none.
"""

from __future__ import annotations

from typing import Any

from xce.core.views import HostView
from xce.proto import schema as S
from xce.proto import writes
from xce.proto.opcodes import Op
from xce.rest.backend import Services, idempotency_key
from xce.rest.routes import Reply, route

HOST = "/v1/hosts/{name}"


@route("GET", "/v1/hosts", "hosts.read", summary="List hosts", tag="hosts", reply=list[HostView])
async def list_hosts(svc: Services, req: Any) -> list[HostView]:
    return (await svc.call(req, Op.HOSTS, S.HostsRequest())).hosts


@route("GET", HOST, "hosts.read", summary="One host", tag="hosts", reply=HostView, errors=(404,))
async def get_host(svc: Services, req: Any, name: str) -> HostView:
    return (await svc.call(req, Op.HOSTS, S.HostsRequest(names=[name]))).hosts[0]


async def _admin(svc: Services, req: Any, name: str, action: str) -> HostView:
    await svc.call(req, Op.HOSTS, S.HostsRequest(names=[name]))  # 404 for an unknown host
    await svc.call(req, Op.HOST_ADMIN, writes.host_admin([name], action, key=idempotency_key(req)))
    req.context.audit_result = f"host {name} {action}d" if action == "close" else f"host {name} opened"
    return (await svc.call(req, Op.HOSTS, S.HostsRequest(names=[name]))).hosts[0]


@route("POST", HOST + "/close", "hosts.admin", summary="Close a host to new jobs (badmin hclose)",
       tag="hosts", reply=HostView, errors=(404,))
async def close_host(svc: Services, req: Any, name: str) -> HostView:
    return await _admin(svc, req, name, "close")


@route("POST", HOST + "/open", "hosts.admin", summary="Open a closed host (badmin hopen)", tag="hosts",
       reply=HostView, errors=(404,))
async def open_host(svc: Services, req: Any, name: str) -> HostView:
    return await _admin(svc, req, name, "open")


@route("DELETE", HOST, "hosts.admin", summary="Remove a host (refused with 409 while jobs run there)",
       tag="hosts", status=204, errors=(404, 409))
async def remove_host(svc: Services, req: Any, name: str) -> Reply:
    await svc.call(req, Op.HOSTS, S.HostsRequest(names=[name]))  # 404 for an unknown host
    await svc.call(req, Op.HOST_ADMIN, writes.host_admin([name], "remove", key=idempotency_key(req)))
    req.context.audit_result = f"host {name} removed"
    return Reply(None, 204)


@route("GET", "/v1/queues", "queues.read", summary="Queues, the default one, and job counts by state",
       tag="queues", reply=S.QueuesReply)
async def list_queues(svc: Services, req: Any) -> S.QueuesReply:
    return await svc.call(req, Op.QUEUES)


@route("GET", "/v1/fairshare", "queues.read", summary="The share trees: shares, decayed usage and priority, "
       "as the scheduler's round computes them (xce fairshare)", tag="queues", reply=S.FairshareReply)
async def fairshare(svc: Services, req: Any) -> S.FairshareReply:
    return await svc.call(req, Op.FAIRSHARE)


@route("GET", "/v1/limits", "queues.read", summary="Each limit's use per principal and the pending jobs it "
       "holds (xce limits)", tag="queues", reply=list[S.LimitRow])
async def limits(svc: Services, req: Any) -> list[S.LimitRow]:
    return (await svc.call(req, Op.LIMITS)).rows


@route("GET", "/v1/status", "cluster.read", summary="Controllers, leader, term; hosts and jobs by state",
       tag="cluster", reply=S.StatusReply)
async def status(svc: Services, req: Any) -> S.StatusReply:
    s = await svc.call(req, Op.STATUS)
    if not s.rest_url:
        s.rest_url = svc.conf.url
    return s
