"""One meaning of a hint: the runtime and the mypy plugin agree on each annotation.

Each case is an annotation and a value of it. The runtime's verdict: the value
is refused (a `SpecError` when the function is decorated, or a
`ValidationError` at the call) or accepted. The plugin's verdict: a
`treespec-*` error on the annotation's line, or none. They must agree. The
cases are written once, into one module that mypy checks and Python imports.

Known disagreements are marked `xfail(strict=True)`: they are the static
checking issue's work, and a fix turns them into failures here until the mark
goes.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import types
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import treespec

from .conftest import HAS_TREE_STATIC, needs_tree_static, resolve, run_mypy

ROOT = Path(__file__).resolve().parent.parent

HEADER = """\
from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, Optional, Union

import dataclasses
from typing import NamedTuple

import equinox as eqx
import jax
import numpy as np
from flax import nnx, struct
from flax.core import FrozenDict

import treespec
from treespec import Donate, Dynamic, Static
from treespec._model.markers import Marker

SInt = Static[int]
DArr = Dynamic[jax.Array]
Leaves = list[Dynamic[jax.Array]]


@dataclasses.dataclass(frozen=True)
class Unregistered:
    w: float


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Registered:
    w: jax.Array
    name: str = dataclasses.field(default="r", metadata={"static": True})


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Mutable:
    n: int


@dataclasses.dataclass(frozen=True)
class Holder:
    sizes: list[int]


class EqOnly:
    def __eq__(self, other: object) -> bool:
        return self is other


class Settings(eqx.Module):
    depth: int


class Model(eqx.Module):
    w: jax.Array
    act: str = eqx.field(static=True)


class Batch(NamedTuple):
    x: jax.Array
    names: Static[tuple[str, ...]]


class Named(eqx.Module):
    w: jax.Array
    act: str  # a leaf, not metadata: it can never be traced


class MlpHolder(eqx.Module):
    mlp: eqx.nn.MLP


@treespec.dataclass
class Labelled:
    w: jax.Array
    label: Static[str]


class ByCall:
    def __init__(self, a: jax.Array) -> None:
        self.a = a


jax.tree_util.register_pytree_node(
    ByCall, lambda b: ((b.a,), None), lambda _, c: ByCall(c[0])
)


@jax.tree_util.register_pytree_node_class
class Pair:
    def __init__(self, a: jax.Array, name: str) -> None:
        self.a = a
        self.name = name

    def tree_flatten(self) -> tuple[tuple[jax.Array], str]:
        return (self.a,), self.name

    @classmethod
    def tree_unflatten(cls, aux: str, children: tuple[jax.Array]) -> Pair:
        return cls(children[0], aux)


class NnxNet(nnx.Module):
    def __init__(self, rngs: nnx.Rngs) -> None:
        self.lin = nnx.Linear(2, 2, rngs=rngs)
        self.depth = 2


@struct.dataclass
class FlaxStruct:
    w: jax.Array
