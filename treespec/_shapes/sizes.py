"""The sizes of a shape check: those a value given binds, by dimension name
(not those its instances bind for themselves),
one JAX symbol per name, in one scope with the constraints given, and the
names' sizes at witnesses of the symbols the constraints leave."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax

from .._model.spec import Node, Param
from .._runtime.checking.dims import bound_dims
from .._runtime.checking.validate import scopes_of
from .._runtime.planning.resolve import walk_value
from .._runtime.reading.typing_forms import is_jaxtyping_array

__all__ = ["constrained", "given_sizes", "symbols_for"]


def given_sizes(params: Sequence[Param], given: Mapping[str, Any]) -> dict[str, int]:
    """The dimension sizes the values `given` for `params` bind, by name, the
    first binding of a name kept (`_bound_by`)."""
    fixed: dict[str, int] = {}
    for param in params:
        if param.name in given:
            bound = _bound_by(given[param.name], param.node, param.name)
            fixed.update((k, v) for k, v in bound.items() if k not in fixed)
    return fixed


def _bound_by(value: Any, node: Node, name: str) -> dict[str, int]:
    """The dimension sizes a value given binds, by name: the concrete leaves
    that jaxtyping annotations describe (the first binding of a name kept),
    but those an instance binds in a scope of its own (`scopes_of`: a
    stack's layer). The arguments built around a given model use them, not
    symbols."""
    infos, _, _ = walk_value(value, node, path=name, argument=name, check=False)
    sizes: dict[str, int] = {}
    leaves = jax.tree_util.tree_leaves(value)
    for info, leaf, scope in zip(infos, leaves, scopes_of(infos)):
        annotation = getattr(info.node, "annotation", None)
        shape = getattr(leaf, "shape", None)
        if scope is not None or not is_jaxtyping_array(annotation) or shape is None:
            continue
        if not all(isinstance(d, int) for d in shape):
            continue
        try:
            dims = bound_dims(annotation, shape)
        except (TypeError, ValueError):  # a shape the annotation does not fit
            continue
        for dim, size in dims:
            if isinstance(size, int):
                sizes.setdefault(dim, size)
    return sizes


def symbols_for(names: Sequence[str], constraints: Sequence[str]) -> dict[str, Any]:
    """One JAX symbol per dimension name, all in one scope with `constraints`."""
    if not names:
        return {}
    symbols = jax.export.symbolic_shape(", ".join(names), constraints=constraints)
    return dict(zip(names, symbols))


def constrained(
    symbols: Mapping[str, Any], names: Sequence[str]
) -> tuple[list[str], Callable[[Mapping[str, int]], dict[str, int]]]:
    """Where constraints are given, the symbols they leave free (`d == 4*k`
    leaves `k`) and each name's size at values of those, so that witnesses
    satisfy the constraints; the names themselves where none relate them."""
    if not all(
        hasattr(symbols.get(n), "_evaluate") and hasattr(symbols.get(n), "get_vars")
        for n in names
    ):
        return list(names), dict  # no symbols, or a JAX that cannot evaluate
    free: dict[str, None] = {}
    for name in names:
        free.update(dict.fromkeys(sorted(symbols[name].get_vars())))

    def at(values: Mapping[str, int]) -> dict[str, int]:
        sizes = {}
        for name in names:
            sizes[name] = int(symbols[name]._evaluate(dict(values)))
        return sizes

    return list(free), at
