"""The bound form of a transformed method: what `instance.method` is.

It is what a bound method of the instance's class is, so that everything
that takes one keeps working:

- on an Equinox `Module`, Equinox's own `BoundMethod`: a pytree of the
  instance (`jax.grad`, `eqx.filter_grad`, `jax.tree.map` see its arrays).
  Equinox builds one on every attribute access, through its `__init__`, which
  costs more than the call; treespec builds it directly (a subclass, so
  `isinstance(x, BoundMethod)` holds), with `.spec`, `.trace_count` and the
  stages (`.lower`, `.trace`, `.eval_shape`) bound to the instance, and it
  pickles as Python's bound methods do (by the instance and the name);
- on any other class, Python's `types.MethodType` (`inspect.ismethod`, one
  leaf of a tree, pickled by the instance and the name). Attribute access on
  it reaches the transform itself: `Class.method.lower(instance, ...)`.

The other way round, a bound method handed to a transform
(`treespec.jit(model.apply)`) is taken apart by `unbind`: the function, the
instance, and the flags said for the function's parameters after `self`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import threading
import types
from collections.abc import Mapping
from typing import Any

import jax

from .._model.held import EQX_MODULES
from .._runtime.reading.classes import mro_names

__all__ = ["method_get", "unbind"]

_lock = threading.Lock()
#: Classes known to be Equinox Modules, and known not to be.
_modules: set[type] = set()
_others: set[type] = set()
_bound_class: type | None = None
_new = object.__new__


def _is_module(cls: type) -> bool:
    found = not mro_names(cls).isdisjoint(EQX_MODULES)
    with _lock:
        (_modules if found else _others).add(cls)
    return found


def method_get(transform: Any, instance: Any, owner: Any = None) -> Any:
    """`Transformed.__get__`: `instance.method` for a transform used as a
    method (see the module docstring). On the path of every method call of a
    Module (Equinox asks it on each attribute access): kept short."""
    if instance is None:
        return transform
    cls = type(instance)
    if cls in _modules or (cls not in _others and _is_module(cls)):
        bound: Any = _new(_bound_class or _make_bound_class())
        fields = bound.__dict__  # the bound class's lookup is object's own
        fields.update(transform.__dict__.get("_bound_fields") or _fields(transform))
        fields["__self__"] = instance
        return bound
    return types.MethodType(transform, instance)


def _fields(transform: Any) -> dict[str, Any]:
    """What Equinox's `BoundMethod.__post_init__` sets, but `__self__`: the
    function and its wrapped names (kept on the transform, made once)."""
    fields = {"__func__": transform}
    for name in functools.WRAPPER_ASSIGNMENTS:
        if hasattr(transform, name):
            fields[name] = getattr(transform, name)
    transform.__dict__["_bound_fields"] = fields
    return fields


def _equinox_bound_method() -> Any:
    """Equinox's `BoundMethod`, found through Equinox's public behaviour: the
    type of a Module's bound method."""
    import equinox as eqx

    class _Probe(eqx.Module):
        def method(self) -> None: ...

    return type(_Probe().method)


def _make_bound_class() -> type:
    """A subclass of Equinox's `BoundMethod`."""
    global _bound_class
    base: Any = _equinox_bound_method()

    class TransformedMethod(base):  # type: ignore[misc]
        """A transformed method bound to an Equinox Module instance."""

        # Python's own attribute lookup: Equinox's `__getattribute__` (in
        # Python, to turn bound methods into BoundMethods) ran on every
        # access, `isinstance`'s look at `__class__` included.
        __getattribute__ = object.__getattribute__

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return self.__func__(self.__self__, *args, **kwargs)

        @property
        def __wrapped__(self) -> Any:
            """The method as written, bound to the instance: what
            `inspect.signature` reads (and JAX's transforms through it).
            Equinox's own binds `__func__`, here the transform, again: a loop."""
            return types.MethodType(self.__func__.__wrapped__, self.__self__)

        @property
        def spec(self) -> Any:
            """The transform's `Spec`, without `self` (bound)."""
            spec = self.__func__.spec
            return dataclasses.replace(spec, params=spec.params[1:])

        @property
        def trace_count(self) -> int:
            """How often the transform traced (the function's count)."""
            return int(self.__func__.trace_count)

        def lower(self, *args: Any, **kwargs: Any) -> Any:
            """`lower` with the instance bound: `model.method.lower(x)`."""
            lowered = self.__func__.lower(self.__self__, *args, **kwargs)
            return lowered.bound(self.__self__)

        def trace(self, *args: Any, **kwargs: Any) -> Any:
            """`trace` with the instance bound."""
            return self.__func__.trace(self.__self__, *args, **kwargs)

        def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
            """`eval_shape` with the instance bound."""
            return self.__func__.eval_shape(self.__self__, *args, **kwargs)

        def __reduce__(self) -> Any:
            # As Python's bound methods: the instance and the attribute name
            # (the transform itself cannot be pickled, as jax.jit's cannot).
            name = getattr(self.__func__, "_attribute", None) or self.__name__
            return getattr, (self.__self__, name)

    with _lock:
        if _bound_class is None:
            _bound_class = TransformedMethod
    return _bound_class


def unbind(fun: Any, static_flags: Any) -> tuple[Any, Any, Any] | None:
    """`(function, instance, flags for the function)` of a bound method whose
    instance is a pytree (its arrays traced, so a trace serves every instance
    of the same structure, as `equinox.filter_jit(m.method)`).

    None for anything else, and for a method of an instance that JAX sees as
    one leaf (a plain class): that is jitted as it is, as `jax.jit(m.method)`
    does, the instance part of the function, not of its calls' keys, so that
    it goes with the method.
    """
    # `types.MethodType`, and method objects like Equinox's bound methods.
    func = getattr(fun, "__func__", None)
    instance = getattr(fun, "__self__", None)
    if instance is None or isinstance(instance, type) or not inspect.isfunction(func):
        return None
    if jax.tree_util.all_leaves([instance]):
        return None
    if static_flags is None or isinstance(static_flags, Mapping):
        return func, instance, static_flags
    if isinstance(static_flags, (list, tuple)) and not hasattr(static_flags, "_fields"):
        return func, instance, [None, *static_flags]  # nothing said for `self`
    names = list(inspect.signature(func).parameters)[1:]
    return func, instance, dict.fromkeys(names, static_flags)