"""

#: (annotation, a value of it written as Python, refused by the runtime).
CASES: list[tuple[str, str, bool]] = [
    ("Static[int]", "3", False),
    ("Static[tuple[int, str]]", "(1, 'a')", False),
    ("Static[list[int]]", "[1, 2]", False),
    ("Dynamic[jax.Array]", "jax.numpy.ones(2)", False),
    ("Dynamic[list[float]]", "[1.0, 2.0]", False),
    ("Donate[dict[str, jax.Array]]", "{'w': jax.numpy.ones(2)}", False),
    ("Mapping[str, Dynamic[float]]", "{'a': 1.0}", False),
    ("Sequence[Static[int]]", "(1, 2)", False),
    (
        "collections.OrderedDict[str, Static[str]]",
        "collections.OrderedDict(a='x')",
        False,
    ),
    ("Static[Optional[int]]", "None", False),
    ("Optional[Static[int]]", "2", False),
    ("Static[np.ndarray]", "np.ones(2)", True),
    ("Static[set[int]]", "{1, 2}", True),
    ("Dynamic[str]", "'text'", True),
    ("Donate[bytes]", "b'x'", True),
    ("Mapping[str, Dynamic[str]]", "{'a': 'text'}", True),
    (
        "collections.OrderedDict[str, Dynamic[str]]",
        "collections.OrderedDict(a='x')",
        True,
    ),
    ("Sequence[Dynamic[str]]", "('a',)", True),
    ("Dynamic[collections.deque[float]]", "collections.deque([1.0])", True),
    ("Static[Dynamic[int]]", "1", True),
    ("Union[Static[int], Dynamic[jax.Array]]", "1", True),
    ("Static[Optional[Dynamic[jax.Array]]]", "None", True),
    ("Static[Annotated[Dynamic[int], '']]", "1", True),
    ("Dynamic[object]", "jax.numpy.ones(2)", False),
    ("Dynamic[Literal[1, 2]]", "1", False),
    ("Dynamic[Literal['a', 'b']]", "'a'", True),
    ("Static[Literal['a', 'b']]", "'a'", False),
    ("Annotated[str, Marker.DYNAMIC]", "'text'", True),
    ("Annotated[jax.Array, Marker.DYNAMIC]", "jax.numpy.ones(2)", False),
    ("Annotated[int, Marker.STATIC, Marker.DYNAMIC]", "1", True),
    ("Static[int] | Dynamic[jax.Array]", "1", True),
    ("SInt | DArr", "1", True),
    ("Optional[SInt]", "None", False),
    ("Static[Leaves]", "[jax.numpy.ones(2)]", False),
    ("Dynamic[Unregistered]", "Unregistered(1.0)", True),
    ("Dynamic[Registered]", "Registered(jax.numpy.ones(2))", False),
    ("Static[Holder]", "Holder([1])", True),
    ("Static[EqOnly]", "EqOnly()", True),
    ("Static[Settings]", "Settings(3)", False),
    ("Static[Mutable]", "Mutable(3)", False),
    ("Dynamic[Model]", "Model(jax.numpy.ones(2), 'relu')", False),
    ("Dynamic[Batch]", "Batch(jax.numpy.ones(2), ('a',))", False),
    ("Dynamic[Labelled]", "Labelled(jax.numpy.ones(2), 'a')", False),
    ("Dynamic[Pair]", "Pair(jax.numpy.ones(2), 'a')", False),
    ("Dynamic[ByCall]", "ByCall(jax.numpy.ones(2))", False),
    (
        "Dynamic[FrozenDict[str, jax.Array]]",
        "FrozenDict(a=jax.numpy.ones(2))",
        False,
    ),
    (
        "Dynamic[eqx.nn.Linear]",
        "eqx.nn.Linear(2, 2, key=jax.random.PRNGKey(0))",
        False,
    ),
    ("Dynamic[NnxNet]", "NnxNet(nnx.Rngs(0))", False),
    ("Donate[nnx.Linear]", "nnx.Linear(2, 2, rngs=nnx.Rngs(0))", False),
    ("Dynamic[FlaxStruct]", "FlaxStruct(jax.numpy.ones(2))", False),
    # Around a class: its fields that can never be traced stay static.
    ("Dynamic[Named]", "Named(jax.numpy.ones(2), 'relu')", False),
    (
        "Donate[MlpHolder]",
        "MlpHolder(eqx.nn.MLP(2, 2, 4, 1, key=jax.random.PRNGKey(0)))",
        False,
    ),
    ("Dynamic[list[Named]]", "[Named(jax.numpy.ones(2), 'relu')]", False),
    ("Dynamic[dict[str, str]]", "{'act': 'relu'}", True),
]

#: Cases where the plugin does not yet say what the runtime says (none now; a
#: new gap is marked here as `{annotation: reason}`, and fails once fixed).
KNOWN: dict[str, str] = {}


def _source() -> str:
    lines = [HEADER]
    for i, (annotation, value, _) in enumerate(CASES):
        lines.append(f"def case_{i}(x: {annotation}) -> None: ...")
        lines.append(f"value_{i} = {value}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def cases_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder holding every case module of this file."""
    folder = tmp_path_factory.mktemp("agreement")
    (folder / "agreement_cases.py").write_text(_source())
    (folder / "flag_cases.py").write_text(_flag_source())
    (folder / "field_cases.py").write_text(_field_source()[0])
    (folder / "definition_cases.py").write_text(_definition_source()[0])
    return folder


