"""From annotations to a `Spec`: follow every kind of hint DESIGN.md lists."""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import inspect
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ForwardRef, TypeVar, get_args, get_origin

import typing_extensions
from typing_extensions import is_typeddict

from .._model.errors import SpecError
from .._model.held import data_conflict, held_conflict, unfollowed_problem
from .._model.markers import marker_of
from .._model.rules import (
    MAPPING_TYPES,
    SEQUENCE_TYPES,
    marked_union_conflict,
    union_conflict,
    union_fix,
)
from .._model.spec import (
    AnyNode,
    ClassBacked,
    ClassNode,
    LeafNode,
    MappingNode,
    Node,
    NoneNode,
    Param,
    PyTreeNode,
    SequenceNode,
    Spec,
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
from .wrappers import report_hidden_markers

__all__ = [
    "Context",
    "check_unfollowed",
    "derive_spec",
    "is_jaxtyping_array",
    "parse_annotation",
    "type_text",
]

_NOT_REQUIRED = {typing_extensions.NotRequired}
_NOT_REQUIRED |= {typing.NotRequired} if hasattr(typing, "NotRequired") else set()
_REQUIRED = {typing_extensions.Required, *_NOT_REQUIRED}
_REQUIRED |= {typing.Required} if hasattr(typing, "Required") else set()
_READONLY = {m.ReadOnly for m in (typing, typing_extensions) if hasattr(m, "ReadOnly")}
_UNION_TYPES: tuple[Any, ...] = (typing.Union, types.UnionType)


def _arg_text(arg: Any) -> str:
    """A type argument as written: `...`, a `Callable`'s `[int, str]`, a type."""
    if arg is Ellipsis:
        return "..."
    if isinstance(arg, (list, tuple)):
        return f"[{', '.join(_arg_text(a) for a in arg)}]"
    return type_text(arg)


def type_text(annotation: Any) -> str:
    """How an annotation reads in a message: `Static[int]`, `Float[Array, 'b n']`."""
    base, markers, _ = marker_of(annotation)
    if markers:
        inner = type_text(base)
        for m in markers:
            inner = f"{m.title}[{inner}]"
        return inner
    if annotation is type(None) or annotation is None:
        return "None"
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, ForwardRef):
        return annotation.__forward_arg__
    if isinstance(annotation, TypeVar):
        return annotation.__name__
    origin = get_origin(annotation)
    if origin in _UNION_TYPES:
        return " | ".join(type_text(a) for a in get_args(annotation))
    if origin is not None:
        args = get_args(annotation)
        name = getattr(origin, "__name__", None) or repr(origin).replace("typing.", "")
        if origin is typing.Literal:
            return f"Literal[{', '.join(repr(a) for a in args)}]"
        if not args:
            return name
        parts = [_arg_text(a) for a in args]
        return f"{name}[{', '.join(parts)}]"
    if isinstance(annotation, type):
        name = annotation.__name__
        return name.replace("jaxlib._jax.Array", "Array").replace("jaxlib._jax.", "")
    return repr(annotation).replace("typing.", "")


class Context:
    """What one derivation needs: namespaces, TypeVar bindings, class cache."""

    def __init__(self, globalns: dict[str, Any], localns: Mapping[str, Any]) -> None:
        self.globalns = globalns
        self.localns = dict(localns)
        self.classes: dict[tuple[Any, ...], ClassBacked] = {}
        #: Forward references being expanded (recursive aliases stop there).
        self.expanding: set[str] = set()

    def evaluate(self, annotation: Any, where: str, module: str | None = None) -> Any:
        # A quoted hint under `from __future__ import annotations` is a string
        # whose value is a string: evaluate until it is not.
        for _ in range(3):
            annotation = self._evaluate_once(annotation, where, module)
            if not isinstance(annotation, (str, ForwardRef)):
                break
        return annotation

    def _evaluate_once(self, annotation: Any, where: str, module: str | None) -> Any:
        if isinstance(annotation, ForwardRef):
            annotation = annotation.__forward_arg__
        if not isinstance(annotation, str):
            return annotation
        globalns = self.globalns
        if module is not None and module in sys.modules:
            globalns = vars(sys.modules[module])  # read only: no copy needed
        try:
            return eval(annotation, globalns, self.localns)
        except Exception as exc:
            raise SpecError(
                f"cannot resolve the forward reference {annotation!r} in {where}: "
                f"{type(exc).__name__}: {exc}. Define the name at module level, or "
                "in the scope where the decorator runs, before the function is "
                "decorated (a method's annotations may also name classes of its "
                "module defined later, such as its own class: those are looked "
                "up at the first call)."
            ) from exc


