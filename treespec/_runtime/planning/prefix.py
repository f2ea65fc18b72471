"""Prefix trees over a call's arguments: `in_axes`, `in_specs`, `in_shardings`, `wrt`.

A prefix tree gives one entry per positional argument (tuple/list), one per
parameter name (dict), or one entry for everything; below that, a container
shaped like the argument, down to entries that cover whole subtrees.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from jax.tree_util import keystr

from ..._model.errors import SpecError, a_type
from ..._model.spec import KEYWORD_KINDS, Spec
from ..reading.flags import prefix_child
from .tree import child_items, key_name

__all__ = ["Entry", "broadcast_call", "broadcast_tree", "top_entry"]


class Entry:
    """The entry covering one leaf, and whether it was written at that leaf."""

    __slots__ = ("exact", "value", "where")

    def __init__(self, value: Any, where: str, exact: bool) -> None:
        self.value = value
        self.where = where
        self.exact = exact


def broadcast_tree(
    prefix: Any, tree: Any, is_entry: Callable[[Any], bool], where: str
) -> list[Entry]:
    """One `Entry` per leaf of `tree` (flatten order) from a prefix of it."""
    out: list[Entry] = []
    _broadcast(prefix, tree, is_entry, where, out)
    return out


def _broadcast(
    prefix: Any,
    tree: Any,
    is_entry: Callable[[Any], bool],
    where: str,
    out: list[Entry],
) -> None:
    children = child_items(tree)
    if is_entry(prefix):
        if children is None:
            out.append(Entry(prefix, where, exact=True))
        else:
            out += [Entry(prefix, where, exact=False) for _ in _leaves(tree)]
        return
    if children is None:
        raise SpecError(
            f"{where} is {a_type(prefix)}, but the argument there is a leaf; "
            "give a single entry at that place."
        )
    names = [key_name(k) for k, _ in children]
    for index, (key, child) in enumerate(children):
        sub = prefix_child(prefix, index, names, where, "this tree")
        _broadcast(sub, child, is_entry, where + keystr((key,)), out)


def _leaves(tree: Any) -> list[Any]:
    import jax

    return jax.tree_util.tree_leaves(tree)


def top_entry(
    entries: Any,
    param: str,
    index: int,
    is_entry: Callable[[Any], bool],
    name: str,
    default: Any = None,
) -> tuple[Any, str, bool]:
    """The entry for one whole argument, how to name it, and if it was given.

    It was not given when one entry covers the whole call, or when `entries`
    has nothing for this argument (then `default` applies).
    """
    if is_entry(entries):
        return entries, name, False
    if isinstance(entries, Mapping):
        if param in entries:
            return entries[param], f"{name}[{param!r}]", True
        return default, name, False
    if 0 <= index < len(entries):
        return entries[index], f"{name}[{index}]", True
    return default, name, False


def broadcast_call(
    entries: Any,
    spec: Spec,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    is_entry: Callable[[Any], bool],
    name: str,
    kwarg_default: Any = None,
    skip: frozenset[int] = frozenset(),
) -> list[Entry]:
    """One `Entry` per leaf of `(args, kwargs)` (flatten order).

    `entries` is one entry for everything, a tuple/list with one per positional
    argument, or a dict by parameter name. Keyword arguments take the entry of
    their parameter, else `kwarg_default`. Positional arguments whose index is
    in `skip` are left out.
    """
    names = [p.name for p in spec.positional]
    if isinstance(entries, (list, tuple)) and not is_entry(entries):
        if len(entries) > len(args):
            raise SpecError(
                f"{name} has {len(entries)} entries but the call passes "
                f"{len(args)} positional arguments."
            )
    elif isinstance(entries, Mapping) and not is_entry(entries):
        unknown = [k for k in entries if spec.param(k) is None]
        if unknown:
            raise SpecError(f"{name} names {unknown!r}, which are not parameters.")

    out: list[Entry] = []

    def add(entry: Any, where: str, given: bool, value: Any) -> None:
        found = broadcast_tree(entry, value, is_entry, where)
        if not given:
            for item in found:
                item.exact = False
        out.extend(found)

    for i, value in enumerate(args):
        if i in skip:
            continue
        param = names[i] if i < len(names) else ""
        add(*top_entry(entries, param, i, is_entry, name, kwarg_default), value)
    # A keyword takes its parameter's entry; one that no parameter takes by
    # name (a positional-only name included) went to `**kwargs`.
    by_keyword = {p.name for p in spec.params if p.kind in KEYWORD_KINDS}
    for key in sorted(kwargs):
        param = key if key in by_keyword else ""
        index = names.index(param) if param in names else -1
        found = top_entry(entries, param, index, is_entry, name, kwarg_default)
        add(*found, kwargs[key])
    return out
