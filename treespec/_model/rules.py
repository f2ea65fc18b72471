"""The one rule table: what may be traced, what may be held static.

The runtime checks, the error hints, the docs and the mypy plugin all read these
names, so the answers cannot drift apart. JAX-free, as the whole spec model is:
the mypy plugin imports it at type-checking time. What a value is at run time
(an array, array-like, hashable) is the runtime's: `_runtime/planning/values.py`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final

from .markers import Marker
from .spec import (
    AnyNode,
    ClassBacked,
    ClassNode,
    LeafNode,
    Node,
    NoneNode,
    PyTreeNode,
    SequenceNode,
    UnionNode,
)

__all__ = [
    "ARRAY_TYPES",
    "DEFAULT_POLICIES",
    "MAPPING_TYPES",
    "NON_ARRAY_TYPES",
    "SCALAR_TYPES",
    "SEQUENCE_TYPES",
    "UNHASHABLE_TYPES",
    "is_array_annotation",
    "left_at_default",
    "may_be_filtered_out",
    "covered",
    "covered_places",
    "marked_union_conflict",
    "node_unhashable",
    "type_problem",
    "union_conflict",
    "non_array_fix",
    "uncovered_fix",
    "unhashable_fix",
    "union_fix",
]

#: The `default=` policies a transform takes (`DEFAULTS` of
#: `_runtime/planning/build.py`).
DEFAULT_POLICIES: Final = ("infer", "static", "dynamic", "error")

#: Types whose instances are arrays: traced under the "infer" policy.
ARRAY_TYPES: Final = frozenset(
    {
        "jax.Array",
        "jax._src.basearray.Array",
        "jax.jaxlib._jax.Array",
        "jaxlib._jax.Array",
        "jaxlib._jax.ArrayImpl",
        "numpy.ndarray",
        "numpy.generic",
        "jax.ShapeDtypeStruct",
        "jax._src.api.ShapeDtypeStruct",
        "jax._src.core.ShapeDtypeStruct",
        # A member of `jax.typing.ArrayLike` in JAX 0.8 (a NumPy array that
        # keeps its JAX dtype), not an `ndarray` subclass.
        "jax._src.literals.TypedNdArray",
    }
)

#: Python scalar types: may be traced (marked `Dynamic`), static under "infer".
SCALAR_TYPES: Final = frozenset(
    {"builtins.bool", "builtins.int", "builtins.float", "builtins.complex"}
)

#: Leaf types that can never be traced, so `Dynamic[...]` of them is an error.
NON_ARRAY_TYPES: Final = frozenset(
    {"builtins.str", "builtins.bytes", "builtins.object", "builtins.type"}
)

#: Leaf types that can never be static, so `Static[...]` of them is an error.
UNHASHABLE_TYPES: Final = frozenset(
    {
        "builtins.set",
        "builtins.bytearray",
        "builtins.memoryview",
        "numpy.ndarray",
        "jax.Array",
        "jax._src.basearray.Array",
        "jax.jaxlib._jax.Array",
        "jaxlib._jax.Array",
        "jaxlib._jax.ArrayImpl",
    }
)


# The fixes a message suggests, written once for the runtime and the plugin.


def union_fix() -> str:
    """How to fix a union whose members disagree on markers."""
    return (
        "Put one marker around the whole union, e.g. Static[A | B], or mark "
        "every member alike."
    )


def uncovered_fix() -> str:
    """How to cover leaves that `default="error"` found uncovered."""
    return (
        "Annotate these leaves with Static[...]/Dynamic[...], pass static_flags, "
        "or choose another default."
    )


def unhashable_fix(is_an_array: bool) -> str:
    """How to fix a static leaf (or leaf type) that cannot be hashed."""
    if is_an_array:
        return "mark it Dynamic[...] (or static_flags=False) to trace it"
    return (
        "static leaves must be hashable (they are part of the compile-cache "
        "key): use a tuple, a frozenset or a frozen dataclass"
    )


def non_array_fix() -> str:
    """How to fix a traced leaf (or leaf type) that is not an array."""
    return "mark it Static[...] (or static_flags=True) to hold it static"


#: Containers whose type arguments are the types of their children, by full
#: name (the runtime's `typing` objects and mypy's types both have one). Each is
#: a pytree node in JAX's registry, or an abstract type whose values usually
#: are. `collections.deque` is not among them: JAX keeps a deque a leaf.
SEQUENCE_TYPES: Final = frozenset(
    {
        "builtins.list",
        "builtins.tuple",
        "collections.abc.Sequence",
        "typing.Sequence",
    }
)
MAPPING_TYPES: Final = frozenset(
    {
        "builtins.dict",
        "collections.OrderedDict",
        "collections.defaultdict",
        "collections.abc.Mapping",
        "typing.Mapping",
    }
)


# Verdicts on spec nodes: the runtime (`_runtime/reading/hints.py`) builds the
# nodes from typing objects, the mypy plugin from mypy's types; both ask these.


def union_conflict(members: Sequence[Node]) -> str | None:
    """The members of an unmarked union and their markers, shown, when they
    disagree (`None` members aside); `None` when they agree."""
    relevant = [m for m in members if not isinstance(m, NoneNode)]
    if len({m.marker for m in relevant}) <= 1:
        return None
    return ", ".join(
        f"{m.text or 'Any'} ({m.marker.title if m.marker else 'no marker'})"
        for m in relevant
    )


def marked_union_conflict(node: UnionNode, marker: Marker) -> Node | None:
    """The first member marked otherwise than the marker around the union.

    A marker around a union covers its members, so such a member is a marker
    directly inside another (nothing lies between them).
    """
    for member in node.members:
        if member.marker is not None and member.marker is not marker:
            return member
    return None


def covered(node: Node) -> Iterator[Node]:
    """The places below a marked `node` that its marker covers, to be judged
    by `type_problem`: leaf types, and classes (whose hashability matters).

    An inner marker covers its own subtree (the nearest marker wins). Pytree
    containers, class fields, union members and a `PyTree[T]`'s leaf are
    looked through; a class met again (a recursive type) is not walked twice.
    """
    for _, place in covered_places(node):
        yield place


def covered_places(
    node: Node, *, into_classes: bool = True
) -> Iterator[tuple[str, Node]]:
    """`covered`, each place with its key path below `node` (`.activation`,
    `['k']`, `[0]`, `[*]` for any item; `""` for `node` itself), as the
    runtime names a leaf below an argument.

    Without `into_classes`, a class's fields (a dataclass, an Equinox or NNX
    module, a NamedTuple: a `ClassNode`, not a mapping) are not places of the
    marker: a `Dynamic`/`Donate` marker around a class covers its leaves that
    can be traced, and a field that never can (a layer's activation
    function, a name) stays static, as the runtime holds it."""
    seen: set[int] = set()
    stack: list[tuple[str, Node]] = [("", node)]
    while stack:
        path, current = stack.pop()
        if current is not node and current.marker is not None:
            continue
        if isinstance(current, ClassBacked):
            if id(current.body) in seen:
                continue
            seen.add(id(current.body))
            yield path, current
            if not into_classes and isinstance(current, ClassNode):
                continue
        elif isinstance(current, LeafNode):
            yield path, current
        if isinstance(current, PyTreeNode):
            stack.append((path, current.leaf))
            continue
        children = list(current.children())
        for name, child in reversed(children):
            stack.append((path + _step(current, name), child))


def _step(parent: Node, name: str) -> str:
    """One step of a key path, from a child's name in `Node.children`."""
    if isinstance(parent, UnionNode):
        return ""  # a member is the same place
    if name.startswith("["):
        return name
    if isinstance(parent, ClassBacked) and not name.startswith("'"):
        return f".{name}"
    return f"[{name}]"


