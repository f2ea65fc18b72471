"""Type-checker cases: mypy with and without the plugin, and pyright.

Each case file under tests/typing/ marks what it expects on its own line:
`# E: <error code>` for an error (`# E: <code>, <code>` for two on one line),
`# N: <note text>` for a reveal_type note. Lines with no mark must produce
nothing. mypy's list of overload variants after a `call-overload` error belongs
to that error and is not marked.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import HAS_TREE_STATIC, child_env, run_mypy

ROOT = Path(__file__).resolve().parent.parent
TYPING = ROOT / "tests" / "typing"
_MARK = re.compile(r"#\s*([EN]):\s*(.+?)\s*$")
_LINE = re.compile(
    r"^(?P<file>[^:]+):(?P<line>\d+): (?P<kind>error|note): (?P<text>.*)$"
)


#: Case files that need a newer JAX than the floor, left out on an older one.
_NEWER_JAX = () if HAS_TREE_STATIC else ("held_field_tree_static.py",)


def _expected(folder: Path) -> set[tuple[str, int, str]]:
    out = set()
    for path in sorted(folder.glob("*.py")):
        if path.name in _NEWER_JAX:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            mark = _MARK.search(line)
            if mark and mark.group(1) == "E":
                for code in mark.group(2).split(", "):
                    out.add((path.name, number, f"E: {code}"))
            elif mark:
                out.add((path.name, number, f"N: {mark.group(2)}"))
    return out


#: The notes mypy adds under a `call-overload` error: the variants it tried.
_OVERLOAD_NOTE = re.compile(r"^(Possible overload variants?:|    def )")


def _mypy(folder: Path, config: Path) -> set[tuple[str, int, str]]:
    done = run_mypy(folder, config, ROOT, skip=_NEWER_JAX)
    got = set()
    for line in done.stdout.splitlines():
        match = _LINE.match(line)
        assert match, line
        if Path(match["file"]).resolve().parent != folder:
            continue  # treespec's own modules, checked with laxer settings here
        name = Path(match["file"]).name
        if match["kind"] == "error":
            code = re.search(r"\[([a-z-]+)\]$", match["text"])
            assert code, line
            got.add((name, int(match["line"]), f"E: {code.group(1)}"))
        elif not _OVERLOAD_NOTE.match(match["text"]):
            got.add((name, int(match["line"]), f"N: {_unqualified(match['text'])}"))
    return got


def _unqualified(note: str) -> str:
    """A revealed type as mypy 2 prints it: mypy 1 qualifies builtins
    (`builtins.int`), mypy 2 does not (`int`)."""
    return re.sub(r"\bbuiltins\.", "", note)


def test_plugin_cases() -> None:
    # Every module of treespec/mypy_plugin/: its README says which case files
    # exercise which module.
    folder = TYPING / "plugin"
    assert len(list(folder.glob("*.py"))) >= 40
    assert _mypy(folder, TYPING / "mypy-plugin.ini") == _expected(folder)


#: Case modules that import each other: a models module and the module using it.
_CROSS_MODULE = (
    "ok_xmod_models.py",
    "ok_xmod_train.py",
    "xmod_models_bad.py",
    "xmod_train_bad.py",
)


def _findings(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return sorted(
        line
        for line in done.stdout.splitlines()
        if line.startswith("cases") and ": note: " not in line
    )


def test_same_findings_clean_warm_and_daemon(tmp_path: Path) -> None:
    # mypy_plugin/class_facts.py (the record in the metadata, shown to dmypy)
    # and markers.py (a marker's dependencies on the classes it looked into).
    # A clean run, a warm-cache run after an unrelated edit, and dmypy report
    # the same: the models module comes from the cache (its class bodies gone)
    # when the training module is checked again.
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "__init__.py").write_text("")  # the cases import each other relatively
    for name in _CROSS_MODULE:
        (cases / name).write_text((TYPING / "plugin" / name).read_text())
    env = {
        **os.environ,
        "MYPYPATH": str(ROOT),
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
    }
    flags = [
        "--config-file",
        str(TYPING / "mypy-plugin.ini"),
        "--show-error-codes",
        "--no-error-summary",
        "--hide-error-context",
        "cases",
    ]

    def run(*args: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=900,
            check=False,
        )
        return _findings(done)

    cache = ["--cache-dir", str(tmp_path / "cache")]
    clean = run("-m", "mypy", *cache, *flags)
    assert len(clean) >= 6, clean
    for name in ("ok_xmod_train.py", "xmod_train_bad.py"):
        with (cases / name).open("a") as f:
            f.write("\nunrelated_edit = 1\n")
    warm = run("-m", "mypy", *cache, *flags)
    assert warm == clean
    status = ["--status-file", str(tmp_path / "dmypy.json")]
    try:
        daemon = run("-m", "mypy.dmypy", *status, "run", "--", *flags)
        assert daemon == clean
        again = run("-m", "mypy.dmypy", *status, "run", "--", *flags)
        assert again == clean
        # A field specifier edited in the models module (no type changes):
        # the daemon and a warm run both recheck the module that uses it.
        models = cases / "ok_xmod_models.py"
        text = models.read_text()
        edited = text.replace(
            "table: set[int] = eqx.field(static=True)",
            "table: set[int]",
            1,
        )
        assert edited != text
        models.write_text(edited)
        daemon = run("-m", "mypy.dmypy", *status, "run", "--", *flags)
        new = sorted(set(daemon) - set(clean))
        assert len(new) == 1, new
        assert "ok_xmod_train.py" in new[0], new
        assert "treespec-unhashable-static" in new[0], new
        assert run("-m", "mypy", *cache, *flags) == daemon
    finally:
        subprocess.run(
            [sys.executable, "-m", "mypy.dmypy", *status, "stop"],
            capture_output=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
            check=False,
        )


def test_an_internal_failure_is_a_note_and_mypy_goes_on(tmp_path: Path) -> None:
    # mypy_plugin/markers.py: the plugin's checks (here nodes.Builder) fail
    # inside (a stand-in for any bug): mypy still
    # finishes, with a note on the annotation and its own errors intact.
    (tmp_path / "broken_plugin.py").write_text(
        "import treespec.mypy_plugin as p\n"
        "from treespec.mypy_plugin.nodes import Builder\n"
        "def boom(self, t, depth=0):\n"
        "    raise RecursionError('boom')\n"
        "Builder.node = boom\n"
        "plugin = p.plugin\n"
    )
    (tmp_path / "mypy.ini").write_text("[mypy]\nplugins = broken_plugin\n")
    (tmp_path / "case.py").write_text(
        "from treespec import Static\n"
        "def f(n: Static[int]) -> None: ...\n"
        "x: int = 'three'\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "case.py"],
        capture_output=True,
        text=True,
        env=child_env((tmp_path,), MYPYPATH=str(ROOT)),
        cwd=tmp_path,
        timeout=900,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "INTERNAL ERROR" not in done.stdout + done.stderr
    assert "case.py:2: note: treespec: this annotation was not checked" in done.stdout
    assert "case.py:3: error: Incompatible types in assignment" in done.stdout


def test_plain_mypy_sees_markers_as_their_types() -> None:
    folder = TYPING / "plain"
    assert _mypy(folder, TYPING / "mypy-plain.ini") == _expected(folder)


def test_plugin_never_imports_jax() -> None:
    # mypy_plugin/__init__.py and every module it imports.
    code = "import sys, treespec.mypy_plugin; assert 'jax' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_plugin_package_an_edit_to_any_module_invalidates_the_cache(
    tmp_path: Path,
) -> None:
    # mypy_plugin/__init__.py: mypy keys its cache on the plugin module's
    # `__version__` and the bytes of its `__file__`, the package's __init__.py
    # alone; an edit to another module of the package must change that key too.
    import shutil

    shutil.copytree(
        ROOT / "treespec", tmp_path / "treespec", ignore=shutil.ignore_patterns("*.pyc")
    )
    code = (
        "import treespec.mypy_plugin as p\n"
        "from mypy.build import take_module_snapshot\n"
        "print(take_module_snapshot(p))\n"
    )

    def snapshot() -> str:
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env=child_env((tmp_path,)),
            cwd=tmp_path,
            timeout=120,
            check=True,
        )
        return done.stdout.strip()

    before = snapshot()
    assert snapshot() == before
    with (tmp_path / "treespec" / "mypy_plugin" / "nodes.py").open("a") as f:
        f.write("\n# an edit\n")
    assert snapshot() != before


def _pyright(paths: list[str]) -> list[dict[str, Any]]:
    """basedpyright's error diagnostics, run by this interpreter (no PATH needed)."""
    if importlib.util.find_spec("basedpyright") is None:
        pytest.skip("basedpyright is not installed (the dev extra installs it)")
    done = subprocess.run(
        # --pythonpath: resolve imports in this interpreter's environment, not
        # in whichever `python` is first on PATH (none, outside an activated venv).
        [
            sys.executable,
            "-m",
            "basedpyright",
            "--pythonpath",
            sys.executable,
            "--outputjson",
            *paths,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
        check=False,
    )
    report = json.loads(done.stdout)
    return [d for d in report["generalDiagnostics"] if d["severity"] == "error"]


def test_pyright_reports_nothing_on_the_clean_cases() -> None:
    clean = sorted(str(p) for p in (TYPING / "plugin").glob("ok_*.py"))
    assert len(clean) >= 10
    errors = _pyright(clean)
    assert errors == [], errors


def test_pyright_reports_the_deliberate_errors() -> None:
    # Markers are their types and transforms keep signatures, for pyright too:
    # a wrong call of a jitted function is an error on its line.
    folder = TYPING / "pyright"
    errors = _pyright(sorted(str(p) for p in folder.glob("*.py")))
    got = {
        (Path(d["file"]).name, d["range"]["start"]["line"] + 1, f"E: {d['rule']}")
        for d in errors
    }
    expected = _expected(folder)
    assert len(expected) >= 3
    assert got == expected, errors


_OUTSIDE = """\
import numpy as np

import treespec
from treespec import Static


def f(x: Static[np.ndarray]) -> None: ...


treespec.jit(f)(1)
"""


def test_type_checkers_resolve_the_installed_package_from_outside(
    tmp_path: Path,
) -> None:
    # As a user's project would: a folder outside the checkout, nothing on
    # PYTHONPATH or MYPYPATH, treespec found only through its installation
    # (the README's editable install, whose path file both checkers follow).
    import importlib.metadata

    try:
        importlib.metadata.version("jax-treespec")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("jax-treespec is not installed (the README installs it)")
    (tmp_path / "user.py").write_text(_OUTSIDE)
    (tmp_path / "mypy.ini").write_text("[mypy]\nplugins = treespec.mypy_plugin\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    run: dict[str, Any] = {
        "capture_output": True,
        "text": True,
        "cwd": tmp_path,
        "env": env,
    }
    outside = subprocess.run(
        [sys.executable, "-c", "import mypy"],
        check=False,
        **run,
    )
    if outside.returncode != 0:  # a TPU VM: .ci/tpu-env installs it under /tmp
        pytest.skip(
            "this Python finds mypy only through PYTHONPATH, which the test drops"
        )
    mypy = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "user.py"],
        timeout=600,
        check=False,
        **run,
    )
    assert "[treespec-unhashable-static]" in mypy.stdout, mypy.stdout  # plugin
    assert "[arg-type]" in mypy.stdout and "import" not in mypy.stdout, mypy.stdout
    pyright = subprocess.run(
        [
            sys.executable,
            "-m",
            "basedpyright",
            "--pythonpath",
            sys.executable,
            "user.py",
        ],
        timeout=600,
        check=False,
        **run,
    )
    assert "reportArgumentType" in pyright.stdout, pyright.stdout
    assert "reportMissingImports" not in pyright.stdout, pyright.stdout


def test_a_call_of_a_transformed_function_is_named_for_it(tmp_path: Path) -> None:
    # `signature.py`: mypy's own wording for a plain function, not
    # `Argument 2 to "__call__" of "Jitted"`.
    (tmp_path / "calls.py").write_text(
        "import jax\n"
        "import jax.numpy as jnp\n"
        "import treespec\n"
        "from treespec import Static\n"
        "\n"
        "@treespec.jit\n"
        "def step(x: jax.Array, n: Static[int]) -> jax.Array:\n"
        "    return x * n\n"
        "\n"
        "step(jnp.ones(2), 'a')\n"
        "treespec.grad(step)(jnp.ones(2), 'a')\n"
    )
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nplugins = treespec.mypy_plugin\n")
    out = run_mypy(tmp_path / "calls.py", config, tmp_path).stdout
    lines = out.splitlines()
    assert len(lines) == 2, out
    assert 'calls.py:10: error: Argument 2 to "step" has incompatible' in lines[0]
    # Called on what a call returned, there is no name to give: mypy's own.
    assert 'Argument 2 to "__call__" of "Transformed"' in lines[1], out
