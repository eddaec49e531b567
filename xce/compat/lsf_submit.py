"""bsub: LSF's submit over XCE, in its own module so that the command loads no other (docs/compat.md).

A workflow tool runs bsub once per job, so the script `xce compat path lsf` writes for it
imports this module, not xce/compat/lsf.py with every other LSF command (~0.4 ms of a
~20 ms process).  Options and ``#BSUB`` lines go through xce/core/jobspec (options.py,
directives.py, bsub.py), the one parser of every door; the job reaches the controller
through its local door when it can (xce/compat/fast.py, via ``Session.submit``).

Lazy imports: bsub loads the parser when it parses, and the client only for -K and -I.
"""

from __future__ import annotations

import os
import sys

from xce.compat import mapping
from xce.compat.session import Refused, Session, run

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: the commands start in ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

BAD = 255  # LSF's commands exit 255 on bad input and unknown jobs


def _file_script(command: list[str]) -> str | None:
    """``bsub FILE``: the file's text when it is a job script (text, as `xce submit` decides)."""
    from xce.site.local import script_file

    if not command or not script_file(command[0]):
        return None
    try:
        with open(command[0], encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise Refused(f"cannot read the job script {command[0]}: {e}") from None


def bsub_spec(argv: list[str], stdin_script: Callable[[], str | None]) -> tuple[dict[str, Any], Any]:
    """bsub's argv (and script) -> JobSpec fields, and the BsubRequest (for -K), by the one builder
    (xce/core/jobspec/build.py) that `xce submit` uses; a trailing command string runs by /bin/sh -c."""
    from xce.core.jobspec.build import Submission, bsub_job
    from xce.core.jobspec.options import parse_bsub_args

    cli, command = parse_bsub_args(argv)
    script = stdin_script() if not command else _file_script(command)
    if not command and not script:
        raise Refused("no command given (bsub [options] COMMAND, bsub FILE, or bsub < FILE)")
    words = command if script is not None else (["/bin/sh", "-c", " ".join(command)] if command else [])
    built = bsub_job(cli, Submission(command=words, script=script, environ=dict(os.environ), cwd=os.getcwd()),
                     mem_unit=mapping.LSF_UNIT_FOR_LIMITS)
    fields = dict(built.fields)
    fields.setdefault("name", " ".join(command) if command else "")
    return fields, built.request


def _read_stdin() -> str | None:
    if sys.stdin is None or sys.stdin.isatty():
        return None
    return sys.stdin.read() or None


def bsub(s: Session, argv: list[str]) -> int:
    fields, req = bsub_spec(argv, _read_stdin)
    job_id, queue = s.submit(fields)
    print(f"Job <{job_id}> is submitted to queue <{queue}>.", flush=True)
    if not (req.wait or req.interactive):
        return 0
    # -K and -I as `xce submit` does them: one implementation (xce/client/interactive.py)
    from xce.client import make_spec
    from xce.client.interactive import follow_job, wait_for_job

    if not req.interactive:
        return wait_for_job(s.client, job_id)
    return follow_job(s.client, job_id, make_spec(**fields), s.state_dir)


def main(name: str, argv: list[str]) -> int:
    return run(name, bsub, argv, BAD)
