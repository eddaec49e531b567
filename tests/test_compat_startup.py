"""What bsub loads before it reaches the cluster: the interpreter started without site (the
scripts' ``#!python -S``, xce/compat/shims.py) and the stdlib modules a submission needs, no
more.  re (with enum, functools and collections), typing and msgspec each cost the command
milliseconds of a ~10 ms interpreter (docs/benchmarks.md "The front-ends' start-up")."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from xce.compat import shims

# struct and binascii: C modules (binascii linked to zlib), ~0.2-0.3 ms each to load (session 10)
HEAVY = {"re", "enum", "functools", "collections", "typing", "msgspec", "zmq", "site", "struct", "binascii"}


def test_a_workflow_tools_bsub_parses_without_the_heavy_modules() -> None:
    """dask-jobqueue's options (-J -n -R -M -W -o -e -env) through the one builder, as the script runs it."""
    code = ("import sys; sys.path[0:1] = []; sys.path += %r\n"
            "from xce.compat.lsf_submit import main, bsub_spec\n"
            "fields, _ = bsub_spec(['-J', 'dask', '-n', '2', '-R', 'rusage[mem=100] span[hosts=1]', '-M', '100',"
            " '-W', '1:30', '-o', 'o', '-e', 'e', '-env', 'all, FOO=1', 'true'], lambda: None)\n"
            "import xce.compat.fast, xce.transport.door, xce.proto.lite, xce.proto.zmtp\n"
            "assert fields['run_limit'] == 5400 and fields['mem_limit'] == 100 << 20, fields\n"
            "print(' '.join(sorted(set(sys.modules) & %r)))") % (shims.import_paths(), HEAVY)
    r = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=Path(__file__).parent)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [], f"bsub's start-up path loads {r.stdout.strip()}"


# submitit 1.5.4's and dask-jobqueue's #SBATCH lines (long and short forms, quoted values); an
# array (--array) loads msgspec for its ArraySpec, as bsub -J 'a[1-10]' does (plain.py)
_SBATCH_SCRIPT = ("#!/bin/bash\n#SBATCH --job-name=\"sub it\"\n#SBATCH -o /tmp/%j_%t_log.out\n#SBATCH -e /tmp/%j.err\n"
                  "#SBATCH -p normal\n#SBATCH -A proj\n#SBATCH -n 1\n#SBATCH --cpus-per-task=2\n#SBATCH --mem=1G\n"
                  "#SBATCH -t 0:30:00\n#SBATCH --open-mode=append\n#SBATCH --signal=USR2@90\n"
                  "#SBATCH --export=ALL\n#SBATCH --nodes=1\n#SBATCH --parsable\ntrue\n")


def test_a_workflow_tools_sbatch_parses_without_the_heavy_modules() -> None:
    """The command's own module (its main, as the script imports it), sbatch's options in the
    script through the one builder, and the door's modules: none of the heavy ones."""
    code = ("import sys; sys.path[0:1] = []; sys.path += %r\n"
            "from xce.compat.slurm_submit import main, sbatch_spec\n"
            "import xce.compat.session\n"
            "fields, flags = sbatch_spec([], lambda _: (%r, 'sbatch'))\n"
            "import xce.compat.fast, xce.transport.door, xce.proto.lite, xce.proto.zmtp\n"
            "assert fields['run_limit'] == 1800 and fields['warn_signal'] == 12 and fields['cpus_per_task'] == 2, fields\n"
            "assert flags == {'--parsable'}, flags\n"
            "print(' '.join(sorted(set(sys.modules) & %r)))") % (shims.import_paths(), _SBATCH_SCRIPT, HEAVY)
    r = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=Path(__file__).parent)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [], f"sbatch's start-up path loads {r.stdout.strip()}"


# The parsers that replace re-based ones on that path, against the stdlib's own answers.

def _outcome(f: Any, *args: Any, **kw: Any) -> Any:
    try:
        return f(*args, **kw)
    except Exception as e:  # noqa: BLE001 - the class and message are compared
        return type(e).__name__, str(e)


