"""Walking a value through its annotations: one `LeafInfo` per leaf, in order.

The walk follows the value's own pytree structure (so leaf order is JAX's
flatten order) and, alongside, the annotation nodes and any flag tree; it picks
the nearest marker for each leaf, and (when asked) notes where the value's
structure disagrees with its annotation.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from jax.tree_util import GetAttrKey, keystr

from ..._model.errors import Issue, SpecError, a_type, describe_value, location
from ..._model.held import held_conflict
from ..._model.markers import Marker
from ..._model.rules import is_array_annotation, left_at_default, may_be_filtered_out
from ..._model.spec import (
    AnyNode,
    ClassNode,
    Node,
    PyTreeNode,
    UnionNode,
)
from ..reading.classes import held_in, is_class_backed, is_nnx
from ..reading.flags import FlagEntry, flag_child, flag_kind
from ..reading.hints import check_unfollowed, parse_annotation
from ..reading.typing_forms import Context
from .nnx_objects import is_variable
from .plan import Held, Kind, LeafInfo, not_array, not_array_like, static_in_grad
from .structure import child_node, children_issues, pick, structure_issue
from .tree import child_items, key_name

__all__ = ["Walk", "held_fields", "walk", "walk_value"]


@dataclasses.dataclass
class Walk:
    """One walk's policy and what it found: a `LeafInfo` per leaf, the
    structure's issues, the leaves no marker or flag covers, the held fields."""

    default: str
    check: bool
    #: Unannotated Python floats are traced (`grad` differentiates them).
    trace_floats: bool = False
    #: Inside an instance whose class no annotation named (see
    #: `may_be_filtered_out`).
    inferred: bool = False
    #: The class instance whose field annotations the leaves walked now come
    #: from: its class and key path (see `LeafInfo.owner`).
    owner: tuple[type, str] | None = None
    #: Below an NNX `Variable` or an NNX object's data attribute (through
    #: plain containers), which NNX makes data.
    in_variable: bool = False
    #: The nearest marker so far was written around a class the walk went
    #: into (`Donate[Model]`): it covers the leaves that can be traced, and a
    #: leaf that never can (an activation function) stays static.
    around_class: bool = False
    infos: list[LeafInfo] = dataclasses.field(default_factory=list)
    issues: list[Issue] = dataclasses.field(default_factory=list)
    uncovered: list[str] = dataclasses.field(default_factory=list)
    held: list[Held] = dataclasses.field(default_factory=list)


_class_nodes: dict[type, Node] = {}
_class_lock = threading.Lock()


def _node_for_class(cls: type) -> Node:
    """The node of an unannotated value whose class carries annotations (`self`)."""
    node = _class_nodes.get(cls)
    if node is None:
        with _class_lock:
            node = _class_nodes.get(cls)
            if node is None:
                import sys

                module = sys.modules.get(cls.__module__)
                ctx = Context(dict(vars(module)) if module else {}, {})
                node = parse_annotation(cls, ctx, cls.__qualname__)
                _class_nodes[cls] = node
    return node


def _union_marker(node: UnionNode) -> tuple[Marker, str] | None:
    """The marker the members of a union share (they agree: checked at derivation)."""
    for member in node.members:
        if member.marker is not None:
            return member.marker, f"{member.marker.title} on {member.origin}"
    return None


def _refine(
    node: Node,
    value: Any,
    leaf: bool,
    marker: tuple[Marker, str] | None,
    flag: FlagEntry,
) -> tuple[Node, tuple[Marker, str] | None]:
    """The node that describes this value, and the nearest marker so far: a
    union's member that the container fits, the annotations of an unannotated
    value's own class."""
    if isinstance(node, UnionNode):
        # A marker around the union covers every member (a member marked
        # otherwise is refused when the spec is derived); unmarked members
        # share their markers (also checked then).
        if node.marker is not None:
            marker = (node.marker, f"{node.marker.title} on {node.origin}")
        elif leaf:
            marker = _union_marker(node) or marker
        if not leaf:
            node = pick(node, value)  # a container: follow the member it fits
        # A leaf keeps the whole union: validation tries every member.
    if node.marker is not None:  # `Static[Any]` around a class's instance too
        marker = (node.marker, f"{node.marker.title} on {node.origin}")
    if (
        isinstance(node, AnyNode)
        and flag_kind(flag) != "bool"  # a bool flag decides: class markers can't
        and not isinstance(value, dict)
    ):
        if is_class_backed(type(value)):
            node = _node_for_class(type(value))
        elif not leaf:
            check_unfollowed(type(value))
    if node.marker is not None:
        marker = (node.marker, f"{node.marker.title} on {node.origin}")
    return node, marker


