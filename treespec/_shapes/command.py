"""`python -m treespec check FILE_OR_PACKAGE...`: shapes checked without data.

Imports each file or package, finds every function and method a treespec
transform wraps there (defined there, not imported), checks each with
`check_shapes`, and prints what mypy prints: `FILE:LINE: error: FUNCTION:
MESSAGE` and `FILE:LINE: note: ...` lines, then `checked N functions: E
errors, I notes, S skipped`. `--format json` prints one JSON object instead.

It behaves as a CI tool that runs other people's files: a file whose source
never names treespec is not imported (nothing in it to check; its top level
never runs); a file of a package is imported as the module it is (its
package's root on `sys.path`, as mypy and pytest find it), any other file as
`python FILE` would run it (`sys.argv` is `[FILE]`); one that exits or
raises at import is an error of its own while the others are still checked;
a folder that is not a package skips hidden folders, virtual environments,
`site-packages`, `build`, `dist`, `__pycache__` and `node_modules`. What the
checked code prints goes to stderr. `--constraint RELATION` (repeatable)
holds for every function whose annotations name one of its sizes. Each
function's check has a time bound (`--timeout`, 120 s by default): one past
it is reported as not checked (skipped); the command's memory has a bound
(`--memory`, half the machine's by default), past which what the checked
code allocates fails (a note at its line) where the system would kill the
command, every finding lost. Exits 0
only when every file was imported and checked and no error was found (notes
allowed), 1 when there is an error, nothing to check, or (with
`--fail-on-skip`) a function that could not be checked, 2 on a usage error
(a path that does not exist, found before anything is imported), 130 on
Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import re
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from types import FrameType, ModuleType
from typing import Any

from .._model.errors import plural
from .._transforms.base import Transformed
from .check import check_shapes
from .declared import innermost
from .files import UsageError, import_all, sources
from .leaves import declared_names
from .memory import memory_bound
from .report import ShapeIssue, ShapeReport
from .user_code import def_line, shown

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; its exit status."""
    try:
        options = _parser().parse_args(argv)
    except SystemExit as exit:  # argparse's usage error (2) or --help (0)
        return int(exit.code or 0)
    try:
        with memory_bound(options.memory):
            return _run(
                options.targets,
                options.format,
                options.allow_empty,
                tuple(options.constraint),
                options.fail_on_skip,
                options.timeout,
            )
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
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
    check.add_argument(
        "--constraint",
        action="append",
        default=[],
        metavar="RELATION",
        help="a relation between sizes, in JAX's syntax ('n == 2*k', 'b >= 2'), "
        "for every function whose annotations name one of its sizes; repeat it "
        "for more (as check_with(constraints=...) for one function)",
    )
    check.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help="the time bound of each function's check (default "
        f"{DEFAULT_TIMEOUT:g}; 0 for none): a function past it is reported as "
        "not checked (skipped), and the others are checked",
    )
    check.add_argument(
        "--memory",
        type=float,
        default=None,
        metavar="GIB",
        help="the memory the command may take, in GiB (default half the "
        "machine's; 0 for no bound): past it, what the checked code allocates "
        "on the host (NumPy on sizes) fails, a note at its line, where the "
        "system would kill the command",
    )
    check.add_argument(
        "--fail-on-skip",
        action="store_true",
        help="exit 1 when a function could not be checked (skipped), as on an error",
    )
    check.add_argument(
        "--allow-empty",
        action="store_true",
        help="exit 0 when the files hold no function to check (pre-commit "
        "passes the files a commit changed)",
    )
    return parser


def _run(
    targets: Sequence[str],
    format: str,
    allow_empty: bool,
    constraints: tuple[str, ...] = (),
    fail_on_skip: bool = False,
    timeout: float = 0,
) -> int:
    given = [sources(target) for target in targets]  # every path first
    for constraint in constraints:  # and every relation, before any import
        _parsed(constraint)
    failed: list[ShapeIssue] = []
    # What the checked code prints, at import or while traced, is its own
    # output: on stderr, so that the command's output stays its findings (and
    # `--format json` stays JSON).
    with contextlib.redirect_stdout(sys.stderr):
        modules = [m for found in given for m in import_all(found, failed)]
        reports = [_bounded(fun, constraints, timeout) for fun in _functions(modules)]
    if not reports and not failed and not allow_empty:
        failed.append(_nothing_found(targets))
    problems = [*failed, *(p for report in reports for p in report.problems)]
    errors = sum(p.severity == "error" for p in problems)
    notes = sum(p.severity == "note" and not p.skipped for p in problems)
    skipped = sum(report.skipped for report in reports)
    if format == "json":
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
    return 1 if errors or (fail_on_skip and skipped) else 0


def _as_json(problem: ShapeIssue) -> dict[str, Any]:
    return {
        "file": problem.file,
        "line": problem.line,
        "severity": problem.severity,
        "function": problem.function,
        "message": problem.message,
        "skipped": problem.skipped,
    }


