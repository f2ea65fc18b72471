"""The shape of the package: its layers import only downward, its import
graph has no cycle, no module takes a `_`-name from another, and no module,
class or function outgrows its gauge. Every import counts, those inside
functions and under `TYPE_CHECKING` too.

The layers (DESIGN's Layout; each package's docstring says the same):

- `treespec._model`, the JAX-free spec model: the standard library only;
- `treespec.mypy_plugin`: mypy, the standard library and the spec model;
- `treespec._runtime`: the spec model; inside it, four rooms by when their
  code runs, each importing only the rooms before it: `reading` (at
  decoration), `planning` (per tree structure), `checking` (per trace and on
  a failure), `calling` (every call); its public tools (`api.py`, ...) any
  room;
- `treespec._transforms`: the spec model and the runtime; a transform never
  imports another transform's module;
- `treespec._shapes`, the shape checker: the spec model, the runtime and, of
  the transforms, only the base they all share;
- `treespec` (the public names) any layer; `treespec.__main__` the command,
  which nothing else imports.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "treespec"

#: The import graph may not grow deeper than this (modules stacked on modules).
MAX_FLOORS = 15

#: The gauges: lines of a module, of a class, of a function (its docstring not
#: counted).
MAX_MODULE_LINES = 400
MAX_CLASS_LINES = 250
MAX_FUNCTION_LINES = 60

#: Which layers each layer may import (besides itself). A module named here
#: rather than a package is the one module of that layer it may reach.
LAYERS: dict[str, set[str]] = {
    "treespec._model": set(),
    "treespec.mypy_plugin": {"treespec._model"},
    "treespec._runtime": {
        "treespec._model",
        "treespec._runtime.reading",
        "treespec._runtime.planning",
        "treespec._runtime.checking",
        "treespec._runtime.calling",
    },
    # The runtime's rooms, by when their code runs: each imports only the
    # rooms that run before it (and less often).
    "treespec._runtime.reading": {"treespec._model"},
    "treespec._runtime.planning": {"treespec._model", "treespec._runtime.reading"},
    "treespec._runtime.checking": {
        "treespec._model",
        "treespec._runtime.reading",
        "treespec._runtime.planning",
    },
    "treespec._runtime.calling": {
        "treespec._model",
        "treespec._runtime.reading",
        "treespec._runtime.planning",
        "treespec._runtime.checking",
    },
    "treespec._transforms": {"treespec._model", "treespec._runtime"},
    "treespec._shapes": {
        "treespec._model",
        "treespec._runtime",
        "treespec._transforms.base",
    },
    "treespec.__main__": {"treespec._shapes.command"},
    "treespec": {
        "treespec._model",
        "treespec._runtime",
        "treespec._transforms",
        "treespec._shapes",
    },
}

#: What a layer may import from outside treespec, beyond the standard library
#: (None: anything the dependencies give).
OUTSIDE: dict[str, set[str] | None] = {
    "treespec._model": set(),
    "treespec.mypy_plugin": {"mypy"},
}

#: The modules of `treespec._transforms` that are transforms (one each).
TRANSFORMS = {"jit", "grad", "vmap", "shard_map", "checkpoint"}

#: The one module that may import the command.
COMMAND = "treespec._shapes.command"


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


def _layer(module: str) -> str:
    """The layer a module is in: the longest name of `LAYERS` it is under."""
    under = [n for n in LAYERS if module == n or module.startswith(n + ".")]
    return max(under, key=len)


def _within(module: str, allowed: set[str]) -> bool:
    return any(module == a or module.startswith(a + ".") for a in allowed)


def _layering(edges: dict[str, set[str]]) -> list[str]:
    """Every import that goes up or sideways between layers, or reaches the
    command or a transform's module from where it may not."""
    wrong = []
    for module, targets in sorted(edges.items()):
        layer = _layer(module)
        for target in sorted(targets):
            if _layer(target) == layer and layer != "treespec":
                if _is_transform(module) and _is_transform(target):
                    wrong.append(f"{module} imports another transform, {target}")
                continue
            if target == COMMAND and module != "treespec.__main__":
                wrong.append(f"{module} imports the command")
            elif not _within(target, LAYERS[layer] | {layer}):
                wrong.append(f"{module} ({layer}) imports {target}")
    return wrong


def _is_transform(module: str) -> bool:
    package, _, name = module.rpartition(".")
    return package == "treespec._transforms" and name in TRANSFORMS


