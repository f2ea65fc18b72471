"""The README's code blocks and the examples run as written."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import child_env

ROOT = Path(__file__).resolve().parent.parent


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


@pytest.mark.parametrize("index", range(len(_python_blocks(ROOT / "README.md"))))
def test_readme_block_runs(index: int) -> None:
    code = _python_blocks(ROOT / "README.md")[index]
    compiled = compile(code, f"README.md block {index}", "exec", dont_inherit=True)
    exec(compiled, {"__name__": "__readme__"})


def test_readme_opens_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    assert "examples/quickstart.py" in blocks[0]
    assert "pytest" in blocks[1]
    assert text.index(blocks[1]) < text.index("```python")


def test_the_readmes_quick_command_leaves_out_what_conftest_marks_slow() -> None:
    from tests.conftest import SLOW

    text = (ROOT / "README.md").read_text()
    assert 'python -m pytest -m "not slow and not browser"' in text
    assert "about 8 minutes" in text and "about 2" in text
    tests = {path.name for path in (ROOT / "tests").glob("test_*.py")}
    assert set(SLOW) <= tests  # a renamed file would run in the quick part


def test_quickstart_trains_and_explains() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        env=child_env(),
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    losses = [float(m) for m in re.findall(r"loss (\d+\.\d+)", out)]
    assert losses[0] > 10 * losses[-2]
    assert "cfg['hidden']" in out and "Static on Config['hidden']" in out
    assert "Traced 1 time(s) so far." in out and "Still 1 trace(s)" in out
    assert "cfg['activation']: 'tanh' (str) -> 'gelu' (str)" in out
    assert "learning_rate']: 0.1" not in out  # traced: never a retrace


def test_docstring_examples_run() -> None:
    import treespec

    ran = 0
    for name in treespec.__all__:
        # cleandoc: Python 3.13 dedents docstrings when it compiles them,
        # older ones keep the source's indentation; this reads both alike.
        doc = inspect.cleandoc(getattr(treespec, name).__doc__ or "")
        for block in re.findall(r"```python\n(.*?)```", doc, flags=re.S):
            code = textwrap.dedent(block)
            exec(compile(code, f"treespec.{name}", "exec", dont_inherit=True), {})
            ran += 1
    assert ran >= 20  # the public names' examples were found, none skipped
