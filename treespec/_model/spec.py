"""Spec nodes: what the annotations say about each place in an argument tree.

A `Spec` is derived once per function (see `_runtime/reading/hints.py`). It is
immutable and hashable. Class-backed nodes (dataclasses, NamedTuples,
TypedDicts) may refer to themselves (recursive types), so they compare and hash
by the class and its type arguments, never by walking their fields.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterator
from typing import Any

from .markers import Marker

#: The parameter kinds a call fills by position (`Spec.positional`).
POSITIONAL_KINDS = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
)
#: The parameter kinds a keyword of the parameter's name fills.
KEYWORD_KINDS = (
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.KEYWORD_ONLY,
)

__all__ = [
    "AnyNode",
    "ClassBacked",
    "ClassNode",
    "LeafNode",
    "MappingNode",
    "Node",
    "NoneNode",
    "KEYWORD_KINDS",
    "POSITIONAL_KINDS",
    "Param",
    "PyTreeNode",
    "SequenceNode",
    "Spec",
    "UnionNode",
]


@dataclasses.dataclass(frozen=True)
class Node:
    """One place in an annotation tree.

    `marker` is the marker written directly on this annotation (if any); `text`
    is how the annotation reads, for messages; `origin` says where it was
    written (`parameter cfg`, `Config['n_layers']`).
    """

    marker: Marker | None = dataclasses.field(default=None, kw_only=True)
    text: str = dataclasses.field(default="", kw_only=True, compare=False)
    origin: str = dataclasses.field(default="", kw_only=True, compare=False)

    def children(self) -> Iterator[tuple[str, Node]]:
        """The named sub-annotations, for `explain` and static checks."""
        return iter(())

    def with_marker(self, marker: Marker | None, text: str) -> Node:
        return dataclasses.replace(self, marker=marker, text=text)


@dataclasses.dataclass(frozen=True)
class AnyNode(Node):
    """No annotation, or `Any`: whatever is below is resolved by flags/defaults."""


@dataclasses.dataclass(frozen=True)
class NoneNode(Node):
    """`None`: an empty subtree."""


@dataclasses.dataclass(frozen=True)
class LeafNode(Node):
    """An opaque leaf type: `int`, `str`, `Literal[...]`, a jaxtyping array.

    `annotation` is the runtime's typing object (None when the node was built
    from mypy's types). What the shared rules (`rules.type_problem`) read is
    JAX- and mypy-free: `type_names`, the full names of the type's classes
    (its MRO, nearest first); `category`, `"callable"` or `"literal"` for
    those kinds of annotation (a literal's `type_names` are its values'
    classes); `hashable`, False when the class sets
    `__hash__` to None (None when unknown).
    """

    annotation: Any = None
    is_array: bool = False
    type_names: tuple[str, ...] = dataclasses.field(default=(), compare=False)
    category: str = dataclasses.field(default="", compare=False)
    hashable: bool | None = dataclasses.field(default=None, compare=False)


@dataclasses.dataclass(frozen=True)
class PyTreeNode(Node):
    """jaxtyping `PyTree[T]`: any structure, every leaf annotated `T`."""

    leaf: Node = dataclasses.field(default_factory=AnyNode)

    def children(self) -> Iterator[tuple[str, Node]]:
        yield "<leaf>", self.leaf


@dataclasses.dataclass(frozen=True)
class SequenceNode(Node):
    """`tuple[A, B]` (items), `tuple[T, ...]` or `list[T]` (rest)."""

    #: The container class (the runtime), or its full name (the mypy plugin).
    container: Any = tuple
    items: tuple[Node, ...] | None = None
    rest: Node | None = None

    def child_at(self, index: int) -> Node | None:
        if self.items is not None:
            return self.items[index] if index < len(self.items) else None
        return self.rest

    def children(self) -> Iterator[tuple[str, Node]]:
        if self.items is not None:
            for i, item in enumerate(self.items):
                yield f"[{i}]", item
        elif self.rest is not None:
            yield "[*]", self.rest


@dataclasses.dataclass(frozen=True)
class UnionNode(Node):
    """`A | B`, `Optional[A]`."""

    members: tuple[Node, ...] = ()

    def children(self) -> Iterator[tuple[str, Node]]:
        for i, member in enumerate(self.members):
            yield f"|{i}", member


class _Body:
    """Fields of a class-backed node, filled after the node exists (recursion)."""

    __slots__ = ("fields", "required")

    def __init__(self) -> None:
        self.fields: dict[str, Node] = {}
        self.required: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True, eq=False)
class ClassBacked(Node):
    #: The class (the runtime), or its full name (the mypy plugin).
    cls: Any = object
    type_args: tuple[Any, ...] = ()
    body: _Body = dataclasses.field(default_factory=_Body, repr=False)
    #: False when instances cannot be hashed (None when unknown).
    hashable: bool | None = None

    @property
    def fields(self) -> dict[str, Node]:
        return self.body.fields

    def children(self) -> Iterator[tuple[str, Node]]:
        yield from self.body.fields.items()

    def _key(self) -> tuple[Any, ...]:
        return (type(self), self.cls, self.type_args, self.marker)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClassBacked) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        marker = f", marker={self.marker!r}" if self.marker else ""
        name = getattr(self.cls, "__qualname__", self.cls)
        return f"{type(self).__name__}({name}{marker})"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ClassNode(ClassBacked):
    """A dataclass-like pytree (Equinox module, Flax struct, ...) or NamedTuple."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class MappingNode(ClassBacked):
    """A `TypedDict` (fixed keys) or a mapping `dict[K, V]`, `Mapping[K, V]`,
    `OrderedDict[K, V]`, ... (`cls` the container, `values` set)."""

    values: Node | None = None

    @property
    def is_typeddict(self) -> bool:
        return self.values is None

    def _key(self) -> tuple[Any, ...]:
        return (*super()._key(), self.values)

    def children(self) -> Iterator[tuple[str, Node]]:
        yield from ((repr(k), v) for k, v in self.body.fields.items())
        if self.values is not None:
            yield "[*]", self.values

    def __repr__(self) -> str:
        if self.is_typeddict:
            return super().__repr__()
        marker = f", marker={self.marker!r}" if self.marker else ""
        name = getattr(self.cls, "__name__", self.cls)
        return f"MappingNode({name}[*, {self.values!r}]{marker})"


