"""Every Python block in docs/ and README.md runs as written.

Blocks of one page share a namespace, top to bottom, as a reader would run
them. A block whose first line is `# raises: SomeError` must raise that error.
A `text` block right after Python blocks (no other code block between) shows
their output: it must be what they print, bar trailing whitespace.

Code lines fit the site's code box, and the built site shows this checkout's
version and loads the stylesheet that wraps output blocks.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import io
import re
import sys
import types
from collections.abc import Iterator
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


#: The characters a code box of the site shows on a desktop screen (Material's
#: default width): a longer line is cut off there.
CODE_BOX = 76

#: A fence opening or closing a code block: its indentation, fence, language.
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*\{?\.?([\w+-]*)")


def _code_lines(text: str) -> Iterator[tuple[str, int, str]]:
    """`(language, line number, line)` of every line inside a fenced block,
    at any indentation, less that of its fence."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        found = _FENCE.match(line)
        if fence is None:
            if found:
                fence = found
            continue
        if found and found.group(2).startswith(fence.group(2)) and not found.group(3):
            fence = None
            continue
        yield fence.group(3), number, line[len(fence.group(1)) :]


def _too_long(text: str) -> list[str]:
    """The code lines longer than the code box shows; output (`text`) blocks
    wrap instead (docs/stylesheets/extra.css)."""
    return [
        f"line {number} ({len(line)} characters, {language or 'no language'})"
        for language, number, line in _code_lines(text)
        if language != "text" and len(line) > CODE_BOX
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_code_lines_fit_the_code_box(page: Path) -> None:
    too_long = _too_long(page.read_text())
    assert not too_long, f"{page.relative_to(ROOT)}: {too_long}"


def test_long_code_lines_are_found() -> None:
    long = "x" * (CODE_BOX + 1)
    page = (
        f"```python\n{'x' * CODE_BOX}\n```\n\n```text\n{long}\n```\n\n"
        f"!!! note\n\n    ```toml\n    {long}\n    ```\n\n````ini\n```\n{long}\n````\n"
    )
    assert _too_long(page) == [
        f"line 12 ({CODE_BOX + 1} characters, toml)",
        f"line 17 ({CODE_BOX + 1} characters, ini)",
    ]


def _api_objects() -> dict[str, Any]:
    """The objects docs/api.md documents (`::: treespec.jit`), by identifier."""
    found = {}
    for name in re.findall(r"^::: (\S+)", (ROOT / "docs" / "api.md").read_text(), re.M):
        module, _, attribute = name.rpartition(".")
        found[name] = getattr(importlib.import_module(module), attribute)
    return found


def _api_docstrings() -> dict[str, str]:
    """The docstrings the API page shows: each object's, and its members'."""
    docs = {}
    for name, obj in _api_objects().items():
        docs[name] = inspect.getdoc(obj) or ""
        if isinstance(obj, type):
            for member, value in vars(obj).items():
                if not member.startswith("_") or member == "__call__":
                    docs[f"{name}.{member}"] = inspect.getdoc(value) or ""
    return docs


def test_api_page_documents_every_public_name() -> None:
    shown = {name.removeprefix("treespec.") for name in _api_objects()}
    assert set(treespec.__all__) <= shown


def test_api_code_lines_fit_the_code_box() -> None:
    docstrings = _api_docstrings()
    assert "treespec._errors.Issue.format" in docstrings
    # The markers' docstrings are in the source only (at runtime an alias has
    # Annotated's); their blocks are not indented there.
    docstrings["treespec._markers"] = (ROOT / "treespec" / "_markers.py").read_text()
    for name, doc in docstrings.items():
        assert not _too_long(doc), f"{name}: {_too_long(doc)}"


def test_api_examples_run() -> None:
    # Those of treespec.__all__ run in tests/test_examples.py too; this covers the
    # classes the page shows that are not importable from treespec.
    ran = set()
    for name, doc in _api_docstrings().items():
        for index, block in enumerate(re.findall(r"```python\n(.*?)```", doc, re.S)):
            code = compile(inspect.cleandoc(block), f"{name} {index}", "exec")
            with contextlib.redirect_stdout(io.StringIO()):
                exec(code, {})
            ran.add(name)
    not_exported = {"treespec._stages.Lowered", "treespec._stages.Compiled"}
    assert not_exported | {"treespec._errors.Issue", "treespec.jit"} <= ran


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as `mkdocs build` makes it from this checkout."""
    pytest.importorskip("mkdocs", reason="the dev extra builds the docs")
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    where = tmp_path_factory.mktemp("site")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NO_MKDOCS_2_WARNING", "1")
        config = load_config(str(ROOT / "mkdocs.yml"), site_dir=str(where))
        build(config)
    return where


def _source_version() -> str:
    """`__version__` as treespec/__init__.py writes it (not as installed)."""
    module = ast.parse((ROOT / "treespec" / "__init__.py").read_text())
    (value,) = (
        node.value
        for node in module.body
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
    )
    return str(ast.literal_eval(value))


def test_site_shows_the_version(site: Path) -> None:
    version = _source_version()
    for page in ("index.html", "api/index.html", "transforms/jit/index.html"):
        footer = (site / page).read_text().partition('class="md-footer"')[2]
        assert f"treespec {version}" in footer, page


def test_site_wraps_output_blocks(site: Path) -> None:
    page = (site / "validation" / "index.html").read_text()
    assert 'href="../stylesheets/extra.css"' in page
    assert 'class="language-text highlight"' in page
    css = (site / "stylesheets" / "extra.css").read_text()
    rule = css[css.index(".md-typeset .language-text pre > code") :]
    assert "white-space: pre-wrap" in rule.partition("}")[0]


def test_the_home_pages_figures_are_the_benchmarks() -> None:
    # "Why treespec" quotes three ratios of the latest run (benchmarks/README.md).
    ratios = dict(
        re.findall(
            r"^\| (.+?) \| ([\d.]+) \|$",
            _generated(ROOT / "benchmarks" / "README.md"),
            flags=re.M,
        )
    )
    home = " ".join((ROOT / "docs" / "index.md").read_text().split())
    s1 = ratios["S1 treespec.jit (hints) / jax.jit"]
    eqx = float(ratios["S1 equinox.filter_jit / treespec.jit (hints)"])
    method = ratios["method treespec.jit / jax.jit"]
    assert f"{s1}x `jax.jit` for a config plus parameters (S1)" in home
    assert f"`equinox.filter_jit` took {eqx:.1f}x treespec's time" in home
    assert f"{method}x for a jitted method of an Equinox Module" in home


def _benchmark(name: str) -> Any:
    """A script of benchmarks/, imported as a module."""
    import importlib.util

    where = str(ROOT / "benchmarks")
    spec = importlib.util.spec_from_file_location(name[:-3], f"{where}/{name}")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, where)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(where)
        del sys.modules[spec.name]
    return module


def test_the_report_runs_the_long_life_benchmark_and_holds_it_to_its_targets() -> None:
    report = _benchmark("report.py")
    long_life = _benchmark("long_life.py")
    assert "long_life.py" in report.SCRIPTS

    def run(growth: int, traces: int) -> dict[str, dict[str, Any]]:
        base = {"growth": 4 << 20, "traces": 300, "functions": 0, "configs": 7}
        ours = {**base, "growth": growth, "traces": traces}
        return {"jax.jit": base, "equinox.filter_jit": base, "treespec.jit": ours}

    closures, churn = run(6 << 20, 300), run(4 << 20, 1200)
    tables = long_life.render("machine: here", closures, churn, 500, 300, 250)
    rows = report._targets(tables).splitlines()
    for row in (
        "dropped closures: memory treespec.jit / jax.jit | <= 1.25 | 1.50 | **not met",
        "dropped closures: traces treespec.jit / jax.jit | == 1.0 | 1.00 | met",
        "static churn: memory treespec.jit / jax.jit | <= 1.25 | 1.00 | met",
        "static churn: traces treespec.jit / jax.jit | == 1.0 | 4.00 | **not met",
    ):
        assert any(line.startswith(f"| {row}") for line in rows), row
