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
"""

from __future__ import annotations

import inspect
import logging
import threading
import weakref
from typing import Any

from .._model.markers import mentions_marker

__all__ = ["report_hidden_markers"]

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