#: The time bound of one function's check, in seconds (`--timeout`).
DEFAULT_TIMEOUT = 120.0


class _PastBound(BaseException):
    """Raised in the check when its time bound is past: a BaseException, so
    that no `except Exception` on the way (the checker's, JAX's, the
    user's) takes it for a failure of the code checked."""


def _past_bound(signum: int, frame: FrameType | None) -> None:
    raise _PastBound


def _bounded(fun: Any, constraints: tuple[str, ...], timeout: float) -> ShapeReport:
    """`_check(fun)` within `timeout` seconds (none where 0, or where there is
    no SIGALRM: off the main thread, on Windows): past it, a note that the
    function was not checked."""
    armed = (
        timeout > 0
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not armed:
        return _check(fun, constraints)
    previous = signal.signal(signal.SIGALRM, _past_bound)
    # Again every second past the bound: Python ignores what a handler raises
    # inside a garbage-collection callback (JAX runs one), so one may be lost.
    signal.setitimer(signal.ITIMER_REAL, timeout, 1.0)
    try:
        try:
            return _check(fun, constraints)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _PastBound:  # (one raised while disarming is caught here too)
        return _not_checked(
            fun,
            f"skipped: its check ran past the time bound of {timeout:g} s; give "
            "a longer one with --timeout SECONDS",
        )
    finally:
        signal.signal(signal.SIGALRM, previous)


def _check(fun: Any, constraints: tuple[str, ...] = ()) -> ShapeReport:
    try:
        return check_shapes(fun, constraints=_theirs(fun, constraints))
    except MemoryError:  # past `--memory` outside the code's own lines
        return _not_checked(
            fun,
            "skipped: its check ran out of memory; give it more with --memory GIB",
        )
    except Exception as error:  # a crash of the checker is treespec's bug
        return _not_checked(
            fun,
            f"skipped: the checker failed ({type(error).__name__}: {error}); "
            "this is a bug of treespec's, please report it",
        )


def _not_checked(fun: Any, message: str) -> ShapeReport:
    """A report of `fun` not checked, at its definition."""
    inner = inspect.unwrap(getattr(fun, "__wrapped__", fun))
    code = getattr(inner, "__code__", None)
    name = getattr(fun, "__qualname__", repr(fun))
    file = shown(code.co_filename) if code else "<unknown>"
    line = def_line(inner, code.co_firstlineno if code else 0)
    issue = ShapeIssue("note", file, line, name, message, skipped=True)
    return ShapeReport(name, (issue,))


def _theirs(fun: Any, constraints: tuple[str, ...]) -> tuple[str, ...]:
    """The command's constraints that concern `fun`: those naming one of the
    sizes its annotations name (`n == 2*k` for a function of `"b n"`)."""
    if not constraints:
        return ()
    spec = fun.spec
    names = declared_names([*(p.node for p in spec.params), spec.returns])
    return tuple(c for c in constraints if set(_NAME.findall(c)) & names)


_NAME = re.compile(r"[A-Za-z_]\w*")


def _parsed(constraint: str) -> None:
    """Raise `UsageError` for a `--constraint` JAX cannot read."""
    import jax

    names = dict.fromkeys(
        n
        for n in _NAME.findall(constraint)
        if n not in ("floordiv", "mod", "max", "min")
    )
    try:
        jax.export.symbolic_shape(", ".join(names) or "_", constraints=(constraint,))
    except Exception as error:
        raise UsageError(
            f"--constraint {constraint!r}: not a relation JAX reads ({error}); "
            "write it in JAX's syntax, e.g. 'n == 2*k' or 'b >= 2'"
        ) from None


def _nothing_found(targets: Sequence[str]) -> ShapeIssue:
    shown = " ".join(targets)
    return ShapeIssue(
        "error",
        shown,
        0,
        "check",
        "no function a treespec transform wraps was found: nothing was checked",
    )


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
    if isinstance(found := _unwrapped(value), Transformed):
        if _defined_in(found) == module:
            yield found
    elif isinstance(value, type) and value.__module__ == module:
        for name, attribute in vars(value).items():
            if isinstance(found := _unwrapped(attribute), Transformed):
                if found is not attribute:
                    # Python told the wrapper, not the transform, whose
                    # method it is: told here, as it would have been.
                    found.__set_name__(value, name)
                yield found


def _unwrapped(value: Any) -> Any:
    """The transform under another library's wrapper (`@eqx.filter_jit` or
    `@jax.jit` above `@treespec.jit`: its `__wrapped__`), else `value`."""
    for _ in range(8):  # wrappers of wrappers, never a cycle
        if isinstance(value, Transformed) or not hasattr(value, "__wrapped__"):
            break
        value = value.__wrapped__
    return value


def _defined_in(fun: Any) -> str | None:
    return getattr(innermost(fun), "__module__", None)


def _place(fun: Any) -> tuple[str, int]:
    code = getattr(innermost(fun), "__code__", None)
    return (code.co_filename, code.co_firstlineno) if code else ("", 0)
