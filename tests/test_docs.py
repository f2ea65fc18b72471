"""Every Python block in docs/ and README.md runs as written.

Blocks of one page share a namespace, top to bottom, as a reader would run
them. A block whose first line is `# raises: SomeError` must raise that error.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

import treespec

ROOT = Path(__file__).resolve().parent.parent
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
_BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.S | re.M)
_RAISES = re.compile(r"^# raises: (\w+)")


def _blocks(page: Path) -> list[str]:
    return _BLOCK.findall(page.read_text())


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_blocks_run(page: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A real module, as when a reader runs the page as a script: dataclasses and
    # forward references look classes up through sys.modules.
    module = types.ModuleType(f"docs_{page.stem}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    for index, block in enumerate(_blocks(page)):
        code = compile(block, f"{page.name} block {index}", "exec", dont_inherit=True)
        expected = _RAISES.match(block)
        if expected is None:
            exec(code, namespace)
            continue
        error = (
            getattr(treespec, expected.group(1), None)
            or __builtins__[expected.group(1)]
        )  # type: ignore[index]
        with pytest.raises(error):
            exec(code, namespace)


def test_every_page_starts_with_an_example_or_is_reference() -> None:
    for page in PAGES:
        if page.name in ("api.md", "README.md", "performance.md", "static-checking.md"):
            continue
        assert _blocks(page), f"{page} has no runnable example"


def test_public_functions_are_documented() -> None:
    for name in treespec.__all__:
        obj = getattr(treespec, name)
        if name in ("Static", "Dynamic", "Donate"):
            continue
        doc = obj.__doc__ or ""
        assert "```python" in doc, f"{name} has no example"
        if callable(obj) and not isinstance(obj, type):
            assert "**Arguments:**" in doc and "**Returns:**" in doc, name


def test_marker_docstring_examples_run() -> None:
    source = (ROOT / "treespec" / "_markers.py").read_text()
    blocks = re.findall(r"```python\n(.*?)```", source, flags=re.S)
    assert len(blocks) == 3
    for block in blocks:
        exec(compile(block, "treespec._markers", "exec", dont_inherit=True), {})
