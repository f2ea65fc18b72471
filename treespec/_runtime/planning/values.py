"""What a value is at run time: an array, array-like, hashable.

The rule table (`_model/rules.py`) names the types by their full names, so
that the mypy plugin can read it without JAX; these are the same answers asked
of values, with JAX's and NumPy's classes at hand.
"""

from __future__ import annotations

from typing import Any

from ..._model.rules import SCALAR_TYPES

__all__ = ["array_classes", "is_array", "is_array_like", "is_hashable"]


def _qualname(tp: type) -> str:
    return f"{tp.__module__}.{tp.__qualname__}"


_array_classes: tuple[type, ...] = ()


def array_classes() -> tuple[type, ...]:
    """The runtime classes behind `ARRAY_TYPES` (imported on first use)."""
    global _array_classes
    if not _array_classes:
        import jax
        import numpy as np

        # ShapeDtypeStruct stands for an array (eval_shape, .lower).
        _array_classes = (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct)
    return _array_classes


def is_array(x: Any) -> bool:
    """True for JAX arrays (and tracers), NumPy arrays and scalars, ShapeDtypeStructs.

    The "infer" policy traces exactly these leaves, as `equinox.is_array` does.
    """
    return isinstance(x, _array_classes or array_classes())


def is_array_like(x: Any) -> bool:
    """True for what `Dynamic` accepts: arrays plus Python bool/int/float/complex."""
    return is_array(x) or (
        isinstance(x, (bool, int, float, complex))
        and _qualname(type(x)) in SCALAR_TYPES
    )


def is_hashable(x: Any) -> bool:
    """True when `hash(x)` succeeds, which a static leaf needs."""
    try:
        hash(x)
    except TypeError:
        return False
    return True
