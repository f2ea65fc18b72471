"""What a leaf annotation stands for in a shape check: the dtype an array of
its jaxtyping category is built with, the values of a `bool`, `Literal[...]`
or `Enum` (every mode of a static leaf), and the dimension names a
function's annotations use."""

from __future__ import annotations

import enum
import re
import typing
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import jax
import numpy as np

from .._model.markers import Marker
from .._model.spec import ClassNode, LeafNode, Node
from .._runtime.checking.dims import DIM_NAME

__all__ = [
    "DTYPES",
    "declared_names",
    "dtype_of",
    "finite_values",
    "modes_of",
    "named_by_fields",
    "own_names",
    "rounded_names",
]

#: One dtype for each jaxtyping dtype category, the first the category allows.
DTYPES = ("float32", "int32", "uint32", "bool", "complex64", "bfloat16")


def finite_values(node: LeafNode) -> tuple[Any, ...] | None:
    """Every value of a `bool`, `Literal[...]` or `Enum` annotation, else None."""
    annotation = node.annotation
    if annotation is bool:
        return (False, True)
    if node.category == "literal":
        return tuple(typing.get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return tuple(annotation)
    return None


def dtype_of(annotation: Any) -> Any:
    """The dtype an array of a jaxtyping annotation is built with (a typed
    PRNG key for `Key[...]`)."""
    dtypes = getattr(annotation, "dtypes", None)
    if not isinstance(dtypes, (tuple, list)) or not dtypes:  # `Shaped`: any
        return np.float32
    for name in DTYPES:
        if name in dtypes:
            return np.dtype(name) if name != "bfloat16" else jax.numpy.bfloat16
    if any(str(d).startswith(("key", "prng_key")) for d in dtypes):  # a typed key
        return jax.eval_shape(jax.random.key, 0).dtype
    return np.dtype(dtypes[0])


def modes_of(node: Any, marker: Marker | None, default: Any) -> tuple[Any, ...] | None:
    """A static `bool`, `Literal[...]` or `Enum` leaf's values, its default
    first: a mode only in another value is checked too."""
    if not isinstance(node, LeafNode) or marker in (Marker.DYNAMIC, Marker.DONATE):
        return None
    values = finite_values(node)
    if values is None or default not in values:
        return None
    return (default, *(v for v in values if v is not default and v != default))


def declared_names(nodes: Iterable[Node]) -> frozenset[str]:
    """The dimension names the annotations below `nodes` use (`h` of `h//2`
    too), through every container and class field: a constructor's
    parameter so named takes that dimension (`construct.py`)."""
    found: dict[str, None] = {}
    for text in _dim_texts(nodes):
        found.update(dict.fromkeys(DIM_NAME.findall(text)))
    return frozenset(found)


#: A size rounded: `(h+1)//2`, `(w + 3) // 4`.
_ROUNDED = re.compile(r"\(\s*(\w+)\s*([+-])\s*(\d+)\s*\)\s*//\s*(\d+)")


def rounded_names(nodes: Iterable[Node]) -> dict[str, tuple[str, int, int]]:
    """The names the annotations below `nodes` round, each with where and
    how (`h` of `(h+1)//2`: `("(h+1)//2", 1, 2)`; `(h-1)//2` too, not `h//2`
    or `(h-2)//2`): they say what a size the divisor does not divide
    gives."""
    found: dict[str, tuple[str, int, int]] = {}
    for text in _dim_texts(nodes):
        for match in _ROUNDED.finditer(text):
            name, sign, add, divisor = match.groups()
            shift = int(add) if sign == "+" else -int(add)
            if int(divisor) and shift % int(divisor):
                found.setdefault(name, (match.group(0), shift, int(divisor)))
    return found


def own_names(nodes: Iterable[Node]) -> frozenset[str]:
    """The dimension names the function's own annotations use, not those of
    a class's fields (a layer's `weight: "out_features in_features"` names
    sizes of that layer's own, which its constructor decides)."""
    found: dict[str, None] = {}
    for text in _dim_texts(nodes, fields=False):
        found.update(dict.fromkeys(DIM_NAME.findall(text)))
    return frozenset(found)


def named_by_fields(
    node: ClassNode, instance: Any, sizes: Mapping[str, Any], own: Iterable[str]
) -> dict[str, str]:
    """The sizes (by name, of `sizes`) that an instance's own constructor put
    where its fields' annotations write a name of the function's own
    (`own`): `weights: "cin cout m"` made `(in_channels, out_channels,
    modes)` beside `-> "cout n"`: `out_channels` is `cout`, as the
    annotations say. A size held under two names, or two sizes of one
    value, says nothing."""
    names: dict[str, list[str]] = {}
    for name, size in sizes.items():
        names.setdefault(str(size), []).append(name)
    found: dict[str, set[str]] = {}
    for field, child in node.fields.items():
        if not isinstance(child, LeafNode):
            continue
        shape = getattr(getattr(instance, field, None), "shape", None)
        tokens = str(getattr(child.annotation, "dim_str", "")).split()
        if shape is None or len(shape) != len(tokens):
            continue
        for token, size in zip(tokens, shape):
            held = names.get(str(size), [])
            if token in own and len(held) == 1 and held[0] != token:
                found.setdefault(held[0], set()).add(token)
    return {name: tokens.pop() for name, tokens in found.items() if len(tokens) == 1}


def _dim_texts(nodes: Iterable[Node], fields: bool = True) -> Iterator[str]:
    """The dimension strings of the array annotations below `nodes`, and
    below the fields of classes with `fields`."""
    seen: set[int] = set()
    todo = list(nodes)
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, LeafNode):
            yield str(getattr(node.annotation, "dim_str", ""))
        if fields or not isinstance(node, ClassNode):
            todo.extend(child for _, child in node.children())
