"""The positional route: exactly the positional parameters, no keywords.

Arguments that are dynamic as a whole (`Dynamic[...]`/`Donate[...]` with no
marker below, or a `False` flag) go to JAX unflattened; the others are
flattened together (one of them alone, when there is one). When every static
leaf of a call is of an immutable builtin type (`int`, `str`, ..., enum
members), the key is interned (`StaticKey`, `MixedKey`) so that JAX hashes it
by identity, and a plain dict of scalars registers a *probe* that
`Jitted.__call__` looks up without flattening. A structure of static leaves
only with a frozen dataclass among them is keyed by value, as `jax.jit` keys a
static argument; with any other hashable object, by an interned key
(`routes.by_value`). Past `MAX_STATIC_KEYS` distinct interned keys, new keys
are the plain (value-hashed) tuple: a value seen before keeps its key, so
nothing compiled is traced again.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import jax
from jax.tree_util import keystr

from ..._model.errors import Issue
from ..._model.spec import Param
from ..checking.call_checks import call_issues
from ..planning.graph import graph_of
from ..planning.graph_session import Session
from ..planning.plan import CallView, Kind, Split, getter
from ..planning.prefix import top_entry
from ..planning.resolve import held_fields
from ..reading.flags import FlagEntry
from . import routes
from .layout import MixedKey, StaticKey, is_sharding
from .routes import (
    Key,
    Route,
    RouteContext,
    by_value,
    flatten,
    immutable,
    key_split,
    key_static,
    make_key,
)

__all__ = ["PositionalRoute"]


class PositionalRoute(Route):
    """Exactly the positional parameters: whole arguments as they are, the rest
    flattened (see the module docstring)."""

    def __init__(
        self,
        ctx: RouteContext,
        whole: Sequence[tuple[int, Kind]],
        *,
        probing: bool,
        guard: type | None = None,
        fallback: Route | None = None,
    ) -> None:
        super().__init__(ctx)
        #: Calls whose first argument is not of exactly this class take
        #: `fallback` (a method's `self` handed over whole, see `Splitter`).
        self.guard = guard
        self._fallback = fallback
        if guard is not None:
            probing = False  # the probe path would skip the guard
        positional = ctx.spec.positional
        self.npos = len(positional)
        self.whole_idx = tuple(i for i, _ in whole)
        self.whole_kinds = tuple(k for _, k in whole)
        self.mixed_idx = tuple(i for i in range(self.npos) if i not in self.whole_idx)
        self._skip = frozenset(self.whole_idx)
        self._whole_params = tuple(positional[i] for i in self.whole_idx)
        self._n_whole = len(self.whole_idx)
        #: The arguments handed to JAX whole, in order.
        self.get_whole = getter(self.whole_idx)
        # One flattened argument (the common case) is flattened on its own, not
        # inside a 1-tuple: a tree level less on every call.
        self._single = len(self.mixed_idx) == 1
        #: What is flattened: one argument, or a tuple of them.
        self.get_mixed: Callable[[Sequence[Any]], Any] = (
            operator.itemgetter(self.mixed_idx[0])
            if self._single
            else getter(self.mixed_idx)
        )
        #: The key of a single flattened argument that is one traced leaf, by
        #: the leaf's type (see `_remember_leaf`).
        self._leaf_keys: dict[type, Key] = {}
        #: The one key of calls whose arguments all go to JAX whole (read by
        #: `Jitted.__call__` first).
        self.whole_key: Key | None = None
        #: `(*keys, *value types, *values)` of a plain dict of scalars -> its key;
        #: read by `Jitted.__call__` before it calls `split`.
        self.probes: dict[Key, StaticKey] = {}
        #: Off once a dict that cannot be probed came (its calls would pay for a
        #: failed probe on top of the flatten), or when nothing reads probes.
        self.probing = probing
        self._may_probe = probing

    def clear(self) -> None:
        with self._lock:
            super().clear()
            self._leaf_keys.clear()
            self.whole_key = None
            self.probes.clear()
            self.probing = self._may_probe

    def split(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Key, Sequence[Any]]:
        if self.guard is not None and type(args[0]) is not self.guard:
            assert self._fallback is not None
            return self._fallback.split(args, kwargs)
        if self.whole_key is not None:  # nothing to flatten: one key
            return self.whole_key, self.get_whole(args)
        mixed = self.get_mixed(args)
        if self._single:
            known = self._leaf_keys.get(type(mixed))
            if known is not None:  # a traced leaf of a type seen before
                return known, (*self.get_whole(args), mixed)
        leaves, treedef = flatten(mixed)
        plan = self._plans.get(treedef) or self._plan(
            args, kwargs, treedef, skip=self._skip
        )
        split = plan.fixed or plan.split(leaves)
        if plan.graph is not None:  # NNX objects: one held twice?
            split = plan.graph.split_for(split, leaves, mixed)
        if not split.dynamic_idx:
            key = self._intern(split, leaves, mixed)
            if not self.mixed_idx:
                self.whole_key = key
            return key, self.get_whole(args)
        static = split.get_static(leaves)
        last = split.last
        if last is not None and all(map(operator.is_, static, last[0])):
            key = last[1]  # the same immutable objects as the last call
        else:
            key = self._static_key(split, static)
        if not static and treedef.num_nodes == 1 and plan.kinds_by_type:
            self._remember_leaf(type(mixed), key)
        return key, (*self.get_whole(args), *split.get_dynamic(leaves))

    def _static_key(self, split: Split, static: Sequence[Any]) -> Key:
        """The key of a call with traced and static leaves. When every static
        leaf is of an immutable builtin type, the key is interned and kept on
        the split with its leaves: a next call with the very same objects
        (identity, never equality: a mutable object changed in place would
        give a stale trace) reuses it, and JAX hashes it by identity. Frozen
        dataclasses go to JAX by value; any other object is interned, found
        by its value at each call (`_find`)."""
        full = make_key(split, static)
        if all(map(immutable, static)):
            key = self._interned.get(full) or self.add_key(full, MixedKey)
            split.last = (tuple(static), key)
            return key
        if all(map(by_value, static)):
            return full
        return self.find_key(full, MixedKey, split)

    def _remember_leaf(self, leaf_type: type, key: Key) -> None:
        """One flattened argument that is a single traced leaf: its key is
        the same for every leaf of its type (the plan of a leaf is the same,
        its kind is decided by its type, and no static leaf is in the key), so
        the next call of that type skips the flatten and the plan."""
        with self._lock:
            if len(self._leaf_keys) < routes.MAX_STATIC_KEYS:
                self._leaf_keys[leaf_type] = key

    def _intern(self, split: Split, leaves: Sequence[Any], mixed: Any) -> Key:
        """The interned key of an all-static structure; registers its probe.

        A plain dict whose keys are strings and whose values are
        `PROBE_SCALARS` or enum members (singletons: equal means identical)
        registers its probe `(*keys, *values, *value types)`. Equal probes
        make equal keys: a probe holds every key in order and every value with
        its exact type (so `1`, `1.0` and `True` stay apart); the same dict in
        another key order only costs one more miss. Any other dict turns
        probing off for this function.
        """
        full = make_key(split, leaves)
        if not all(map(immutable, leaves)):
            if type(mixed) is dict:
                self.probing = False
            if all(map(by_value, leaves)):
                # Hashed by value, as jax.jit hashes a static argument: equal
                # configs of functions made afresh are then one entry in
                # JAX's global caches, which keep the first of them.
                return full
        key = self.find_key(full, StaticKey, split)
        if type(key) is not StaticKey:
            return key  # unhashable, or past the bound: no probe answers
        if type(mixed) is dict and self.probing:
            values = mixed.values()
            if all(type(k) is str for k in mixed) and all(map(immutable, values)):
                if len(self.probes) >= routes.MAX_STATIC_KEYS:
                    self.probes.clear()  # many key orders of few configs
                probe = (*mixed, *map(type, values), *values)
                self.probes[probe] = key
            else:
                self.probing = False
        return key

    def rebuild(
        self, key: Key, dynamic: Sequence[Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        split = key_split(key)
        n = self._n_whole
        mixed = jax.tree_util.tree_unflatten(
            split.plan.treedef, split.merge(key_static(key), dynamic[n:])
        )
        if split.links is not None:
            mixed = split.plan.graph.link(mixed, split.links)
        flattened = (mixed,) if self._single else mixed
        args: list[Any] = [None] * self.npos
        for i, value in zip(self.whole_idx, dynamic[:n]):
            args[i] = value
        for i, value in zip(self.mixed_idx, flattened):
            args[i] = value
        return tuple(args), {}

    def root_of(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return self.get_mixed(args)

    def path_name(self, path: tuple[Any, ...]) -> str:
        if self._single:
            return self.ctx.spec.positional_name(self.mixed_idx[0]) + keystr(
                tuple(path)
            )
        if not path:
            return "the arguments"
        index = self.mixed_idx[path[0].idx]
        return self.ctx.spec.positional_name(index) + keystr(tuple(path[1:]))

    def whole_session(self, args: tuple[Any, ...]) -> Session | None:
        if not self.whole_idx:
            return None
        root = tuple(args[i] for i in self.whole_idx)
        treedef = jax.tree_util.tree_structure(root)

        def name(path: tuple[Any, ...]) -> str:
            index = self.whole_idx[path[0].idx]
            return self.ctx.spec.positional_name(index) + keystr(tuple(path[1:]))

        graph = graph_of(root, treedef, name)
        return None if graph is None else Session(graph, root, None, frozenset())

    def _whole(self, values: Sequence[Any]) -> list[tuple[Param, Any, FlagEntry]]:
        """The arguments handed to JAX whole, each with its flag entry."""
        by_name = self.ctx.flags.by_name
        return [
            (param, value, by_name.get(param.name))
            for param, value in zip(self._whole_params, values)
        ]

    def view(self, key: Key, dynamic: Sequence[Any]) -> CallView:
        split = key_split(key)
        leaves = split.merge(key_static(key), dynamic[self._n_whole :])
        whole = self._whole(dynamic)
        held = [*split.plan.held]
        for param, value, _ in whole:
            held += held_fields(value, param.node, param.name)
        return CallView(whole, split.pairs(leaves), held)

    def arg_names(self, split: Split) -> tuple[str, ...]:
        """The parameters handed over whole, then the flattened leaves."""
        whole = tuple(param.name for param in self._whole_params)
        return (*whole, *super().arg_names(split))

    def donate_argnums(self, split: Split, offset: int = 1) -> tuple[int, ...]:
        n = self._n_whole
        return (
            *(offset + j for j, k in enumerate(self.whole_kinds) if k is Kind.DONATE),
            *(offset + n + d for d in split.donate),
        )

    def in_shardings(self, split: Split) -> tuple[Any, ...] | None:
        given = self.ctx.in_shardings
        shardings = self._leaf_shardings(split)
        if given is None or shardings is None:
            return None
        whole = tuple(
            top_entry(given, param.name, i, is_sharding, "in_shardings")[0]
            for i, param in zip(self.whole_idx, self._whole_params)
        )
        return (*whole, *shardings)

    def diagnose(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Issue]:
        if self.guard is not None and type(args[0]) is not self.guard:
            assert self._fallback is not None
            return self._fallback.diagnose(args, kwargs)
        leaves, treedef = flatten(self.get_mixed(args))
        plan = self._plans.get(treedef)
        pairs = plan.split(leaves).pairs(leaves) if plan is not None else []
        whole = self._whole(self.get_whole(args))
        return call_issues(self.ctx.spec, pairs, whole, check=self.checks_leaves)