def is_jaxtyping_array(tp: Any) -> bool:
    jaxtyping = sys.modules.get("jaxtyping")
    return (
        jaxtyping is not None
        and isinstance(tp, type)
        and issubclass(tp, jaxtyping.AbstractArray)
    )


def _is_jaxtyping_pytree(tp: Any) -> bool:
    jaxtyping = sys.modules.get("jaxtyping")
    return jaxtyping is not None and (
        tp is jaxtyping.PyTree or type(tp) is type(jaxtyping.PyTree)
    )


def _is_array_class(tp: Any) -> bool:
    if not isinstance(tp, type):
        return False
    from .._model.rules import ARRAY_TYPES

    jax = sys.modules.get("jax")
    if jax is not None and issubclass(tp, jax.Array):
        return True  # whatever module JAX's version defines it in
    return any(f"{c.__module__}.{c.__qualname__}" in ARRAY_TYPES for c in tp.__mro__)


def _check_union(members: tuple[Node, ...], where: str, text: str) -> None:
    """Members of a union must agree on their markers (None aside)."""
    shown = union_conflict(members)
    if shown is not None:
        raise SpecError(
            f"the union {text} in {where} has members that disagree on markers: "
            f"{shown}. {union_fix()}"
        )


def _check_marked_union(node: UnionNode, marker: Any, where: str, text: str) -> None:
    """A marker around a union covers its members: one of them marked otherwise
    is a marker directly inside another (nothing lies between them)."""
    member = marked_union_conflict(node, marker)
    if member is not None:
        raise SpecError(
            f"{where} is annotated {text}: the member {member.text} of the "
            f"union has its own marker inside {marker.title}[...], a marker "
            f"directly inside another. {union_fix()}"
        )


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
    if _is_jaxtyping_pytree(annotation):
        leaftype = getattr(annotation, "leaftype", Any)
        leaf = at.parse(leaftype, f"{where} (PyTree leaf)")
        return PyTreeNode(leaf=leaf, text=at.text, origin=where)
    if (
        is_jaxtyping_array(annotation)
        or _is_array_class(annotation)
        or _is_array_class(get_origin(annotation))  # np.ndarray[Any, np.dtype[...]]
    ):
        return at.leaf(annotation, is_array=True)
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
        _check_marked_union(node, markers[0], at.where, at.text)
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
    if origin in _REQUIRED or origin in _READONLY:
        return at.parse(args[0])
    if origin in _UNION_TYPES:
        members = tuple(at.parse(a) for a in args)
        _check_union(members, at.where, at.text)
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
            if qualifier in _NOT_REQUIRED:
                required.discard(field)
            elif qualifier in _REQUIRED:
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


def _code_owner(fun: Any) -> Any:
    """The plain function whose globals and closure the annotations were written in.

    Looks through `functools.partial`, bound methods and `functools.wraps`
    wrappers (`__wrapped__`).
    """
    while True:
        if isinstance(fun, functools.partial):
            fun = fun.func
        elif inspect.ismethod(fun):
            fun = fun.__func__
        elif hasattr(fun, "__wrapped__"):
            fun = fun.__wrapped__
        else:
            return fun


def derive_spec(fun: Any, localns: Mapping[str, Any] | None = None) -> Spec:
    """Derive the `Spec` of `fun` from its annotations (no caching here)."""
    try:
        signature = inspect.signature(fun)
    except (TypeError, ValueError) as exc:
        raise SpecError(f"cannot read the signature of {fun!r}: {exc}") from exc
    report_hidden_markers(fun, signature)
    target = _code_owner(fun)
    globalns = dict(getattr(target, "__globals__", {}))
    namespace = dict(localns or {})
    closure = getattr(target, "__closure__", None)
    code = getattr(target, "__code__", None)
    if closure and code is not None:
        for cell_name, cell in zip(code.co_freevars, closure):
            try:
                namespace.setdefault(cell_name, cell.cell_contents)
            except ValueError:
                continue
    ctx = Context(globalns, namespace)
    name = getattr(fun, "__qualname__", None) or getattr(
        target, "__qualname__", repr(fun)
    )
    params = []
    for p in signature.parameters.values():
        where = f"parameter {p.name!r} of {name}"
        node = parse_annotation(p.annotation, ctx, where)
        params.append(
            Param(
                p.name,
                p.kind,
                node,
                has_default=p.default is not inspect.Parameter.empty,
            )
        )
    # A class called as a function makes what its `__new__` (or metaclass)
    # makes, whatever its `__init__` says (`-> None`): nothing to check.
    returned = Any if inspect.isclass(fun) else signature.return_annotation
    returns = parse_annotation(returned, ctx, f"the return of {name}")
    return Spec(name=str(name), params=tuple(params), returns=returns)