#: One error mypy reports: the file, the line, the message, the code.
_ERROR = re.compile(r"^(?:.*[/\\])?(\w+)\.py:(\d+): error: (.*)  \[([a-z-]+)\]$")


@pytest.fixture(scope="module")
def plugin_errors(cases_dir: Path) -> dict[str, dict[int, list[tuple[str, str]]]]:
    """What mypy (with the plugin) reports, run once over every case module:
    `(code, message)` by module name and line."""
    config = cases_dir / "mypy.ini"
    config.write_text("[mypy]\nplugins = treespec.mypy_plugin\n")
    done = run_mypy(cases_dir, config, cases_dir)
    found: dict[str, dict[int, list[tuple[str, str]]]] = {}
    for line in done.stdout.splitlines():
        match = _ERROR.match(line)
        assert match, line
        name, number, message, code = match.groups()
        found.setdefault(name, {}).setdefault(int(number), []).append((code, message))
    return found


def _error_codes(
    errors: dict[str, dict[int, list[tuple[str, str]]]], name: str
) -> dict[int, list[str]]:
    """The error codes mypy reports, by line of `name`.py."""
    return {
        line: [code for code, _ in found]
        for line, found in errors.get(name, {}).items()
    }


def _load(folder: Path, name: str) -> Any:
    """Import `name`.py from `folder`."""
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[name] = loaded
    spec.loader.exec_module(loaded)
    return loaded


@pytest.fixture(scope="module")
def plugin_lines(
    plugin_errors: dict[str, dict[int, list[tuple[str, str]]]],
) -> dict[int, list[str]]:
    """The treespec error codes mypy reports, by line of the cases module."""
    return _error_codes(plugin_errors, "agreement_cases")


@pytest.fixture(scope="module")
def module(cases_dir: Path) -> Any:
    return _load(cases_dir, "agreement_cases")


def _runtime_refuses(module: Any, i: int) -> bool:
    fun = getattr(module, f"case_{i}")
    try:
        jitted = treespec.jit(fun)
        jitted(getattr(module, f"value_{i}"))
    except (treespec.SpecError, treespec.ValidationError):
        return True
    return False


def _line_of(i: int) -> int:
    return HEADER.count("\n") + 2 + 2 * i


def _params() -> list[Any]:
    out = []
    for i, (annotation, _, refused) in enumerate(CASES):
        marks = []
        if annotation in KNOWN:
            marks.append(pytest.mark.xfail(reason=KNOWN[annotation], strict=True))
        out.append(pytest.param(i, refused, id=annotation, marks=marks))
    return out


@pytest.mark.parametrize(("i", "refused"), _params())
def test_runtime_and_plugin_agree(
    i: int, refused: bool, module: Any, plugin_lines: dict[int, list[str]]
) -> None:
    # The runtime's verdict is the one the case states (checked first, so a
    # wrong case is caught as such); the plugin must say the same.
    assert _runtime_refuses(module, i) is refused
    codes = [c for c in plugin_lines.get(_line_of(i), []) if c.startswith("treespec-")]
    assert bool(codes) is refused, (CASES[i][0], codes)


def test_the_cases_compile_to_the_lines_read() -> None:
    source = _source().splitlines()
    for i, (annotation, _, _) in enumerate(CASES):
        assert source[_line_of(i) - 1] == f"def case_{i}(x: {annotation}) -> None: ..."
    assert np.unique([a for a, _, _ in CASES]).size == len(CASES)


# -- literal static_flags= and default= ------------------------------------------

