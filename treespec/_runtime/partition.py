"""`partition` / `combine`: split a tree by a flag tree and put it back together."""

from __future__ import annotations

from typing import Any, TypeVar

import jax

from .._model.errors import SpecError
from .._model.spec import AnyNode
from .planning.plan import Kind
from .planning.resolve import walk_value
from .reading.flags import FlagEntry

__all__ = ["combine", "leaf_kinds", "partition"]

_T = TypeVar("_T")


def leaf_kinds(tree: Any, flags: FlagEntry, default: str = "infer") -> list[Kind]:
    """The kind of every leaf of `tree` under a prefix flag tree."""
    infos, _, _ = walk_value(
        tree, AnyNode(), flags=flags, flag_src="flags", default=default, check=False
    )
    leaves = jax.tree_util.tree_leaves(tree)
    return [info.resolve(leaf) for info, leaf in zip(infos, leaves)]


def partition(tree: _T, flags: FlagEntry) -> tuple[_T, _T]:
    """Split `tree` into its dynamic part and its static part.

    **Arguments:**

    - `tree`: any pytree.
    - `flags`: a prefix of `tree` whose entries are `True` (static), `False`
      (dynamic), `None` (infer: arrays dynamic, the rest static) or a callable
      `leaf -> bool` (True = static), e.g. the output of `flag_tree`.

    **Returns:**

    `(dynamic, static)`: two trees shaped like `tree`; each holds `None` where
    the other holds the leaf. `combine(dynamic, static)` gives `tree` back.

    !!! example

        ```python
        import jax.numpy as jnp
        import treespec

        cfg = {"n_layers": 2, "w": jnp.ones(3)}
        dynamic, static = treespec.partition(cfg, {"n_layers": True, "w": False})
        assert dynamic["n_layers"] is None and static["w"] is None
        assert treespec.combine(dynamic, static)["n_layers"] == 2
        ```
    """
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    kinds = leaf_kinds(tree, flags)
    dynamic = [None if k is Kind.STATIC else v for k, v in zip(kinds, leaves)]
    static = [v if k is Kind.STATIC else None for k, v in zip(kinds, leaves)]
    return (
        jax.tree_util.tree_unflatten(treedef, dynamic),
        jax.tree_util.tree_unflatten(treedef, static),
    )


def _is_none(x: Any) -> bool:
    return x is None


def combine(dynamic: _T, static: _T) -> _T:
    """Rebuild the tree that `partition` split.

    **Arguments:**

    - `dynamic`, `static`: the two halves from `partition`, same structure,
      with `None` where the other half holds the leaf.

    **Returns:**

    The original tree: at every place, the leaf of whichever half is not `None`.

    !!! example

        ```python
        import treespec

        assert treespec.combine({"a": None, "b": 2}, {"a": 1, "b": None}) == {
            "a": 1,
            "b": 2,
        }
        ```
    """
    d_leaves, d_def = jax.tree_util.tree_flatten(dynamic, is_leaf=_is_none)
    s_leaves, s_def = jax.tree_util.tree_flatten(static, is_leaf=_is_none)
    if d_def != s_def:  # type: ignore[operator]
        raise SpecError(
            "combine() needs two halves of the same structure, as partition() "
            f"returns them; got {d_def} and {s_def}."
        )
    merged = [s if d is None else d for d, s in zip(d_leaves, s_leaves)]
    return jax.tree_util.tree_unflatten(d_def, merged)  # type: ignore[no-any-return]
