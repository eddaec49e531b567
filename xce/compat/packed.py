"""The modules a submit command loads, compiled into one file and imported from it.

bsub and sbatch import ~25 small modules of XCE before they reach the controller.  Each
import through the path finder costs ~40-60 us of Python beyond reading and running the
module: directory and file stats, the ``__pycache__`` name, the pyc's header checks.  `xce
compat path` (xce/compat/shims.py) writes the command's modules, compiled from their sources,
into one marshal file beside its scripts; the script installs a finder that serves them from
it (one read, one ``marshal.loads``), the same code objects the sources compile to.

A packed module is served only while its source is what was compiled: the finder compares
the source's size and mtime (one ``stat``), and anything else -- a changed or missing source,
a module not in the pack, an unreadable pack -- is imported as always.  Stdlib only, and no
``importlib`` (its package costs ~1.5 ms): the spec class is the one ``sys`` was loaded with.
"""

from __future__ import annotations

import marshal
import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: the commands start in ms
if TYPE_CHECKING:
    from types import CodeType, ModuleType
    from typing import Any

Entry = tuple  # (source path, st_mtime_ns, st_size, is_package, code)


def source_of(root: str, name: str) -> tuple[str, bool] | None:
    """The source file of module ``name`` under ``root`` (the directory holding the xce package)."""
    base = os.path.join(root, *name.split("."))
    if os.path.isfile(os.path.join(base, "__init__.py")):
        return os.path.join(base, "__init__.py"), True
    if os.path.isfile(base + ".py"):
        return base + ".py", False
    return None


def write(path: str, root: str, names: tuple[str, ...]) -> None:
    """Compile ``names`` from their sources under ``root`` into the pack at ``path`` (atomically)."""
    entries: dict[str, Entry] = {}
    for name in names:
        found = source_of(root, name)
        if found is None:
            continue  # not installed from source: imported as always
        src, pkg = found
        with open(src, "rb") as f:
            text = f.read()
        st = os.stat(src)
        entries[name] = (src, st.st_mtime_ns, st.st_size, pkg, compile(text, src, "exec", dont_inherit=True))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(marshal.dumps(entries))
    os.replace(tmp, path)


class Packed:
    """A meta path finder and loader over one pack."""

    def __init__(self, entries: dict[str, Entry]) -> None:
        self.entries = entries

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        entry = self.entries.get(name)
        if entry is None:
            return None
        src, mtime, size, pkg, _code = entry
        try:
            st = os.stat(src)
        except OSError:
            return None
        if (st.st_mtime_ns, st.st_size) != (mtime, size):
            return None  # edited since `xce compat path`: the source decides
        spec = type(sys.__spec__)(name, self, origin=src, is_package=pkg)
        spec.has_location = True  # __file__ as the path finder sets it
        if pkg:  # its other submodules are found as always
            spec.submodule_search_locations = [os.path.dirname(src)]
        return spec

    def create_module(self, spec: Any) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        code: CodeType = self.entries[module.__name__][4]
        exec(code, module.__dict__)


def install(path: str) -> None:
    """Serve the pack at ``path`` before the path finder; nothing if it cannot be read."""
    try:
        with open(path, "rb") as f:
            entries = marshal.loads(f.read())
    except (OSError, ValueError, EOFError, TypeError):
        return
    if isinstance(entries, dict):
        sys.meta_path.insert(0, Packed(entries))
