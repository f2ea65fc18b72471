"""The shape of the package: its import graph has no cycle, and no module
takes a `_`-name from a sibling. Every import counts, those inside functions
and under `TYPE_CHECKING` too."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "treespec"

#: The import graph may not grow deeper than this (modules stacked on modules).
MAX_FLOORS = 15


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path) -> list[tuple[str, str]]:
    """`(module, imported name)` of every `from ... import` of treespec's, and
    `(module, "")` of every `import treespec...`."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            if node.level:
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target.split(".")[0] == "treespec":
                found += [(target, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [
                (alias.name, "")
                for alias in node.names
                if alias.name.split(".")[0] == "treespec"
            ]
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for target, imported in _imports(name, path):
            full = f"{target}.{imported}"
            dest = full if full in modules else target
            if dest in modules and dest != name:
                edges[name].add(dest)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for other in sorted(edges[module]):
            if state.get(other) == 1:
                cycles.append([*stack[stack.index(other) :], other])
            elif other not in state:
                visit(other)
        stack.pop()
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module)
    return cycles


def _private(modules: dict[str, Path]) -> list[str]:
    return [
        f"{name} imports {imported} from {target}"
        for name, path in modules.items()
        for target, imported in _imports(name, path)
        if imported.startswith("_")
        and not imported.startswith("__")
        and f"{target}.{imported}" not in modules  # a private module is fine
    ]


def _floors(edges: dict[str, set[str]]) -> int:
    floors: dict[str, int] = {}

    def floor(module: str) -> int:
        if module not in floors:
            floors[module] = 0  # a cycle (the cycle test names it) counts once
            floors[module] = 1 + max((floor(o) for o in edges[module]), default=0)
        return floors[module]

    return max(floor(module) for module in edges)


def test_the_import_graph_has_no_cycle() -> None:
    assert _cycles(_graph()) == []


def test_no_private_name_is_taken_from_a_sibling_module() -> None:
    assert _private(_modules()) == []


def test_the_graph_stays_shallow() -> None:
    assert _floors(_graph()) <= MAX_FLOORS


def test_the_checks_find_what_they_look_for(tmp_path: Path) -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert _floors({"a": {"b"}, "b": {"c"}, "c": set()}) == 3
    module = tmp_path / "_m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from ._spec import _Hidden\n"
        "def f():\n"
        "    from treespec._rules import is_array\n"
    )
    modules = {"treespec._m": module, "treespec._spec": PACKAGE / "_spec.py"}
    assert _imports("treespec._m", module) == [
        ("treespec._spec", "_Hidden"),
        ("treespec._rules", "is_array"),
    ]
    assert _private(modules) == ["treespec._m imports _Hidden from treespec._spec"]
