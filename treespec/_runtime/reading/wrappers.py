"""A decorator that hides the annotations of the function it wraps.

treespec reads annotations through `__wrapped__`, so a decorator made with
`functools.wraps` is followed quietly. A plain wrapper, `def inner(*args,
**kwargs)` with no `__wrapped__`, hides them: its markers would vanish (a
`Donate` not donated, a `Static` not checked). That is why JAX declined
annotation-driven statics (JAX #10476: "other decorators can hide or mangle
annotations without anyone noticing"). treespec notices: a wrapper that takes
only `*args`/`**kwargs`, has no annotations of its own (`Any` says nothing)
and closes over a function whose annotations carry markers is reported once,
on the `treespec` logger, naming both functions.

The other way round, a wrapper that another transform made shows annotations
that are not its own: `jax.grad(loss)` shows `loss`'s (`functools.wraps`) and
returns a gradient, `jax.vmap(f)` shows `f`'s and takes a batch. Its markers
still say what is static; its return annotation (`returns_its_own`), and for
a mapped function its argument annotations (`maps_arguments`), are no promise
of the wrapper's, so a treespec transform over it does not check them. A
decorator of your own made with `functools.wraps` keeps the promise.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import sys
import threading
import weakref
from typing import Any

from ..._model.markers import mentions_marker

__all__ = ["maps_arguments", "report_hidden_markers", "returns_its_own"]

logger = logging.getLogger("treespec")

_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)

_reported: weakref.WeakSet[Any] = weakref.WeakSet()
_lock = threading.Lock()


def _says(annotation: Any) -> bool:
    """Whether an annotation says anything (`Any` says nothing)."""
    return annotation not in (
        inspect.Parameter.empty,
        Any,
        object,
        "Any",
        "typing.Any",
        "object",
    )


def _marked(fun: Any) -> list[str]:
    """The parameters (and `return`) of `fun` whose annotations carry markers."""
    try:
        annotations = inspect.get_annotations(fun)
    except Exception:  # not a function, or annotations that cannot be read
        return []
    return [name for name, ann in annotations.items() if mentions_marker(ann)]


def report_hidden_markers(fun: Any, signature: inspect.Signature) -> None:
    """Log once when `fun` is a plain wrapper hiding a marked function's
    annotations (see the module docstring). `signature` is `fun`'s, as
    `inspect.signature` reads it (through `__wrapped__`)."""
    params = signature.parameters.values()
    if (
        not params
        or any(p.kind not in _VARIADIC or _says(p.annotation) for p in params)
        or _says(signature.return_annotation)
        or not inspect.isfunction(fun)
        or not fun.__closure__
    ):
        return
    for cell in fun.__closure__:
        try:
            inner = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if not inspect.isfunction(inner) or inner is fun:
            continue
        marked = _marked(inner)
        if not marked:
            continue
        with _lock:
            if fun in _reported:
                return
            _reported.add(fun)
        logger.warning(
            "treespec: %s takes only *args/**kwargs and hides the annotations "
            "of %s, which it wraps: their markers (on %s) are not seen, so "
            "nothing there is held static, traced or donated as they say. "
            "Make the wrapper with functools.wraps(%s) (treespec reads "
            "annotations through __wrapped__), or apply the treespec "
            "transform to %s itself.",
            fun.__qualname__,
            inner.__qualname__,
            ", ".join(marked),
            inner.__name__,
            inner.__name__,
        )
        return


def _received(fun: Any) -> Any:
    """What a `functools.partial` calls (it returns what that returns)."""
    while isinstance(fun, functools.partial):
        fun = fun.func
    return fun


#: The libraries whose transforms wrap a function with `functools.wraps` and
#: return something else (a gradient, a batch).
_TRANSFORMING = ("jax", "jaxlib", "equinox", "flax")


def _made_by_a_library(fun: Any) -> bool:
    """Whether `fun` was made by one of `_TRANSFORMING`: its code, or its
    class, is theirs."""
    code = getattr(fun, "__code__", None)
    if code is None:
        return type(fun).__module__.split(".")[0] in _TRANSFORMING
    for name in _TRANSFORMING:
        module = sys.modules.get(name)
        where = getattr(module, "__file__", None)
        if where and code.co_filename.startswith(os.path.dirname(where) + os.sep):
            return True
    return False


def returns_its_own(fun: Any) -> bool:
    """Whether `fun`'s return annotation is a promise about what `fun` returns:
    not when a transform of JAX's or Equinox's made it and shows, through
    `__wrapped__`, the function it transforms (`jax.grad(loss)` returns a
    gradient, not what `loss` says). A decorator of your own made with
    `functools.wraps` keeps the function's promise."""
    fun = _received(fun)
    return getattr(fun, "__wrapped__", None) is None or not _made_by_a_library(fun)


#: How `jax.vmap` documents the function it returns (JAX 0.4 to 0.12).
_VMAPPED_DOC = "Vectorized version of "
#: Equinox's mapped functions (`filter_vmap`, `filter_pmap`), by class name.
_EQX_MAPPED = frozenset({"_VmapWrapper", "_PmapWrapper"})


def maps_arguments(fun: Any) -> bool:
    """Whether `fun` maps another function over an axis of its arguments
    (`jax.vmap`, `jax.pmap`, `eqx.filter_vmap`, `eqx.filter_pmap`): the
    annotations it shows describe one slice of what it is called with."""
    fun = _received(fun)
    kind = type(fun)
    if kind.__module__.split(".")[0] == "equinox" and kind.__name__ in _EQX_MAPPED:
        return True
    if (getattr(fun, "__doc__", None) or "").startswith(_VMAPPED_DOC):
        return True
    if hasattr(fun, "_prepare_pmap"):  # `jax.pmap`'s C++ function
        return True
    code = getattr(fun, "__code__", None)  # `jax.pmap` through `shard_map`
    return (
        code is not None
        and code.co_name == "wrapped"
        and code.co_filename.endswith(os.path.join("_src", "pmap.py"))
    )
