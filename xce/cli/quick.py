"""`xce submit` through the controller's local door, without pyzmq, msgspec or the big modules.

A submit from the shell used to cost ~250 ms, nearly all of it imports.  This
path parses only the options it knows, reads the cluster file's two keys and the
stored token, and sends one SUBMIT over the ``ipc://`` door (xce/site/local.py) with
the stdlib speaker (xce/proto/zmtp.py, xce/proto/lite.py).

It either finishes the command exactly as the full path would (same line, same
error message, same exit code) or returns ``Fallback`` and the full path in
xce/cli/main.py runs instead: no door, an option or a form it does not handle (a job
script given as FILE or on stdin, an array name, any bsub option without a ``door`` field in
xce/core/jobspec/options.py's table),
``--dry-run``/``--json``, ``XCE_CONTROLLER``, a token only xce.security.auth can mint, a
leader without a door, or any reply it did not expect.  Once a request has left,
the fallback carries the same idempotency key, so the job is never submitted twice.

Lazy imports: this is `xce submit`'s stdlib-only fast path; anything more loads only when it must fall back.
"""

from __future__ import annotations

import os
import sys

from xce.core.jobspec.options import BSUB_OPTIONS, LONG_SPELLINGS

SUBMIT, OK, ERROR = 10, 1, 2  # xce/proto/opcodes.py; tests/test_quick_submit.py checks them
# The Structs' field order (xce/proto/schema.py SubmitRequest, xce/core/model.py JobSpec): msgspec
# writes the fields in this order, a JobSpec's only where they differ from these defaults
# (omit_defaults), and the door's bytes must equal the full path's (``spec_of`` drops them too).
SPEC_DEFAULTS: dict[str, object] = {
    "command": [], "name": "", "user": "", "queue": "", "slots": 1, "resreq": "", "mem_limit": None,
    "cwd": "", "env": {}, "stdout": None, "stderr": None, "rerunnable": None,
    "priority": 0, "run_limit": None, "run_estimate": None, "project": "", "group": "",
    "depend": None, "array": None, "index": 0, "stdout_overwrite": False, "stderr_overwrite": False,
    "submit_host": "", "script": "", "reclaim": False, "exclusive": False, "pre_exec": "",
    "dep_never_kill": False, "hold": False, "warn_signal": 0, "warn_time": 0.0, "warn_to": "", "cpus_per_task": 1}
# Option -> the JobSpec field this path sets from its word: the one table's ``door`` fields
# (xce/core/jobspec/options.py, stdlib only), and `xce submit`'s long spellings of them.
_DOOR = {name: spec.door for name, spec in BSUB_OPTIONS.items() if spec.door}
VALUE_OPTIONS = {**_DOOR, **{long: _DOOR[short] for long, short in LONG_SPELLINGS.items() if short in _DOOR}}


class Fallback:
    """The full path must serve; ``key`` is the idempotency key it must reuse ("" if none was sent)."""

    __slots__ = ("reason", "key")

    def __init__(self, reason: str, key: str = "") -> None:
        self.reason = reason
        self.key = key


class Args:
    """What the fast path takes from the command line (no typing.NamedTuple: ~5 ms of imports)."""

    __slots__ = ("state_dir", "timeout", "fields", "rerunnable", "command")

    def __init__(self, state_dir: str, timeout: float, fields: dict[str, str], rerunnable: bool,
                 command: list[str]) -> None:
        self.state_dir = state_dir
        self.timeout = timeout
        self.fields = fields
        self.rerunnable = rerunnable
        self.command = command


GLOBAL_OPTIONS = ("--state-dir", "--timeout")  # before `submit` or among its options (xce/cli/parsing.py)


def parse(argv: list[str]) -> Args | None:
    """``[global options] submit [options] [--] CMD...`` in the forms argparse reads alike; None otherwise."""
    glob: dict[str, str] = {"--state-dir": os.environ.get("XCE_STATE_DIR") or "", "--timeout": "10"}
    i = 0
    try:
        while argv[i] != "submit":
            opt, eq, value = argv[i].partition("=")
            if opt not in GLOBAL_OPTIONS:
                return None
            if not eq:
                i += 1
                value = argv[i]
            if value.startswith("-"):
                return None
            glob[opt] = value  # a repeated global option: the last one wins, as in argparse
            i += 1
        i += 1
        fields: dict[str, str] = {}
        rerunnable = False
        while i < len(argv) and argv[i].startswith("-"):
            arg = argv[i]
            if arg == "--":
                i += 1
                break
            if arg == "--rerunnable":
                rerunnable = True
                i += 1
                continue
            opt, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
            if opt not in GLOBAL_OPTIONS and (opt not in VALUE_OPTIONS or VALUE_OPTIONS[opt] in fields):
                return None  # unknown, abbreviated, glued (-n2) or repeated: argparse decides
            if not eq:
                i += 1
                value = argv[i]
            if value.startswith("-"):
                return None
            if opt in GLOBAL_OPTIONS:
                glob[opt] = value
            else:
                fields[VALUE_OPTIONS[opt]] = value
            i += 1
        timeout = float(glob["--timeout"])
    except (IndexError, ValueError):
        return None
    command = argv[i:]
    if not command or command[0].startswith("-") or timeout != timeout:
        return None
    return Args(glob["--state-dir"], timeout, fields, rerunnable, command)


