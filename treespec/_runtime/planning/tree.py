"""Pytree nodes, one level at a time: a node's children with their keys, and
the name or index a key stands for."""

from __future__ import annotations

from typing import Any

import jax
from jax.tree_util import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey

__all__ = ["child_items", "key_name"]


def child_items(value: Any) -> list[tuple[Any, Any]] | None:
    """Immediate children of a pytree node with their keys; None for a leaf."""
    if value is None:
        return []
    pairs, treedef_ = jax.tree_util.tree_flatten_with_path(
        value, is_leaf=lambda x: x is not value
    )
    treedef: Any = treedef_
    if treedef.num_nodes == 1 and treedef.num_leaves == 1 and not pairs[0][0]:
        return None
    return [(path[0], child) for path, child in pairs]


def key_name(key: Any) -> Any:
    """The name or index a JAX key path entry stands for."""
    if isinstance(key, DictKey):
        return key.key
    if isinstance(key, GetAttrKey):
        return key.name
    if isinstance(key, SequenceKey):
        return key.idx
    if isinstance(key, FlattenedIndexKey):
        return key.key
    return key
