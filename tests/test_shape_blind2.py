"""The second blind corpus (`tests/shapes/blind2/`): eight model files written
by a session that had read neither the shape checker nor the other corpora,
to a brief (ViT patchify and Swin window attention, audio 1-D convolutions,
a Perceiver, einops, BatchNorm with Equinox state, beam search, CTC,
diffusion and a mixture-density head): 40 clean functions, each with a twin
that has one planted bug, and 6 that are right only under a relation the
annotations do not state. `tests/shapes/blind2/prove.py` is its author's
proof on real arrays; the same ground truth runs here, then the checker, as
for the first blind corpus (`tests/test_shape_blind.py`).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BLIND = Path(__file__).parent / "shapes" / "blind2"


def _load_cases() -> Any:
    """The corpus's `cases.py`, under a name of its own (the first blind
    corpus has a `cases` module too); it imports the model files by their
    names from its folder."""
    spec = importlib.util.spec_from_file_location("blind2_cases", BLIND / "cases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["blind2_cases"] = module
    spec.loader.exec_module(module)
    return module


cases = _load_cases()

FILES = sorted(p.name for p in BLIND.glob("b2_*.py"))

#: Twins the checker reports no error for, and what it does instead.
MISSED = {
    "ctc_forward_bug": (
        "a relation note, not an error: the bug adds a (b, 2l+1) array to a "
        "(t-1, 2l+1) one, which the checker reads as the relation b == t - 1 "
        "the annotations do not state"
    ),
}


def _pair_id(pair: tuple[Any, ...]) -> str:
    return f"{Path(pair[0].__file__).stem}:{pair[2]}"


@pytest.mark.parametrize("pair", cases.PAIRS, ids=_pair_id)
def test_the_clean_function_runs_and_its_twin_fails_at_distinct_sizes(
    pair: tuple[Any, ...],
) -> None:
    module, clean, twin, build, distinct, lucky, _ = pair
    clean_fn, twin_fn = getattr(module, clean), getattr(module, twin)
    for sizes in [*distinct, *lucky]:
        cases.run(clean_fn, build, sizes)
    for sizes in lucky:
        cases.run(twin_fn, build, sizes)  # a quick test's sizes: it passes
    for sizes in distinct:
        with pytest.raises(cases.SHAPE_ERRORS):
            cases.run(twin_fn, build, sizes)
    ok, line, why = cases.twin_diff(module, clean, twin)
    assert ok, f"{twin}: {why} (bug at line {line})"


@pytest.mark.parametrize(
    "relation", cases.RELATIONS, ids=lambda r: f"{Path(r[0].__file__).stem}:{r[1]}"
)
def test_a_relation_function_runs_where_its_relation_holds(
    relation: tuple[Any, ...],
) -> None:
    module, name, build, sizes, _ = relation
    for each in sizes:
        cases.run(getattr(module, name), build, each)


@functools.cache
def _findings() -> dict[str, list[tuple[int, str, str]]]:
    """What `python -m treespec check` prints for the files, by function:
    (line, severity, message)."""
    done = subprocess.run(
        [sys.executable, "-m", "treespec", "check", *FILES],
        cwd=BLIND,
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


def _span(module: Any, name: str) -> range:
    """The lines of a function (or a class, for a decorated `__call__`)."""
    tree = ast.parse(Path(module.__file__).read_text())
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            return range(node.lineno, (node.end_lineno or node.lineno) + 1)
    raise LookupError(name)


def _twins() -> list[Any]:
    return [
        pytest.param(
            pair,
            id=_pair_id(pair),
            marks=[pytest.mark.xfail(strict=True, reason=MISSED[pair[2]])]
            if pair[2] in MISSED
            else [],
        )
        for pair in cases.PAIRS
    ]


@pytest.mark.parametrize("pair", _twins())
def test_the_checker_reports_each_twin_at_its_bug_or_where_it_surfaces(
    pair: tuple[Any, ...],
) -> None:
    module, _, twin, *_ = pair
    _, bug, _ = cases.twin_diff(module, pair[1], twin)
    span = _span(module, twin)
    errors = [f for f in _findings().get(cases.qualname(twin), []) if f[1] == "error"]
    assert errors, f"{twin}: no error ({_findings().get(cases.qualname(twin))})"
    later = [range(bug, span.stop)]
    for at, _, message in errors:
        called = re.search(r"called at line (\d+)\)", message)
        line = int(called.group(1)) if called else at
        assert any(line in r for r in later), (twin, bug, at, message)


def _cleans() -> list[str]:
    names = [cases.qualname(pair[1]) for pair in cases.PAIRS]
    return names + [relation[1] for relation in cases.RELATIONS]


@pytest.mark.parametrize("function", _cleans())
def test_the_checker_reports_no_error_in_a_clean_function(function: str) -> None:
    findings = _findings().get(function, [])
    assert not [f for f in findings if f[1] == "error"], findings
    assert not [f for f in findings if f[2].startswith("skipped")], findings