def spec_of(a: Args) -> dict[str, object] | None:
    """The JobSpec as cmd_submit and make_spec build it; None if a value needs the full path's checks."""
    from xce.site.local import script_file, unix_user

    if script_file(a.command[0]) or "[" in a.fields.get("name", "") or "]" in a.fields.get("name", ""):
        return None  # a job script, or an array: the full path's builder decides
    if "pre_exec" in a.fields and (not a.fields["pre_exec"].strip() or "\0" in a.fields["pre_exec"]):
        return None  # the full path's -E parser names what is wrong
    spec = dict(SPEC_DEFAULTS)
    spec.update(command=list(a.command), user=unix_user(), cwd=os.getcwd(), env=dict(os.environ),
                submit_host=os.uname().nodename)  # socket.gethostname(), as make_spec sets it
    for key, value in a.fields.items():
        if value or key not in ("stdout", "stderr", "cwd"):  # cmd_submit drops these when empty
            spec[key] = value
    try:
        spec["slots"] = int(a.fields.get("slots", "1"))
        if spec["slots"] < 1:  # the full path's bsub parser names -n
            return None
        if "mem_limit" in a.fields:
            from xce.core.units import parse_mem

            spec["mem_limit"] = parse_mem(a.fields["mem_limit"])
            if spec["mem_limit"] <= 0:  # the full path's -M parser names it
                return None
    except Exception:  # noqa: BLE001 - the full path reports it, in its own words
        return None
    if a.fields.get("cwd"):
        spec["cwd"] = os.path.abspath(a.fields["cwd"])
    if a.rerunnable:
        spec["rerunnable"] = True
    return wire_spec(spec)


def wire_spec(spec: dict[str, object]) -> dict[str, object]:
    """A JobSpec's fields (in SPEC_DEFAULTS' order) as msgspec writes them: a 16-bit map of the
    fields not at their defaults (0 is no False: the default's type counts too)."""
    from xce.proto.lite import Wide

    return Wide((k, v) for k, v in spec.items()
                if k == "command" or v != SPEC_DEFAULTS[k] or type(v) is not type(SPEC_DEFAULTS[k]))


def submit(argv: list[str]) -> int | Fallback:
    if os.environ.get("XCE_QUICK") == "0":
        return Fallback("XCE_QUICK=0")
    if os.environ.get("XCE_CONTROLLER"):
        return Fallback("XCE_CONTROLLER names the controllers")
    a = parse(argv)
    if a is None:
        return Fallback("options the fast path does not parse")
    from xce.site.local import (
        CLUSTER_FILE,
        read_cluster_keys,
        state_dir_default,
        stored_token_if_fresh,
    )

    sd = a.state_dir or state_dir_default()
    keys = read_cluster_keys(os.path.join(sd, CLUSTER_FILE), {("", "state_dir"), ("controller", "address")})
    if not keys or ("controller", "address") not in keys:
        return Fallback("no cluster file with a controller address")
    home = keys.get(("", "state_dir")) or sd
    token = stored_token_if_fresh(home)
    if token is None:
        return Fallback("the token must be minted")
    spec = spec_of(a)
    if spec is None:
        return Fallback("a value the full path must check")
    from xce.proto.idempotency import new_key

    key = new_key()  # sent on every retry, and handed to the full path if it must take over
    return send(home, keys[("controller", "address")], submit_body(spec, key), token, a.timeout, key)


def submit_body(spec: dict[str, object], key: str) -> dict[str, object]:
    """xce/proto/writes.py's ``submit`` as a dict, in the Struct's field order (same bytes)."""
    return {"jobs": [spec], "dry_run": False, "key": key}


def send(home: str, address: str, body: dict[str, object], token: str, timeout: float, key: str) -> int | Fallback:
    """SUBMIT through the door of ``address``, then of the leader it names; every fallback keeps ``key``."""
    from xce.transport.door import ask

    answer = ask(home, address, SUBMIT, body, token, timeout)
    if isinstance(answer, str):
        return Fallback(answer, key)
    op, rbody = answer
    if op == OK:
        line = _submitted(rbody)
        if line is None:
            return Fallback("an OK reply that is not a SubmitReply", key)
        print(line)
        return 0
    assert isinstance(rbody, dict)  # ask returns an ErrorReply's body otherwise
    return _failed(rbody["code"], rbody["message"])


def _submitted(body: object) -> str | None:
    """cmd_submit's line for a SubmitReply of one job; None for anything else."""
    if not isinstance(body, dict):
        return None
    ids, queues = body.get("ids"), body.get("queues")
    if not (isinstance(ids, list) and isinstance(queues, list) and len(ids) == len(queues) == 1
            and type(ids[0]) is int and isinstance(queues[0], str)):
        return None
    return f"Job <{ids[0]}> is submitted to queue <{queues[0]}>."


def _failed(code: str, message: str) -> int:
    """As main() reports an error reply: exit 2 for the InvalidRequest family, else 1."""
    from xce.core.errors import ERROR_CLASSES, InvalidRequest, XceError

    print(f"xce submit: {message}", file=sys.stderr)
    return 2 if issubclass(ERROR_CLASSES.get(code, XceError), InvalidRequest) else 1
