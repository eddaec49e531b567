"""sbatch: Slurm's submit over XCE, in its own module so that the command loads no other (docs/compat.md).

A workflow tool runs sbatch once per job, so the script `xce compat path slurm` writes for
it imports this module, not xce/compat/slurm.py with squeue's and sacct's formats
(slurm_fmt.py: ~0.7 ms of a ~20 ms process).  Options and ``#SBATCH`` lines go through
xce/core/jobspec/slurm.py and directives.py; this module maps them onto JobSpec fields
(``sbatch_spec``), and the rest of XCE never sees a Slurm word.  srun outside a job
submits through ``sbatch_spec`` too.  Exit codes: 0, or 1 for any failure, as Slurm's.

Lazy imports: sbatch loads each parser when an option needs it, the client only for --wait.
"""

from __future__ import annotations

import os
import sys

from xce.compat import mapping
from xce.compat.session import Refused, Session, apply_env, run

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: the commands start in ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

BAD = 1  # Slurm's commands exit 1 on any failure


def _read_script(command: list[str]) -> tuple[str, str]:
    """(script text, default job name) from the file named first, or stdin."""
    if command:
        try:
            with open(command[0], encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise Refused(f"Unable to open file {command[0]}: {getattr(e, 'strerror', e)}") from None
        name = os.path.basename(command[0])
    else:
        text = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
        name = "sbatch"
    if not text.startswith("#!"):
        raise Refused("This does not look like a batch script.  The first line must start with #! "
                      "followed by the path to an interpreter.")
    return text, name


def _int(opts: dict[str, Any], key: str) -> int | None:
    value = opts.get(key)
    if value is None:
        return None
    if not str(value).isdigit() or int(value) < 1:
        raise Refused(f"{key}={value}: expected a whole number, 1 or more")
    return int(value)


def _layout(opts: dict[str, Any]) -> tuple[int, str]:
    """(slots, span[] part of -R) from --nodes, --ntasks, --ntasks-per-node, --cpus-per-task."""
    nodes = opts.get("--nodes")
    if nodes is not None and not str(nodes).isdigit():
        raise Refused(f"--nodes={nodes}: node ranges (min-max) {mapping.NOT_YET}; give one number")
    n_nodes = int(nodes) if nodes else None
    per_node = _int(opts, "--ntasks-per-node")
    cpus = _int(opts, "--cpus-per-task") or 1
    tasks = _int(opts, "--ntasks") or ((n_nodes or 1) * per_node if per_node else (n_nodes or 1))
    slots = tasks * cpus
    if n_nodes == 1 or tasks == 1:
        return slots, "span[hosts=1]"
    if per_node:
        return slots, f"span[ptile={per_node * cpus}]"
    return slots, ""


def _export(text: str | None) -> Any:
    """--export: ALL (default), NONE, or NAMES with VAR=value, as bsub's -env policy."""
    from xce.core.jobspec.bsub import parse_env

    if not text:
        return parse_env("all")
    items = [i.strip() for i in text.split(",") if i.strip()]
    head = items[0].upper()
    if head in ("ALL", "NIL"):
        return parse_env(", ".join(["all", *items[1:]]))
    if head == "NONE":
        return parse_env(", ".join(["none"]) if len(items) == 1 else ", ".join(items[1:]))
    return parse_env(", ".join(items))


def _path(pattern: str, name: str, user: str, array: bool = False) -> str:
    """A Slurm output pattern -> the worker's (LSF's) form, ``%J`` the id and ``%I`` the index
    (both known at dispatch); ``%x %u`` are filled now.  Outside an array ``%j %J %A`` become
    ``%J`` and ``%a`` is Slurm's NO_VAL.  In an array ``%A`` is the array's id (``%J``), ``%a``
    the index (``%I``), and ``%j %J`` an element's own id, written as Slurm shows it: ``A_I``."""
    from xce.core.jobspec.filenames import slurm_filename

    job, arr, index = 2 ** 62 + 12345, 2 ** 62 + 23456, 2 ** 62 + 34567  # no real id; padding cannot reach
    if not array:
        return slurm_filename(pattern, job_id=job, name=name, user=user).replace(str(job), "%J")
    text = slurm_filename(pattern, job_id=job, array_job_id=arr, index=index, name=name, user=user)
    return text.replace(str(job), "%J_%I").replace(str(arr), "%J").replace(str(index), "%I")


def sbatch_spec(argv: list[str], read: Callable[[list[str]], tuple[str, str]] = _read_script
                ) -> tuple[dict[str, Any], frozenset[str]]:
    """sbatch's argv and script -> JobSpec fields, and which of sbatch's own flags were given
    (``--parsable``, ``--wait``: for the command, not the job)."""
    from xce.core.jobspec.build import STDIN_NAME
    from xce.core.jobspec.directives import sbatch_directives
    from xce.core.jobspec.runlimit import parse_slurm_time
    from xce.core.jobspec.slurm import merge_sbatch_options, parse_sbatch_args
    from xce.site.local import unix_user

    cli, command = parse_sbatch_args(argv)
    script, default_name = read(command)
    opts = merge_sbatch_options(sbatch_directives(script).options, cli).values
    for key in opts:
        if key in mapping.SLURM_REFUSED:
            raise Refused(mapping.SLURM_REFUSED[key])
    name, user = str(opts.get("--job-name") or default_name), unix_user()
    slots, span = _layout(opts)
    array = _array(opts.get("--array"))
    cwd = os.path.abspath(str(opts.get("--chdir") or os.getcwd()))
    fields: dict[str, Any] = {
        # The script is kept as submitted and run by the worker under its #! line (JobSpec.script),
        # as bsub's; command is what was submitted: [FILE, *args], or STDIN's name.
        "script": script, "command": list(command) or [STDIN_NAME], "name": name, "slots": slots, "cwd": cwd,
        "queue": mapping.queue_of(str(opts.get("--partition") or "")),
        "project": mapping.project_of(str(opts.get("--account") or "")),
        "env": apply_env(_export(opts.get("--export")), os.environ),  # type: ignore[arg-type]
        "stdout": _path(str(opts.get("--output") or ("slurm-%A_%a.out" if array else "slurm-%j.out")),
                        name, user, array is not None)}
    if array is not None:
        fields["array"] = array
    if opts.get("--error"):
        fields["stderr"] = _path(str(opts["--error"]), name, user, array is not None)
    if opts.get("--dependency"):
        from xce.core.jobspec.slurm import parse_slurm_dependency

        fields["depend"] = parse_slurm_dependency(str(opts["--dependency"]), name)
    if opts.get("--open-mode") == "truncate":
        fields["stdout_overwrite"] = fields["stderr_overwrite"] = True
    if "--exclusive" in opts:
        fields["exclusive"] = _exclusive(opts["--exclusive"])
    if opts.get("--time"):
        fields["run_limit"] = parse_slurm_time(str(opts["--time"]))
    fields.update(_job_control(opts))
    fields["resreq"] = " ".join(p for p in (_mem(opts, slots), span) if p)
    return fields, frozenset(k for k in ("--parsable", "--wait") if opts.get(k))


def _job_control(opts: dict[str, Any]) -> dict[str, Any]:
    """--hold, --signal and --cpus-per-task as JobSpec fields (only those given)."""
    out: dict[str, Any] = {}
    if opts.get("--hold"):
        out["hold"] = True
    if opts.get("--signal"):
        from xce.core.jobspec.signals import parse_slurm_warning

        out["warn_signal"], out["warn_time"], out["warn_to"] = parse_slurm_warning(str(opts["--signal"]))
    cpus = _int(opts, "--cpus-per-task")
    if cpus and cpus > 1:
        out["cpus_per_task"] = cpus
    return out


def _exclusive(value: Any) -> bool:
    """--exclusive alone: no other job on the job's nodes (bsub -x); =user and =mcs share nodes by owner."""
    if value is True:
        return True
    raise Refused(f"--exclusive={value}: sharing nodes by user or MCS label {mapping.NOT_YET}; "
                  "give --exclusive alone (no other job on the job's nodes)")


def _array(text: Any) -> Any:
    """--array=0-15%4 (or -a) -> the job model's ArraySpec (xce/core/jobspec/arrays.py), or None."""
    if text is None:
        return None
    from xce.core.jobspec.arrays import parse_slurm_array

    return parse_slurm_array(str(text))


def _mem(opts: dict[str, Any], slots: int) -> str:
    """--mem (per node) and --mem-per-cpu (per slot) -> rusage[mem=...]."""
    if opts.get("--mem") and opts.get("--mem-per-cpu"):
        raise Refused("--mem and --mem-per-cpu are mutually exclusive")
    if opts.get("--mem"):
        return f"rusage[mem={mapping.slurm_mem_option(str(opts['--mem']))}/host]"
    if opts.get("--mem-per-cpu"):
        return f"rusage[mem={mapping.slurm_mem_option(str(opts['--mem-per-cpu']))}/task]"
    return ""


def sbatch(s: Session, argv: list[str]) -> int:
    fields, flags = sbatch_spec(argv)
    job_id, _ = s.submit(fields)
    print(job_id if "--parsable" in flags else f"Submitted batch job {job_id}", flush=True)
    if "--wait" not in flags:
        return 0
    from xce.client.interactive import job_exit_code  # --wait: as bsub -K (one rule for the code)

    return job_exit_code(s.client.wait([job_id])[0])


def main(name: str, argv: list[str]) -> int:
    return run(name, sbatch, argv, BAD)
