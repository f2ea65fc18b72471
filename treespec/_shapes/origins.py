"""JAX's origin messages left unwritten while a constructor is traced.

Flax NNX asks each value it stores in a variable for its `sharding`
(`getattr(value, "sharding", None)`); a tracer has none, and JAX writes, for
the `AttributeError` that `getattr` swallows, a message that walks the whole
trace so far to say where the tracer came from. Built abstractly, a
constructor is one trace that grows with every parameter it makes: the
messages cost it time quadratic in its parameters (a model of 24 embedding
tables: a third of its check). Nobody reads them, so while the checker
builds an instance they are not written. Process-wide for the duration (the
message is a method of JAX's tracer class): an error another thread raises
meanwhile says less of where its tracer came from.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["unwritten_origins"]


def _tracer_class() -> Any:
    """JAX's tracer of a traced program (JAX 0.10 to 0.12), or None where
    this JAX has none with an origin message."""
    try:
        from jax._src.interpreters import partial_eval
    except ImportError:  # pragma: no cover - a JAX without the private module
        return None
    tracer = getattr(partial_eval, "DynamicJaxprTracer", None)
    return tracer if callable(getattr(tracer, "_origin_msg", None)) else None


_TRACER = _tracer_class()


def _unwritten(self: Any) -> str:
    return ""


@contextlib.contextmanager
def unwritten_origins() -> Iterator[None]:
    """Within it, JAX's tracers write no origin message."""
    own = {} if _TRACER is None else _TRACER.__dict__
    if _TRACER is None or own.get("_origin_msg") is _unwritten:
        yield  # no such message, or already unwritten (a nested build)
        return
    written = own.get("_origin_msg")  # None where a base class writes it
    _TRACER._origin_msg = _unwritten
    try:
        yield
    finally:
        if written is None:
            del _TRACER._origin_msg
        else:
            _TRACER._origin_msg = written
