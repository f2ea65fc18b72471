"""Every Python block in docs/ and README.md runs as written.

Blocks of one page share a namespace, top to bottom, as a reader would run
them; and each block runs alone too, in a fresh process, as a reader who
copies it would run it. A block whose first line is `# raises: SomeError` must
raise that error. A block whose first line is `# file: name.py` is a file the
page tells the reader to save: the page's other blocks may import it. A `text`
block (or an `output` block: aligned output, which scrolls instead of
wrapping) right after Python blocks (no other code block between) shows their
output: it must be what they print, bar trailing whitespace. A `text` block
right after a `python -m mypy FILE` command is what mypy prints.

Code lines fit the site's code box, and the built site shows this checkout's
version and loads the stylesheet that wraps output blocks.
"""

from __future__ import annotations

import ast
import contextlib
import html
import importlib
import importlib.util
import inspect
import io
import itertools
import json
import logging
import re
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import pytest

import treespec

from .conftest import child_env

ROOT = Path(__file__).resolve().parent.parent
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
_BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.S | re.M)
_FENCED = re.compile(r"^```(\w*)\n(.*?)^```", flags=re.S | re.M)
_RAISES = re.compile(r"^(?:# file: \S+\n)?# raises: (\w+)")
_FILE = re.compile(r"^# file: (\S+)\n")
#: Output blocks: `text` wraps its lines, `output` keeps them (aligned columns).
OUTPUT = ("text", "output")


def _files(page: Path) -> dict[str, str]:
    """The files a page tells the reader to save: name -> content."""
    found = {}
    for block in _blocks(page):
        name = _FILE.match(block)
        if name:
            found[name.group(1)] = block
    return found


def _blocks(page: Path) -> list[str]:
    return _BLOCK.findall(page.read_text())


def _fenced(page: Path) -> list[tuple[str, str]]:
    """Every fenced block of the page in order: (language, body)."""
    return _FENCED.findall(page.read_text())


