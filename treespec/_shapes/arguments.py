"""The function a shape check traces (`Target`), and its abstract call: each
parameter the value given
to `check_shapes`, else as `check_with` declares it, else built from its
annotation (`abstract.py`)."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from .._model.spec import Param, Spec
from .._runtime.api import spec_for
from .._runtime.reading.flags import Flags
from .._transforms.base import Transformed
from .abstract import NO_DEFAULT, Builder, CannotBuild
from .declared import build_declared, declared_of, values_declared
from .user_code import def_line, shown

__all__ = ["Target", "arguments_of", "target_of"]


@dataclasses.dataclass(frozen=True)
class Target:
    """The function whose body is traced, and what its call needs."""

    inner: Callable[..., Any]
    spec: Spec
    flags: Flags
    default: str
    given: dict[str, Any]
    #: How to build arguments, as `check_with` declares (by parameter).
    declared: Mapping[str, Any]
    file: str
    line: int
    name: str


def arguments_of(t: Target, builder: Builder) -> tuple[list[Any], dict[str, Any]]:
    """The abstract call of `t`: each parameter the value given, else as
    `check_with` declares it (once the others are built), else built from
    its annotation by `builder`."""
    try:
        signature = inspect.signature(t.inner)
        defaults = {name: p.default for name, p in signature.parameters.items()}
    except (TypeError, ValueError):
        defaults = {}
    built = {  # those `check_with` declares once the others are built
        p.name: _argument(t, builder, p, defaults.get(p.name, NO_DEFAULT))
        for p in t.spec.params
        if p.name in t.given or p.name not in t.declared
    }
    for param in t.spec.params:
        if param.name not in built:
            built[param.name] = _declared(t, builder, param, built)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for param in t.spec.params:
        value = built[param.name]
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            args.extend(value)
        elif param.kind is inspect.Parameter.VAR_KEYWORD:
            kwargs.update(value)
        elif param.kind is inspect.Parameter.KEYWORD_ONLY:
            kwargs[param.name] = value
        else:
            args.append(value)
    return args, kwargs


def _argument(t: Target, builder: Builder, param: Param, default: Any) -> Any:
    if param.name in t.given:
        value = t.given[param.name]
        return builder.build(param.node, param.name, value, given=True)
    if param.kind is inspect.Parameter.VAR_POSITIONAL:  # one of several
        with builder.scopes.any_length():
            return [builder.build(param.node, f"{param.name}[0]")]
    if param.kind is inspect.Parameter.VAR_KEYWORD:
        return {}
    return builder.build(param.node, param.name, default)


def _declared(t: Target, builder: Builder, param: Param, built: dict[str, Any]) -> Any:
    """An argument as `check_with` says to build it."""
    try:
        value = build_declared(t.declared[param.name], built)
    except Exception as error:
        why = f"its check_with builder raised {type(error).__name__}: {error}"
        raise CannotBuild(param.name, why) from None
    return builder.build(param.node, param.name, value, given=True)


def target_of(fun: Any, statics: Mapping[str, Any]) -> Target:
    """The function `fun` (a transform, a bound method of one, or a plain
    function) as a shape check traces it, with the `statics` given."""
    given = dict(statics)
    transform = fun
    instance = getattr(fun, "__self__", None)
    func = getattr(fun, "__func__", None)
    if instance is not None and isinstance(func, Transformed):
        transform = func  # a bound method: its instance is a value given
    if isinstance(transform, Transformed):
        spec = transform.spec
        flags: Flags = getattr(transform, "_flags", Flags())
        default: str = getattr(transform, "_default", "infer")
        if transform is not fun and spec.params:
            given.setdefault(spec.params[0].name, instance)
    else:
        spec = spec_for(fun, {})
        flags, default = Flags(), "infer"
    inner: Any = transform
    while isinstance(inner, Transformed):
        inner = inner.__wrapped__
    code = getattr(inspect.unwrap(inner), "__code__", None)
    file = code.co_filename if code else "<unknown>"
    line = def_line(inner, code.co_firstlineno if code else 0)
    name = getattr(inner, "__qualname__", spec.name)
    declared = declared_of(inner, spec.params)
    given = {**values_declared(declared), **given}  # a value given still wins
    return Target(inner, spec, flags, default, given, declared, shown(file), line, name)