def walk(
    w: Walk,
    value: Any,
    node: Node,
    path: str,
    argument: str,
    marker: tuple[Marker, str] | None,
    flag: FlagEntry,
    flag_src: str,
) -> None:
    """Resolve every leaf of `value` against `node` into `w`: the flag first,
    then the nearest marker (`marker` so far), then the default."""
    children = child_items(value)
    annotated = not isinstance(node, AnyNode)
    given = marker
    node, marker = _refine(node, value, children is None, marker, flag)
    around = w.around_class and marker is given

    if w.check:
        wrong = structure_issue(node, value)
        if wrong is not None:
            w.issues.append(
                Issue(location(argument, path), wrong, describe_value(value))
            )
            node = AnyNode()

    if children is None:
        w.around_class, outer_around = around, w.around_class
        try:
            _leaf(w, value, node, path, argument, marker, flag, flag_src)
        finally:
            w.around_class = outer_around
        return

    names = [key_name(k) for k, _ in children]
    if w.check:
        w.issues.extend(children_issues(node, value, names, path, argument))
    saved = w.inferred, w.owner, w.in_variable, w.around_class
    if isinstance(node, ClassNode):
        _held_fields(w, value, node, children, path, argument)
        w.inferred = saved[0] or not annotated
        w.owner = (node.cls, path)
        around = around or marker is not None
    if is_variable(value) or is_nnx(type(value)):
        w.in_variable = True  # NNX data: a Variable's value, a data attribute
    elif isinstance(node, ClassNode):
        w.in_variable = False  # another class: its own rules
    w.around_class = around
    try:
        _walk_children(w, node, children, names, path, argument, marker, flag, flag_src)
    finally:
        w.inferred, w.owner, w.in_variable, w.around_class = saved


def _walk_children(
    w: Walk,
    node: Node,
    children: list[tuple[Any, Any]],
    names: list[Any],
    path: str,
    argument: str,
    marker: tuple[Marker, str] | None,
    flag: FlagEntry,
    flag_src: str,
) -> None:
    """`walk` into each child of a container, but a `None` that Equinox's
    `filter` left in a class's field (`may_be_filtered_out`) and a field
    the class's `__init__` left at its default (`left_at_default`)."""
    for index, (key, child) in enumerate(children):
        sub_node = child_node(node, key, index)
        if (
            child is None
            and isinstance(node, ClassNode)
            and may_be_filtered_out(sub_node, w.inferred)
        ) or left_at_default(child):
            continue  # no leaf there: nothing to check
        sub_flag = flag_child(flag, index, names, flag_src)
        sub_src = flag_src
        if flag_kind(flag) not in ("none", "bool", "callable"):
            sub_src = flag_src + keystr((key,))
        walk(
            w,
            child,
            sub_node,
            path + keystr((key,)),
            argument,
            marker,
            sub_flag,
            sub_src,
        )


def _held_fields(
    w: Walk,
    value: Any,
    node: ClassNode,
    children: list[tuple[Any, Any]],
    path: str,
    argument: str,
) -> None:
    """The fields the value's class keeps in its tree structure: a marker there
    that cannot be honoured is a `SpecError` (the class could not tell before
    this call: `meta_fields`, an NNX attribute that is not data); the others
    are recorded, for `explain` and retrace descriptions."""
    cls = type(value)
    if not (dataclasses.is_dataclass(cls) or is_nnx(cls)) or not all(
        isinstance(k, GetAttrKey) for k, _ in children
    ):
        return  # no names to tell the fields that are children
    names = [k.name for k, _ in children]
    for name, (switch, annotated) in held_in(value, names).items():
        field = node.fields.get(name)
        if field is not None:
            problem = held_conflict(cls.__qualname__, name, field, switch)
            if problem is not None:
                raise SpecError(problem)
        w.held.append(
            Held(
                f"{path}.{name}", argument, getattr(value, name), switch.text, annotated
            )
        )


