"""Type-checker cases: mypy with and without the plugin, and pyright.

Each case file under tests/typing/ marks what it expects on its own line:
`# E: <error code>` for an error, `# N: <note text>` for a reveal_type note.
Lines with no mark must produce nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TYPING = ROOT / "tests" / "typing"
_MARK = re.compile(r"#\s*([EN]):\s*(.+?)\s*$")
_LINE = re.compile(
    r"^(?P<file>[^:]+):(?P<line>\d+): (?P<kind>error|note): (?P<text>.*)$"
)


def _expected(folder: Path) -> set[tuple[str, int, str]]:
    out = set()
    for path in sorted(folder.glob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            mark = _MARK.search(line)
            if mark:
                out.add((path.name, number, f"{mark.group(1)}: {mark.group(2)}"))
    return out


def _mypy(folder: Path, config: Path) -> set[tuple[str, int, str]]:
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(config),
            "--no-incremental",
            "--show-error-codes",
            "--no-error-summary",
            "--hide-error-context",
            str(folder),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=900,
        check=False,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
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
        else:
            got.add((name, int(match["line"]), f"N: {match['text']}"))
    return got


def test_plugin_cases() -> None:
    folder = TYPING / "plugin"
    assert len(list(folder.glob("*.py"))) >= 40
    assert _mypy(folder, TYPING / "mypy-plugin.ini") == _expected(folder)


def test_plain_mypy_sees_markers_as_their_types() -> None:
    folder = TYPING / "plain"
    assert _mypy(folder, TYPING / "mypy-plain.ini") == _expected(folder)


def test_plugin_never_imports_jax() -> None:
    code = "import sys, treespec.mypy_plugin; assert 'jax' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.mark.skipif(shutil.which("basedpyright") is None, reason="basedpyright missing")
def test_pyright_reports_nothing_on_the_clean_cases() -> None:
    clean = sorted(str(p) for p in (TYPING / "plugin").glob("ok_*.py"))
    done = subprocess.run(
        ["basedpyright", "--outputjson", *clean],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
        check=False,
    )
    import json

    report = json.loads(done.stdout)
    errors = [d for d in report["generalDiagnostics"] if d["severity"] == "error"]
    assert errors == [], errors