def type_problem(node: Node, marker: Marker) -> str | None:
    """Why no value of this annotation can be under `marker`, if none can.

    Judged from the type alone: a static leaf must be hashable, a traced leaf
    an array or a Python scalar. Unknown types (`Any`, type variables) pass.
    """
    if isinstance(node, AnyNode):
        return None
    name = f'"{node.text}"'
    if marker is Marker.STATIC:
        names = node.type_names if isinstance(node, LeafNode) else ()
        if any(n in UNHASHABLE_TYPES for n in names) or node_unhashable(node):
            is_an_array = any(n in ARRAY_TYPES for n in names)
            return (
                f"{name} is not hashable, so it cannot be Static: "
                f"{unhashable_fix(is_an_array)}."
            )
        return None
    if not isinstance(node, LeafNode):
        return None
    if node.category == "literal" and any(n in SCALAR_TYPES for n in node.type_names):
        return None  # `Literal[1, 2]`: the values are Python scalars, traceable
    if node.category in ("callable", "literal"):
        what = "a callable" if node.category == "callable" else "a Literal"
        return (
            f"{what} cannot be traced, so it cannot be {marker.title}: "
            f"{non_array_fix()}."
        )
    names = node.type_names
    if not names or any(n in ARRAY_TYPES or n in SCALAR_TYPES for n in names):
        return None
    if (
        names[0] in NON_ARRAY_TYPES
        or "builtins.str" in names
        or ("builtins.bytes" in names)
    ):
        reason = f"{name} is not an array"
    else:
        reason = f"{name} is neither an array nor a registered pytree"
    return f"{reason}, so it cannot be {marker.title} (traced): {non_array_fix()}."