def test_directive_words_split_as_shlex_does() -> None:
    import shlex

    from xce.core.jobspec.directives import split_words

    rng = random.Random(15)
    texts = ['-J "my job"', "-R 'rusage[mem=2G] span[hosts=1]'", '-o out # a comment', 'a#b c', '"a\\"b\\c"',
             "x\\ y", "'", '"', "\\", '""', "''", "a'b c'd", "-n 4 #x\n-W 10", '"#x" y', "a\\#b"]
    texts += ["".join(rng.choice("ab '\"\\#\t\n") for _ in range(rng.randrange(12))) for _ in range(20_000)]
    for t in texts:
        assert _outcome(split_words, t) == _outcome(shlex.split, t, comments=True), repr(t)


def _slurm_filename_by_re(pattern: str, **facts: Any) -> str:
    """The regex reading the loop in filenames.py replaced (kept here as the reference)."""
    import re

    if "\\" in pattern:
        return pattern.replace("\\", "")
    numbers = {"j": facts["job_id"], "J": facts["job_id"], "A": facts["array_job_id"], "a": facts["index"]}
    words = {"x": facts["name"], "u": facts["user"], "N": facts["host"], "%": "%"}
    return re.sub(r"%(\d{0,10})([%jAaJxuN])", lambda m: str(numbers[m.group(2)]).zfill(int(m.group(1) or 0))
                  if m.group(2) in numbers else words[m.group(2)], pattern)


def test_slurm_file_names_as_the_regex_read_them() -> None:
    from xce.core.jobspec.filenames import slurm_filename

    facts = {"job_id": 12, "array_job_id": 7, "index": 3, "name": "nm", "user": "u", "host": "h1"}
    rng = random.Random(15)
    patterns = ["slurm-%A_%a.out", "%x-%j.%4a", "%%j", "%5%", "%12345678901j", "%1234567890j", "a%", "%q%j", "%"]
    patterns += ["".join(rng.choice("%%%jAaJxuNq0129-.") for _ in range(rng.randrange(14))) for _ in range(20_000)]
    for p in patterns:
        assert slurm_filename(p, **facts) == _slurm_filename_by_re(p, **facts), repr(p)


def test_signal_names_as_the_signal_module_reads_them() -> None:
    import signal

    from xce.core.errors import InvalidRequest
    from xce.core.jobspec.signals import ENDING, parse_signal

    for s in signal.Signals:
        for text in (s.name, s.name[3:], s.name.lower(), s.name[3:].lower(), str(int(s))):
            assert parse_signal(text) == int(s) and type(parse_signal(text)) is int
    for bad in ("SIG_DFL", "_DFL", "SIG_IGN", "FOO", "SIGFOO", "NSIG", "SIG", "", "handler"):
        with pytest.raises(InvalidRequest, match="unknown signal"):
            parse_signal(bad)
    assert ENDING == {signal.SIGKILL, signal.SIGTERM, signal.SIGINT}


def test_slurm_times_read_as_the_regex_read_them() -> None:
    import re

    from xce.core.jobspec.runlimit import _slurm_time_groups

    old = r"^(?:(\d{1,5})-)?(\d{1,8})(?::(\d{1,8}))?(?::(\d{1,8}))?$"
    rng = random.Random(15)
    texts = ["10", "1:30", "1:2:3", "1-12", "1-2:3", "1-2:3:4", "123456-1", "12345-1", "123456789", "12345678",
             "1:2:3:4", "-1", "1-", ":1", "1:", "", "1--2", "1-2-3", "١٢"]
    texts += ["".join(rng.choice("0123456789-:-:x") for _ in range(rng.randrange(16))) for _ in range(20_000)]
    for t in texts:
        m = re.match(old, t)
        assert _slurm_time_groups(t) == (m.groups() if m else None), repr(t)


def test_squeue_folds_arrays_without_msgspec_unless_elements_are_unstarted() -> None:
    """squeue asks the arrays' summaries on every listing; parsing an unstarted list needs
    arrays.py (msgspec, ~20 ms), so only a listing that has one loads it."""
    code = ("import sys; sys.path[0:1] = []; sys.path += %r\n"
            "from xce.compat import slurm, slurm_fmt\n"
            "from xce.core.jobids import element_id\n"
            "class A: id, name, user, queue, limit, counts, unstarted = 1, 'a', 'u', 'q', None, {'RUN': 1}, ''\n"
            "class V: id, state, reason = element_id(1, 2), 'PEND', ''\n"
            "rows = slurm_fmt.fold_arrays([V()], [A()], each=False)\n"
            "assert [r.folded for r in rows] == ['1_[2]'], [r.folded for r in rows]\n"
            "print('msgspec' in sys.modules, end=' ')\n"
            "A.unstarted = '3-4'\n"
            "print([r.folded for r in slurm_fmt.fold_arrays([V()], [A()], each=False)] == ['1_[2-4]'])"
            ) % (shims.import_paths(),)
    r = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=Path(__file__).parent)
    assert (r.returncode, r.stdout) == (0, "False True\n"), r.stderr


