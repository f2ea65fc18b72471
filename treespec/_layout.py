"""How each argument of a function is handed to JAX, decided once per function.

An argument is *wholly dynamic* when every leaf it can have is traced (so JAX
gets it unflattened), *wholly static* when every leaf is static (so it needs
no plan per call), or mixed. Below an `Any` under a static marker, a value's
pytree class may bring markers of its own; such an argument is wholly static
per tree structure of its value, decided once for each (`Splitter._fits`).
"""

from __future__ import annotations

import inspect
from typing import Any

import jax

from ._flags import flag_kind
from ._markers import Marker
from ._plan import Kind
from ._spec import AnyNode, LeafNode, Node, NoneNode, Param, PyTreeNode, _ClassBacked

__all__ = [
    "ALWAYS",
    "BY_VALUE",
    "NEVER",
    "PROBE_SCALARS",
    "StaticKey",
    "StaticLayout",
    "is_sharding",
    "whole_kind",
    "whole_static",
]

_POSITIONAL = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
)


def _below(node: Node) -> tuple[set[Marker], bool]:
    """Markers strictly below `node`, and whether an unannotated place is below."""
    markers: set[Marker] = set()
    any_below = False
    seen: set[int] = set()
    stack = [child for _, child in node.children()]
    if isinstance(node, PyTreeNode):
        stack = [node.leaf] if not isinstance(node.leaf, AnyNode) else []
        if isinstance(node.leaf, AnyNode) and node.leaf.marker is not None:
            markers.add(node.leaf.marker)
    while stack:
        current = stack.pop()
        if isinstance(current, _ClassBacked):
            if id(current.body) in seen:
                continue
            seen.add(id(current.body))
        if current.marker is not None:
            markers.add(current.marker)
        if isinstance(current, AnyNode):
            any_below = True
        stack.extend(child for _, child in current.children())
    return markers, any_below


def whole_kind(param: Param, flag: Any) -> Kind | None:
    """The kind of every leaf of this parameter, when one kind covers them all."""
    if param.kind not in _POSITIONAL:
        return None
    node = param.node
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
        if node.marker is Marker.DYNAMIC:
            return Kind.DYNAMIC
        if node.marker is Marker.DONATE:
            return Kind.DONATE
    return None


#: Whether every leaf of an annotation is static: whatever the value ("always"),
#: depending on the value ("by value": an `Any` below a static marker, where a
#: pytree class may bring markers of its own; plain containers bring none), or
#: not ("never").
ALWAYS, BY_VALUE, NEVER = "always", "by value", "never"


def _every_leaf_static(
    node: Node, inherited: Marker | None, default: str, seen: set[int]
) -> str:
    """Whether every leaf a value of this annotation can have resolves static."""
    marker = node.marker or inherited
    static = marker is Marker.STATIC or (marker is None and default == "static")
    if isinstance(node, AnyNode):
        return BY_VALUE if static else NEVER
    if isinstance(node, NoneNode):
        return ALWAYS
    if isinstance(node, LeafNode):
        return ALWAYS if static else NEVER
    if isinstance(node, PyTreeNode):
        return _every_leaf_static(node.leaf, marker, default, seen)
    if isinstance(node, _ClassBacked):
        if id(node.body) in seen:
            return ALWAYS  # a recursive type: the first visit decides
        seen = seen | {id(node.body)}
    found = ALWAYS
    for _, child in node.children():
        verdict = _every_leaf_static(child, marker, default, seen)
        if verdict == NEVER:
            return NEVER
        if verdict == BY_VALUE:
            found = BY_VALUE
    return found


def whole_static(param: Param, flag: Any, default: str) -> str:
    """Whether every leaf of this parameter is static: `ALWAYS`, `BY_VALUE`, `NEVER`."""
    if param.kind not in _POSITIONAL:
        return NEVER
    kind = flag_kind(flag)
    if kind == "bool":
        return ALWAYS if flag else NEVER
    if kind != "none":
        return NEVER
    return _every_leaf_static(param.node, None, default, set())


def is_sharding(x: Any) -> bool:
    return x is None or isinstance(x, jax.sharding.Sharding)


class StaticLayout:
    """The first item of the key of a call whose arguments are each wholly static
    or wholly dynamic: the key is `(layout, treedef, *static_leaves, *types)`, with
    no plan looked up per call (the plan is built while tracing)."""

    __slots__ = ("caller",)

    def __init__(self) -> None:
        self.caller: Any = None


class StaticKey(tuple):  # type: ignore[type-arg]
    """An interned static-layout key: `(layout, treedef, *static_leaves, *types)`.

    A `Splitter` makes one per distinct content, so identity stands for
    equality: JAX hashes and compares it (as the compiled call's static
    argument) in C, by identity, instead of hashing every leaf on each call.
    Compare contents with `tuple(a) == tuple(b)`.
    """

    __slots__ = ()
    __hash__ = object.__hash__
    __eq__ = object.__eq__
    __ne__ = object.__ne__


#: Leaf types whose `==` is exact enough to stand for the leaf in a probe (see
#: `Splitter.static_key`): equal values of one of these types make equal keys
#: (bar `0.0 == -0.0`, which JAX's own cache treats alike).
PROBE_SCALARS = frozenset({bool, int, float, complex, str, bytes, type(None)})
