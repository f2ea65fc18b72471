"""`out_axes` holding callables (`leaf -> axis or None`), as Equinox takes
them, for `vmap` and `pmap`."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from .._model.errors import SpecError
from .._runtime.partition import combine
from .._runtime.planning.prefix import broadcast_tree
from .outputs import WithStatic

__all__ = ["OutAxes", "has_callable"]


def has_callable(out_axes: Any) -> bool:
    """Whether `out_axes` holds a callable anywhere."""
    leaves = jax.tree_util.tree_leaves(out_axes, is_leaf=callable)
    return any(callable(leaf) for leaf in leaves)


def _is_out_entry(x: Any) -> bool:
    return x is None or isinstance(x, int) or callable(x)


class OutAxes:
    """`out_axes` holding callables (`leaf -> axis or None`), as Equinox takes.

    JAX needs the output axes before the output exists, so the traced body
    returns two groups, `(mapped, unmapped)` with `out_axes=(0, None)`: each
    output leaf goes to the group its axis says (the callables see the traced
    leaves), and `join` puts them back in place, moving each mapped leaf's
    axis where it was asked for. Non-array outputs stay Python objects.
    """

    def __init__(self, spec: Any) -> None:
        self.spec = spec

    def split(self, out: Any, record: dict[str, Any]) -> tuple[Any, Any]:
        static = out.static if type(out) is WithStatic else None
        dynamic = out.dynamic if type(out) is WithStatic else out
        leaves, treedef = jax.tree_util.tree_flatten(dynamic)
        entries = broadcast_tree(self.spec, dynamic, _is_out_entry, "out_axes")
        axes = []
        for entry, leaf in zip(entries, leaves):
            axis = entry.value(leaf) if callable(entry.value) else entry.value
            if axis is not None and not isinstance(axis, int):
                raise SpecError(
                    f"{entry.where} (callable) returned {type(axis).__name__} "
                    f"{axis!r}; an out_axes callable returns an int or None."
                )
            axes.append(axis)
        record.update(treedef=treedef, axes=axes, static=static)
        mapped = tuple(leaf for leaf, a in zip(leaves, axes) if a is not None)
        unmapped = tuple(leaf for leaf, a in zip(leaves, axes) if a is None)
        return mapped, unmapped

    @staticmethod
    def join(groups: tuple[Any, Any], record: dict[str, Any]) -> Any:
        mapped, unmapped = iter(groups[0]), iter(groups[1])
        leaves = []
        for axis in record["axes"]:
            if axis is None:
                leaves.append(next(unmapped))
            else:
                leaf = next(mapped)
                leaves.append(leaf if axis == 0 else jnp.moveaxis(leaf, 0, axis))
        dynamic = jax.tree_util.tree_unflatten(record["treedef"], leaves)
        static = record["static"]
        return dynamic if static is None else combine(dynamic, static)