#: (parameters, the options as written at `treespec.jit(f, ...)`, the call's
#: arguments, refused by the runtime).
FLAG_CASES: list[tuple[str, str, str, bool]] = [
    (
        "x: jax.Array, n: int",
        "static_flags=[False, True]",
        "jax.numpy.ones(2), 3",
        False,
    ),
    (
        "x: jax.Array, n: int",
        "static_flags=[None, True]",
        "jax.numpy.ones(2), 3",
        False,
    ),
    ("x: jax.Array, n: int", "static_flags=[False]", "jax.numpy.ones(2), 3", True),
    (
        "x: jax.Array, n: int",
        "static_flags=[False, True, True]",
        "jax.numpy.ones(2), 3",
        True,
    ),
    # One entry per parameter, `*ns` being one (its entry covers every extra
    # argument); entries per extra argument are nested in it.
    (
        "x: jax.Array, *ns: int",
        "static_flags=[False, True, True]",
        "jax.numpy.ones(2), 1, 2",
        True,
    ),
    (
        "x: jax.Array, *ns: int",
        "static_flags=[False, True]",
        "jax.numpy.ones(2), 1, 2",
        False,
    ),
    (
        "x: jax.Array, *ns: int",
        "static_flags=[False, [True, True]]",
        "jax.numpy.ones(2), 1, 2",
        False,
    ),
    (
        "x: jax.Array, *ns: jax.Array",
        "static_flags=[False, True]",
        "jax.numpy.ones(2), jax.numpy.ones(2)",
        True,
    ),
    ("x: jax.Array, n: int", "static_flags={'n': True}", "jax.numpy.ones(2), 3", False),
    ("x: jax.Array, n: int", "static_flags={'nn': True}", "jax.numpy.ones(2), 3", True),
    ("x: jax.Array, n: int", "static_flags={'x': True}", "jax.numpy.ones(2), 3", True),
    (
        "x: jax.Array, n: int",
        "static_flags=[False, 'yes']",
        "jax.numpy.ones(2), 3",
        True,
    ),
    (
        "x: jax.Array, cfg: dict[str, int]",
        "static_flags=[False, {'a': True}]",
        "jax.numpy.ones(2), {'a': 1}",
        False,
    ),
    (
        "x: jax.Array, n: int",
        "static_flags={'n': lambda leaf: True}",
        "jax.numpy.ones(2), 3",
        False,
    ),
    ("x: jax.Array, n: Static[int]", "default='static'", "jax.numpy.ones(2), 3", True),
    (
        "x: Dynamic[jax.Array], n: int",
        "default='static'",
        "jax.numpy.ones(2), 3",
        False,
    ),
    (
        "x: jax.Array, n: int",
        "static_flags=[False, None], default='static'",
        "jax.numpy.ones(2), 3",
        False,
    ),
    ("x: jax.Array, s: str", "default='dynamic'", "jax.numpy.ones(2), 'a'", True),
    (
        "x: jax.Array, s: str",
        "static_flags={'s': True}, default='dynamic'",
        "jax.numpy.ones(2), 'a'",
        False,
    ),
    ("x: jax.Array, n: Static[int]", "default='error'", "jax.numpy.ones(2), 3", True),
    (
        "x: Dynamic[jax.Array], n: Static[int]",
        "default='error'",
        "jax.numpy.ones(2), 3",
        False,
    ),
    (
        "x: jax.Array, n: Static[int]",
        "static_flags={'x': False}, default='error'",
        "jax.numpy.ones(2), 3",
        False,
    ),
    # A None entry covers nothing: the hints decide, and `n` has no marker.
    (
        "x: jax.Array, n: int",
        "static_flags={'x': False, 'n': None}, default='error'",
        "jax.numpy.ones(2), 3",
        True,
    ),
    ("x: Any, n: Static[int]", "default='error'", "(), 3", False),
    ("p: Literal[1, 2]", "default='dynamic'", "1", False),
    # Positional-only parameters, which mypy's callable types keep no name of.
    (
        "x: jax.Array, /, n: int",
        "static_flags=[False, True]",
        "jax.numpy.ones(2), 3",
        False,
    ),
    ("x: jax.Array, /, n: int", "static_flags=[False]", "jax.numpy.ones(2), 3", True),
    ("x: jax.Array, /, n: int", "default='static'", "jax.numpy.ones(2), 3", True),
    (
        "x: jax.Array, /, n: int",
        "static_flags={'x': False, 'n': True}",
        "jax.numpy.ones(2), 3",
        False,
    ),
    ("p: Literal['a', 'b']", "default='dynamic'", "'a'", True),
    ("x: jax.Array, n: Static[int]", "default='dynamc'", "jax.numpy.ones(2), 3", True),
]


