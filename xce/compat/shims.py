"""The command directories and LSF's configuration directory, made on first use.

``xce compat path lsf`` (or ``slurm``) prints ``<state_dir>/compat/<flavor>/bin``, a
directory of small Python scripts, one per command (``bsub``, ``bjobs``, ...), each
started by the interpreter XCE is installed in and calling
``xce.compat.<flavor>.main(NAME, argv)`` (bsub and sbatch: their own modules', with the
modules they load compiled into ``<state_dir>/compat/<flavor>/packs/<name>.pack``,
xce/compat/packed.py).  Nothing is put on PATH by installing XCE,
so a real LSF or Slurm on the machine is never shadowed; a user opts in with
``eval "$(xce compat env lsf)"``.  A script sets ``XCE_STATE_DIR`` to its own cluster's
directory only when it is unset, so the commands reach the cluster `xce` reaches.

``<state_dir>/compat/lsf/conf`` is an ``LSF_ENVDIR``: ``lsf.conf``
(``LSF_UNIT_FOR_LIMITS=MB``) and ``lsbatch/<cluster>/configdir/lsb.params``, written
from the cluster's configuration, because workflow tools read them.  Both are
rewritten whenever they are asked for (a dozen small files), so they follow the
interpreter and the configuration.

Lazy imports: writing the command scripts needs the config only when asked.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from xce.compat import mapping, packed

FLAVORS = ("lsf", "slurm")

# ``-S``: no site module, so no .pth file runs at start (an editable install's finder imports
# pathlib and urllib: 10-20 ms of a 10 ms interpreter).  The script puts on sys.path what site
# would have given XCE: the directory the xce package is in, then the site-packages directories,
# after the stdlib and in place of the script's own directory (nothing to import there).
_SHIM = """#!{python} -S
# Written by xce (xce/compat/shims.py): {flavor}'s `{name}` over XCE. Regenerate: xce compat path {flavor}
import os, sys
sys.path[0:1] = []
sys.path += {paths!r}
os.environ.setdefault("XCE_STATE_DIR", {state_dir!r})
{preload}from xce.compat.{module} import main
from xce.compat.session import leave
leave(main({name!r}, sys.argv[1:]))
"""
_PRELOAD = """from xce.compat.packed import install
install({pack!r})
"""
# The submit commands, which workflow tools run once per job, import their own module, not
# their flavor's with every other command (each module's ``main(NAME, argv)``) ...
ENTRY = {"bsub": "lsf_submit", "sbatch": "slurm_submit"}
# ... and the modules a plain submission loads from one pack (xce/compat/packed.py; ~1.5 ms
# less of the import system); tests/test_compat_startup.py checks the lists against what loads.
_DOOR = ("xce.core", "xce.core.jobids", "xce.core.errors", "xce.compat.mapping", "xce.compat.session",
         "xce.core.jobspec", "xce.core.jobspec.errors", "xce.core.jobspec.plain", "xce.core.jobspec.options",
         "xce.core.units", "xce.core.jobspec.runlimit", "xce.core.jobspec.bsub", "xce.core.jobspec.scripts",
         "xce.core.jobspec.build", "xce.site", "xce.site.local", "xce.compat.fast", "xce.proto",
         "xce.proto.idempotency", "xce.transport", "xce.transport.door", "xce.proto.lite", "xce.proto.zmtp")
PACKED = {"bsub": ("xce.compat.lsf_submit", *_DOOR),
          "sbatch": ("xce.compat.slurm_submit", "xce.core.jobspec.slurm", "xce.core.jobspec.directives",
                     "xce.core.jobspec.filenames", *_DOOR)}


def commands(flavor: str) -> tuple[str, ...]:
    if flavor == "lsf":
        from xce.compat.lsf import COMMANDS
    elif flavor == "slurm":
        from xce.compat.slurm import COMMANDS
    else:
        raise ValueError(f"unknown flavor {flavor!r} (lsf or slurm)")
    return tuple(COMMANDS)


def bin_dir(state_dir: Path, flavor: str) -> Path:
    return state_dir / "compat" / flavor / "bin"


def envdir(state_dir: Path) -> Path:
    return state_dir / "compat" / "lsf" / "conf"


def sharedir(conf: Path) -> Path:
    """LSB_SHAREDIR: ``<cluster>/logdir/lsb.events`` is there, empty (XCE keeps no event file;
    tools that read it for finished jobs find none and ask bjobs, which keeps them)."""
    return conf.parent / "work"


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.chmod(mode)
    os.replace(tmp, path)


def import_paths() -> list[str]:
    """What a script started without site needs on sys.path: the directory holding the xce
    package (an editable install's source tree, or site-packages), then this interpreter's
    site-packages directories (msgspec and pyzmq, for the full path), each once, in that order.
    PYTHONPATH still comes first, as for any interpreter."""
    import site

    import xce

    own = os.path.dirname(os.path.dirname(os.path.abspath(xce.__file__)))
    found = [own, *site.getsitepackages()]
    if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        found.append(site.getusersitepackages())
    return [p for i, p in enumerate(found) if p not in found[:i] and os.path.isdir(p)]


def pack_path(state_dir: Path, flavor: str, name: str) -> Path:
    return state_dir / "compat" / flavor / "packs" / f"{name}.pack"


def ensure_bin(state_dir: Path, flavor: str) -> Path:
    """Write the flavor's command scripts (and the submit command's pack); the directory."""
    d = bin_dir(state_dir, flavor)
    paths = import_paths()
    for name in commands(flavor):
        preload = ""
        if name in PACKED:
            pack = pack_path(state_dir, flavor, name)
            packed.write(str(pack), paths[0], PACKED[name])
            preload = _PRELOAD.format(pack=str(pack))
        _write(d / name, _SHIM.format(python=sys.executable, flavor=flavor, name=name, paths=paths, preload=preload,
                                      module=ENTRY.get(name, flavor), state_dir=str(state_dir)), 0o755)
    return d


def lsf_conf(cfg: Any, conf_dir: Path) -> str:
    return (f"# Written by xce from {cfg.source or 'the defaults'} (xce/compat/shims.py)\n"
            f"LSF_UNIT_FOR_LIMITS={mapping.LSF_UNIT_FOR_LIMITS}\n"
            f"LSF_ENVDIR={conf_dir}\n"
            f"LSF_CONFDIR={conf_dir}\n"
            f"LSB_CONFDIR={conf_dir / 'lsbatch'}\n"
            f"LSB_SHAREDIR={sharedir(conf_dir)}\n"
            f"LSF_CLUSTER_NAME={cfg.cluster.name}\n"
            "LSF_VERSION=10.1\n")


def lsb_params(cfg: Any) -> str:
    return ("# Written by xce (xce/compat/shims.py)\n"
            "Begin Parameters\n"
            f"DEFAULT_QUEUE = {cfg.default_queue()}\n"
            f"CLEAN_PERIOD = {int(cfg.compat.clean_period)}\n"
            f"MBD_SLEEP_TIME = {max(1, round(cfg.scheduler.interval))}\n"
            "End Parameters\n")


def ensure_envdir(state_dir: Path, cfg: Any) -> Path:
    """Write LSF_ENVDIR's files from ``cfg``; the directory."""
    d = envdir(state_dir)
    _write(d / "lsf.conf", lsf_conf(cfg, d))
    _write(d / "lsbatch" / cfg.cluster.name / "configdir" / "lsb.params", lsb_params(cfg))
    events = sharedir(d) / cfg.cluster.name / "logdir" / "lsb.events"
    if not events.exists():
        _write(events, "")
    return d


def shell_env(state_dir: Path, flavor: str, cfg: Any) -> str:
    """The lines ``eval "$(xce compat env FLAVOR)"`` runs."""
    lines = [f'export PATH="{ensure_bin(state_dir, flavor)}:$PATH"']
    if flavor == "lsf":
        lines.append(f'export LSF_ENVDIR="{ensure_envdir(state_dir, cfg)}"')
    return "\n".join(lines)
