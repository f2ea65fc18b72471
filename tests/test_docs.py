"""Every Python block in docs/ and README.md runs as written.

Blocks of one page share a namespace, top to bottom, as a reader would run
them. A block whose first line is `# raises: SomeError` must raise that error.
A `text` block right after Python blocks (no other code block between) shows
their output: it must be what they print, bar trailing whitespace.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import treespec

ROOT = Path(__file__).resolve().parent.parent
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
_BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.S | re.M)
_FENCED = re.compile(r"^```(\w*)\n(.*?)^```", flags=re.S | re.M)
_RAISES = re.compile(r"^# raises: (\w+)")


def _blocks(page: Path) -> list[str]:
    return _BLOCK.findall(page.read_text())


def _fenced(page: Path) -> list[tuple[str, str]]:
    """Every fenced block of the page in order: (language, body)."""
    return _FENCED.findall(page.read_text())


def _normalised(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def _run(block: str, name: str, namespace: dict[str, Any]) -> str:
    """Run one block; what it printed."""
    code = compile(block, name, "exec", dont_inherit=True)
    expected = _RAISES.match(block)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        if expected is None:
            exec(code, namespace)
        else:
            error = (
                getattr(treespec, expected.group(1), None)
                or __builtins__[expected.group(1)]  # type: ignore[index]
            )
            with pytest.raises(error):
                exec(code, namespace)
    return printed.getvalue()


def _run_page(page: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Run the page's Python blocks; (shown, printed) for each output block."""
    # A real module, as when a reader runs the page as a script: dataclasses and
    # forward references look classes up through sys.modules.
    module = types.ModuleType(f"docs_{page.stem}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    outputs: list[tuple[str, str]] = []
    printed = ""  # by the Python blocks since the last other block
    ran = False
    for index, (language, body) in enumerate(_fenced(page)):
        if language == "python":
            printed += _run(body, f"{page.name} block {index}", namespace)
            ran = True
            continue
        if language == "text" and ran:
            outputs.append((body, printed))
        printed, ran = "", False
    return outputs


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_blocks_run(page: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _run_page(page, monkeypatch)


def _output_blocks(page: Path) -> int:
    """How many `text` blocks of the page come right after a Python block."""
    fenced = _fenced(page)
    return sum(
        lang == "text" and fenced[i - 1][0] == "python"
        for i, (lang, _) in enumerate(fenced)
        if i
    )


@pytest.mark.parametrize(
    "page",
    [p for p in PAGES if _output_blocks(p)],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_page_text_blocks_show_what_the_code_prints(
    page: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outputs = _run_page(page, monkeypatch)
    assert len(outputs) == _output_blocks(page)
    for shown, printed in outputs:
        assert _normalised(printed) == _normalised(shown)


def test_output_blocks_are_found_and_normalised() -> None:
    # docs/validation.md shows the error its example prints; static-checking.md's
    # text blocks show code, not output (no Python block right before them).
    assert _output_blocks(ROOT / "docs" / "validation.md") == 1
    assert _output_blocks(ROOT / "docs" / "static-checking.md") == 0
    assert _normalised("\na  \n\nb\t\n\n") == "a\n\nb"


def test_every_page_starts_with_an_example_or_is_reference() -> None:
    for page in PAGES:
        if page.name in ("api.md", "README.md", "performance.md", "static-checking.md"):
            continue
        assert _blocks(page), f"{page} has no runnable example"
        # Its first code block (past shell commands such as an install line) is
        # the Python example, not another language.
        first = next(lang for lang, _ in _fenced(page) if lang not in ("bash", "sh"))
        assert first == "python", f"{page} starts with a {first} block"


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


#: A benchmark table row: | contender | median per call | / jax.jit |
_ROW = re.compile(r"^\| ([^|]+?) \| [^|]+ \| ([\d.]+) \|$", flags=re.M)


def _ratio_range(text: str, contender: str) -> str:
    """`lo-hi` of `contender`'s `/ jax.jit` ratios over the S1/S2 tables."""
    ratios = []
    for table in re.split(r"^#+ ", text, flags=re.M):
        if not re.match(r"S[12]:", table):
            continue
        for name, ratio in _ROW.findall(table):
            if name.startswith(contender):
                ratios.append(float(ratio))
    assert ratios, contender
    return f"{min(ratios):.1f}-{max(ratios):.1f}x"


def test_readme_ratios_match_the_benchmarks() -> None:
    bench = (ROOT / "benchmarks" / "README.md").read_text()
    row = next(
        line
        for line in (ROOT / "README.md").read_text().splitlines()
        if line.startswith("| per-call time on a cache hit")
    )
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[2] == _ratio_range(bench, "equinox.filter_jit")
    assert cells[3].split()[0] == _ratio_range(bench, "treespec.jit")


def _generated(page: Path) -> str:
    """The section `benchmarks/report.py` writes into a page."""
    text = page.read_text()
    start, end = "<!-- benchmarks:start -->", "<!-- benchmarks:end -->"
    assert text.count(start) == 1 and text.count(end) == 1, page
    return text[text.index(start) : text.index(end)]


def test_the_performance_page_shows_the_benchmarks_latest_run() -> None:
    # One run, written into both pages by benchmarks/report.py: the same
    # tables, with the machine and its load stated.
    page = _generated(ROOT / "docs" / "performance.md")
    readme = _generated(ROOT / "benchmarks" / "README.md")
    assert page == readme
    assert "load average" in page and "CPU cores" in page
    assert "### dispatch.py" in page and "### Targets" in page
