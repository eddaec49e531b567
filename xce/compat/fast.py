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


def _door() -> tuple[str, str, str] | None:
    """(home, controller address, token) when the local door may serve; None: the full path must."""
    if os.environ.get("XCE_QUICK") == "0" or os.environ.get("XCE_CONTROLLER"):
        return None
    from xce.site.local import CLUSTER_FILE, read_cluster_keys, state_dir_default, stored_token_if_fresh

    sd = state_dir_default()
    keys = read_cluster_keys(os.path.join(sd, CLUSTER_FILE), {("", "state_dir"), ("controller", "address")})
    if not keys or ("controller", "address") not in keys:
        return None
    home = keys.get(("", "state_dir")) or sd
    token = stored_token_if_fresh(home)
    if token is None:
        return None
    return home, keys[("controller", "address")], token


def _answer(door: tuple[str, str, str], op: int, body: dict[str, Any], timeout: float) -> object:
    """The OK reply's body; None if the full path must serve; the controller's error raised."""
    from xce.transport.door import OK, ask

    home, address, token = door
    answer = ask(home, address, op, body, token, timeout)
    if isinstance(answer, str):
        return None
    rop, rbody = answer
    if rop == OK:
        return rbody
    from xce.core.errors import XceError

    assert isinstance(rbody, dict)
    fields_ = {k: v for k, v in rbody.items() if k not in ("code", "message")}
    raise XceError.from_wire(rbody["code"], rbody["message"], fields_)


def submit(fields: dict[str, Any], key: str, timeout: float = 10.0) -> tuple[int, str] | None:
    door = _door()
    if door is None:
        return None
    from xce.site.local import unix_user
    from xce.transport.door import SUBMIT

    spec = {"user": unix_user(), "submit_host": os.uname().nodename, **_builtins(fields)}
    body = _answer(door, SUBMIT, {"jobs": [spec], "dry_run": False, "key": key}, timeout)
    return None if body is None else _submitted(body)


def jobs_body(ids: list[int], user: str | None, all_: bool, fields: list[str]) -> dict[str, Any]:
    """A JobsRequest as a dict, its keys in the Struct's order (tests/test_lite.py checks it)."""
    return {"ids": ids, "user": user, "all": all_, "fields": fields}


class Row:
    """One job's named fields (a JobView's attributes, no more): what the formatters read."""

    def __init__(self, fields: list[str], values: list[Any]) -> None:
        self.__dict__.update(zip(fields, values))


def jobs(ids: list[int], user: str | None, all_: bool, fields: list[str], timeout: float = 60.0) -> list[Row] | None:
    """A JOBS naming ``fields`` through the door -> one Row per job; None: the full path must serve
    (no door, or a reply that is not rows of those fields)."""
    door = _door()
    if door is None:
        return None
    from xce.transport.door import JOBS

    body = _answer(door, JOBS, jobs_body(ids, user, all_, fields), timeout)
    rows = body.get("rows") if isinstance(body, dict) else None
    if not isinstance(rows, list) or any(not isinstance(r, list) or len(r) != len(fields) for r in rows):
        return None
    return rows_of(fields, rows)


def rows_of(fields: list[str], rows: list[list[Any]]) -> list[Row]:
    """Rows as objects; a field that holds a list of Structs (a JobView's ``accounts``: maps on
    the wire) holds Rows of theirs, so formatters read ``a.host`` either way."""
    nested = [i for i, f in enumerate(fields) if f in _STRUCT_LISTS]
    if nested:
        for r in rows:
            for i in nested:
                if isinstance(r[i], list):
                    r[i] = [Row(list(a), list(a.values())) if isinstance(a, dict) else a for a in r[i]]
    return [Row(fields, r) for r in rows]


_STRUCT_LISTS = {"accounts"}  # JobView's fields that are lists of Structs (xce/core/views.py)


def arrays(ids: list[int], user: str | None, timeout: float = 60.0) -> list[Row] | None:
    """Each array's summary (ArrayView's fields) through the door; None: the full path must serve."""
    door = _door()
    if door is None:
        return None
    from xce.transport.door import JOBS

    body = _answer(door, JOBS, {"ids": ids, "user": user, "arrays": True, "arrays_only": True}, timeout)
    found = body.get("arrays") if isinstance(body, dict) else None
    if not isinstance(found, list) or not all(isinstance(a, dict) for a in found):
        return None
    return [Row(list(a), list(a.values())) for a in found]


def _submitted(body: object) -> tuple[int, str] | None:
    if not isinstance(body, dict):
        return None
    ids, queues = body.get("ids"), body.get("queues")
    if isinstance(ids, list) and isinstance(queues, list) and len(ids) == len(queues) == 1 \
            and type(ids[0]) is int and isinstance(queues[0], str):
        return ids[0], queues[0]
    return None