def _normalised(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


_NUMBER = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?")

#: How far a page's printed numbers may stray from the CPU's on another
#: device: a TPU's matmuls take bfloat16 passes by default
#: (`jax_default_matmul_precision`), and a few training steps carry that to
#: about 1e-3 of a loss. The pages show the CPU's output, compared exactly.
DEVICE_RTOL = 2e-2


def _same_output(printed: str, shown: str, backend: str) -> bool:
    """Whether a page's `text` block shows what its code printed: exactly on
    the CPU; elsewhere the same text with each decimal number within
    `DEVICE_RTOL` of the shown one."""
    printed, shown = _normalised(printed), _normalised(shown)
    if backend == "cpu" or printed == shown:
        return printed == shown
    if _NUMBER.split(printed) != _NUMBER.split(shown):
        return False
    pairs = zip(_NUMBER.findall(printed), _NUMBER.findall(shown), strict=True)
    return all(
        abs(float(a) - float(b)) <= DEVICE_RTOL * max(abs(float(b)), 1e-3)
        for a, b in pairs
    )


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


def _run_page(
    page: Path, monkeypatch: pytest.MonkeyPatch, where: Path
) -> list[tuple[str, str]]:
    """Run the page's Python blocks; (shown, printed) for each output block.

    The files the page names are saved in `where`, which is put on the path.
    """
    for name, content in _files(page).items():
        (where / name).write_text(content)
    monkeypatch.syspath_prepend(str(where))
    for name in _files(page):
        monkeypatch.delitem(sys.modules, Path(name).stem, raising=False)
    # A block may add a handler to treespec's logger: it goes with the page.
    logger = logging.getLogger("treespec")
    monkeypatch.setattr(logger, "handlers", list(logger.handlers))
    # A real module, as when a reader runs the page as a script: dataclasses and
    # forward references look classes up through sys.modules.
    module = types.ModuleType(f"docs_{page.stem}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    # As in a fresh process: a page may register its classes' export
    # serialization (JAX's registry refuses a name registered twice).
    from jax._src.export import _export

    for registry in ("serialization_registry", "deserialization_registry"):
        monkeypatch.setattr(_export, registry, dict(getattr(_export, registry)))
    namespace = module.__dict__
    outputs: list[tuple[str, str]] = []
    printed = ""  # by the Python blocks since the last other block
    ran = False
    for index, (language, body) in enumerate(_fenced(page)):
        if language == "python":
            printed += _run(body, f"{page.name} block {index}", namespace)
            ran = True
            continue
        if language in OUTPUT and ran:
            outputs.append((body, printed))
        printed, ran = "", False
    return outputs


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_blocks_run(
    page: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _run_page(page, monkeypatch, tmp_path)


def _page_blocks() -> list[tuple[Path, int, str]]:
    """`(page, index, block)` for every Python block of every page."""
    return [
        (page, index, block)
        for page in PAGES
        for index, block in enumerate(_blocks(page))
    ]


@pytest.fixture(scope="module")
def block_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """tests/_block_server.py: one fresh process per block, forked from one
    that imported JAX once."""
    env = child_env(PYTHONHASHSEED="0")
    env.pop("XLA_FLAGS", None)
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "_block_server.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path_factory.mktemp("blocks"),
        env=env,
    )
    assert server.stdout is not None and server.stdin is not None
    assert json.loads(server.stdout.readline()) == {"ready": True}

    def run(
        name: str, code: str, files: dict[str, str] | None = None
    ) -> dict[str, Any]:
        assert server.stdin is not None and server.stdout is not None
        request = {"name": name, "code": code, "files": files or {}}
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        result: dict[str, Any] = json.loads(server.stdout.readline())
        return result

    yield run
    server.stdin.close()
    server.wait(timeout=60)


@pytest.mark.parametrize(
    ("page", "index", "block"),
    _page_blocks(),
    ids=[f"{p.relative_to(ROOT)}-{i}" for p, i, _ in _page_blocks()],
)
def test_block_runs_alone(
    page: Path, index: int, block: str, block_server: Any
) -> None:
    # What the copy button hands over: the block alone, in a new interpreter.
    # With the files the page tells the reader to save, and nothing else.
    result = block_server(f"{page.name} block {index}", block, _files(page))
    assert result["ok"], f"{page.relative_to(ROOT)} block {index}:\n{result['error']}"


def test_a_block_that_leans_on_another_fails_alone(block_server: Any) -> None:
    assert block_server("one", "import jax.numpy as jnp\nx = jnp.ones(2)")["ok"]
    leaning = block_server("two", "print(x)")
    assert not leaning["ok"] and "NameError" in leaning["error"]
    raising = block_server("three", "# raises: SpecError\nimport treespec")
    assert not raising["ok"] and "raised nothing" in raising["error"]
    refused = "# raises: SpecError\nfrom treespec import Static\nStatic[int][0]"
    assert not block_server("four", refused)["ok"]
    saved = {"helper.py": "# file: helper.py\nVALUE = 3\n"}
    assert block_server("five", "from helper import VALUE", saved)["ok"]
    assert not block_server("six", "from helper import VALUE")["ok"]


#: Run as `python -c`: the script argv[1] in an interpreter where `import
#: <argv[2]>` fails as it does where that package is not installed.
_WITHOUT = """
import runpy, sys
name = sys.argv[2]
class NotInstalled:
    def find_spec(self, fullname, path=None, target=None):
        if fullname == name or fullname.startswith(name + "."):
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
sys.meta_path.insert(0, NotInstalled())
runpy.run_path(sys.argv[1], run_name="__main__")
"""


def _run_without(
    module: str, code: str, where: Path
) -> subprocess.CompletedProcess[str]:
    script = where / "block.py"
    script.write_text(code)
    env = child_env()
    env.pop("XLA_FLAGS", None)
    command = [sys.executable, "-c", _WITHOUT, str(script), module]
    return subprocess.run(
        command, capture_output=True, text=True, cwd=where, env=env, timeout=300
    )


def test_nnx_blocks_run_without_equinox(tmp_path: Path) -> None:
    # A Flax user need not install Equinox to follow the NNX examples: each
    # NNX block runs alone in a fresh interpreter where Equinox is missing.
    blocker = _run_without("equinox", "import equinox\n", tmp_path)
    assert "No module named 'equinox'" in blocker.stderr  # the blocker bites
    nnx_blocks = [
        (page, index, block)
        for page, index, block in _page_blocks()
        if re.search(r"^from flax import nnx|^import flax\.nnx", block, re.M)
    ]
    assert len(nnx_blocks) >= 3  # Interop's NNX section
    for page, index, block in nnx_blocks:
        done = _run_without("equinox", block, tmp_path)
        where = f"{page.relative_to(ROOT)} block {index}"
        assert "equinox" not in done.stderr, f"{where} needs Equinox:\n{done.stderr}"
        raises = _RAISES.match(block)
        if raises is None:
            assert done.returncode == 0, f"{where}:\n{done.stderr}"
        else:  # the block's own error, as the page says
            last = done.stderr.strip().splitlines()[-1]
            kind = rf"^(?:[\w.]+\.)?{raises.group(1)}:"
            assert re.match(kind, last), f"{where}:\n{done.stderr}"


def _output_blocks(page: Path) -> int:
    """How many `text` blocks of the page come right after a Python block."""
    fenced = _fenced(page)
    return sum(
        lang in OUTPUT and fenced[i - 1][0] == "python"
        for i, (lang, _) in enumerate(fenced)
        if i
    )


@pytest.mark.parametrize(
    "page",
    [p for p in PAGES if _output_blocks(p)],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_page_text_blocks_show_what_the_code_prints(
    page: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    outputs = _run_page(page, monkeypatch, tmp_path)
    assert len(outputs) == _output_blocks(page)
    backend = jax.default_backend()
    for shown, printed in outputs:
        assert _same_output(printed, shown, backend), (
            f"on {backend}:\n{_normalised(printed)}\n!=\n{_normalised(shown)}"
        )


#: A command the tests run as the page shows it: mypy, or the shape check.
_COMMAND = re.compile(r"^python -m (mypy|treespec check) (\S+)\n$")


def _command_outputs(page: Path) -> list[tuple[str, str, str]]:
    """`(tool, file, shown output)` for each `python -m mypy FILE` or
    `python -m treespec check FILE` command of the page that is followed by a
    `text` block and names a file the page saves."""
    fenced = _fenced(page)
    found = []
    saved = _files(page)
    for (lang, body), (after, shown) in itertools.pairwise(fenced):
        command = _COMMAND.match(body)
        if lang == "bash" and command and after == "text" and command.group(2) in saved:
            found.append((command.group(1), command.group(2), shown))
    return found


@pytest.mark.parametrize(
    "page",
    [p for p in PAGES if _command_outputs(p)],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_command_output_blocks_are_what_the_command_prints(
    page: Path, tmp_path: Path
) -> None:
    pytest.importorskip("mypy", reason="the dev extra installs mypy")
    # The files and the mypy configuration (the page's `ini` block) as the
    # reader saves them, and the command as the page shows it.
    for name, content in _files(page).items():
        (tmp_path / name).write_text(content)
    for lang, body in _fenced(page):
        if lang == "ini":  # at most one: the page's mypy configuration
            assert not (tmp_path / "mypy.ini").exists()
            (tmp_path / "mypy.ini").write_text(body)
    env = child_env()
    for tool, name, shown in _command_outputs(page):
        cache = ["--cache-dir", str(tmp_path / ".c")] if tool == "mypy" else []
        done = subprocess.run(
            [sys.executable, "-m", *tool.split(), *cache, name],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
        )
        assert _normalised(done.stdout) == _normalised(shown), done.stderr


def test_the_tutorials_mypy_and_shape_steps_are_checked() -> None:
    found = _command_outputs(ROOT / "docs" / "tutorial.md")
    assert [(tool, name) for tool, name, _ in found] == [
        ("mypy", "bad_config.py"),
        ("treespec check", "model.py"),
        ("treespec check", "skip.py"),  # a bug a square test passes
    ]


def test_printed_numbers_may_stray_by_the_devices_precision_off_the_cpu() -> None:
    shown = "loss 1.1747, [0.2270326 0.39950302]"
    near = "loss 1.1761, [0.22702833 0.39951316]"  # a TPU v5e's print
    assert _same_output(shown + "\n", shown, "cpu")
    assert not _same_output(near, shown, "cpu")
    assert _same_output(near, shown, "tpu")
    assert not _same_output("loss 1.3100, [0.2270326 0.39950302]", shown, "tpu")
    assert not _same_output("cost 1.1747, [0.2270326 0.39950302]", shown, "tpu")
    assert not _same_output("loss 1.1747, [0.2270326]", shown, "tpu")


def test_output_blocks_are_found_and_normalised() -> None:
    # docs/validation.md shows the error its example prints; static-checking.md's
    # text blocks show code, not output (no Python block right before them).
    assert _output_blocks(ROOT / "docs" / "validation.md") == 2
    assert _output_blocks(ROOT / "docs" / "static-checking.md") == 0
    assert _normalised("\na  \n\nb\t\n\n") == "a\n\nb"


#: Pages of reference, tables or included files: no example of their own.
REFERENCE = (
    "README.md",
    "performance.md",
    "static-checking.md",
    "changelog.md",
    "contributing.md",
    "examples.md",
)


def _is_api(page: Path) -> bool:
    """A page of the API reference (docs/api.md, docs/api-*.md)."""
    return (
        page.parent == ROOT / "docs"
        and re.fullmatch(r"api(-.+)?\.md", page.name) is not None
    )


def test_every_page_starts_with_an_example_or_is_reference() -> None:
    for page in PAGES:
        if page.name in REFERENCE or _is_api(page):
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
    source = (ROOT / "treespec" / "_model" / "markers.py").read_text()
    blocks = re.findall(r"```python\n(.*?)```", source, flags=re.S)
    assert len(blocks) == 3
    for block in blocks:
        exec(compile(block, "treespec._model.markers", "exec", dont_inherit=True), {})


#: A benchmark table row: | contender | median per call | / jax.jit |
_ROW = re.compile(r"^\| ([^|]+?) \| ([\d.]+) µs \| ([\d.]+) \|$", flags=re.M)


def _cache_hit_tables() -> dict[str, dict[str, tuple[float, float]]]:
    """The latest run's "A call on a cache hit" tables: title -> row -> (µs,
    ratio), as `benchmarks/report.py` wrote them (first call left out)."""
    text = _generated(ROOT / "benchmarks" / "README.md")
    section = text[text.index("### A call on a cache hit") :]
    section = section[: section.index("\n### ", 1)]
    tables = {}
    for table in re.split(r"^#### ", section, flags=re.M)[1:]:
        title = table.splitlines()[0]
        if not title.startswith("First call"):
            rows = _ROW.findall(table)
            tables[title] = {name: (float(t), float(r)) for name, t, r in rows}
    return tables


def _against_jax(contender: str) -> dict[str, float]:
    """`contender`'s time over `jax.jit`'s for the same call, per table row.

    The same call: the table's `jax.jit` row, or the row of its group (`plain
    class: jax.jit (instance static)` for `plain class: treespec.jit`). The
    step returning the model is said apart (`jax.jit` needs it split by hand).
    """
    found = {}
    for title, rows in _cache_hit_tables().items():
        for name, (time, ratio) in rows.items():
            group, _, who = name.rpartition(": ")
            if not who.startswith(contender) or group == "model":
                continue
            prefix = f"{group}: " if group else ""
            [(base, base_ratio)] = [
                value
                for row, value in rows.items()
                if row.startswith(f"{prefix}jax.jit")
            ]
            exact = base_ratio == 1.0  # the column is this call over jax.jit's
            found[f"{title} | {name}"] = ratio if exact else round(time / base, 2)
    return found


def _ratio_range(contender: str) -> str:
    """`lo-hi` of `contender`'s ratios to `jax.jit` over every cache-hit table."""
    ratios = _against_jax(contender).values()
    return f"{min(ratios):.2f}-{max(ratios):.2f}x"


def test_readme_ratios_match_the_benchmarks() -> None:
    # The range covers every call shape of the run, its slowest included.
    rows = {
        cells[0]: cells[1:]
        for line in (ROOT / "README.md").read_text().splitlines()
        if line.startswith("| ")
        for cells in [[cell.strip() for cell in line.strip("|").split("|")]]
    }
    cells = rows["per-call time on a cache hit, vs `jax.jit`"]
    assert cells[1] == _ratio_range("equinox.filter_jit")
    assert cells[2].split()[0] == _ratio_range("treespec.jit")
    step = _cache_hit_tables()[
        "step: a training step returning arrays, and one returning the model"
    ]
    cells = rows["a training step returning the model, vs `jax.jit`'s returning arrays"]
    assert cells == [
        f"{step['model: jax.jit, split by hand'][1]:.2f}x (split by hand)",
        f"{step['model: equinox.filter_jit'][1]:.2f}x",
        f"{step['model: treespec.jit'][1]:.2f}x",
    ]


def test_the_ratio_ranges_cover_every_call_shape() -> None:
    ours = _against_jax("treespec.jit")
    # S1 and S2 x3 (hints and flags), S3, S4, the three methods and the
    # step returning arrays.
    assert len(ours) == 14, ours
    assert any("plain class" in row for row in ours)
    assert any("arrays: treespec.jit" in row for row in ours)
    assert len(_against_jax("equinox.filter_jit")) == 8


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
    assert "### A call on a cache hit" in page and "### Targets" in page
    # Headings a reader understands, one unit, nothing of the machine's files.
    assert not re.search(r"^#+ .*\.py$", page, flags=re.M)
    assert not re.search(r"\d us\b", page)
    assert "wrote " not in page and "/work/" not in page and "/home/" not in page
    # A missed target says why, and a missed time target what it costs in µs
    # (the long-life targets are memory and counts). A run may meet them all.
    missed = re.findall(r"^\| (.+?) \| .* \| \*\*missed\*\* \|$", page, flags=re.M)
    for ratio in missed:
        why = re.search(rf"^- \*\*{re.escape(ratio)}\*\*: (.+)$", page, flags=re.M)
        assert why, ratio
        timed = not ratio.startswith(("dropped closures:", "static churn:"))
        # Against jax.jit: µs more; a lead over Equinox: both contenders' µs.
        if timed and ratio.endswith("/ jax.jit"):
            assert why.group(1).endswith(" µs more."), ratio
        elif timed:
            contender = ratio.split(" / ")[0].removeprefix("S1 ").removeprefix("S4 ")
            assert f"A call with `{contender}` took " in why.group(1), ratio
            assert why.group(1).endswith(" is the target."), ratio
        else:
            assert " µs" not in why.group(1), ratio
    assert "<!-- long-life:start -->" in page


def _report(monkeypatch: pytest.MonkeyPatch) -> Any:
    """benchmarks/report.py as a module (it is a script, not in a package)."""
    spec = importlib.util.spec_from_file_location(
        "benchmarks_report", ROOT / "benchmarks" / "report.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # for its dataclasses
    spec.loader.exec_module(module)
    return module


def test_the_performance_page_is_the_recorded_run_rendered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `report.py --render` rewrites the pages from benchmarks/latest-run.json.
    report = _report(monkeypatch)
    run = json.loads(report.RECORD.read_text())
    page = _generated(ROOT / "docs" / "performance.md")
    assert report.render(run).startswith(page)


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
        if language not in OUTPUT and len(line) > CODE_BOX
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_code_lines_fit_the_code_box(page: Path) -> None:
    too_long = _too_long(page.read_text())
    assert not too_long, f"{page.relative_to(ROOT)}: {too_long}"


def test_docs_code_is_formatted_to_the_code_box() -> None:
    # pyproject.toml leaves docs/ to tests/docs-ruff.toml (76 columns), which
    # lives outside docs/ so that the site does not publish it.
    pytest.importorskip("ruff", reason="the dev extra installs ruff")
    config = ROOT / "tests" / "docs-ruff.toml"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "format",
            "--check",
            "--config",
            str(config),
            "docs",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "files already formatted" in done.stdout or "file already" in done.stdout
    assert not (ROOT / "docs" / "ruff.toml").exists()


#: The characters of a heading's code that one line holds on a 390 px phone,
#: by heading level (Material's sizes: h1 2em, h2 1.5625em, h3 1.25em of a
#: 16 px text, code at 0.85em, a monospace character 0.6em wide, in the
#: 358 px the content gets), with some room to spare. A longer word breaks
#: inside itself (`field(pyt` / `ree_node=False)`).
PHONE_WORD = {1: 20, 2: 26, 3: 32, 4: 40}


def _headings(text: str) -> Iterator[tuple[int, str]]:
    """`(level, text)` of the page's headings, outside code blocks."""
    in_code = {number for _, number, _ in _code_lines(text)}
    for number, line in enumerate(text.splitlines(), 1):
        found = re.match(r"^(#{1,6}) (.+)$", line)
        if found and number not in in_code and not _FENCE.match(line):
            # An attribute list (`{ #anchor }`) is not shown.
            shown = re.sub(r"\s*\{[^{}]*\}\s*$", "", found.group(2))
            yield len(found.group(1)), shown


def _too_wide_for_a_phone(text: str) -> list[str]:
    """Headings with a word a phone breaks inside, or longer than 3 lines."""
    found = []
    for level, heading in _headings(text):
        width = PHONE_WORD.get(level, 40)
        plain = heading.replace("`", "")
        long = [word for word in plain.split() if len(word) > width]
        if long or len(plain) > 3 * width:
            found.append(f"h{level} {heading!r}")
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_headings_fit_a_phone(page: Path) -> None:
    too_wide = _too_wide_for_a_phone(page.read_text())
    assert not too_wide, f"{page.relative_to(ROOT)}: {too_wide}"


def test_headings_too_wide_for_a_phone_are_found() -> None:
    page = (
        "# From `flax.struct.field(pytree_node=False)`\n\n"
        "```python\n# a comment, not a heading: flax.struct.field(pytree)\n```\n\n"
        f"## {'word ' * 20}\n\n### `treespec.value_and_grad`\n\n"
        "## Why did it retrace? { #why-did-it-retrace-and-compile-again }\n"
    )
    assert _too_wide_for_a_phone(page) == [
        "h1 'From `flax.struct.field(pytree_node=False)`'",
        f"h2 {'word ' * 20!r}",
    ]


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
    """The objects the API reference (docs/api.md, docs/api-*.md) documents
    (`::: treespec.jit`), by identifier."""
    found = {}
    for page in sorted((ROOT / "docs").glob("api*.md")):
        for name in re.findall(r"^::: (\S+)", page.read_text(), re.M):
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
    assert "treespec._model.errors.Issue.format" in docstrings
    # The markers' docstrings are in the source only (at runtime an alias has
    # Annotated's); their blocks are not indented there.
    docstrings["treespec._model.markers"] = (
        ROOT / "treespec" / "_model" / "markers.py"
    ).read_text()
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
    not_exported = {
        "treespec._transforms.stages.Lowered",
        "treespec._transforms.stages.Compiled",
    }
    assert not_exported | {"treespec._model.errors.Issue", "treespec.jit"} <= ran


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


def test_site_has_a_full_tab_title(site: Path) -> None:
    title = re.search(r"<title>(.*?)</title>", (site / "index.html").read_text())
    assert title is not None and title.group(1).startswith("Per-leaf static")


def test_aligned_output_keeps_its_columns(site: Path) -> None:
    # explain's columns (```output blocks) wrap under their last column on a
    # wide screen (the hook sets where it starts) and scroll on a phone; the
    # browser test (tests/test_site.py) sees both.
    page = (site / "getting-started" / "index.html").read_text()
    block = page[page.index('class="language-output highlight"') :]
    hang = re.search(r'<code style="--hang: (\d+)ch">', block[:200])
    assert hang is not None, block[:200]
    text = html.unescape(re.sub(r"<[^>]+>", "", block.partition("</code>")[0]))
    columns = {line.find(" <- ") for line in text.splitlines() if " <- " in line}
    assert columns == {int(hang.group(1)) - 4}
    css = (site / "stylesheets" / "extra.css").read_text()
    phone = css[css.index("@media screen and (max-width: 44.984375em)") :]
    rule = phone[phone.index(".md-typeset .language-output pre > code") :]
    assert "white-space: pre;" in rule.partition("}")[0]


def test_site_wraps_output_blocks(site: Path) -> None:
    page = (site / "validation" / "index.html").read_text()
    assert 'href="../stylesheets/extra.css"' in page
    assert 'class="language-text highlight"' in page
    css = (site / "stylesheets" / "extra.css").read_text()
    rule = css[css.index(".md-typeset .language-text pre > code") :]
    assert "white-space: pre-wrap" in rule.partition("}")[0]


def test_the_home_pages_figures_are_the_benchmarks() -> None:
    # "Why treespec" quotes the range of treespec.jit / jax.jit over every
    # call shape of the latest run (benchmarks/README.md), its slowest case
    # within it, and the step returning the model beside the one returning
    # arrays; the FAQ quotes filter_jit's ratios to treespec from the same run.
    home = " ".join((ROOT / "docs" / "index.md").read_text().split())
    faq = " ".join((ROOT / "docs" / "faq.md").read_text().split())
    ours = _against_jax("treespec.jit")
    low, high = min(ours.values()), max(ours.values())
    assert f"took between {low:.2f}x and {high:.2f}x the time of the same call" in home
    tables = _cache_hit_tables()
    s1 = tables["S1: config + params"]
    s4 = tables["S4: 12 register_dataclass layers + TypedDict config"]
    method = tables["method: a jitted method of an equinox.Module"]
    step = tables["step: a training step returning arrays, and one returning the model"]
    plain = ours[
        "method: of a treespec.dataclass, of a plain class | plain class: treespec.jit"
    ]
    assert plain == high  # the slowest case, said as such
    for figure in (
        f"{s1['treespec.jit (hints)'][1]:.2f}x for a call with a config plus",
        f"{method['treespec.jit'][1]:.2f}x for a jitted method of an Equinox",
        f"{s4['treespec.jit (hints)'][1]:.2f}x for a model of 12 dataclass layers",
        f"{plain:.2f}x, the slowest, for a jitted method of a plain class",
        f"{step['model: treespec.jit'][1]:.2f}x against "
        f"{step['arrays: treespec.jit'][1]:.2f}x the time of `jax.jit`'s step",
        "split and merged by hand took "
        f"{step['model: jax.jit, split by hand'][1]:.2f}x",
    ):
        assert figure in home, figure
    eqx_s1 = s1["equinox.filter_jit"][0] / s1["treespec.jit (hints)"][0]
    eqx_step = step["model: equinox.filter_jit"][0] / step["model: treespec.jit"][0]
    for page in (home, faq):
        assert f"{eqx_s1:.2f}x treespec's time" in page
        assert f"{eqx_step:.2f}x on" in page
    # No benchmark label ("(S1)") before the Performance page defines it.
    assert not re.search(r"\(S\d\)", home)


#: Pages that end where they are: the included files.
_ENDS = ("README.md", "changelog.md", "contributing.md")


def test_every_page_ends_with_where_to_go_next() -> None:
    for page in PAGES:
        if page.name in _ENDS:
            continue
        headings = re.findall(r"^## (.+)$", page.read_text(), flags=re.M)
        assert headings and headings[-1] in ("Where next", "Where to start"), page


def test_included_pages_show_the_files(site: Path) -> None:
    # docs/changelog.md and contributing.md include the files (snippets).
    for page, source in (
        ("changelog", "CHANGELOG.md"),
        ("contributing", "CONTRIBUTING.md"),
    ):
        html = (site / page / "index.html").read_text()
        first = next(
            line
            for line in (ROOT / source).read_text().splitlines()
            if line and not line.startswith("#")
        )
        assert first.split()[0] in html and "--8&lt;--" not in html, page


def test_the_examples_page_shows_every_script(site: Path) -> None:
    # Included whole (snippets), so the page shows each file as it is.
    page = (ROOT / "docs" / "examples.md").read_text()
    built = html.unescape(
        re.sub(r"<[^>]+>", "", (site / "examples" / "index.html").read_text())
    )
    for script in sorted((ROOT / "examples").glob("*.py")):
        assert f'--8<-- "examples/{script.name}"' in page, script.name
        lines = [line for line in script.read_text().splitlines() if line.strip()]
        assert lines[0] in built and lines[-1].strip() in built, script.name


def test_site_publishes_no_tool_files_and_no_sitemap(site: Path) -> None:
    assert not list(site.rglob("ruff.toml")) and not list(site.rglob("*.toml"))
    # No host yet, so no absolute URLs: no sitemap (mkdocs.yml says why).
    assert not (site / "sitemap.xml").exists()
    assert not (site / "sitemap.xml.gz").exists()


def test_the_404_page_finds_the_sites_root(site: Path) -> None:
    # Served at any missed path: its links start at the root, which its
    # script moves to the folder the site is served from.
    html = (site / "404.html").read_text()
    assert "search/search_index.json" in html
    links = re.findall(r'(?:href|src)="([^"#]+)"', html)
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert local and all(link.startswith("/") for link in local), local


def _index_terms(text: str, separator: str) -> set[str]:
    """The words Material's search makes of a text: split on `separator`,
    lower-cased, as lunr does in the browser."""
    plain = re.sub(r"<[^>]+>", " ", text)
    return {word.lower() for word in re.split(separator, plain) if word}


@pytest.mark.parametrize("name", ["filter_jit", "static_argnums", "jax.export"])
def test_search_finds_dotted_names_on_every_page_naming_them(
    site: Path, name: str
) -> None:
    index = json.loads((site / "search" / "search_index.json").read_text())
    separator = index["config"]["separator"]
    wanted = _index_terms(name, separator)
    pages: dict[str, set[str]] = {}
    for doc in index["docs"]:
        where = doc["location"].partition("#")[0]
        terms = _index_terms(doc["title"] + " " + doc["text"], separator)
        pages[where] = pages.get(where, set()) | terms
    naming = [
        page
        for page in sorted((ROOT / "docs").rglob("*.md"))
        if name in page.read_text()
    ]
    assert len(naming) >= 2, name
    for page in naming:
        location = page.relative_to(ROOT / "docs").with_suffix("").as_posix() + "/"
        location = location.removesuffix("index/")
        assert wanted <= pages[location], (name, location)


def test_search_leaves_the_example_scripts_out(site: Path) -> None:
    # The Examples page shows each script whole; its search entries are the
    # prose around them, so a result's preview is never a script's code.
    docs = json.loads((site / "search" / "search_index.json").read_text())["docs"]
    examples = [d for d in docs if d["location"].startswith("examples/")]
    assert examples
    for doc in examples:
        assert "def main" not in doc["text"] and "import jax" not in doc["text"], doc


def test_the_built_performance_page_is_for_readers(site: Path) -> None:
    html = (site / "performance" / "index.html").read_text()
    text = re.sub(r"<[^>]+>", " ", html)
    assert "wrote " not in text
    assert not re.search(r"(/work/|/home/|/tmp/|/root/)", text)
    assert not re.search(r"\d us\b", text)
    # The plot in a light and a dark variant, each shown in its theme.
    assert 'src="../images/scaling.png#only-light"' in html
    assert 'src="../images/scaling-dark.png#only-dark"' in html
    assert (site / "images" / "scaling-dark.png").exists()


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


def test_the_long_life_rows_are_the_median_growth_and_the_largest_counts() -> None:
    long_life = _benchmark("long_life.py")
    runs = [
        {"growth": 5, "traces": 500, "functions": 0},
        {"growth": 3, "traces": 500, "functions": 2},
        {"growth": 40, "traces": 501, "functions": 0},
    ]
    assert long_life.combine(runs) == {"growth": 5, "traces": 501, "functions": 2}
    assert long_life.RUNS == 3


def test_the_report_runs_the_long_life_benchmark_and_holds_it_to_its_targets() -> None:
    report = _benchmark("report.py")
    long_life = _benchmark("long_life.py")
    assert report.LONG_LIFE.script == "long_life.py"
    assert (ROOT / "benchmarks" / report.LONG_LIFE.script).exists()

    def run(growth: int, traces: int) -> dict[str, dict[str, Any]]:
        base = {"growth": 4 << 20, "traces": 300, "functions": 0, "configs": 7}
        ours = {**base, "growth": growth, "traces": traces}
        return {"jax.jit": base, "equinox.filter_jit": base, "treespec.jit": ours}

    closures, churn = run(6 << 20, 300), run(4 << 20, 1200)
    tables = long_life.render("machine: here", closures, churn, 500, 300, 250)
    rows = report._targets(tables).splitlines()
    for row in (
        "dropped closures: memory treespec.jit / jax.jit | ≤ 1.25 | 1.50 | **missed",
        "dropped closures: traces treespec.jit / jax.jit | = 1.0 | 1.00 | met",
        "static churn: memory treespec.jit / jax.jit | ≤ 1.25 | 1.00 | met",
        "static churn: traces treespec.jit / jax.jit | = 1.0 | 4.00 | **missed",
    ):
        assert any(line.startswith(f"| {row}") for line in rows), row


def test_a_long_life_run_of_one_scenario_shows_only_its_tables() -> None:
    long_life = _benchmark("long_life.py")
    row = {"growth": 1 << 20, "traces": 240, "device": 0}
    churn = {name: row for name in long_life.CONTENDERS}
    tables = long_life.render("machine: here", {}, churn, 100, 60, 50)
    assert "### static churn: 60 values cycled 4 times" in tables
    assert "dropped closures" not in tables and "bound methods" not in tables
    assert "| static churn | +0.0 MB | +0.0 MB | +0.0 MB |" in tables
    assert "| static churn: traces treespec.jit / jax.jit | 1.00 |" in tables


def test_search_ranks_the_shapes_page_first_for_the_checker(site: Path) -> None:
    # `check` also names treespec.checkpoint: the Shapes page is boosted so
    # that `check` and `python -m treespec check` find it first (issue 42, 7).
    docs = json.loads((site / "search" / "search_index.json").read_text())["docs"]
    boosts = {d["location"]: d.get("boost", 1) for d in docs}
    shapes = boosts["shapes/"]
    assert shapes > 1
    assert all(b < shapes for loc, b in boosts.items() if not loc.startswith("shapes/"))
    text = " ".join(d["text"] for d in docs if d["location"].startswith("shapes/"))
    assert "python -m treespec check" in text.replace("\u2060", "")
    # The search box reads `-m` as "without the word m": the index has no
    # word of one letter (mkdocs_hooks.py), so the query leaves out no page.
    # tests/test_site.py types the queries into the search box.
    separator = json.loads((site / "search" / "search_index.json").read_text())[
        "config"
    ]["separator"]
    words = _index_terms(
        " ".join(d["title"] + " " + d["text"] for d in docs), separator
    )
    assert not [word for word in words if len(word) == 1 and word.isalpha()]


def test_the_index_hook_joins_one_letter_words() -> None:
    import mkdocs_hooks

    index = {
        "config": {"separator": r"[\s\-]+"},
        "docs": [{"title": "python -m x", "text": "<code>n m</code> am -m"}],
    }
    (doc,) = json.loads(mkdocs_hooks._flag_safe(json.dumps(index)))["docs"]
    j = "\u2060"
    assert doc == {
        "title": f"python -{j}m {j}x",
        "text": f"<code>{j}n {j}m</code> am -{j}m",
    }
