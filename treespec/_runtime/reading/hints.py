"""From annotations to spec nodes: follow every kind of hint DESIGN.md lists.

`parse_annotation` turns one typing object into a node (containers, classes
with fields, unions, markers, leaves), reading it with `typing_forms.py`;
`derive.py` does so for each parameter of a function.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ForwardRef, TypeVar, get_args, get_origin

import typing_extensions
from typing_extensions import is_typeddict

from ..._model.errors import SpecError
from ..._model.held import data_conflict, held_conflict, unfollowed_problem
from ..._model.markers import marker_of
from ..._model.rules import (
    MAPPING_TYPES,
    SEQUENCE_TYPES,
)
from ..._model.spec import (
    AnyNode,
    ClassBacked,
    ClassNode,
    LeafNode,
    MappingNode,
    Node,
    NoneNode,
    PyTreeNode,
    SequenceNode,
    UnionNode,
)
from .classes import (
    class_data,
    class_held,
    class_hints,
    field_names,
    is_class_backed,
    unfollowed_markers,
)
from .typing_forms import (
    NOT_REQUIRED,
    READONLY,
    REQUIRED,
    UNION_TYPES,
    Context,
    check_marked_union,
    check_union,
    is_array_class,
    is_jaxtyping_array,
    is_jaxtyping_pytree,
    type_text,
)

__all__ = ["check_unfollowed", "parse_annotation"]


def parse_annotation(
    annotation: Any,
    ctx: Context,
    where: str,
    bindings: Mapping[Any, Any] | None = None,
    module: str | None = None,
) -> Node:
    """Turn one annotation into a `Node`; `where` names it for errors."""
    bindings = bindings or {}
    if isinstance(annotation, (str, ForwardRef)):
        return _forward(annotation, ctx, where, bindings, module)
    at = _At(ctx, where, type_text(annotation), bindings, module)
    base, markers, _foreign = marker_of(annotation)
    if base is not annotation:
        return _marked(base, markers, at)
    special = _special(annotation, at)
    if special is not None:
        return special
    if is_jaxtyping_pytree(annotation):
        leaftype = getattr(annotation, "leaftype", Any)
        leaf = at.parse(leaftype, f"{where} (PyTree leaf)")
        return PyTreeNode(leaf=leaf, text=at.text, origin=where)
    if is_jaxtyping_array(annotation):
        return at.leaf(annotation, is_array=True)
    for cls in (annotation, get_origin(annotation)):  # np.ndarray[Any, ...] too
        if is_array_class(cls):
            # NumPy's classes are named, as `rules.is_array_annotation` reads
            # them; JAX's array classes are named by nothing but `is_array`.
            numpy = cls.__module__.split(".")[0] == "numpy"
            names = tuple(f"{c.__module__}.{c.__qualname__}" for c in cls.__mro__)
            return at.leaf(annotation, is_array=True, type_names=names if numpy else ())
    origin = get_origin(annotation)
    if origin is not None:
        return _generic(annotation, origin, get_args(annotation), at)
    return _plain(annotation, at)


@dataclasses.dataclass(frozen=True)
class _At:
    """The place being parsed: how it reads, where it is, what is bound there."""

    ctx: Context
    where: str
    text: str
    bindings: Mapping[Any, Any]
    module: str | None

    def parse(self, annotation: Any, where: str | None = None) -> Node:
        """A sub-annotation at `where` (this place by default)."""
        return parse_annotation(
            annotation, self.ctx, where or self.where, self.bindings, self.module
        )

    def leaf(self, annotation: Any, **facts: Any) -> LeafNode:
        return LeafNode(
            annotation=annotation, text=self.text, origin=self.where, **facts
        )


def _forward(
    annotation: str | ForwardRef,
    ctx: Context,
    where: str,
    bindings: Mapping[Any, Any],
    module: str | None,
) -> Node:
    """A string or forward reference, evaluated; met again while it is being
    expanded, a recursive alias (`Tree = list["Tree"] | Array`): any tree."""
    name = annotation if isinstance(annotation, str) else annotation.__forward_arg__
    if name in ctx.expanding:
        return AnyNode(text=name, origin=where)
    evaluated = ctx.evaluate(annotation, where, module)
    ctx.expanding.add(name)
    try:
        return parse_annotation(evaluated, ctx, where, bindings, module)
    finally:
        ctx.expanding.discard(name)


def _marked(base: Any, markers: Sequence[Any], at: _At) -> Node:
    """`Static[T]` and friends (or `Annotated` with foreign metadata only)."""
    if len(markers) > 1:
        raise SpecError(
            f"{at.where} is annotated {at.text}: a marker directly inside another. "
            f"Use exactly one of Static/Dynamic/Donate here (the outer one wins "
            f"nothing: there is nothing between them)."
        )
    node = at.parse(base)
    if not markers:
        return node
    if node.marker is not None:
        raise SpecError(
            f"{at.where} is annotated {at.text}: a marker directly inside another. "
            "Use exactly one of Static/Dynamic/Donate here."
        )
    if isinstance(node, UnionNode):
        check_marked_union(node, markers[0], at.where, at.text)
    return node.with_marker(markers[0], at.text)


def _special(annotation: Any, at: _At) -> Node | None:
    """Type variables, `Any` (and no annotation), `None`."""
    if isinstance(annotation, TypeVar):
        if annotation in at.bindings:
            bound = at.bindings[annotation]
            return parse_annotation(bound, at.ctx, at.where, None, at.module)
        return AnyNode(text=at.text, origin=at.where)
    if annotation is inspect.Parameter.empty:
        return AnyNode(text="", origin=at.where)
    if annotation is Any or annotation is object:
        return AnyNode(text=at.text, origin=at.where)
    if annotation is None or annotation is type(None):
        return NoneNode(text="None", origin=at.where)
    return None


def _generic(annotation: Any, origin: Any, args: tuple[Any, ...], at: _At) -> Node:
    """An annotation with type arguments: `list[int]`, `A | B`, `Literal[...]`."""
    if origin in REQUIRED or origin in READONLY:
        return at.parse(args[0])
    if origin in UNION_TYPES:
        members = tuple(at.parse(a) for a in args)
        check_union(members, at.where, at.text)
        return UnionNode(members=members, text=at.text, origin=at.where)
    if origin is typing.Literal or origin is typing_extensions.Literal:
        names = (
            f"{c.__module__}.{c.__qualname__}" for v in args for c in type(v).__mro__
        )  # the values' classes, as the plugin reads them
        return at.leaf(
            annotation, category="literal", type_names=tuple(dict.fromkeys(names))
        )
    if origin is collections.abc.Callable:
        return at.leaf(annotation, category="callable")
    if origin is tuple:
        return _tuple(annotation, args, at)
    container = _container_kind(origin)
    if container is not None:
        return _container(annotation, origin, container, args, at)
    if isinstance(origin, type) and is_class_backed(origin):
        params = getattr(origin, "__parameters__", ())
        sub = {p: _substitute(a, at.bindings) for p, a in zip(params, args)}
        return _class_node(origin, tuple(sub.values()), sub, at.ctx, at.text, at.where)
    return at.leaf(annotation)


def _tuple(annotation: Any, args: tuple[Any, ...], at: _At) -> Node:
    """`tuple[()]`, `tuple[T, ...]`, `tuple[A, B]`."""
    where = at.where
    if not args and annotation is typing.Tuple:  # noqa: UP006 (bare: any length)
        return _plain(tuple, at)
    if args == ((),) or (not args and annotation is not tuple):
        return SequenceNode(container=tuple, items=(), text=at.text, origin=where)
    if len(args) == 2 and args[1] is Ellipsis:
        rest = at.parse(args[0], f"{where}[*]")
        return SequenceNode(container=tuple, rest=rest, text=at.text, origin=where)
    items = tuple(at.parse(a, f"{where}[{i}]") for i, a in enumerate(args))
    return SequenceNode(container=tuple, items=items, text=at.text, origin=where)


def _container(
    annotation: Any,
    origin: Any,
    container: type[Node],
    args: tuple[Any, ...],
    at: _At,
) -> Node:
    """A container of the shared table with its item (or value) type."""
    item = (args[-1] if container is MappingNode else args[0]) if args else Any
    try:
        child = at.parse(item, f"{at.where}[*]")
    except SpecError:
        if origin in (list, dict):
            raise
        # A library's alias (`optax.OptState`: `Mapping[Any, "ArrayTree"]`) may
        # name what only its own module knows: no marker can be there, so the
        # container stays one opaque annotation.
        return at.leaf(annotation)
    if container is SequenceNode:
        return SequenceNode(container=origin, rest=child, text=at.text, origin=at.where)
    return MappingNode(cls=origin, values=child, text=at.text, origin=at.where)


def _plain(annotation: Any, at: _At) -> Node:
    """An annotation without type arguments: `tuple`, `dict`, a class, a value."""
    if annotation is tuple:
        rest = AnyNode(origin=f"{at.where}[*]")
        return SequenceNode(container=tuple, rest=rest, text=at.text, origin=at.where)
    container = _container_kind(annotation)
    if container is SequenceNode:
        rest = AnyNode()
        return SequenceNode(
            container=annotation, rest=rest, text=at.text, origin=at.where
        )
    if container is MappingNode:
        values = AnyNode()
        return MappingNode(cls=annotation, values=values, text=at.text, origin=at.where)
    if not isinstance(annotation, type):
        return at.leaf(annotation)
    if is_class_backed(annotation):
        return _class_node(annotation, (), {}, at.ctx, at.text, at.where)
    check_unfollowed(annotation)
    return at.leaf(
        annotation,
        type_names=tuple(
            f"{c.__module__}.{c.__qualname__}" for c in annotation.__mro__
        ),
        category="callable" if annotation is Callable else "",
        hashable=annotation.__hash__ is not None,
    )


def check_unfollowed(cls: Any) -> None:
    """A `SpecError` when `cls` is a pytree whose fields treespec cannot
    follow and its field annotations carry markers (see `_model/held.py`)."""
    marked = unfollowed_markers(cls)
    if marked:
        fields = [f"{name}: {type_text(ann)}" for name, ann in marked]
        raise SpecError(unfollowed_problem(cls.__qualname__, fields))


def _container_kind(tp: Any) -> type[Node] | None:
    """`SequenceNode`/`MappingNode` for the containers of the shared table."""
    if not isinstance(tp, type) or tp is tuple:
        return None
    name = f"{tp.__module__}.{tp.__qualname__}"
    if name in SEQUENCE_TYPES:
        return SequenceNode
    if name in MAPPING_TYPES:
        return MappingNode
    return None


def _substitute(arg: Any, bindings: Mapping[Any, Any]) -> Any:
    if isinstance(arg, TypeVar) and arg in bindings:
        return bindings[arg]
    return arg


def _class_node(
    cls: type,
    type_args: tuple[Any, ...],
    bindings: Mapping[Any, Any],
    ctx: Context,
    text: str,
    where: str,
) -> Node:
    key = (cls, type_args)
    cached = ctx.classes.get(key)
    if cached is not None:
        return dataclasses.replace(cached, text=text, origin=where, marker=None)
    kind = MappingNode if is_typeddict(cls) else ClassNode
    node = kind(cls=cls, type_args=type_args, text=text, origin=where)
    ctx.classes[key] = node
    # Inside a class, a recursion comes back through `ctx.classes`: the fields
    # start with no forward reference under expansion, so a field spelled like
    # an enclosing annotation (`left: Tree | None` in `t: Tree | None`) is
    # followed, not cut short.
    saved, ctx.expanding = ctx.expanding, set()
    try:
        _fill_class_node(node, cls, bindings, ctx)
    finally:
        ctx.expanding = saved
    return node


def _fill_class_node(
    node: ClassBacked, cls: type, bindings: Mapping[Any, Any], ctx: Context
) -> None:
    """Parse the field annotations of a class-backed node into its body."""
    name = cls.__qualname__
    if is_typeddict(cls):
        required = set(getattr(cls, "__required_keys__", ()))
        hints = class_hints(cls)
        for field, (ann, module) in hints.items():
            where = f"{name}[{field!r}]"
            evaluated = ctx.evaluate(ann, where, module)
            # Python < 3.12 cannot see Required/NotRequired inside string hints
            # (`from __future__ import annotations`); they are evaluated here.
            qualifier = get_origin(evaluated)
            if qualifier in NOT_REQUIRED:
                required.discard(field)
            elif qualifier in REQUIRED:
                required.add(field)
            node.body.fields[field] = parse_annotation(
                evaluated, ctx, where, bindings, module
            )
        node.body.required = frozenset(required)
        return
    hints = class_hints(cls)
    for field in field_names(cls):
        ann, module = hints.get(field, (Any, None))
        node.body.fields[field] = parse_annotation(
            ann, ctx, f"{name}.{field}", bindings, module
        )
    _check_held(node, cls)


def _check_held(node: ClassBacked, cls: type) -> None:
    """Markers on fields the class holds in its tree structure (or, for NNX,
    declares data) that cannot be honoured: a `SpecError` now, as the class is
    known (see `_model/held.py`)."""
    owner = cls.__qualname__
    for field, switch in class_held(cls).items():
        child = node.fields.get(field)
        problem = held_conflict(owner, field, child, switch) if child else None
        if problem is not None:
            raise SpecError(problem)
    for field, says in class_data(cls).items():
        child = node.fields.get(field)
        problem = data_conflict(owner, field, child, says) if child else None
        if problem is not None:
            raise SpecError(problem)