@dataclasses.dataclass(frozen=True)
class Param:
    """One parameter of the function: its name, kind and annotation node."""

    name: str
    kind: inspect._ParameterKind
    node: Node
    has_default: bool = False

    @property
    def display(self) -> str:
        if self.kind is inspect.Parameter.VAR_POSITIONAL:
            return f"*{self.name}"
        if self.kind is inspect.Parameter.VAR_KEYWORD:
            return f"**{self.name}"
        return self.name


@dataclasses.dataclass(frozen=True)
class Spec:
    """What a function's annotations say about every argument, derived once.

    Immutable and hashable; [`spec_of`][treespec.spec_of] and a transform's
    `.spec` give it. `params` follows the signature's order; `returns` is the
    return annotation's node; `tree()` renders it as an indented tree.

    !!! example

        ```python
        import treespec
        from treespec import Static

        def f(n: Static[int], x: float) -> float:
            return n * x

        spec = treespec.spec_of(f)
        assert spec.param("n").node.text == "Static[int]"
        print(spec.tree())
        ```
    """

    name: str
    params: tuple[Param, ...]
    returns: Node = dataclasses.field(default_factory=AnyNode)

    def param(self, name: str) -> Param | None:
        """The parameter called `name` (its `name`, `kind` and annotation
        `node`), or `None` if the function has none of that name."""
        for p in self.params:
            if p.name == name:
                return p
        return None

    @property
    def positional(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.kind in POSITIONAL_KINDS)

    @property
    def var_positional(self) -> Param | None:
        for p in self.params:
            if p.kind is inspect.Parameter.VAR_POSITIONAL:
                return p
        return None

    @property
    def var_keyword(self) -> Param | None:
        for p in self.params:
            if p.kind is inspect.Parameter.VAR_KEYWORD:
                return p
        return None

    def positional_name(self, index: int) -> str:
        """What positional argument `index` of a call is called: its
        parameter's name, or `args[j]` for the extra ones."""
        positional = self.positional
        if index < len(positional):
            return positional[index].name
        extra = self.var_positional
        return f"{extra.name if extra else 'args'}[{index - len(positional)}]"

    def __repr__(self) -> str:
        parts = [f"{p.display}: {_inline(p.node)}" for p in self.params]
        ret = f" -> {_inline(self.returns)}" if self.returns.text else ""
        return f"Spec({self.name}({', '.join(parts)}){ret})"

    def tree(self) -> str:
        """The spec as an indented tree, one annotation per line."""
        lines = [f"{self.name}"]
        for p in self.params:
            _tree_lines(p.display, p.node, 1, lines, set())
        if not isinstance(self.returns, AnyNode) or self.returns.text:
            _tree_lines("return", self.returns, 1, lines, set())
        return "\n".join(lines)


#: How far `Spec.__repr__` opens classes inside classes, and how long the
#: fields of one class may read before the rest are left out as `...`.
_INLINE_DEPTH = 3
_INLINE_WIDTH = 100


def _inline(node: Node, depth: int = 0, seen: frozenset[int] = frozenset()) -> str:
    """An annotation on one line, with the markers inside its classes.

    A dataclass, NamedTuple or TypedDict with a marker somewhere below reads
    `Config{n_layers: Static[int], scale: Dynamic[float]}`; a recursive class
    is opened once, and the fields are cut at `_INLINE_WIDTH` characters and
    `_INLINE_DEPTH` levels.
    """
    text = node.text or "Any"
    if (
        not isinstance(node, ClassBacked)
        or node.marker is not None  # the marker covers everything below
        or id(node.body) in seen
        or depth >= _INLINE_DEPTH
        or not node.body.fields
        or not _marked_below(node, frozenset())
    ):
        return text
    seen = seen | {id(node.body)}
    fields: list[str] = []
    width = 0
    for name, child in node.body.fields.items():
        field = f"{name}: {_inline(child, depth + 1, seen)}"
        width += len(field) + 2
        if fields and width > _INLINE_WIDTH:
            fields.append("...")
            break
        fields.append(field)
    return f"{text}{{{', '.join(fields)}}}"


def _marked_below(node: Node, seen: frozenset[int]) -> bool:
    """Whether a marker is written anywhere below `node` (recursion cut)."""
    for _, child in node.children():
        if child.marker is not None:
            return True
        if isinstance(child, ClassBacked):
            if id(child.body) in seen:
                continue
            if _marked_below(child, seen | {id(child.body)}):
                return True
        elif _marked_below(child, seen):
            return True
    return False


def _tree_lines(
    label: str, node: Node, depth: int, lines: list[str], seen: set[int]
) -> None:
    pad = "  " * depth
    text = node.text or "Any"
    if isinstance(node, ClassBacked):
        if id(node.body) in seen:
            lines.append(f"{pad}{label}: {text}  (recursive, see above)")
            return
        seen = seen | {id(node.body)}
    lines.append(f"{pad}{label}: {text}")
    for sub_label, child in node.children():
        _tree_lines(sub_label, child, depth + 1, lines, seen)