def _flag_source() -> str:
    lines = [HEADER]
    for i, (params, options, _, _) in enumerate(FLAG_CASES):
        lines.append(f"def flag_fun_{i}({params}) -> None: ...")
        lines.append(
            f"def make_{i}() -> object: return treespec.jit(flag_fun_{i}, {options})"
        )
    return "\n".join(lines) + "\n"


def _flag_line_of(i: int) -> int:
    return HEADER.count("\n") + 3 + 2 * i


@pytest.fixture(scope="module")
def flag_module(
    cases_dir: Path, plugin_errors: dict[str, dict[int, list[tuple[str, str]]]]
) -> tuple[Any, dict[int, list[str]]]:
    found = _error_codes(plugin_errors, "flag_cases")
    return _load(cases_dir, "flag_cases"), found


@pytest.mark.parametrize(
    ("i", "refused"),
    [
        pytest.param(i, refused, id=f"{params} | {options}")
        for i, (params, options, _, refused) in enumerate(FLAG_CASES)
    ],
)
def test_runtime_and_plugin_agree_on_literal_options(
    i: int, refused: bool, flag_module: tuple[Any, dict[int, list[str]]]
) -> None:
    module, lines = flag_module
    try:
        jitted = getattr(module, f"make_{i}")()
        jitted(*eval(f"({FLAG_CASES[i][2]},)", vars(module)))
        runtime_refuses = False
    except (treespec.SpecError, treespec.ValidationError):
        runtime_refuses = True
    assert runtime_refuses is refused
    codes = [c for c in lines.get(_flag_line_of(i), []) if c.startswith("treespec-")]
    assert bool(codes) is refused, (FLAG_CASES[i][:2], codes)


def test_the_option_cases_compile_to_the_lines_read() -> None:
    source = _flag_source().splitlines()
    for i in range(len(FLAG_CASES)):
        assert source[_flag_line_of(i) - 1].startswith(f"def make_{i}() -> object:")


# -- markers on the fields of the pytree classes users meet -----------------------