def is_array_annotation(node: Node) -> bool:
    """Whether an annotation says "an array": an array type (`jax.Array`,
    `np.ndarray`, a jaxtyping array), a union of array types
    (`Optional[jax.Array]`), or a union that spells array-likeness: NumPy's
    arrays or scalars beside Python scalars (`jax.typing.ArrayLike`, `Array |
    np.ndarray | np.bool_ | np.number | bool | int | float | complex`).

    Under the "infer" default, an unmarked leaf annotated so is traced,
    whatever value comes. A union of array types with Python scalars alone
    (`int | float | Array`, Equinox's `MaxPool2d.init`) is not: the value
    chooses, an array traced and a Python scalar held static, as
    `eqx.filter_jit` holds it.
    """
    if isinstance(node, LeafNode):
        return node.is_array
    if not isinstance(node, UnionNode):
        return False
    members = [m for m in node.members if not isinstance(m, NoneNode)]
    arrays = [m for m in members if isinstance(m, LeafNode) and m.is_array]
    if not arrays or (len(arrays) < len(members) and not _spells_array_like(arrays)):
        return False
    scalars = [
        m
        for m in members
        if isinstance(m, LeafNode)
        and m.type_names[:1]
        and m.type_names[0] in SCALAR_TYPES
    ]
    return len(arrays) + len(scalars) == len(members)


def _spells_array_like(arrays: list[LeafNode]) -> bool:
    """Whether a union's array members name NumPy's own (`np.ndarray`,
    `np.number`): what converts to an array, not an array or a number."""
    return any(
        "numpy.ndarray" in m.type_names or "numpy.generic" in m.type_names
        for m in arrays
    )


def left_at_default(value: Any) -> bool:
    """Whether `value` is what Equinox flattens a field to that the class's
    own `__init__` never set (`extra: Linear | None = eqx.field(default=None)`,
    read as the class's default): no leaf, and nothing to check, as the
    function reads the default."""
    kind = type(value)
    return kind.__qualname__ == "_Missing" and kind.__module__.startswith("equinox.")


def may_be_filtered_out(field: Node, inferred: bool) -> bool:
    """Whether a class's field may hold `None` where its annotation says a
    leaf: Equinox's `filter`/`partition` put `None` in the fields they leave
    out (an optax state made from `eqx.filter(model, eqx.is_array)`, a
    `filter_grad` result), and such a `None` is a filtered-out leaf, not a
    wrong value.

    Only in an instance that no annotation names (`inferred`: the copies of
    the model's classes in an unannotated optimizer state, at any depth): an
    instance the signature names (`model: Net`, its annotated fields) is
    what its class says, so a `None` there is refused, naming the field. A
    field that is itself a container or a class never may: filtering keeps
    the structure and replaces leaves.
    """
    if isinstance(field, (ClassBacked, SequenceNode, PyTreeNode)):
        return False
    return inferred


def node_unhashable(node: Node) -> bool:
    """Whether the node says its values cannot be hashed."""
    return getattr(node, "hashable", None) is False