def _leaf(
    w: Walk,
    value: Any,
    node: Node,
    path: str,
    argument: str,
    marker: tuple[Marker, str] | None,
    flag: FlagEntry,
    flag_src: str,
) -> None:
    if isinstance(node, PyTreeNode):
        node = node.leaf
        if node.marker is not None:
            marker = (node.marker, f"{node.marker.title} on {node.origin}")
        elif isinstance(node, UnionNode):
            marker = _union_marker(node) or marker
    kind = flag_kind(flag)
    if kind in ("mapping", "sequence", "object"):
        raise SpecError(
            f"{flag_src} is {a_type(flag)} but the argument at {path} is a "
            f"leaf ({describe_value(value)}); give True/False/None or a callable here."
        )
    traced = Kind.DONATE if marker and marker[0] is Marker.DONATE else Kind.DYNAMIC
    if kind == "bool":
        fixed = Kind.STATIC if flag else traced
        info = LeafInfo(path, argument, fixed, flag_src, node, traced)
    elif kind == "callable":
        source = f"{flag_src} (callable)"
        info = LeafInfo(path, argument, None, source, node, traced, flag)
    elif (
        marker is not None
        and w.around_class
        and marker[0] is not Marker.STATIC
        and not is_array_annotation(node)
    ):
        # Around a class: its leaves that can be traced are, one that never
        # can (a layer's activation function) stays static, as
        # `eqx.filter_jit(donate="all")` treats a model.
        source = f"{marker[1]}, for its array-like leaves"
        info = LeafInfo(path, argument, None, source, node, traced, not_array_like)
    elif marker is not None:
        info = LeafInfo(path, argument, marker[0], marker[1], node)
    else:
        info = _by_default(w, node, path, argument)
    w.infos.append(info if w.owner is None else info.owned_by(w.owner))


def _by_default(w: Walk, node: Node, path: str, argument: str) -> LeafInfo:
    """A leaf no flag and no marker covers: what the `default=` policy says."""
    if w.default == "static":
        return LeafInfo(path, argument, Kind.STATIC, "default 'static'", node)
    if w.default == "dynamic":
        return LeafInfo(path, argument, Kind.DYNAMIC, "default 'dynamic'", node)
    if w.default == "error":
        w.uncovered.append(path)
    if is_array_annotation(node):
        # The hint already says what the leaf is: traced, whatever comes.
        source = f"default 'infer', annotated {node.text}"
        return LeafInfo(path, argument, Kind.DYNAMIC, source, node)
    if w.in_variable:
        # NNX makes a Variable's value and an object's data attributes data:
        # `nnx.jit` traces a Python scalar there, and NNX code indexes it
        # (`count[...] += 1`).
        source = "default 'infer' (NNX data: a Variable's value or attribute)"
        return LeafInfo(
            path, argument, None, source, node, Kind.DYNAMIC, not_array_like
        )
    if w.trace_floats and (isinstance(node, AnyNode) or w.owner is None):
        # Not a class's annotated field: a module's `float` hyperparameter
        # (Equinox's `Dropout.p`) is a number its code reads, held static as
        # `eqx.filter_value_and_grad` holds it; the parameter itself
        # (`x: float`) or an unannotated float is what is differentiated.
        source = "default 'infer' (a float in a differentiated argument)"
        return LeafInfo(
            path, argument, None, source, node, Kind.DYNAMIC, static_in_grad
        )
    source = "default 'infer'"
    return LeafInfo(path, argument, None, source, node, Kind.DYNAMIC, not_array)


def walk_value(
    value: Any,
    node: Node,
    *,
    path: str = "",
    argument: str = "value",
    flags: FlagEntry = None,
    flag_src: str = "flags",
    default: str = "infer",
    check: bool = True,
) -> tuple[list[LeafInfo], list[Issue], list[str]]:
    """Resolve every leaf of one value against one annotation node."""
    w = Walk(default=default, check=check)
    walk(w, value, node, path, argument, None, flags, flag_src)
    return w.infos, w.issues, w.uncovered


def held_fields(value: Any, node: Node, name: str) -> list[Held]:
    """The fields that the classes inside argument `name` keep in their tree
    structure (for a retrace description of an argument JAX gets whole)."""
    w = Walk(default="dynamic", check=False)
    walk(w, value, node, name, name, None, None, "static_flags")
    return w.held