#: (a class definition, a value of it, refused by the runtime): for each pytree
#: base class, a field held static with a marker that agrees, and one with a
#: marker that cannot be honoured. The runtime refuses when a function taking
#: the class is decorated or first called; the plugin on the class's lines.
FIELD_CASES: list[tuple[str, str, bool]] = [
    (
        """class EqxAgrees(eqx.Module):
    w: jax.Array
    act: Static[str] = eqx.field(static=True)""",
        "EqxAgrees(jax.numpy.ones(2), 'relu')",
        False,
    ),
    (
        """class EqxTraced(eqx.Module):
    w: jax.Array
    scale: Dynamic[float] = eqx.field(static=True)""",
        "EqxTraced(jax.numpy.ones(2), 0.5)",
        True,
    ),
    (
        """class NodeAgrees(struct.PyTreeNode):
    w: jax.Array
    name: Static[str] = struct.field(pytree_node=False)""",
        "NodeAgrees(jax.numpy.ones(2), 'a')",
        False,
    ),
    (
        """class NodeDonated(struct.PyTreeNode):
    w: jax.Array
    scale: Donate[float] = struct.field(pytree_node=False)""",
        "NodeDonated(jax.numpy.ones(2), 0.5)",
        True,
    ),
    (
        """@struct.dataclass
class StructAgrees:
    w: Dynamic[jax.Array]
    name: Static[str] = struct.field(pytree_node=False)""",
        "StructAgrees(jax.numpy.ones(2), 'a')",
        False,
    ),
    (
        """@struct.dataclass
class StructTraced:
    w: jax.Array
    scale: Dynamic[float] = struct.field(pytree_node=False)""",
        "StructTraced(jax.numpy.ones(2), 0.5)",
        True,
    ),
    (
        """class NnxAgrees(nnx.Module):
    w: Dynamic[jax.Array]
    n: Static[int]

    def __init__(self) -> None:
        self.w = jax.numpy.ones(2)
        self.n = 2""",
        "NnxAgrees()",
        False,
    ),
    (
        """class NnxTraced(nnx.Module):
    scale: Dynamic[float]

    def __init__(self, scale: float) -> None:
        self.lin = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
        self.scale = scale""",
        "NnxTraced(0.5)",
        True,
    ),
    (
        """class NnxData(nnx.Module):
    scale: Dynamic[float]

    def __init__(self, scale: float) -> None:
        self.scale = nnx.data(scale)""",
        "NnxData(0.5)",
        False,
    ),
    (
        """class PytreeAgrees(nnx.Pytree):
    w: Dynamic[jax.Array]

    def __init__(self) -> None:
        self.w = jax.numpy.ones(2)""",
        "PytreeAgrees()",
        False,
    ),
    (
        """class PytreeHeld(nnx.Pytree):
    n: Donate[int] = nnx.static()

    def __init__(self) -> None:
        self.n = 2""",
        "PytreeHeld()",
        True,
    ),
    (
        """@treespec.dataclass
class MadeAgrees:
    w: jax.Array
    label: Static[str]""",
        "MadeAgrees(jax.numpy.ones(2), 'a')",
        False,
    ),
    (
        """@treespec.dataclass
class MadeInner:
    w: jax.Array
    sizes: Static[tuple[Dynamic[float], ...]]""",
        "MadeInner(jax.numpy.ones(2), (1.0,))",
        True,
    ),
    (
        """@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class JaxAgrees:
    w: jax.Array
    op: Static[str] = jax.tree.static(default='add')""",
        "JaxAgrees(jax.numpy.ones(2))",
        False,
    ),
    (
        """@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class JaxTraced:
    w: jax.Array
    scale: Dynamic[float] = jax.tree.static(default=1.0)""",
        "JaxTraced(jax.numpy.ones(2))",
        True,
    ),
    (
        """@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class MetadataTraced:
    w: jax.Array
    scale: Dynamic[float] = dataclasses.field(
        default=1.0, metadata={'static': True}
    )""",
        "MetadataTraced(jax.numpy.ones(2))",
        True,
    ),
    (
        """@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class MetadataData:
    w: jax.Array
    scale: Dynamic[float] = dataclasses.field(
        default=1.0, metadata={'static': False}
    )""",
        "MetadataData(jax.numpy.ones(2))",
        False,
    ),
    (
        """@functools.partial(
    jax.tree_util.register_dataclass, data_fields=['w'], meta_fields=['scale']
)
@dataclasses.dataclass(frozen=True)
class MetaTraced:
    w: jax.Array
    scale: Dynamic[float]""",
        "MetaTraced(jax.numpy.ones(2), 0.5)",
        True,
    ),
    (
        """@jax.tree_util.register_pytree_node_class
class FlattensAgrees:
    def __init__(self, a: jax.Array) -> None:
        self.a = a

    def tree_flatten(self) -> tuple[tuple[jax.Array], None]:
        return (self.a,), None

    @classmethod
    def tree_unflatten(cls, aux: None, c: tuple[jax.Array]) -> FlattensAgrees:
        return cls(c[0])""",
        "FlattensAgrees(jax.numpy.ones(2))",
        False,
    ),
    (
        """@jax.tree_util.register_pytree_node_class
class FlattensMarked:
    a: Dynamic[jax.Array]
    name: Dynamic[str]

    def __init__(self, a: jax.Array, name: str) -> None:
        self.a, self.name = a, name

    def tree_flatten(self) -> tuple[tuple[jax.Array], str]:
        return (self.a,), self.name

    @classmethod
    def tree_unflatten(cls, aux: str, c: tuple[jax.Array]) -> FlattensMarked:
        return cls(c[0], aux)""",
        "FlattensMarked(jax.numpy.ones(2), 'a')",
        True,
    ),
]


