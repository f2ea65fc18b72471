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
from .._runtime.reading.flags import Flags
from .abstract import NO_DEFAULT, Builder, CannotBuild
from .declared import build_declared

__all__ = ["Target", "arguments_of"]


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
