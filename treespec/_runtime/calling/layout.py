"""What the positional route decides once per function, and the keys it interns.

An argument is *wholly dynamic* when every leaf it can have is traced, whatever
the value: JAX then gets it unflattened. Whether the other leaves of a call are
all static is known per tree structure, from its plan (see `routes.py`).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from typing import Any

import jax

from ..._model.markers import Marker
from ..._model.rules import SCALAR_TYPES, is_array_annotation
from ..._model.spec import (
    AnyNode,
    ClassBacked,
    ClassNode,
    LeafNode,
    Node,
    NoneNode,
    Param,
    PyTreeNode,
    UnionNode,
)
from ..planning.plan import Kind
from ..reading.classes import class_held, is_nnx
from ..reading.flags import flag_kind

__all__ = [
    "PROBE_SCALARS",
    "MixedKey",
    "StaticKey",
    "is_sharding",
    "max_static_keys",
    "whole_kind",
]


def _children(node: Node) -> list[Node]:
    """The sub-annotations of `node` whose places can hold leaves: a class's
    fields it keeps in its tree structure are none (`classes.class_held`)."""
    if isinstance(node, ClassNode) and isinstance(node.cls, type):
        held = class_held(node.cls)
        return [child for name, child in node.children() if name not in held]
    return [child for _, child in node.children()]


def _below(node: Node) -> tuple[set[Marker], bool]:
    """Markers strictly below `node`, and whether an unannotated place is below."""
    markers: set[Marker] = set()
    any_below = False
    seen: set[int] = set()
    stack = _children(node)
    if isinstance(node, PyTreeNode):
        stack = [node.leaf] if not isinstance(node.leaf, AnyNode) else []
        if isinstance(node.leaf, AnyNode) and node.leaf.marker is not None:
            markers.add(node.leaf.marker)
    while stack:
        current = stack.pop()
        if isinstance(current, ClassBacked):
            if id(current.body) in seen:
                continue
            seen.add(id(current.body))
        if current.marker is not None:
            markers.add(current.marker)
        if isinstance(current, AnyNode):
            any_below = True
        stack.extend(_children(current))
    return markers, any_below


def _only_arrays(node: Node) -> bool:
    """Whether every leaf place a value of `node` can have is annotated as an
    array (so "infer" traces it whatever comes): no `Any`, no other leaf type."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, AnyNode):
            return False
        if isinstance(current, PyTreeNode):
            stack.append(current.leaf)
            continue
        if is_array_annotation(current) or isinstance(current, NoneNode):
            continue
        if isinstance(current, (LeafNode, UnionNode)):
            return False
        if isinstance(current, ClassBacked):
            if _open(current):
                return False
            if id(current.body) in seen:
                continue
            seen.add(id(current.body))
        stack.extend(_children(current))
    return True


def _open(node: ClassBacked) -> bool:
    """Whether an annotated class says nothing of the leaves its instances
    hold: an abstract one, or one with no fields (`act: eqx.Module` holding
    an `eqx.nn.Lambda(jax.nn.relu)`), whose subclasses add their own."""
    cls = node.cls
    return (
        isinstance(node, ClassNode)
        and isinstance(cls, type)
        and (not node.fields or inspect.isabstract(cls))
    )


def _traceable_only(node: Node) -> bool:
    """Whether every leaf place below `node` is annotated as something JAX
    traces: an array or a Python scalar (no callable, string, ...)."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, PyTreeNode):
            stack.append(current.leaf)
            continue
        if isinstance(current, LeafNode):
            if not (
                current.is_array
                or (current.type_names[:1] and current.type_names[0] in SCALAR_TYPES)
            ):
                return False
            continue
        if isinstance(current, ClassBacked):
            if _open(current):
                return False
            if id(current.body) in seen:
                continue
            seen.add(id(current.body))
        stack.extend(_children(current))
    return True


def whole_kind(param: Param, flag: Any, default: str = "infer") -> Kind | None:
    """The kind of every leaf of this positional parameter, when one kind
    covers them all."""
    node = param.node
    if isinstance(node, ClassNode) and is_nnx(node.cls):
        # Flattened per call: what the function changes in its Variables is
        # written back into the caller's objects (`graph.py`).
        return None
    markers, any_below = _below(node)
    kind = flag_kind(flag)
    if kind == "bool" and not flag:
        # A False flag traces everything; only Donate markers still matter.
        if Marker.DONATE not in markers and node.marker is not Marker.DONATE:
            return Kind.DYNAMIC
        if node.marker is Marker.DONATE and not markers:
            return Kind.DONATE
        return None
    if kind == "none" and not markers and not any_below:
        # A marker around a class covers its leaves that can be traced (one
        # that never can stays static): whole only when every leaf can.
        if node.marker is not None and not _traceable_only(node):
            return None
        if node.marker is Marker.DYNAMIC:
            return Kind.DYNAMIC
        if node.marker is Marker.DONATE:
            return Kind.DONATE
        if node.marker is None and default == "infer" and _only_arrays(node):
            return Kind.DYNAMIC  # `params: dict[str, jax.Array]`
    return None


def is_sharding(x: Any) -> bool:
    """Whether `x` is one entry of `in_shardings`/`out_shardings`, never a prefix
    container: `None`, a `Sharding`, a `PartitionSpec` (a tuple subclass, which
    JAX resolves against the mesh context), or any other object that is not a
    list, tuple or dict (JAX judges it)."""
    return (
        x is None
        or isinstance(x, (jax.sharding.Sharding, jax.sharding.PartitionSpec))
        or not isinstance(x, (list, tuple, Mapping))
    )


class StaticKey(tuple):  # type: ignore[type-arg]
    """An interned key of an all-static structure: `(split, *leaves, *types)`.

    A `PositionalRoute` makes one per distinct content, so identity stands for
    equality: JAX hashes and compares it (as the compiled call's static
    argument) in C, by identity, instead of hashing every leaf on each call.
    Compare contents with `tuple(a) == tuple(b)`.
    """

    __slots__ = ()
    __hash__ = object.__hash__
    __eq__ = object.__eq__
    __ne__ = object.__ne__


class MixedKey(StaticKey):
    """An interned key of a structure with traced leaves too, whose static
    leaves are all of immutable builtin types (`PositionalRoute._static_key`):
    the same identity semantics as `StaticKey`."""

    __slots__ = ()


#: Leaf types whose `==` is exact enough to stand for the leaf in a probe (see
#: `PositionalRoute._intern`): equal values of one of these types make equal keys
#: (bar `0.0 == -0.0`, which JAX's own cache treats alike).
PROBE_SCALARS = frozenset({bool, int, float, complex, str, bytes, type(None)})


#: Lowers `routes.MAX_STATIC_KEYS` (read once, at import).
MAX_STATIC_KEYS_ENV = "TREESPEC_MAX_STATIC_KEYS"
DEFAULT_MAX_STATIC_KEYS = 4096


def max_static_keys() -> int:
    """The bound on interned keys a route keeps (`routes.MAX_STATIC_KEYS`):
    `TREESPEC_MAX_STATIC_KEYS`, else 4096."""
    text = os.environ.get(MAX_STATIC_KEYS_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_STATIC_KEYS
    try:
        return max(0, int(text))
    except ValueError:
        raise ValueError(
            f"{MAX_STATIC_KEYS_ENV}={text!r}: expected a whole number of static "
            f"keys (the default is {DEFAULT_MAX_STATIC_KEYS})"
        ) from None
