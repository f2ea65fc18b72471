"""A function's `Spec`: its signature's annotations, parsed in the namespaces
they were written in (the module's globals, the closure, the decorator's
caller), each parameter a node of `hints.py`."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from typing import Any

from ..._model.errors import SpecError
from ..._model.spec import Param, Spec
from .hints import parse_annotation
from .typing_forms import Context
from .wrappers import report_hidden_markers, returns_its_own

__all__ = ["derive_spec"]


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
    # makes, whatever its `__init__` says (`-> None`); a transform's output
    # (`jax.grad(loss)`) shows the return annotation of what it wraps: neither
    # is a promise about what `fun` returns, so nothing to check.
    own = returns_its_own(fun) and not inspect.isclass(fun)
    returned = signature.return_annotation if own else Any
    returns = parse_annotation(returned, ctx, f"the return of {name}")
    return Spec(name=str(name), params=tuple(params), returns=returns)
