"""Imports inside functions stay only where start-up time needs them, each with its reason.

A function-level import is allowed when the line itself, or the comment line above it,
says why; or when its module is on a command's start-up path (the `xce` CLI and the
front-ends' commands, which each load only what their subcommand uses) and its docstring
says so in a "Lazy imports:" line.  Anything else belongs at the top of its module.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "xce"
START_UP = ("cli/", "compat/", "rest/cli.py", "site/local.py", "transport/door.py")


def lazy_imports(path: Path) -> list[int]:
    tree = ast.parse(path.read_text())
    return sorted({n.lineno for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                   for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))})


def test_every_lazy_import_says_why() -> None:
    unexplained = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        lines = path.read_text().splitlines()
        doc = ast.get_docstring(ast.parse("\n".join(lines))) or ""
        if rel.startswith(START_UP) and "Lazy imports:" in doc:
            continue
        for n in lazy_imports(path):
            line, above = lines[n - 1], lines[n - 2].strip() if n > 1 else ""
            if "#" not in line and not above.startswith("#"):
                unexplained.append(f"xce/{rel}:{n}: {line.strip()}")
    assert not unexplained, "imports inside functions without a reason:\n" + "\n".join(unexplained)


def test_only_start_up_modules_use_the_module_wide_reason() -> None:
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if "Lazy imports:" in doc:
            assert rel.startswith(START_UP), f"xce/{rel} is not on a start-up path"
