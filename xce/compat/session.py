"""What every front-end command shares: the client, the cluster's config, exit codes.

A command speaks to the cluster exactly as `xce` does: the state directory from
``XCE_STATE_DIR`` (the shims set it to their own cluster's when it is unset), the
cluster file's endpoints and the stored token, through ``xce.client.Client``.
``run`` maps XCE's error tree once per command: the message goes to stderr under
the command's name; bad input exits 255 for LSF commands (as LSF's do) and 1 for
Slurm's.

CLEAN_PERIOD: finished jobs older than ``[compat] clean_period`` seconds are no longer
listed (``visible``), as LSF forgets them; younger ones are, whatever was asked,
because tools poll a job until they see its end.

Lazy imports: the client and its wire stack load only when a command reaches the cluster.
"""

from __future__ import annotations

import os
import sys
import time

from xce.core.errors import InvalidRequest, XceError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: the commands start in ms
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, NoReturn

__all__ = ["Refused", "Session", "apply_env", "leave", "run", "visible"]


def apply_env(spec: Any, environ: Any) -> dict[str, str]:
    """The one -env policy (xce/core/jobspec/build.py), for sbatch's --export; loaded when used,
    because the listings (bjobs, squeue) need neither it nor the msgspec it brings."""
    from xce.core.jobspec.build import apply_env as policy

    return policy(spec, environ)


class Refused(InvalidRequest):
    """An option or command the front-end does not serve; the message names it and says why."""


class Session:
    """A lazily made Client and the cluster's config."""

    def __init__(self) -> None:
        self._client: Any = None
        self._cfg: Any = None

    @property
    def cfg(self) -> Any:
        if self._cfg is None:
            from xce.site.config import cluster_config

            self._cfg = cluster_config(None)
        return self._cfg

    @property
    def state_dir(self) -> str:
        """The cluster's state directory, as `xce` finds it."""
        from xce.site.local import state_dir_default

        return str(self.cfg.state_dir or state_dir_default())

    @property
    def client(self) -> Any:
        if self._client is None:
            from xce.client import Client

            self._client = Client()
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def submit(self, fields: dict[str, Any]) -> tuple[int, str]:
        """One job (JobSpec fields, as make_spec takes them) -> (id, queue): through the local
        door when it can serve (xce/compat/fast.py), else through xce.client, with one key."""
        from xce.compat import fast
        from xce.proto.idempotency import new_key

        key = new_key()
        done = fast.submit(_plain_array(fields), key)
        _debug_path("submit", "door" if done is not None else "full")
        if done is not None:
            return done
        from xce.client import make_spec
        from xce.proto import writes
        from xce.proto.opcodes import Op

        reply = self.client.request(Op.SUBMIT, writes.submit([make_spec(**fields)], key=key))
        return reply.ids[0], reply.queues[0]

    def jobs(self, ids: Sequence[int] = (), *, finished: bool = True, user: str | None = None,
             reads: Sequence[str] = (), aged: bool = True) -> list[Any]:
        """Jobs the front-ends list: unfinished ones, and finished ones within CLEAN_PERIOD
        (``aged=False``: every finished job the controller keeps, for bacct's records).

        ``reads``: the JobView fields the caller's format reads (all it may touch); the controller
        then sends only those, through the local door when it can serve (xce/compat/fast.py),
        and each job is a ``fast.Row``.  Empty, or no door: full views through xce.client."""
        from xce.core.errors import NotFound

        try:
            views = self._rows(ids, finished, user, reads) if reads else None
            _debug_path("jobs", "full" if views is None else "door")
            if views is None:
                views = self.client.jobs(ids=list(ids), all=finished or bool(ids), user=user)
        except NotFound:  # the controller refuses a lone unknown id outright
            return []
        if not aged or not any(v.end_time is not None for v in views):
            return views  # nothing to age out: the config need not be read
        return visible(views, self.cfg.compat.clean_period, time.time())


    def arrays(self, ids: Sequence[int] = (), user: str | None = None) -> list[Any]:
        """Each job array's summary (ArrayView), through the door when it can serve."""
        from xce.compat import fast
        from xce.core.jobids import split_id

        from xce.core.errors import NotFound

        arrays = sorted({split_id(i)[0] for i in ids})  # an element's id asks for its array
        try:
            found = fast.arrays(arrays, user)
            return self.client.arrays(ids=arrays, user=user) if found is None else found
        except NotFound:  # the controller refuses a lone unknown id outright
            return []

    def _rows(self, ids: Sequence[int], finished: bool, user: str | None, reads: Sequence[str]) -> list[Any] | None:
        from xce.compat import fast

        fields = sorted({*reads, "end_time"})  # end_time: CLEAN_PERIOD ages finished jobs out (visible)
        return fast.jobs(list(ids), user, finished or bool(ids), fields)


def _plain_array(fields: dict[str, Any]) -> dict[str, Any]:
    """The fields with an array (an ArraySpec, so msgspec is loaded already) as plain lists and
    ints, which the door's stdlib encoder takes; the controller reads them back as an ArraySpec."""
    if fields.get("array") is None:
        return fields
    import msgspec

    return {**fields, "array": msgspec.to_builtins(fields["array"])}


def job_ids(words: Sequence[str]) -> list[int]:
    """``12``, ``12[3]``, ``12[1-5,7]`` (LSF) and ``12_3`` (Slurm) -> the job ids to ask for."""
    from xce.core.arrays import target_ids
    from xce.core.jobspec.arrays import parse_job_target
    from xce.core.jobspec.errors import ArraySpecError

    out: list[int] = []
    for word in words:
        try:
            out += target_ids(parse_job_target(word))
        except ArraySpecError as e:
            raise Refused(f"{word}: Illegal job ID ({e.message})") from None
    return out


def _debug_path(what: str, path: str) -> None:
    """With XCE_DEBUG_PATH set, say which path served the submit or the listing and whether
    pyzmq was loaded."""
    if os.environ.get("XCE_DEBUG_PATH"):
        print(f"{what} path {path}; zmq {'loaded' if 'zmq' in sys.modules else 'not loaded'}", file=sys.stderr)


def visible(views: list[Any], clean_period: float, now: float) -> list[Any]:
    return [v for v in views if v.end_time is None or now - v.end_time <= clean_period]


def run(name: str, body: Callable[[Session, list[str]], int], argv: list[str], bad_input_rc: int) -> int:
    """Run one command; XCE errors become ``name: message`` on stderr."""
    session = Session()
    try:
        return body(session, argv)
    except XceError as e:
        print(f"{name}: {e.message}", file=sys.stderr)
        return bad_input_rc if isinstance(e, InvalidRequest) else 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 141
    finally:
        session.close()


def leave(rc: int) -> NoReturn:
    """End the command's process with ``rc`` (what each script of `xce compat path` calls).

    Once its output is flushed, a command that started no thread and registered nothing to
    run at exit (the door's paths load neither ``threading`` nor ``atexit``) has nothing left
    for the interpreter's shutdown but freeing its modules and objects one by one: about
    3 ms of bsub's ~20 (docs/benchmarks.md, session 10), so it exits at once.  The full path
    (pyzmq's threads), or a flush that fails (a closed pipe: reported as before), takes the
    usual exit."""
    if "threading" in sys.modules or "atexit" in sys.modules:
        sys.exit(rc)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - the usual exit reports it, as it did before
        sys.exit(rc)
    os._exit(rc)
