"""`python -m treespec check FILE_OR_PACKAGE...`: shapes checked without data.

Imports each file or package, finds every function and method a treespec
transform wraps there (defined there, not imported), checks each with
`check_shapes`, and prints what mypy prints: `FILE:LINE: error: FUNCTION:
MESSAGE` and `FILE:LINE: note: ...` lines, then `checked N functions: E
errors, I notes, S skipped`. Exits 0 when there is no error, 1 when there is
one, 2 on a usage error (no such file, a module that cannot be imported).
`--format json` prints one JSON object instead.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import pkgutil
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from .._model.errors import plural
from .._transforms.base import Transformed
from .check import check_shapes
from .report import ShapeIssue, ShapeReport

__all__ = ["main"]


class _UsageError(Exception):
    """What exits 2: the command was given something it cannot check."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; its exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m treespec",
        description="Check the shapes of every treespec function, without data.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser(
        "check", help="check the shapes of the functions in files or packages"
    )
    check.add_argument("targets", nargs="+", metavar="FILE_OR_PACKAGE")
    check.add_argument("--format", choices=("text", "json"), default="text")
    try:
        options = parser.parse_args(argv)
    except SystemExit as exit:  # argparse's usage error (2) or --help (0)
        return int(exit.code or 0)
    try:
        modules = [m for target in options.targets for m in _import(target)]
    except _UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    reports = [_check(fun) for fun in _functions(modules)]
    problems = [p for report in reports for p in report.problems]
    errors = sum(p.severity == "error" for p in problems)
    notes = sum(p.severity == "note" and not p.skipped for p in problems)
    skipped = sum(report.skipped for report in reports)
    if options.format == "json":
        print(
            json.dumps(
                {
                    "functions": len(reports),
                    "errors": errors,
                    "notes": notes,
                    "skipped": skipped,
                    "problems": [_as_json(p) for p in problems],
                },
                indent=2,
            )
        )
    else:
        for problem in problems:
            print(problem.format())
        print(
            f"checked {plural(len(reports), 'function')}: "
            f"{plural(errors, 'error')}, {plural(notes, 'note')}, {skipped} skipped"
        )
    return 1 if errors else 0


def _as_json(problem: ShapeIssue) -> dict[str, Any]:
    return {
        "file": problem.file,
        "line": problem.line,
        "severity": problem.severity,
        "function": problem.function,
        "message": problem.message,
        "skipped": problem.skipped,
    }


def _check(fun: Any) -> ShapeReport:
    try:
        return check_shapes(fun)
    except Exception as error:  # a crash of the checker is treespec's bug
        code = getattr(
            inspect.unwrap(getattr(fun, "__wrapped__", fun)), "__code__", None
        )
        name = getattr(fun, "__qualname__", repr(fun))
        issue = ShapeIssue(
            "note",
            code.co_filename if code else "<unknown>",
            code.co_firstlineno if code else 0,
            name,
            f"skipped: the checker failed ({type(error).__name__}: {error}); "
            "this is a bug of treespec's, please report it",
            skipped=True,
        )
        return ShapeReport(name, (issue,))


def _import(target: str) -> list[ModuleType]:
    """The modules a target names: a `.py` file, a directory (every file in
    it, or the package it is), or a dotted module name."""
    path = Path(target)
    if path.is_file():
        return [_import_file(path)]
    if path.is_dir():
        if (path / "__init__.py").is_file():
            sys.path.insert(0, str(path.resolve().parent))
            return _import_package(path.name)
        return [_import_file(p) for p in sorted(path.rglob("*.py"))]
    if target.replace(".", "").replace("_", "").isalnum():
        return _import_package(target)
    raise _UsageError(f"{target}: no such file, directory or module")


def _import_file(path: Path) -> ModuleType:
    name = path.stem
    if name in sys.modules or not name.isidentifier():
        name = f"treespec_check_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise _UsageError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and forward references look here
    sys.path.insert(0, str(path.resolve().parent))  # its sibling modules
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # the user's module fails on import
        del sys.modules[name]
        raise _UsageError(f"{path}: cannot be imported: {error!r}") from None
    return module


def _import_package(name: str) -> list[ModuleType]:
    try:
        package = importlib.import_module(name)
        modules = [package]
        for info in pkgutil.walk_packages(
            getattr(package, "__path__", []), prefix=f"{name}."
        ):
            modules.append(importlib.import_module(info.name))
    except Exception as error:  # the user's package fails on import
        raise _UsageError(f"{name}: cannot be imported: {error!r}") from None
    return modules


def _functions(modules: Sequence[ModuleType]) -> Iterator[Any]:
    """Every transform defined in the modules (at the top or in a class
    defined there), once, in the order of the source."""
    seen: set[int] = set()
    found: list[tuple[str, int, Any]] = []
    for module in modules:
        for value in vars(module).values():
            for fun in _transforms_in(value, module.__name__):
                if id(fun) not in seen:
                    seen.add(id(fun))
                    found.append((*_place(fun), fun))
    found.sort(key=lambda item: (item[0], item[1]))
    return iter([fun for _, _, fun in found])


def _transforms_in(value: Any, module: str) -> Iterator[Any]:
    if isinstance(value, Transformed):
        if _defined_in(value) == module:
            yield value
    elif isinstance(value, type) and value.__module__ == module:
        for attribute in vars(value).values():
            if isinstance(attribute, Transformed):
                yield attribute


def _innermost(fun: Any) -> Any:
    while isinstance(fun, Transformed):
        fun = fun.__wrapped__
    return inspect.unwrap(fun)


def _defined_in(fun: Any) -> str | None:
    return getattr(_innermost(fun), "__module__", None)


def _place(fun: Any) -> tuple[str, int]:
    code = getattr(_innermost(fun), "__code__", None)
    return (code.co_filename, code.co_firstlineno) if code else ("", 0)