@pytest.mark.parametrize("flavor, command, own, others", [
    ("lsf", "bsub", "xce.compat.lsf_submit", {"xce.compat.lsf", "xce.compat.lsf_fmt", "xce.compat.lsf_acct"}),
    ("slurm", "sbatch", "xce.compat.slurm_submit", {"xce.compat.slurm", "xce.compat.slurm_fmt"})])
def test_the_submit_scripts_load_their_own_module_only(tmp_path: Path, flavor: str, command: str, own: str,
                                                       others: set[str]) -> None:
    """bsub's and sbatch's scripts import their command's module, not their flavor's with every
    other command and its formats (xce/compat/lsf.py, slurm.py and slurm_fmt.py: ~0.4-0.7 ms)."""
    script = (shims.ensure_bin(tmp_path, flavor) / command).read_text()
    assert f"from xce.compat.{own.rsplit('.', 1)[1]} import main\n" in script, script
    code = ("import sys; sys.path[0:1] = []; sys.path += %r\n"
            "from %s import main\n"
            "import xce.compat.session\n"
            "print(' '.join(sorted(set(sys.modules) & %r)))") % (shims.import_paths(), own, others)
    r = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=Path(__file__).parent)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [], f"{command}'s script loads {r.stdout.strip()}"


_LEAVE = ("import sys; sys.path[0:1] = []; sys.path += %r\n"
          "import os\n"
          "from xce.compat.session import leave\n"
          "class Late:\n"
          "    def __del__(self): os.write(1, b' finalized')\n"
          "late = Late()\n"
          "%s\n"
          "print('out', end=''); print('err', end='', file=sys.stderr)\n"
          "leave(3)\n")


@pytest.mark.parametrize("before, finalized", [
    ("", False),  # the door's paths: flushed, then os._exit (no shutdown: ~3 ms of bsub's ~20)
    ("import atexit; atexit.register(lambda: os.write(1, b' atexit'))", True),  # what runs at exit still runs
    ("import threading", True)])  # a thread may run (pyzmq's): the usual exit waits for it
def test_a_command_leaves_at_once_when_nothing_waits_for_the_exit(before: str, finalized: bool) -> None:
    r = subprocess.run([sys.executable, "-S", "-c", _LEAVE % (shims.import_paths(), before)],
                       capture_output=True, text=True, timeout=60, cwd=Path(__file__).parent)
    assert (r.returncode, r.stderr) == (3, "err")
    assert r.stdout.startswith("out") and (" finalized" in r.stdout) == finalized, r.stdout
    assert (" atexit" in r.stdout) == ("atexit" in before)


def test_a_packed_module_whose_source_changed_is_imported_from_the_source(tmp_path: Path) -> None:
    from xce.compat import packed

    (tmp_path / "pk").mkdir()
    (tmp_path / "pk" / "__init__.py").write_text("")
    (tmp_path / "pk" / "m.py").write_text("WHAT = 'packed'\n")
    packed.write(str(tmp_path / "p.pack"), str(tmp_path), ("pk", "pk.m", "pk.absent"))
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from xce.compat.packed import install; install(%r)\n"
            "import pk.m\n"
            "print(pk.m.WHAT, type(pk.m.__spec__.loader).__name__, pk.m.__file__ == %r, pk.__path__ == [%r])"
            ) % (str(tmp_path), str(tmp_path / "p.pack"), str(tmp_path / "pk" / "m.py"), str(tmp_path / "pk"))
    run = lambda: subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,  # noqa: E731
                                 cwd=tmp_path).stdout.split()
    assert run() == ["packed", "Packed", "True", "True"]
    (tmp_path / "pk" / "m.py").write_text("WHAT = 'edited'\n")
    assert run()[:2] == ["edited", "SourceFileLoader"]
    (tmp_path / "p.pack").write_bytes(b"not marshal")
    (tmp_path / "pk" / "m.py").write_text("WHAT = 'packed'\n")
    assert run()[:2] == ["packed", "SourceFileLoader"]
