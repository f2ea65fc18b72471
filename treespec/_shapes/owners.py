"""Whose code a file of a traceback is: the user's or a library's, told by
module, not by install path.

JAX's own files (its modules, and the folders JAX leaves out of its
tracebacks), those of installed distributions and treespec's are a
library's wherever they are installed: site-packages, a source checkout
installed editable, a `PYTHONPATH` or `pip install --target` folder (as on a
TPU VM). The checked function's file, and the modules of its own top-level
package, are the user's. A file is mapped back to the module it was imported
as (`sys.modules`); one that no module holds is named by its `__init__.py`
chain, as Python would import it.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import sys
import sysconfig
from pathlib import Path

__all__ = ["is_library", "library_raised", "top_package"]

_TREESPEC = __name__.partition(".")[0]
#: Top-level packages that are a library's whatever installed them: JAX, and
#: treespec itself (an editable install records no top-level names).
_ALWAYS = frozenset({"jax", "jaxlib", _TREESPEC})


def _folders(*keys: str) -> tuple[str, ...]:
    """The resolved folders of `sysconfig`'s paths `keys`."""
    paths = sysconfig.get_paths()
    return tuple({str(Path(p).resolve()) for key in keys if (p := paths.get(key))})


_SITE_DIRS = _folders("purelib", "platlib")
_STDLIB_DIRS = _folders("stdlib", "platstdlib")


@functools.cache
def _jax_excluded() -> tuple[str, ...]:
    """The files and folders JAX leaves out of its tracebacks (its own, where
    this JAX is installed); none where this JAX keeps no such list."""
    try:
        from jax._src import traceback_util
    except ImportError:  # pragma: no cover - a JAX without the private module
        return ()
    paths = getattr(traceback_util, "_exclude_paths", ())
    return tuple(str(Path(p).resolve()) for p in paths if isinstance(p, str))


def _under(file: str, folders: tuple[str, ...]) -> bool:
    resolved = str(Path(file).resolve())
    return any(resolved == f or resolved.startswith(f + os.sep) for f in folders)


class _Modules:
    """The module each file was imported as, rebuilt as `sys.modules` grows."""

    def __init__(self) -> None:
        self.size = -1
        self.by_file: dict[str, str] = {}

    def name_of(self, file: str) -> str | None:
        if len(sys.modules) != self.size:
            self.size = len(sys.modules)
            files = {
                name: getattr(module, "__file__", None)
                for name, module in list(sys.modules.items())
            }
            self.by_file = {
                file: name for name, file in files.items() if isinstance(file, str)
            }
        return self.by_file.get(file)


_MODULES = _Modules()


@functools.cache
def _package_by_folders(file: str) -> str:
    """The top-level package a file lies in by its `__init__.py` chain (the
    file's own name where its folder is no package)."""
    path = Path(file)
    top = path.stem
    folder = path.parent
    while (folder / "__init__.py").is_file():
        top = folder.name
        folder = folder.parent
    return top


def top_package(file: str) -> str:
    """The top-level package of the module `file` was imported as."""
    name = _MODULES.name_of(file)
    if name is None or name == "__main__":
        return _package_by_folders(file)
    return name.partition(".")[0]


@functools.cache
def _distributed() -> frozenset[str]:
    """The top-level names installed distributions provide (read once: it
    scans every distribution's record)."""
    return frozenset(importlib.metadata.packages_distributions())


def is_library(file: str, own: str) -> bool:
    """Whether `file` is a library's, never the user's; `own`, the checked
    function's file, and the modules of its top-level package are the
    user's wherever they lie."""
    if file == own:
        return False
    if file.startswith("<"):  # code made from a string: no line to show
        return True
    top = top_package(file)
    if top in _ALWAYS:
        return True
    if own and top == top_package(own):  # the same project, installed or not
        return False
    if _under(file, (*_STDLIB_DIRS, *_SITE_DIRS, *_jax_excluded())):
        return True
    return top in _distributed()


def library_raised(file: str, own: str) -> bool:
    """Whether an error raised in `file` is a library's refusal of what the
    user's code gave it: JAX's, or an installed library's (not treespec's,
    not the standard library's)."""
    if file == own or file.startswith("<") or not is_library(file, own):
        return False
    top = top_package(file)
    if top in ("jax", "jaxlib"):
        return True
    if top == _TREESPEC:
        return False
    return _under(file, _SITE_DIRS) or not _under(file, _STDLIB_DIRS)
