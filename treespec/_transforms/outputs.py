"""Non-array outputs: the arrays are traced, everything else rides along.

A transformed function may return Python values beside its arrays (a name, a
step count, a config). The traced body returns `WithStatic(dynamic, static)`:
the arrays as its children, the rest as its aux data, which JAX carries out
of the trace unchanged; `join_output` puts the two halves back together.

The stages (`stages.py`) keep the static half out of the program instead:
an `Exported` returns plain arrays, with `None` where the function returned a
non-array value.
"""

from __future__ import annotations

from typing import Any

import jax

from .._model.errors import Issue, ValidationError, describe_value
from .._runtime.partition import combine
from .._runtime.planning.values import is_array

__all__ = ["WithStatic", "check_aux_pair", "join_output", "split_output"]


class WithStatic:
    """An output with non-array leaves: the arrays are children, the rest aux data."""

    __slots__ = ("dynamic", "static")

    def __init__(self, dynamic: Any, static: Any) -> None:
        self.dynamic = dynamic
        self.static = static


jax.tree_util.register_pytree_node(
    WithStatic,
    lambda w: ((w.dynamic,), w.static),
    lambda static, children: WithStatic(children[0], static),
)


def split_output(out: Any) -> Any:
    """Arrays stay in the traced output; everything else rides in aux data."""
    leaves, treedef = jax.tree_util.tree_flatten(out)
    mask = [is_array(leaf) for leaf in leaves]
    if all(mask):
        return out
    dynamic = [leaf if m else None for leaf, m in zip(leaves, mask)]
    static = [None if m else leaf for leaf, m in zip(leaves, mask)]
    return WithStatic(
        jax.tree_util.tree_unflatten(treedef, dynamic),
        jax.tree_util.tree_unflatten(treedef, static),
    )


def join_output(out: Any) -> Any:
    """Undo `split_output` on what a JAX transform returned."""
    if type(out) is WithStatic:
        return combine(out.dynamic, out.static)
    return out


def check_aux_pair(out: Any, name: str) -> None:
    """With `has_aux`, the function must return a `(value, aux)` pair."""
    if isinstance(out, (tuple, list)) and len(out) == 2:
        return
    got = describe_value(out)
    if isinstance(out, (tuple, list)):
        got = f"{type(out).__name__} of length {len(out)}"
    raise ValidationError(
        [
            Issue(
                "the return value",
                "a (value, aux) pair, since has_aux=True",
                got,
                "return (value, aux) from the function, or drop has_aux=True",
            )
        ],
        name,
    )