def _class_name(definition: str) -> str:
    return definition.split("class ", 1)[1].split("(", 1)[0].split(":", 1)[0]


def _field_source() -> tuple[str, list[range]]:
    """The cases module, and the lines of each case (its class and function)."""
    lines = [HEADER, "import functools", ""]
    spans = []
    for i, (definition, value, _) in enumerate(FIELD_CASES):
        if "jax.tree.static" in definition and not HAS_TREE_STATIC:
            spans.append(range(0))  # its test skips, saying why
            continue
        lines.append("")
        start = sum(part.count("\n") + 1 for part in lines) + 1
        lines.append(definition)
        lines.append(f"def field_fun_{i}(x: {_class_name(definition)}) -> None: ...")
        lines.append(f"def field_value_{i}() -> object: return {value}")
        end = sum(part.count("\n") + 1 for part in lines)
        spans.append(range(start, end + 1))
    return "\n".join(lines) + "\n", spans


@pytest.fixture(scope="module")
def field_module(
    cases_dir: Path, plugin_errors: dict[str, dict[int, list[tuple[str, str]]]]
) -> tuple[Any, dict[int, list[str]]]:
    found = _error_codes(plugin_errors, "field_cases")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return _load(cases_dir, "field_cases"), found


@pytest.mark.parametrize(
    ("i", "refused"),
    [
        pytest.param(
            i,
            refused,
            id=_class_name(definition),
            marks=[needs_tree_static] if "jax.tree.static" in definition else [],
        )
        for i, (definition, _, refused) in enumerate(FIELD_CASES)
    ],
)
def test_runtime_and_plugin_agree_on_markers_on_fields(
    i: int, refused: bool, field_module: tuple[Any, dict[int, list[str]]]
) -> None:
    module, lines = field_module
    try:
        jitted = treespec.jit(getattr(module, f"field_fun_{i}"))
        jitted(getattr(module, f"field_value_{i}")())
        runtime_refuses = False
    except (treespec.SpecError, treespec.ValidationError):
        runtime_refuses = True
    assert runtime_refuses is refused
    span = _field_source()[1][i]
    codes = [
        c for line in span for c in lines.get(line, []) if c.startswith("treespec-")
    ]
    assert bool(codes) is refused, (_class_name(FIELD_CASES[i][0]), codes)


def test_the_field_cases_compile_to_the_lines_read() -> None:
    source, spans = _field_source()
    lines = source.splitlines()
    for i, (definition, _, _) in enumerate(FIELD_CASES):
        if not spans[i]:
            continue  # a case this JAX cannot define
        block = "\n".join(lines[spans[i].start - 1 : spans[i].stop - 1])
        assert block.startswith(definition), (i, block)
        assert lines[spans[i].stop - 3].startswith(f"def field_fun_{i}(")


# -- what a class definition alone is refused for -------------------------------

#: (a class definition, refused by the runtime when the class is defined). A
#: mutable container under `Static[...]` in a `treespec.dataclass` field would
#: go stale as JAX metadata: the runtime refuses the class, the plugin the line.
DEFINITION_CASES: list[tuple[str, bool]] = [
    (
        """@treespec.dataclass
class StaticList:
    w: jax.Array
    sizes: Static[list[int]]""",
        True,
    ),
    (
        """@treespec.dataclass
class StaticDict:
    w: jax.Array
    names: Static[dict[str, int]]""",
        True,
    ),
    (
        """@treespec.dataclass
class StaticOrdered:
    w: jax.Array
    names: Static[collections.OrderedDict[str, int]]""",
        True,
    ),
    (
        """@treespec.dataclass
class StaticTuple:
    w: jax.Array
    sizes: Static[tuple[int, ...]]""",
        False,
    ),
    (
        """@treespec.dataclass
class StaticFrozen:
    w: jax.Array
    names: Static[frozenset[str]]""",
        False,
    ),
    (
        """@treespec.dataclass
class TracedList:
    w: list[jax.Array]""",
        False,
    ),
]


