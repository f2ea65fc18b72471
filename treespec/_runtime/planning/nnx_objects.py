"""What an NNX object is, read without importing Flax, and where NNX objects
are in a tree: `Variable`s and graph nodes, every node with its path
(`graph_nodes`), getters compiled from paths (`path_getter`), the NNX objects
that are no pytree (refused, `opaque_nodes`), and a returned node's stand-in
(`ArgNode`). What `graph.py` and `graph_session.py` build on.

A call holds NNX objects only once the user imported Flax; their classes are
read from `sys.modules` then.
"""

from __future__ import annotations

import functools
import keyword
import sys
from collections.abc import Callable, Sequence
from typing import Any

import jax
from jax.tree_util import DictKey, GetAttrKey, SequenceKey

from ..._model.errors import Issue, location
from .tree import child_items

__all__ = [
    "ArgNode",
    "Namer",
    "Path",
    "flatten_vars",
    "graph_nodes",
    "is_node",
    "is_variable",
    "nnx_classes",
    "opaque_nodes",
    "path_getter",
    "read_at",
    "set_value",
    "sets_directly",
    "write_at",
]

#: A tree path as JAX gives it (`GetAttrKey`, `DictKey`, `SequenceKey`, ...).
Path = tuple[Any, ...]
#: Names a path below the route's root in the user's words (`model.lin`).
Namer = Callable[[Path], str]


def set_value(variable: Any, value: Any) -> None:
    """Set a plain `Variable`'s value without NNX's trace-level check (see
    `Graph.write`): where `Variable.get_raw_value` reads it."""
    object.__setattr__(variable, "_raw_value", value)


@functools.cache
def sets_directly() -> bool:
    """Whether this Flax keeps a `Variable`'s value where `set_value` sets
    it (checked once, on a `Variable` of its own)."""
    classes = nnx_classes()
    if classes is None:
        return False
    try:
        probe = classes[0](0)
        set_value(probe, 1)
        return bool(probe.get_raw_value() == 1)
    except Exception:
        return False


def nnx_classes() -> tuple[type, type] | None:
    """`(nnx.Variable, nnx.Pytree)`, once the user imported Flax NNX."""
    nnx = sys.modules.get("flax.nnx")
    variable = getattr(nnx, "Variable", None)
    pytree = getattr(nnx, "Pytree", None) or getattr(nnx, "Object", None)
    if not isinstance(variable, type) or not isinstance(pytree, type):
        return None
    return variable, pytree


def is_variable(x: Any) -> bool:
    """Whether `x` is an NNX `Variable` (`nnx.Param`, `nnx.BatchStat`, ...)."""
    classes = nnx_classes()
    return classes is not None and isinstance(x, classes[0])


def is_node(x: Any) -> bool:
    """Whether `x` is an NNX graph node: a `Variable` or a module, optimizer,
    `Rngs`, ... (an `nnx.Pytree`)."""
    classes = nnx_classes()
    return classes is not None and isinstance(x, classes)


def flatten_vars(root: Any) -> tuple[list[Any], Any]:
    """`root` flattened down to its `Variable`s (each one leaf) and the
    structure above them: what a function may not change."""
    variable = nnx_classes()
    kind = variable[0] if variable is not None else ()
    leaves, treedef = jax.tree_util.tree_flatten(
        root, is_leaf=lambda x: isinstance(x, kind)
    )
    return leaves, treedef


def path_getter(paths: Sequence[Path]) -> Callable[[Any], tuple[Any, ...]] | None:
    """One function `root -> (object at each path)`, compiled once: attribute
    reads and indexing in one Python frame, the cost of a call being a few
    microseconds for a model's `Variable`s. None when a path has a key that
    cannot be read back (`FlattenedIndexKey`)."""
    consts: list[Any] = []
    exprs = []
    for path in paths:
        expr = "r"
        for entry in path:
            if isinstance(entry, GetAttrKey):
                name = entry.name
                if name.isidentifier() and not keyword.iskeyword(name):
                    expr = f"{expr}.{name}"
                    continue
                consts.append(name)
                expr = f"getattr({expr}, C[{len(consts) - 1}])"
            elif isinstance(entry, DictKey):
                consts.append(entry.key)
                expr = f"{expr}[C[{len(consts) - 1}]]"
            elif isinstance(entry, SequenceKey):
                expr = f"{expr}[{int(entry.idx)}]"
            else:
                return None
        exprs.append(expr)
    source = f"lambda r: ({''.join(e + ', ' for e in exprs)})"
    # Generated from attribute names checked to be identifiers and from
    # integer indices; anything else is read through the constants `C`.
    made: Callable[[Any], tuple[Any, ...]] = eval(
        source, {"C": tuple(consts), "getattr": getattr, "__builtins__": {}}
    )
    return made


def read_at(owner: Any, key: Any) -> Any:
    """The child of `owner` at one path entry (an attribute, an item)."""
    if isinstance(key, GetAttrKey):
        return getattr(owner, key.name)
    return owner[key.key if isinstance(key, DictKey) else key.idx]


def write_at(owner: Any, key: Any, value: Any) -> None:
    """Set the child of `owner` at one path entry (NNX checks the trace)."""
    if isinstance(key, GetAttrKey):
        setattr(owner, key.name, value)
    else:
        owner[key.key if isinstance(key, DictKey) else key.idx] = value


class ArgNode:
    """What a traced function returned where it returned one of its
    arguments' graph nodes (the module itself, a submodule, a `Variable`):
    its place among the call's nodes, so that the caller gets its own object
    back, as `nnx.jit` hands it back."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __eq__(self, other: object) -> bool:
        return type(other) is ArgNode and other.index == self.index

    def __hash__(self) -> int:
        return hash((ArgNode, self.index))

    def __repr__(self) -> str:
        return f"ArgNode({self.index})"


def graph_nodes(root: Any) -> list[tuple[Path, Any]]:
    """Every NNX graph node below `root` (modules, `Variable`s, ...) with its
    path, in one order that depends only on the structure: each place once,
    so an object held twice is listed twice."""
    found: list[tuple[Path, Any]] = []
    stack: list[tuple[Path, Any]] = [((), root)]
    while stack:
        path, value = stack.pop()
        if is_node(value):
            found.append((path, value))
            if is_variable(value):
                continue
        children = child_items(value)
        if children:
            stack.extend(((*path, key), child) for key, child in reversed(children))
    return found


def opaque_nodes(infos: Sequence[Any], leaves: Sequence[Any]) -> list[Issue]:
    """NNX objects that are no pytree (`pytree=False`): leaves to JAX, so a
    transform would hold them static (their arrays constants of the program,
    what the function changes in them lost, a change made between calls
    never seen). Refused, each named, whatever `validate` says."""
    return [
        Issue(
            location(info.argument, info.path),
            "a pytree (an NNX object's arrays are traced, and what the function "
            "changes in them written back)",
            f"{type(leaf).__name__}, an NNX object made with pytree=False: a "
            "leaf to JAX",
            "drop pytree=False from its class (NNX objects are pytrees by "
            "default), or call the function through nnx.jit",
        )
        for info, leaf in zip(infos, leaves)
        if is_node(leaf)
    ]
