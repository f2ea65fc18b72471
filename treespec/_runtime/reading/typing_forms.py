"""Typing objects as the runtime reads them, before they become spec nodes.

How an annotation reads in a message (`type_text`), a forward reference
evaluated where it was written (`Context`), the forms that mean an array or a
jaxtyping `PyTree`, the qualifiers a `TypedDict` field may carry (`Required`,
`NotRequired`, `ReadOnly`), and the checks on a union's markers, raised as
`SpecError`s with the shared rules' texts. `hints.py` builds the nodes.
"""

from __future__ import annotations

import importlib
import sys
import types
import typing
from collections.abc import Mapping
from typing import Any, ForwardRef, TypeVar, get_args, get_origin

import typing_extensions

from ..._model.errors import SpecError
from ..._model.markers import marker_of
from ..._model.rules import marked_union_conflict, union_conflict, union_fix
from ..._model.spec import ClassBacked, Node, UnionNode

__all__ = [
    "NOT_REQUIRED",
    "READONLY",
    "REQUIRED",
    "UNION_TYPES",
    "Context",
    "check_marked_union",
    "check_union",
    "is_array_class",
    "is_jaxtyping_array",
    "is_jaxtyping_pytree",
    "loaded",
    "type_text",
]

NOT_REQUIRED = {typing_extensions.NotRequired}
NOT_REQUIRED |= {typing.NotRequired} if hasattr(typing, "NotRequired") else set()
REQUIRED = {typing_extensions.Required, *NOT_REQUIRED}
REQUIRED |= {typing.Required} if hasattr(typing, "Required") else set()
READONLY = {m.ReadOnly for m in (typing, typing_extensions) if hasattr(m, "ReadOnly")}
UNION_TYPES: tuple[Any, ...] = (typing.Union, types.UnionType)


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
    if origin in UNION_TYPES:
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


def loaded(name: str) -> Any:
    """Module `name` if it was imported (treespec does not import it to find
    out whether an annotation is its), else None. An import under way in
    another thread is waited for: its module is in `sys.modules` before it
    has its names."""
    if name not in sys.modules:
        return None
    return importlib.import_module(name)


def is_jaxtyping_array(tp: Any) -> bool:
    jaxtyping = loaded("jaxtyping")
    return (
        jaxtyping is not None
        and isinstance(tp, type)
        and issubclass(tp, jaxtyping.AbstractArray)
    )


def is_jaxtyping_pytree(tp: Any) -> bool:
    jaxtyping = loaded("jaxtyping")
    return jaxtyping is not None and (
        tp is jaxtyping.PyTree or type(tp) is type(jaxtyping.PyTree)
    )


def is_array_class(tp: Any) -> bool:
    if not isinstance(tp, type):
        return False
    from ..._model.rules import ARRAY_TYPES

    jax = loaded("jax")
    if jax is not None and issubclass(tp, jax.Array):
        return True  # whatever module JAX's version defines it in
    return any(f"{c.__module__}.{c.__qualname__}" in ARRAY_TYPES for c in tp.__mro__)


def check_union(members: tuple[Node, ...], where: str, text: str) -> None:
    """Members of a union must agree on their markers (None aside)."""
    shown = union_conflict(members)
    if shown is not None:
        raise SpecError(
            f"the union {text} in {where} has members that disagree on markers: "
            f"{shown}. {union_fix()}"
        )


def check_marked_union(node: UnionNode, marker: Any, where: str, text: str) -> None:
    """A marker around a union covers its members: one of them marked otherwise
    is a marker directly inside another (nothing lies between them)."""
    member = marked_union_conflict(node, marker)
    if member is not None:
        raise SpecError(
            f"{where} is annotated {text}: the member {member.text} of the "
            f"union has its own marker inside {marker.title}[...], a marker "
            f"directly inside another. {union_fix()}"
        )
