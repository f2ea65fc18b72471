"""The reshapes of a traced program whose sizes JAX did not check.

`jnp.reshape` checks that a reshape keeps the array's size only where every
size is a number, and `lax.reshape` never does: at symbolic sizes
`memory.reshape(b, q, d)` of a `(b, k, d)` array traces without a word, and
fails at every call where `k != q`. The shape check reads the traced
program's reshapes (in nested programs too: `jit`, `scan`, `cond`) and
reports the first whose sizes JAX cannot prove equal, as JAX reports it at
concrete sizes, at the user's line that made it. Where they are equal at
some sizes only (`floordiv`, `mod`), the witnesses decide (`witness.py`);
where none runs (constraints given), it is a note.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from .user_code import Frame

__all__ = ["Unequal", "unequal_reshape"]


class Unequal(TypeError):
    """A reshape whose sizes differ (JAX's message at concrete sizes), with
    the frames that made it, outermost first."""

    def __init__(self, message: str, frames: list[Frame]) -> None:
        super().__init__(message)
        self.frames = frames


def unequal_reshape(closed: Any) -> Unequal | None:
    """The first reshape of a traced program (a `ClosedJaxpr`) whose sizes
    JAX cannot prove equal (`b*k*d` against `b*q*d`, or `2*floordiv(n, 2)`
    against `n`), or None."""
    for eqn, outer in _equations(getattr(closed, "jaxpr", closed), [], set()):
        if eqn.primitive.name != "reshape":
            continue
        old = tuple(eqn.invars[0].aval.shape)
        new = tuple(eqn.params.get("new_sizes", old))
        if _size(old) == _size(new):
            continue
        message = (
            f"cannot reshape array of shape {_text(old)} (size {_size(old)}) "
            f"into shape {_text(new)} (size {_size(new)})"
        )
        return Unequal(message, [*outer, *_frames(eqn)])
    return None


def _size(shape: tuple[Any, ...]) -> Any:
    return math.prod(shape) if shape else 1


def _text(shape: tuple[Any, ...]) -> str:
    inner = ", ".join(str(d) for d in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def _equations(
    jaxpr: Any, outer: list[Frame], seen: set[int]
) -> Iterator[tuple[Any, list[Frame]]]:
    """The equations of a jaxpr and of every jaxpr in their parameters
    (`scan`'s body, `cond`'s branches, a nested `jit`), each with the frames
    of the equations it lies in: JAX keeps a nested body's frames from the
    body down only."""
    if id(jaxpr) in seen:
        return
    seen.add(id(jaxpr))
    for eqn in getattr(jaxpr, "eqns", ()):
        yield eqn, outer
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                inner = getattr(sub, "jaxpr", sub)  # a ClosedJaxpr's jaxpr
                if hasattr(inner, "eqns"):
                    yield from _equations(inner, [*outer, *_frames(eqn)], seen)


def _frames(eqn: Any) -> list[Frame]:
    """Where an equation was made, outermost frame first; empty where this
    JAX keeps no traceback."""
    traceback = getattr(getattr(eqn, "source_info", None), "traceback", None)
    frames = getattr(traceback, "frames", None) or ()
    return [(f.file_name, f.function_name, f.line_num) for f in reversed(frames)]