def _definition_source() -> tuple[str, list[range]]:
    """The definitions module, and the lines of each definition."""
    lines = [HEADER]
    spans = []
    for definition, _ in DEFINITION_CASES:
        lines.append("")
        start = sum(part.count("\n") + 1 for part in lines) + 1
        lines.append(definition)
        spans.append(range(start, start + definition.count("\n") + 1))
    return "\n".join(lines) + "\n", spans


@pytest.fixture(scope="module")
def definition_lines(
    plugin_errors: dict[str, dict[int, list[tuple[str, str]]]],
) -> dict[int, list[tuple[str, str]]]:
    """`(code, message)` of each error mypy reports, by line."""
    return plugin_errors.get("definition_cases", {})


@pytest.mark.parametrize(
    ("i", "refused"),
    [
        pytest.param(i, refused, id=_class_name(definition))
        for i, (definition, refused) in enumerate(DEFINITION_CASES)
    ],
)
def test_runtime_and_plugin_agree_on_class_definitions(
    i: int, refused: bool, definition_lines: dict[int, list[tuple[str, str]]]
) -> None:
    definition = DEFINITION_CASES[i][0]
    # A module of its own: dataclasses reads the class's module.
    module = types.ModuleType(f"definition_case_{i}")
    sys.modules[module.__name__] = module
    namespace = module.__dict__
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        exec(HEADER, namespace)
    try:
        exec(definition, namespace)
        runtime_refuses = False
    except treespec.SpecError as error:
        runtime_refuses = True
        message = str(error)
    assert runtime_refuses is refused
    span = _definition_source()[1][i]
    found = [
        (code, text)
        for line in span
        for code, text in definition_lines.get(line, [])
        if code.startswith("treespec-")
    ]
    assert [code for code, _ in found] == (
        ["treespec-mutable-static"] if refused else []
    ), found
    if refused:  # the runtime's words
        assert found[0][1] == message


def test_a_marker_around_a_model_holds_its_activations_static_in_both(
    tmp_path: Path,
) -> None:
    # `Dynamic[eqx.nn.MLP]`: the marker covers the arrays; the activation
    # functions, which can never be traced, stay static (DESIGN, Markers),
    # so the plugin is quiet and the runtime runs it. A marker written on a
    # callable itself is still refused by both.
    source = HEADER + (
        "\n\ndef f(m: Dynamic[eqx.nn.MLP]) -> None: ...\n"
        "def g(act: Dynamic[Callable[[jax.Array], jax.Array]]) -> None: ...\n"
    )
    source = source.replace(
        "import dataclasses", "import dataclasses\nfrom collections.abc import Callable"
    )
    (tmp_path / "named_field.py").write_text(source)
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nplugins = treespec.mypy_plugin\n")
    out = run_mypy(tmp_path / "named_field.py", config, tmp_path).stdout
    lines = [line for line in out.splitlines() if "[treespec-" in line]
    assert len(lines) == 1 and "non-array-dynamic" in lines[0], out
    assert f"named_field.py:{source.count(chr(10))}:" in lines[0], out  # g, not f
    import equinox as eqx
    import jax

    from treespec import Donate, Dynamic

    def apply(m: Donate[eqx.nn.MLP], x: jax.Array) -> jax.Array:
        return m(x)

    mlp = eqx.nn.MLP(2, 2, 2, 1, key=jax.random.PRNGKey(0))
    expected = mlp(jax.numpy.ones(2))
    donated = eqx.tree_at(
        lambda m: m.layers, mlp, jax.tree_util.tree_map(lambda a: a + 0, mlp.layers)
    )  # a copy: its buffers go
    out = treespec.jit(apply)(donated, jax.numpy.ones(2))
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    kinds = resolve(apply, mlp, jax.numpy.ones(2))
    assert kinds["m.activation"] == kinds["m.final_activation"] == "static"
    assert kinds["m.layers[0].weight"] == "donate", kinds

    def f(m: Dynamic[eqx.nn.MLP]) -> None: ...

    treespec.jit(f)(mlp)  # the activation is held static, not refused
