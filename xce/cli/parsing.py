"""The `xce` parser's machinery: global options that every subcommand also takes after its name.

``xce --state-dir X up`` and ``xce up --state-dir X`` mean the same; so do
``xce admin audit --timeout 3`` and ``xce --timeout 3 admin audit``.  ``Parser``
registers ``SubCommands`` as its subparsers action, and argparse builds nested
subparsers with the parent's class, so every subcommand at every depth (those of
xce/cli/main.py and of the areas in its EXTENSIONS alike) gets the global options.

On a subcommand they default to ``argparse.SUPPRESS``: given there, they override
the value given before the subcommand; absent there, they leave it alone.  A
subcommand's own option of the same name wins over the global one
(``xce wait --timeout S`` is the wait's own bound): subparsers resolve conflicts.
"""

from __future__ import annotations

import argparse
import os
from typing import Any


def add_global_options(p: argparse.ArgumentParser, top: bool) -> None:
    """``--state-dir`` and ``--timeout``: with their defaults on the top parser, suppressed below."""
    p.add_argument("--state-dir", default=os.environ.get("XCE_STATE_DIR") if top else argparse.SUPPRESS,
                   help="the local cluster's directory (default $XCE_STATE_DIR or ~/.local/state/xce)")
    p.add_argument("--timeout", type=float, default=10.0 if top else argparse.SUPPRESS,
                   help="seconds to wait for the controller")


class SubCommands(argparse._SubParsersAction):  # argparse's documented hook: register("action", "parsers")
    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        kwargs.setdefault("conflict_handler", "resolve")
        p = super().add_parser(name, **kwargs)
        add_global_options(p, top=False)
        return p


class Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", SubCommands)
