"""How a shape check builds containers (`abstract.py`'s `Builder`, the
first argument of each, builds their items), and why an argument could not
be built."""

from __future__ import annotations

from typing import Any

from .._model.markers import Marker
from .._model.spec import MappingNode, NoneNode, SequenceNode, UnionNode

__all__ = [
    "CannotBuild",
    "MissingValue",
    "mapping_value",
    "sequence_value",
    "union_value",
]


class CannotBuild(Exception):
    """An annotation no abstract value can be made from (`jax.Array`, which
    says no shape; a field of no annotation)."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


class MissingValue(Exception):
    """A static leaf with no value given, no default and no finite type."""

    def __init__(self, path: str, text: str) -> None:
        super().__init__(f"{path} ({text}) has no value")
        self.path = path
        self.text = text


def sequence_value(
    self: Any, node: SequenceNode, path: str, marker: Marker | None
) -> Any:
    """A sequence: each item of a fixed-length tuple, one item of one of
    any length (an instance there binds its own names, `scopes.py`)."""
    if node.items is not None:
        items = [
            self.build(item, f"{path}[{i}]", marker=marker)
            for i, item in enumerate(node.items)
        ]
    elif node.rest is not None:  # one item, of the several it holds
        with self.scopes.any_length():
            items = [self.build(node.rest, f"{path}[0]", marker=marker)]
    else:
        items = []
    container = node.container if isinstance(node.container, type) else tuple
    return container(items)


def mapping_value(
    self: Any, node: MappingNode, path: str, marker: Marker | None
) -> Any:
    """A `TypedDict` with every key; any other mapping empty."""
    if not node.is_typeddict:
        container = node.cls if isinstance(node.cls, type) else dict
        try:
            return container()
        except TypeError:  # a mapping that needs arguments (defaultdict)
            return {}
    return {
        key: self.build(child, f"{path}[{key!r}]", marker=marker)
        for key, child in node.fields.items()
    }


def union_value(
    builder: Any,
    node: UnionNode,
    path: str,
    marker: Marker | None,
    prefer_value: bool = False,
) -> Any:
    """A union as its first member (None aside); when that cannot be built,
    never a later one as a guess (`optax.OptState`): None if it has it, else
    no value (the function is skipped, naming it)."""
    has_none = any(isinstance(member, NoneNode) for member in node.members)
    for member in node.members:
        if isinstance(member, NoneNode):
            continue
        try:
            return builder.build(member, path, marker=marker)
        except (CannotBuild, MissingValue):
            if has_none:
                return None
            raise MissingValue(path, node.text or "a union") from None
    return None
