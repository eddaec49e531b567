"""bsub and sbatch through the controller's local door: no pyzmq, no xce.client.

Workflow tools run bsub or sbatch once per job, so each costs what its imports cost; the
full path (xce.client) loads pyzmq, the codec and the domain model.  ``submit`` sends the
JobSpec fields the front-end built (the same dict it would give ``make_spec``) as one SUBMIT
through xce/transport/door.py, the door `xce submit` uses.  It returns ``(id, queue)``,
raises the error the controller answered with (the same class and message as the full
path), or returns None when the full path must serve: ``XCE_QUICK=0``, ``XCE_CONTROLLER``,
no cluster file or door, a token only xce.security.auth can mint, anything unexpected.
The caller then submits with the same idempotency key, so a job is never submitted twice.
The controller checks the spec as for any door (model.check_spec).

Lazy imports: bsub/sbatch try the local door with the stdlib only; the rest loads on fallback.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: the commands start in ms
if TYPE_CHECKING:
    from typing import Any


def _builtins(fields: dict[str, Any]) -> dict[str, Any]:
    """The fields as msgpack's plain types; a dependency AST through msgspec (already loaded)."""
    if fields.get("depend") is None:
        return {k: v for k, v in fields.items() if k != "depend"}
    import msgspec

    return {**fields, "depend": msgspec.to_builtins(fields["depend"])}


def submit(fields: dict[str, Any], key: str, timeout: float = 10.0) -> tuple[int, str] | None:
    if os.environ.get("XCE_QUICK") == "0" or os.environ.get("XCE_CONTROLLER"):
        return None
    from xce.site.local import CLUSTER_FILE, read_cluster_keys, state_dir_default, stored_token_if_fresh, unix_user

    sd = state_dir_default()
    keys = read_cluster_keys(os.path.join(sd, CLUSTER_FILE), {("", "state_dir"), ("controller", "address")})
    if not keys or ("controller", "address") not in keys:
        return None
    home = keys.get(("", "state_dir")) or sd
    token = stored_token_if_fresh(home)
    if token is None:
        return None
    spec = {"user": unix_user(), "submit_host": os.uname().nodename, **_builtins(fields)}
    from xce.transport.door import OK, SUBMIT, ask

    answer = ask(home, keys[("controller", "address")], SUBMIT, {"jobs": [spec], "dry_run": False, "key": key},
                 token, timeout)
    if isinstance(answer, str):
        return None
    op, body = answer
    if op == OK:
        return _submitted(body)
    from xce.core.errors import XceError

    assert isinstance(body, dict)
    fields_ = {k: v for k, v in body.items() if k not in ("code", "message")}
    raise XceError.from_wire(body["code"], body["message"], fields_)


def _submitted(body: object) -> tuple[int, str] | None:
    if not isinstance(body, dict):
        return None
    ids, queues = body.get("ids"), body.get("queues")
    if isinstance(ids, list) and isinstance(queues, list) and len(ids) == len(queues) == 1 \
            and type(ids[0]) is int and isinstance(queues[0], str):
        return ids[0], queues[0]
    return None
