"""The route of any call: `(args, kwargs)` flattened together.

Calls with keywords or extra `*args` take it (the positional route takes the
rest); its key and its plans are those of every route (`routes.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
from jax.tree_util import keystr

from ..._model.errors import Issue
from ..checking.call_checks import call_issues
from ..planning.plan import CallView, Split
from .layout import MixedKey
from .routes import Key, Route, by_value, flatten, key_split, key_static, make_key

__all__ = ["CallRoute"]


class CallRoute(Route):
    """Any call: `(args, kwargs)` flattened together."""

    def split(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Key, Sequence[Any]]:
        leaves, treedef = flatten((args, kwargs))
        plan = self._plans.get(treedef) or self._plan(args, kwargs, treedef)
        split = plan.fixed or plan.split(leaves)
        if plan.graph is not None:  # NNX objects: one held twice?
            split = plan.graph.split_for(split, leaves, (args, kwargs))
        static = split.get_static(leaves)
        key = make_key(split, static)
        if not all(map(by_value, static)):  # an object that may change in place
            key = self.find_key(key, MixedKey, split)
        return key, split.get_dynamic(leaves)

    def rebuild(
        self, key: Key, dynamic: Sequence[Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        split = key_split(key)
        root = jax.tree_util.tree_unflatten(
            split.plan.treedef, split.merge(key_static(key), dynamic)
        )
        if split.links is not None:
            root = split.plan.graph.link(root, split.links)
        args, kwargs = root
        return tuple(args), dict(kwargs)

    def root_of(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return (args, kwargs)

    def path_name(self, path: tuple[Any, ...]) -> str:
        if len(path) < 2:
            return "the arguments"
        top, name = path[0], path[1]
        if getattr(top, "idx", 0) == 0:
            return self.ctx.spec.positional_name(name.idx) + keystr(tuple(path[2:]))
        return str(getattr(name, "key", name)) + keystr(tuple(path[2:]))

    def view(self, key: Key, dynamic: Sequence[Any]) -> CallView:
        split = key_split(key)
        leaves = split.merge(key_static(key), dynamic)
        return CallView([], split.pairs(leaves), split.plan.held)

    def donate_argnums(self, split: Split, offset: int = 1) -> tuple[int, ...]:
        return tuple(offset + d for d in split.donate)

    def in_shardings(self, split: Split) -> tuple[Any, ...] | None:
        shardings = self._leaf_shardings(split)
        return None if shardings is None else tuple(shardings)

    def diagnose(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Issue]:
        leaves, treedef = flatten((args, kwargs))
        plan = self._plans.get(treedef)
        if plan is None:
            return []
        pairs = plan.split(leaves).pairs(leaves)
        return call_issues(self.ctx.spec, pairs, check=self.checks_leaves)
