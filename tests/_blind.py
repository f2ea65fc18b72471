"""The tests of a blind corpus (`tests/shapes/blind/`, `tests/shapes/blind2/`):
each corpus's test file makes them for its `cases` module, its model files
and the twins the checker is known to miss (`corpus_tests`).

- The ground truth, on real arrays: each clean function runs at distinct
  sizes and at its twin's lucky ones; each twin runs at the lucky sizes and
  fails at the distinct ones; the twin differs from its clean function in
  the one line marked `# BUG:`; each relation function runs where its
  relation holds.
- The checker, run once over the files: each twin has an error at its bug's
  line or at a later line of the twin, where the wrong size surfaces; no
  clean or relation function has an error or is skipped. A twin the
  checker misses is an `xfail(strict=True)` saying what it does.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import functools
import re
import subprocess
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import pytest

from .conftest import child_env

#: What a twin raises at distinct sizes: JAX's shape errors, in its body.
SHAPE_ERRORS = (TypeError, ValueError)


def run(fn: Any, build: Callable[[Any, Any], Any], sizes: Any) -> Any:
    """`fn` on fresh arrays of `sizes` (a corpus's `build`), its result ready."""
    return jax.block_until_ready(build(fn, sizes))


def qualname(name: str, method_classes: Collection[str]) -> str:
    """The name the checker reports a function by (a class's `__call__`)."""
    return f"{name}.__call__" if name in method_classes else name


def _node_lines(path: str, name: str) -> tuple[int, list[str]]:
    """The first line (its decorators') and the lines of a top-level function
    or class."""
    text = Path(path).read_text()
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return start, text.splitlines()[start - 1 : node.end_lineno]
    raise LookupError(f"{name} not in {path}")


def twin_diff(module: Any, clean: str, twin: str) -> tuple[bool, int | None, str]:
    """Whether the twin differs from its clean function in the one line marked
    `# BUG:` (or that line stands for several clean lines: a dropped
    projection); `(ok, the bug's line, why)`."""
    path = module.__file__
    _, c_lines = _node_lines(path, clean)
    t_start, t_lines = _node_lines(path, twin)
    c_norm = [ln.replace(clean, "<NAME>") for ln in c_lines]
    # The code only: the BUG comment stripped.
    t_code = [ln.replace(twin, "<NAME>").split("  # BUG:")[0] for ln in t_lines]
    matcher = difflib.SequenceMatcher(a=c_norm, b=t_code, autojunk=False)
    diffs = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    bug_lines = [t_start + k for k, ln in enumerate(t_lines) if "# BUG:" in ln]
    if len(bug_lines) != 1:
        return False, None, f"{len(bug_lines)} '# BUG:' comments"
    if len(diffs) != 1:
        return False, bug_lines[0], f"{len(diffs)} differing hunks"
    tag, i1, i2, j1, j2 = diffs[0]
    if tag != "replace" or j2 - j1 != 1:
        return False, bug_lines[0], f"diff is {tag} of {i2 - i1} -> {j2 - j1} lines"
    if t_start + j1 != bug_lines[0]:
        return False, bug_lines[0], "the changed line is not the BUG line"
    if i2 - i1 == 1:
        return True, bug_lines[0], "one line differs"
    return True, bug_lines[0], f"{i2 - i1} clean lines became the one BUG line"


def _on_the_cpu(twin: str, crashes: Mapping[str, str]) -> Any:
    """Where a twin runs at its lucky sizes: on the default device, or on the
    CPU off it when `crashes` names the twin (a program that crashes another
    device's compiler, which says nothing of the checker's truth)."""
    if twin in crashes and jax.default_backend() != "cpu":
        return jax.default_device(jax.devices("cpu")[0])
    return contextlib.nullcontext()


def corpus_tests(
    cases: Any,
    folder: Path,
    files: Sequence[str],
    missed: Mapping[str, str],
    crashes: Mapping[str, str] = {},
) -> dict[str, Callable[..., None]]:
    """The corpus's tests, by name, for its test file's namespace. `crashes`:
    twins whose program at their lucky sizes crashes an accelerator's
    compiler, with why; off the CPU they run there on the CPU."""

    def _pair_id(pair: tuple[Any, ...]) -> str:
        return f"{Path(pair[0].__file__).stem}:{pair[2]}"

    @pytest.mark.parametrize("pair", cases.PAIRS, ids=_pair_id)
    def test_the_clean_function_runs_and_its_twin_fails_at_distinct_sizes(
        pair: tuple[Any, ...],
    ) -> None:
        module, clean, twin, build, distinct, lucky, _ = pair
        clean_fn, twin_fn = getattr(module, clean), getattr(module, twin)
        for sizes in [*distinct, *lucky]:
            run(clean_fn, build, sizes)
        for sizes in lucky:
            with _on_the_cpu(twin, crashes):
                run(twin_fn, build, sizes)  # a quick test's sizes: it passes
        for sizes in distinct:
            with pytest.raises(SHAPE_ERRORS):
                run(twin_fn, build, sizes)
        ok, line, why = twin_diff(module, clean, twin)
        assert ok, f"{twin}: {why} (bug at line {line})"

    @pytest.mark.parametrize(
        "relation",
        cases.RELATIONS,
        ids=lambda r: f"{Path(r[0].__file__).stem}:{r[1]}",
    )
    def test_a_relation_function_runs_where_its_relation_holds(
        relation: tuple[Any, ...],
    ) -> None:
        module, name, build, sizes, _ = relation
        for each in sizes:
            run(getattr(module, name), build, each)

    @functools.cache
    def findings() -> dict[str, list[tuple[int, str, str]]]:
        """What `python -m treespec check` prints for the files, by function:
        (line, severity, message)."""
        done = subprocess.run(
            [sys.executable, "-m", "treespec", "check", *files],
            cwd=folder,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 1, done.stdout + done.stderr  # errors found
        assert "Traceback" not in done.stdout + done.stderr, done.stderr
        found: dict[str, list[tuple[int, str, str]]] = {}
        for line in done.stdout.splitlines():
            match = re.match(r"[\w.]+\.py:(\d+): (error|note): ([\w.]+): (.*)", line)
            if match:
                at, severity, function, message = match.groups()
                found.setdefault(function, []).append((int(at), severity, message))
        return found

    def span(module: Any, name: str) -> range:
        """The lines of a function (or a class, for a decorated `__call__`)."""
        tree = ast.parse(Path(module.__file__).read_text())
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
                return range(node.lineno, (node.end_lineno or node.lineno) + 1)
        raise LookupError(name)

    twins = [
        pytest.param(
            pair,
            id=_pair_id(pair),
            marks=[pytest.mark.xfail(strict=True, reason=missed[pair[2]])]
            if pair[2] in missed
            else [],
        )
        for pair in cases.PAIRS
    ]

    @pytest.mark.parametrize("pair", twins)
    def test_the_checker_reports_each_twin_at_its_bug_or_where_it_surfaces(
        pair: tuple[Any, ...],
    ) -> None:
        module, _, twin, *_ = pair
        _, bug, _ = twin_diff(module, pair[1], twin)
        lines = span(module, twin)
        name = qualname(twin, cases.METHOD_CLASSES)
        errors = [f for f in findings().get(name, []) if f[1] == "error"]
        assert errors, f"{twin}: no error ({findings().get(name)})"
        later = [range(bug, lines.stop)]
        for at, _, message in errors:
            called = re.search(r"called at line (\d+)\)", message)
            line = int(called.group(1)) if called else at
            assert any(line in r for r in later), (twin, bug, at, message)

    cleans = [qualname(pair[1], cases.METHOD_CLASSES) for pair in cases.PAIRS]
    cleans += [relation[1] for relation in cases.RELATIONS]

    @pytest.mark.parametrize("function", cleans)
    def test_the_checker_reports_no_error_in_a_clean_function(function: str) -> None:
        found = findings().get(function, [])
        assert not [f for f in found if f[1] == "error"], found
        assert not [f for f in found if f[2].startswith("skipped")], found

    return {name: test for name, test in locals().items() if name.startswith("test_")}
