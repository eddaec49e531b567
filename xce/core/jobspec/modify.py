"""What a job may still be changed in, and how each door's words become the change: one place
for `xce modify`, LSF's ``bmod`` and Slurm's ``scontrol update`` (docs/compat.md).

``-M`` (the memory limit) goes by MODIFY, any time; the rest only while the job pends, by
MODIFY_SPEC, whose fields are ``MODIFY_FIELDS``' values.  bsub's options are parsed by the
one bsub grammar (bsub.py); scontrol's ``Key=value`` words by the Slurm grammars (the time
and dependency parsers sbatch uses), the dependency written back as ``-w`` text, which the
controller parses (once, as for bmod -w).  Pure: no I/O.
"""

from __future__ import annotations

from xce.core.jobspec.bsub import bsub_request
from xce.core.jobspec.errors import DirectiveError, JobSpecError
from xce.core.jobspec.options import OptionSet
from xce.core.jobspec.runlimit import parse_slurm_time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (plain.py says why)
if TYPE_CHECKING:
    from typing import Any

# bmod's options that change a pending job, and the ModifySpecRequest field each sets.
MODIFY_FIELDS = {"-R": "resreq", "-n": "slots", "-q": "queue", "-J": "name", "-W": "run_limit",
                 "-sp": "priority", "-w": "depend", "-E": "pre_exec", "-En": "pre_exec"}


def bmod_changes(opts: OptionSet, *, mem_unit: str = "MB") -> tuple[dict[str, Any], int | None, bool]:
    """bmod's options -> (ModifySpecRequest fields, -M bytes or None, whether -M was given)."""
    extra = sorted(set(opts.values) - set(MODIFY_FIELDS) - {"-M"})
    if extra:
        raise DirectiveError(f"modify: {extra[0]} cannot be changed (-M and, for a pending job, "
                             f"{' '.join(MODIFY_FIELDS)})")
    values = dict(opts.values)
    depend = values.pop("-w", None)
    req = bsub_request(OptionSet(values=values, origins=dict(opts.origins)), mem_unit=mem_unit)
    changes: dict[str, Any] = {field: getattr(req, field) for option, field in MODIFY_FIELDS.items()
                               if option in values and option != "-En"}
    if depend is not None:
        changes["depend"] = depend  # the controller parses it, once (an empty one drops it)
    if "-En" in values:
        if "-E" in values:
            raise DirectiveError("modify: -E sets the pre-execution command and -En drops it; give one")
        changes["pre_exec"] = ""
    return changes, req.mem_limit, "-M" in values


# scontrol update's keys (any case) -> the bsub option that means the same, or a Slurm parser's field.
SCONTROL_KEYS = {"timelimit": "run_limit", "partition": "-q", "jobname": "-J", "name": "-J",
                 "numtasks": "-n", "numcpus": "-n", "priority": "-sp", "dependency": "depend"}


def scontrol_changes(words: list[str], job_name: str = "", cpus_per_task: int = 1) -> dict[str, Any]:
    """``TimeLimit=30 Partition=short ...`` -> ModifySpecRequest fields; any other key refused by name.
    ``job_name``: the job's own, for ``Dependency=singleton``; ``cpus_per_task``: its sbatch -c, as
    ``NumTasks`` counts tasks and XCE's slots are tasks x cpus per task (``NumCPUs`` counts slots)."""
    changes: dict[str, Any] = {}
    name = job_name
    for word in words:
        key, eq, value = word.partition("=")
        what = SCONTROL_KEYS.get(key.lower())
        if not eq or what is None:
            raise DirectiveError(f"Update of this parameter is not supported: {word} (XCE changes "
                                 "TimeLimit, Partition, JobName, NumTasks, NumCPUs, Priority and Dependency "
                                 "of a pending job)")
        if what == "run_limit":
            changes["run_limit"] = parse_slurm_time(value, key)
        elif what == "depend":
            changes["depend"] = _depend_text(value, name)
        elif key.lower() == "numtasks" and value.isdigit():
            changes.update(_as_bsub(word, what, str(int(value) * cpus_per_task)))
        else:
            changes.update(_as_bsub(word, what, value))
            name = changes.get("name", name)
    return changes


def _as_bsub(word: str, option: str, value: str) -> dict[str, Any]:
    """One ``Key=value`` through bsub's grammar; its error names the word as given."""
    try:
        return bmod_changes(OptionSet(values={option: value}, origins={option: "command line"}))[0]
    except JobSpecError as e:
        raise DirectiveError(f"{word}: {e.message.split(': ', 1)[-1]}") from None


def _depend_text(value: str, job_name: str) -> str:
    """Slurm's dependency as ``-w`` text ("" drops it, as Slurm's ``Dependency=``)."""
    if not value:
        return ""
    from xce.core.jobspec.depend import format_expr  # lazy: the AST is msgspec Structs (plain.py says why)
    from xce.core.jobspec.slurm import parse_slurm_dependency  # lazy: as format_expr

    return format_expr(parse_slurm_dependency(value, job_name))