def _outside(name: str, path: Path) -> set[str]:
    """The top-level names of what a module imports from outside treespec."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
    return found - {"treespec", "__future__"} - set(sys.stdlib_module_names)


def _sizes(path: Path, shown: str) -> list[str]:
    """What in one file is over its gauge: the module, a class, a function."""
    source = path.read_text()
    over = []
    if (n := len(source.splitlines())) > MAX_MODULE_LINES:
        over.append(f"{shown}: {n} lines (module gauge {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            n = node.end_lineno - start + 1  # type: ignore[operator]
            if n > MAX_CLASS_LINES:
                over.append(f"{shown}: class {node.name} {n} lines")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = node.end_lineno - node.lineno + 1  # type: ignore[operator]
            first = node.body[0]
            doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            if doc and isinstance(first.value.value, str):  # type: ignore[attr-defined]
                n -= first.end_lineno - first.lineno + 1  # type: ignore[operator]
            if n > MAX_FUNCTION_LINES:
                over.append(f"{shown}: function {node.name} {n} lines")
    return over


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


def test_the_layers_import_only_downward() -> None:
    assert _layering(_graph()) == []


def test_every_module_is_in_a_layer_with_its_docstring() -> None:
    modules = _modules()
    for package in LAYERS:
        if package in ("treespec", "treespec.__main__"):
            continue
        init = PACKAGE.parent / package.replace(".", "/") / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text())), package
    # Only the public front door lies outside the layer packages.
    loose = {m for m in modules if _layer(m) == "treespec"}
    assert loose == {"treespec"}


def test_the_spec_model_and_the_plugin_import_no_jax() -> None:
    wrong = {
        name: got
        for name, path in _modules().items()
        if (allowed := OUTSIDE.get(_layer(name))) is not None
        and (got := _outside(name, path) - allowed)
    }
    assert wrong == {}


def test_no_module_class_or_function_is_over_its_gauge() -> None:
    over = [
        line
        for path in _modules().values()
        for line in _sizes(path, str(path.relative_to(ROOT)))
    ]
    assert over == []


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
    modules = {"treespec._m": module, "treespec._spec": PACKAGE / "_model" / "spec.py"}
    assert _imports("treespec._m", module) == [
        ("treespec._spec", "_Hidden"),
        ("treespec._rules", "is_array"),
    ]
    assert _private(modules) == ["treespec._m imports _Hidden from treespec._spec"]


def test_the_layer_checks_find_what_they_look_for(tmp_path: Path) -> None:
    edges = {
        "treespec._model.spec": {"treespec._runtime.planning.plan"},
        "treespec._runtime.planning.plan": {"treespec._model.spec"},
        "treespec._runtime.planning.resolve": {"treespec._runtime.calling.routes"},
        "treespec._runtime.calling.routes": {"treespec._runtime.checking.diagnose"},
        "treespec._runtime.api": {"treespec._transforms.base"},
        "treespec._transforms.jit": {"treespec._transforms.stages"},
        "treespec._transforms.grad": {"treespec._transforms.vmap"},
        "treespec._shapes.check": {"treespec._transforms.base"},
        "treespec._shapes.abstract": {"treespec._transforms.jit"},
        "treespec.mypy_plugin.nodes": {"treespec._runtime.reading.hints"},
        "treespec._runtime.reading.hints": {COMMAND},
        "treespec.__main__": {COMMAND},
        "treespec": {"treespec._transforms.jit"},
    }
    assert _layering(edges) == [
        "treespec._model.spec (treespec._model) imports "
        "treespec._runtime.planning.plan",
        "treespec._runtime.api (treespec._runtime) imports treespec._transforms.base",
        "treespec._runtime.planning.resolve (treespec._runtime.planning) imports "
        "treespec._runtime.calling.routes",
        "treespec._runtime.reading.hints imports the command",
        "treespec._shapes.abstract (treespec._shapes) imports treespec._transforms.jit",
        "treespec._transforms.grad imports another transform, "
        "treespec._transforms.vmap",
        "treespec.mypy_plugin.nodes (treespec.mypy_plugin) imports "
        "treespec._runtime.reading.hints",
    ]
    module = tmp_path / "m.py"
    module.write_text(
        "import re\nimport numpy as np\nfrom . import x\n"
        "def f():\n    from jax import numpy\n"
    )
    assert _outside("treespec._model.m", module) == {"numpy", "jax"}
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES - 1))
    module.write_text(f'def f():\n    """Doc."""\n{body}\n')
    assert _sizes(module, "m.py") == []  # the docstring is not counted
    module.write_text(f"def f():\n    y = 0\n{body}\n")
    assert _sizes(module, "m.py") == [
        f"m.py: function f {MAX_FUNCTION_LINES + 1} lines"
    ]
