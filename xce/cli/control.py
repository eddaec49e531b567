"""`xce stop|resume|requeue|switch|top|bottom|modify|hist`: job control over xce.client (LSF's
bstop, bresume, brequeue, bswitch, btop, bbot, bmod, bhist).

Each command is a thin door: its words, one client call, LSF's line per job (or ``--json``:
the client's answer as it is).  The transitions and their refusals are xce/core/state.py's;
a refusal comes back as an error naming the job and its state, mapped once in
xce/cli/main.py.  ``xce modify``'s options are bsub's, parsed by xce/core/jobspec (one
parser for every door).

Lazy imports: the job-control commands load the wire and the formatters only when run, so `xce` starts fast.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from xce.core.arrays import element_text
from xce.core.jobspec.errors import DirectiveError
from xce.core.jobspec.modify import bmod_changes
from xce.core.jobspec.options import OptionSet

# What each control command prints for a job, from the state the controller answered with.
SAID = {"stop": "is being stopped", "resume": "is being resumed", "requeue": "is being requeued"}


def job_ids(words: list[str]) -> list[int]:
    """Job ids as given: ``12`` (a job, or a whole array), ``12[3]``, ``12[1-5,7]``, ``12_3`` (its elements)."""
    from xce.core.arrays import target_ids
    from xce.core.jobspec.arrays import parse_job_target

    return [jid for w in words for jid in target_ids(parse_job_target(w))]


def report(results: dict[int, str], action: str, json: bool) -> int:
    from xce.cli.fmt import print_json

    if json:
        print_json({str(k): v for k, v in results.items()})
        return 0
    for jid, state in results.items():
        print(f"Job <{element_text(jid)}> {SAID[action]} (now {state})")
    return 0


def control(c: Any, action: str, words: list[str], json: bool, reason: str = "") -> int:
    ids = job_ids(words)
    if action == "stop":
        results = c.stop(ids)
    elif action == "resume":
        results = c.resume(ids)
    else:
        results = c.requeue(ids, reason=reason)
    return report(results, action, json)


def switch(c: Any, queue: str, words: list[str], json: bool) -> int:
    from xce.cli.fmt import print_json

    results = c.switch(job_ids(words), queue)
    if json:
        print_json({str(k): v for k, v in results.items()})
    else:
        for jid, q in results.items():
            print(f"Job <{element_text(jid)}> is switched to queue <{q}>")
    return 0


def move(c: Any, to: str, word: str, json: bool) -> int:
    from xce.cli.fmt import print_json

    jid = job_ids([word])[0]
    detail = c.move(jid, to)
    if json:
        print_json({"id": jid, "to": to, "detail": detail})
    else:
        print(f"Job <{element_text(jid)}> has been moved to the {to} of its queue ({detail})")
    return 0


def modify_changes(opts: OptionSet, words: list[str]) -> tuple[dict[str, Any], int | None, bool, list[int]]:
    """bmod's options and words -> (ModifySpecRequest fields, -M bytes or None, whether -M was given,
    the job ids: one job, a whole array, or each element of ``ID[LIST]``)."""
    if len(words) != 1:
        raise DirectiveError("modify: give one job id after the options (xce modify [options] ID)")
    return (*bmod_changes(opts), job_ids(words))


def modify(c: Any, opts: OptionSet, words: list[str], json: bool) -> int:
    from xce.cli.fmt import print_json

    changes, mem, mem_given, ids = modify_changes(opts, words)
    said: list[Any] = []
    for jid in ids:  # a request a job, as bmod of ID[LIST] changes each element
        if mem_given or not changes:  # `xce modify ID` alone removes the memory limit, as before
            c.modify(jid, mem)
        if changes:
            c.modify_spec(jid, **changes)
        said.append({"id": jid, "changed": sorted(changes) + (["mem_limit"] if mem_given or not changes else [])})
        if not json and changes:
            print(f"Parameters of job <{element_text(jid)}> are being changed: {', '.join(sorted(changes))}")
        if not json and (mem_given or not changes):
            print(f"Job <{element_text(jid)}>: memory limit set to {_mem_text(mem)}")
    if json:
        print_json(said[0] if len(said) == 1 else said)
    return 0


def _mem_text(mem: int | None) -> str:
    from xce.core.units import fmt_bytes

    return fmt_bytes(mem) if mem is not None else "none"


def hist(c: Any, words: list[str], json: bool) -> int:
    """bhist -l: every event of each job, with its time and who caused it."""
    from xce.cli.fmt import print_json

    ids = job_ids(words)
    out = {jid: c.hist(jid) for jid in ids}
    if json:
        print_json({str(k): v for k, v in out.items()})
        return 0
    blocks = []
    for jid, events in out.items():
        lines = [f"Job <{element_text(jid)}>:"]
        for e in events:
            when = time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(e.time))
            by = f" by {e.by}" if e.by else ""
            lines.append(f"  {when}: {e.event}{by}" + (f": {e.detail}" if e.detail else ""))
        blocks.append("\n".join(lines))
    print("\n\n".join(blocks), file=sys.stdout)
    return 0
