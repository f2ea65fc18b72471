"""The files and packages `python -m treespec check` is given: found, then
imported as a CI tool that runs other people's files imports them.

Every path is resolved before anything is imported (a path that does not
exist is a usage error, `UsageError`). A file whose source never names
treespec is never imported, nor is a subpackage none of whose files does; a
file of a package is imported as the module it is (its package's root on
`sys.path`, as mypy and pytest find it), any other file as `python FILE`
would run it (`sys.argv` is `[FILE]`); one that exits or raises at import is
an error of its own (`import_error`), and the others are still imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

from .report import ShapeIssue

__all__ = ["SKIPPED_FOLDERS", "UsageError", "import_all", "sources"]


class UsageError(Exception):
    """What exits 2: the command was given something it cannot check."""


#: Folders a folder's walk never enters (besides hidden ones and virtual
#: environments, which hold a `pyvenv.cfg`).
SKIPPED_FOLDERS = frozenset(
    {"site-packages", "build", "dist", "__pycache__", "node_modules"}
)


class _Module(NamedTuple):
    """A module imported by its dotted name: a package (its modules walked
    too), or a file of a package; a failure to import it is reported at
    `where`, the path or name given."""

    name: str
    where: str
    walk: bool = False


def sources(target: str) -> list[Path | _Module]:
    """What a target names, checked before anything is imported: `.py`
    files (a file, or those of a folder that is not a package), each as the
    module it is where it lies in a package, or a package to walk (a folder
    that is one, or a dotted name)."""
    path = Path(target)
    if path.is_file():
        return [_module_of(path) or path]
    if path.is_dir():
        if (path / "__init__.py").is_file():
            module = _module_of(path / "__init__.py")
            assert module is not None  # the folder is a package
            return [_Module(module.name, target, walk=True)]
        return [_module_of(file) or file for file in _python_files(path)]
    dotted = target.split(".")
    if target.endswith(".py") or not all(part.isidentifier() for part in dotted):
        raise UsageError(f"{target}: no such file or directory")
    if importlib.util.find_spec(dotted[0]) is None:
        raise UsageError(f"{target}: no such file, directory or module")
    return [_Module(target, target, walk=True)]


def _module_of(path: Path) -> _Module | None:
    """A file of a package as the module it is, found as mypy and pytest find
    it: up its folders while they hold an `__init__.py`; the folder above the
    top package goes on `sys.path`. None for a file that is no package's."""
    folder = path.resolve().parent
    names = [] if path.name == "__init__.py" else [path.stem]
    while (folder / "__init__.py").is_file():
        names.insert(0, folder.name)
        folder = folder.parent
    if folder == path.resolve().parent or not all(n.isidentifier() for n in names):
        return None
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    return _Module(".".join(names), str(path))


def _python_files(folder: Path) -> list[Path]:
    found = []
    for root, folders, files in os.walk(folder):
        folders[:] = sorted(
            name
            for name in folders
            if not name.startswith(".")
            and name not in SKIPPED_FOLDERS
            and not (Path(root) / name / "pyvenv.cfg").exists()
        )
        found += [Path(root) / name for name in sorted(files) if name.endswith(".py")]
    return found


def _names_treespec(path: str | Path | None) -> bool:
    """Whether a source file names treespec: one that never does has no
    function to check and is never imported (a `setup.py`, a script with
    required arguments: importing runs their top level)."""
    if path is None or not str(path).endswith(".py"):
        return True  # no source to read (a compiled module): imported
    try:
        return b"treespec" in Path(path).read_bytes()
    except OSError:
        return True  # imported, and its own error reported there


def import_all(
    found: list[Path | _Module], failed: list[ShapeIssue]
) -> list[ModuleType]:
    """The modules of one target; a file that cannot be imported is an error
    in `failed`, and the others are imported all the same."""
    modules = []
    for source in found:
        if isinstance(source, _Module):
            modules += _import_module(source, failed)
        elif not _names_treespec(source):
            continue
        elif (module := _import_file(source, failed)) is not None:
            modules.append(module)
    return modules


def _import_file(path: Path, failed: list[ShapeIssue]) -> ModuleType | None:
    name = path.stem
    if name in sys.modules or not name.isidentifier():
        name = f"treespec_check_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and forward references look here
    sys.path.insert(0, str(path.resolve().parent))  # its sibling modules
    argv, sys.argv = sys.argv, [str(path)]  # as `python FILE` runs it
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as error:  # the user's module, at import
        del sys.modules[name]
        failed.append(_import_error(str(path), error))
        return None
    finally:
        sys.argv = argv
    return module


def _import_module(source: _Module, failed: list[ShapeIssue]) -> list[ModuleType]:
    if not source.walk and not _names_treespec(source.where):
        return []  # a file of a package that never names treespec
    try:
        package = importlib.import_module(source.name)
    except (Exception, SystemExit) as error:
        failed.append(_import_error(source.where, error))
        return []
    modules = [package]
    if not source.walk:
        return modules
    for name, path in _package_files(package, source.name):
        if not _names_treespec(path):
            continue  # a module, or a subpackage, that never names treespec
        try:
            modules.append(importlib.import_module(name))
        except (Exception, SystemExit) as error:
            failed.append(_import_error(name, error))
    return modules


def _package_files(package: ModuleType, name: str) -> list[tuple[str, Path]]:
    """The modules under a package, unimported, with their source files: its
    subpackages', and those in folders without an `__init__.py` (namespace
    packages, which Python imports by the same dotted names)."""
    found = []
    for root in getattr(package, "__path__", []):
        for path in _python_files(Path(root)):
            parts = path.relative_to(root).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            if parts and all(part.isidentifier() for part in parts):
                found.append((".".join([name, *parts]), path))
    return found


def _import_error(where: str, error: BaseException) -> ShapeIssue:
    """A module that could not be imported, as an error at the line of its
    own that raised (or its first line): nothing in it was checked."""
    line = 1
    target = str(Path(where).resolve()) if where.endswith(".py") else None
    for frame in traceback.extract_tb(error.__traceback__):
        if target is not None and str(Path(frame.filename).resolve()) == target:
            line = frame.lineno or 1
    if isinstance(error, SystemExit):
        what = f"exited at import (sys.exit({error.code!r}))"
        fix = (
            "a checked file is imported, so its top level runs: put a script's "
            'work under `if __name__ == "__main__":`'
        )
    else:
        what = f"raised {type(error).__name__} at import: {error}"
        fix = "nothing in it was checked"
    return ShapeIssue("error", where, line, Path(where).stem, f"{what}; {fix}")
