"""`xce compat path|env|commands lsf|slurm`: where the LSF and Slurm commands are.

Registered into `xce` through xce.cli.main.EXTENSIONS.  ``path`` writes the command
directory (and, for lsf, LSF_ENVDIR) if needed and prints the directory; ``env``
prints the shell lines that put it on PATH; ``commands`` lists the commands.

Lazy imports: `xce compat` loads the front-ends only when asked.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from xce.compat import shims


def _state_dir(a: argparse.Namespace) -> Path:
    from xce.site.local import default_state_dir

    return (Path(a.state_dir) if a.state_dir else default_state_dir()).resolve()


def cmd_compat(a: argparse.Namespace) -> int:
    from xce.site.config import cluster_config

    sd = _state_dir(a)
    cfg = cluster_config(sd)
    if a.sub == "path":
        d = shims.ensure_bin(sd, a.flavor)
        if a.flavor == "lsf":
            shims.ensure_envdir(sd, cfg)
        print(d)
    elif a.sub == "env":
        print(shims.shell_env(sd, a.flavor, cfg))
    else:
        print(" ".join(shims.commands(a.flavor)))
    return 0


def register(sub: Any) -> None:
    s = sub.add_parser("compat", help="LSF- and Slurm-compatible commands (bsub, sbatch, ...; docs/compat.md)")
    cs = s.add_subparsers(dest="sub", required=True)
    for name, what in (("path", "write the commands' directory and print it"),
                       ("env", "print the shell lines that put the commands on PATH (eval them)"),
                       ("commands", "list the commands")):
        c = cs.add_parser(name, help=what)
        c.add_argument("flavor", choices=shims.FLAVORS)
    s.set_defaults(func=cmd_compat)
