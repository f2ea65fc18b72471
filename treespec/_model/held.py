"""Fields another library holds static: its switches, and the verdict on a marker.

Equinox (`eqx.field(static=True)`), flax.struct (`field(pytree_node=False)`),
`jax.tree_util.register_dataclass` (meta fields, `jax.tree.static()`), Flax NNX
(`nnx.static()`, `nnx.Static[...]`, plain attributes) and `treespec.dataclass`
(`Static` fields) keep some fields in the tree structure: such a field is no
leaf, so nothing there can be traced. A `Static[...]` marker on it agrees; a
`Dynamic[...]`/`Donate[...]` marker on or inside it cannot be honoured, and is
refused with the class, the field, the switch and the fix. NNX's explicit data
(`nnx.Data[...]`, `nnx.data()`) under a `Static[...]` marker is the opposite
disagreement, refused alike.

The runtime (`_runtime/reading/classes.py`) and the mypy plugin find the switch
their own way and ask this module what to say; JAX-free, for the plugin.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from .markers import Marker
from .spec import ClassBacked, Node, PyTreeNode

__all__ = [
    "EQX_MODULES",
    "EQX_STATIC",
    "FLAX_STATIC",
    "FLAX_STRUCT_BASES",
    "JAX_META_FIELD",
    "JAX_STATIC",
    "NNX_ANNOTATION",
    "NNX_PLAIN",
    "NNX_PYTREES",
    "NNX_STATIC",
    "MUTABLE_CONTAINERS",
    "TREESPEC_STATIC",
    "Switch",
    "data_conflict",
    "held_conflict",
    "mutable_static_problem",
    "traced_marker",
    "unfollowed_problem",
]

#: The base classes of Equinox modules, flax.struct nodes and NNX pytrees, by
#: full name (the runtime reads them off the MRO, the plugin off mypy's).
EQX_MODULES: Final = frozenset({"equinox._module._module.Module", "equinox.Module"})
FLAX_STRUCT_BASES: Final = frozenset({"flax.struct.PyTreeNode"})
NNX_PYTREES: Final = frozenset(
    {"flax.nnx.pytreelib.Pytree", "flax.nnx.object.Object", "flax.nnx.Pytree"}
)


@dataclasses.dataclass(frozen=True)
class Switch:
    """What holds a field static (as the user wrote it), and how to trace it."""

    text: str
    fix: str


EQX_STATIC: Final = Switch("eqx.field(static=True)", "drop static=True to trace it")
FLAX_STATIC: Final = Switch(
    "flax.struct.field(pytree_node=False)", "drop pytree_node=False to trace it"
)
JAX_STATIC: Final = Switch(
    "jax.tree.static() (metadata={'static': True})",
    "make it a data field (a plain field, without the 'static' metadata)",
)
JAX_META_FIELD: Final = Switch(
    "meta_fields of jax.tree_util.register_dataclass",
    "list it in data_fields instead of meta_fields",
)
TREESPEC_STATIC: Final = Switch(
    "Static[...] around a treespec.dataclass field (JAX metadata)",
    "mark the field Dynamic[...] itself, or mark the parts inside it",
)
NNX_STATIC: Final = Switch("nnx.static()", "declare it with nnx.data() instead")
NNX_ANNOTATION: Final = Switch(
    "nnx.Static[...]", "drop nnx.Static[...] (or use nnx.Data[...])"
)
NNX_PLAIN: Final = Switch(
    "a plain attribute of an nnx.Module (neither an array, an nnx.Variable nor "
    "an nnx.Module, so NNX keeps it static)",
    "assign it with nnx.data(...), or hold it in an nnx.Param (or another "
    "nnx.Variable)",
)


#: Containers that can change in place, by full name (a class with one of
#: them among its bases is one too): under `Static[...]` in a
#: `treespec.dataclass` field they would be JAX metadata, where a change in
#: place is seen by no compile cache. The runtime reads a class's MRO, the
#: plugin mypy's.
MUTABLE_CONTAINERS: Final = frozenset(
    {
        "builtins.list",
        "builtins.dict",
        "builtins.set",
        "builtins.bytearray",
        "collections.deque",
        "collections.abc.MutableSequence",
        "collections.abc.MutableMapping",
        "collections.abc.MutableSet",
        "typing.MutableSequence",
        "typing.MutableMapping",
        "typing.MutableSet",
    }
)


def mutable_static_problem(owner: str, field: str, container: str) -> str:
    """Why a `treespec.dataclass` field `Static[...]` of a mutable container
    (`container`, its class's name) is refused when the class is defined."""
    return (
        f"treespec.dataclass {owner}.{field} is Static[...] of a mutable "
        f"{container}: Static fields become JAX metadata, where a {container} "
        "changed in place is seen by no compile cache (the compiled code would "
        "go stale). Use an immutable type, such as tuple[...] or "
        "frozenset[...], for a static field."
    )


def traced_marker(node: Node) -> Marker | None:
    """A `Dynamic`/`Donate` marker on `node` or anywhere below it (the nearest
    marker wins, so any of them would trace a leaf there), or None."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if current.marker in (Marker.DYNAMIC, Marker.DONATE):
            return current.marker
        if isinstance(current, ClassBacked):
            if id(current.body) in seen:
                continue
            seen.add(id(current.body))
        if isinstance(current, PyTreeNode):
            stack.append(current.leaf)
        else:
            stack.extend(child for _, child in current.children())
    return None


def held_conflict(owner: str, field: str, node: Node, switch: Switch) -> str | None:
    """Why the markers on a field that `owner` holds static cannot be honoured
    (None when they can: no marker, or `Static`)."""
    marker = traced_marker(node)
    if marker is None:
        return None
    written = node.text or marker.title
    return (
        f"{owner}.{field} is annotated {written}, but {owner} holds {field} "
        f"static itself ({switch.text}): the field lives in the tree structure, "
        f"where nothing is traced, so {marker.title}[...] cannot be honoured. "
        f"Either {switch.fix}, or drop the marker (Static[...] agrees with the "
        "class)."
    )


def data_conflict(owner: str, field: str, node: Node, switch: str) -> str | None:
    """Why a `Static` marker on a field NNX is told is data disagrees (None
    when the field's own marker is not `Static`)."""
    if node.marker is not Marker.STATIC:
        return None
    return (
        f"{owner}.{field} is annotated {node.text}, but {switch} makes it NNX "
        "data (a leaf nnx.jit traces): the two disagree. Drop one of them."
    )


def unfollowed_problem(owner: str, fields: list[str]) -> str:
    """Why markers in the field annotations of a pytree class whose fields
    treespec does not follow (it flattens itself) cannot be honoured."""
    return (
        f"{owner} has markers on its fields ({', '.join(fields)}), but it is a "
        "pytree that flattens itself (register_pytree_node_class and the like): "
        "its children carry no field names, so treespec cannot tell which "
        "field a leaf comes from, and the markers would be ignored. Register "
        "it as a dataclass (jax.tree_util.register_dataclass, treespec.dataclass, "
        f"flax.struct) or make it an equinox.Module, or mark {owner} where it "
        f"is used (Dynamic[{owner}], a static_flags entry)."
    )
