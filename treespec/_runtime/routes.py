"""Routes: the ways a call is split into a static key and dynamic arguments.

A route owns, for the calls it takes:

- its split: `(args, kwargs)` to `(key, dynamic)`;
- its key, always `(split, *static_leaves, *their_types)` (`make_key`, read back
  by `key_split`/`key_static`), where `split` (a `Split`, one per tree
  structure and kinds) knows its route: `key_split(key).plan.route`;
- its rebuild: `(key, dynamic)` back to `(args, kwargs)`;
- the view that validation, retrace descriptions, diagnosis, donation and
  shardings read (`CallView`, `donate_argnums`, `in_shardings`, `diagnose`).

Two routes cover every call:

- `PositionalRoute`: exactly the positional parameters, no keywords. Arguments
  that are dynamic as a whole (`Dynamic[...]`/`Donate[...]` with no marker
  below, or a `False` flag) go to JAX unflattened; the others are flattened
  together (one of them alone, when there is one). When every static leaf of
  a call is of an immutable builtin type (`int`, `str`, ..., enum members),
  the key is interned (`StaticKey`, `MixedKey`) so that JAX hashes it by
  identity, and a plain dict of scalars registers a *probe* that
  `Jitted.__call__` looks up without flattening. A structure of static
  leaves only with a frozen dataclass among them is keyed by value, as
  `jax.jit` keys a static argument; with any other hashable object, by an
  interned key (`_by_value`). Past `MAX_STATIC_KEYS` distinct interned keys,
  new keys are the plain (value-hashed) tuple: a value seen before keeps its
  key, so nothing compiled is traced again.
- `CallRoute`: any other call (keywords, extra `*args`): `(args, kwargs)`
  flattened together.

No code outside this module asks which route a key belongs to.

A key holds its split's `SplitId` (an `int` to JAX), its static leaves and
their types, and nothing else: JAX's global caches keep keys (as they keep
`jax.jit`'s static arguments), and from a key nothing leads back to the
function or to what it compiled.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import itertools
import logging
import operator
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import jax

from .._model.errors import Issue, SpecError, ValidationError
from .._model.spec import Param, Spec
from .flags import FlagEntry, Flags
from .layout import PROBE_SCALARS, MixedKey, StaticKey, is_sharding
from .plan import CallView, Kind, Plan, Split, getter
from .prefix import broadcast_call, top_entry
from .resolve import build_plan, held_fields
from .validate import call_issues, plan_issues

__all__ = [
    "MAX_STATIC_KEYS",
    "CallRoute",
    "CallView",
    "Key",
    "PositionalRoute",
    "Route",
    "key_split",
    "key_static",
    "make_key",
    "same_call",
]

# The registry's own method: one Python frame less than `tree_flatten` per call.
_flatten = jax.tree_util.default_registry.flatten

logger = logging.getLogger("treespec")

#: The static part of one call: `(split.token, *static_leaves, *their_types)`.
#: JAX hashes it as the static argument of the compiled call, so `1`, `1.0`
#: and `True` (equal, same hash) still make three keys.
Key = tuple[Any, ...]

#: Lowers `MAX_STATIC_KEYS` (read once, at import).
MAX_STATIC_KEYS_ENV = "TREESPEC_MAX_STATIC_KEYS"
DEFAULT_MAX_STATIC_KEYS = 4096


def _max_static_keys() -> int:
    text = os.environ.get(MAX_STATIC_KEYS_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_STATIC_KEYS
    try:
        return max(0, int(text))
    except ValueError:
        raise ValueError(
            f"{MAX_STATIC_KEYS_ENV}={text!r}: expected a whole number of static "
            f"keys (the default is {DEFAULT_MAX_STATIC_KEYS})"
        ) from None


#: Distinct interned keys a route keeps (and probes it registers before it
#: starts its probes over). Past it, a new key is the plain tuple, hashed by
#: value on each call as `jax.jit` hashes its static arguments: slower per
#: call, never a new trace of a value compiled before. Only a function called
#: with thousands of static configurations, each compiled, reaches it; it is
#: logged once per function on logger `treespec`.
MAX_STATIC_KEYS = _max_static_keys()


def _immutable(value: Any) -> bool:
    """A leaf of an immutable builtin type or an enum member: one whose
    identity may stand for its value (`PROBE_SCALARS`)."""
    return type(value) in PROBE_SCALARS or isinstance(value, enum.Enum)


def _by_value(value: Any) -> bool:
    """A static leaf a key may hold by value (JAX then hashes it on each call):
    an immutable builtin, an enum member or a frozen dataclass, which cannot
    change in place. Any other hashable object is interned, its key compared
    by identity: a next call finds it by its value at that call, so an object
    changed in place gets a new key (JAX would find the old one, JAX #9024)."""
    params = getattr(type(value), "__dataclass_params__", None)
    return getattr(params, "frozen", False) is True or _immutable(value)


def make_key(split: Split, static: Sequence[Any]) -> Key:
    """The key of a call: the split's token, its static leaves, and their types."""
    return (split.token, *static, *map(type, static))


def key_split(key: Key) -> Split:
    """The `Split` a key was made for (its route is `split.plan.route`).

    The key refers to it weakly: a split lives as long as its function's
    plans (until `clear_cache`), and whatever uses a key later keeps its
    split (`StagedCall` of `_transforms/stages.py`).
    """
    split: Split | None = key[0].split()
    if split is None:
        raise RuntimeError(
            "treespec: a call's key outlived its split (the function's cache was "
            "cleared during the call); call it again"
        )
    return split


def key_static(key: Key) -> tuple[Any, ...]:
    """The static leaves of a key, in the split's order."""
    return key[1 : 1 + (len(key) - 1) // 2]


def same_call(a: Key, b: Key) -> bool:
    """Whether two keys stand for the same compiled call, even across
    `clear_cache` (which makes new splits): the same structure, kinds and
    static leaves with their types."""
    split_a, split_b = key_split(a), key_split(b)
    return (
        split_a.plan.route is split_b.plan.route
        and split_a.plan.treedef == split_b.plan.treedef
        and split_a.kinds == split_b.kinds
        and tuple(a[1:]) == tuple(b[1:])
    )


@dataclasses.dataclass(frozen=True)
class RouteContext:
    """What every route of one function shares."""

    spec: Spec
    flags: Flags
    default: str
    validate: bool
    signature: inspect.Signature | None
    in_shardings: Any
    #: Positional parameters whose unannotated floats are traced (`grad`).
    float_args: frozenset[int] = frozenset()
    #: Numbers the splits of this function's routes (see `plan.SplitId`):
    #: never the same number twice, across `clear_cache` too.
    numbers: Callable[[], int] = dataclasses.field(
        default_factory=lambda: itertools.count().__next__
    )


class Route:
    """The part of a route that does not depend on how it flattens."""

    def __init__(self, ctx: RouteContext) -> None:
        self.ctx = ctx
        self._plans: dict[Any, Plan] = {}
        self._lock = threading.RLock()

    # What each route defines.

    def split(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Key, Sequence[Any]]:
        raise NotImplementedError

    def rebuild(
        self, key: Key, dynamic: Sequence[Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        raise NotImplementedError

    def view(self, key: Key, dynamic: Sequence[Any]) -> CallView:
        raise NotImplementedError

    def donate_argnums(self, split: Split, offset: int = 1) -> tuple[int, ...]:
        """Positions of donated dynamic arguments in the call `(key, *dynamic)`."""
        raise NotImplementedError

    def in_shardings(self, split: Split) -> tuple[Any, ...] | None:
        """One `in_shardings` entry per dynamic argument of calls of `split`."""
        raise NotImplementedError

    @staticmethod
    def _leaf_shardings(split: Split) -> list[Any] | None:
        """The `in_shardings` entry of each dynamic leaf of `split`; an entry
        written at a static leaf is a `SpecError` (it would be ignored)."""
        entries = split.plan.shardings
        if entries is None:
            return None
        for i in split.static_idx:
            entry = entries[i]
            if entry.exact and entry.value is not None:
                info = split.plan.infos[i]
                raise SpecError(
                    f"{entry.where} places {info.path}, which is static "
                    f"({info.source}): static leaves are not placed on devices "
                    "(they are Python values in the compiled program). Give None "
                    "there, or mark the leaf Dynamic[...] to trace it."
                )
        return [entries[i].value for i in split.dynamic_idx]

    def diagnose(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Issue]:
        """The leaves that made a call fail: what each should have been."""
        raise NotImplementedError

    # Shared.

    def clear(self) -> None:
        with self._lock:
            self._plans.clear()

    def _plan(
        self,
        args: Any,
        kwargs: Any,
        treedef: Any,
        *,
        skip: frozenset[int] = frozenset(),
    ) -> Plan:
        """The plan of one tree structure, built and checked on its first call."""
        with self._lock:
            plan = self._plans.get(treedef)
            if plan is not None:
                return plan
            ctx = self.ctx
            plan, issues = build_plan(
                ctx.spec,
                ctx.flags,
                ctx.default,
                args,
                kwargs,
                treedef,
                signature=ctx.signature,
                check=ctx.validate,
                skip=skip,
                float_args=ctx.float_args,
                numbers=ctx.numbers,
            )
            if ctx.validate:  # when the call fails, every problem of it
                issues = plan_issues(
                    ctx.spec, ctx.flags, plan, args, kwargs, skip, issues
                )
            if issues:
                raise ValidationError(issues, ctx.spec.name)
            plan.route = self
            if ctx.in_shardings is not None:
                entries = broadcast_call(
                    ctx.in_shardings,
                    ctx.spec,
                    args,
                    kwargs,
                    is_sharding,
                    "in_shardings",
                    skip=skip,
                )
                plan.shardings = entries
            self._plans[treedef] = plan
            return plan


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
        self._interned: dict[Key, StaticKey] = {}
        #: The key of a single flattened argument that is one traced leaf, by
        #: the leaf's type (see `_remember_leaf`).
        self._leaf_keys: dict[type, Key] = {}
        #: The one key of calls whose arguments all go to JAX whole (read by
        #: `Jitted.__call__` first).
        self.whole_key: Key | None = None
        #: `(*keys, *values, *value types)` of a plain dict of scalars -> its key;
        #: read by `Jitted.__call__` before it calls `split`.
        self.probes: dict[Key, StaticKey] = {}
        #: Off once a dict that cannot be probed came (its calls would pay for a
        #: failed probe on top of the flatten), or when nothing reads probes.
        self.probing = probing
        self._may_probe = probing
        #: Whether reaching `MAX_STATIC_KEYS` was logged (once per function).
        self._bound_logged = False

    def clear(self) -> None:
        with self._lock:
            super().clear()
            self._interned.clear()
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
        leaves, treedef = _flatten(mixed)
        plan = self._plans.get(treedef) or self._plan(
            args, kwargs, treedef, skip=self._skip
        )
        split = plan.fixed or plan.split(leaves)
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
        give a stale trace) reuses it, and JAX hashes it by identity."""
        full = make_key(split, static)
        if not all(map(_immutable, static)):
            return full
        key = self._interned.get(full) or self._add_key(full, MixedKey)
        split.last = (tuple(static), key)
        return key

    def _add_key(self, full: Key, kind: type[StaticKey]) -> Key:
        """Intern `full`; past `MAX_STATIC_KEYS`, `full` itself.

        The interned keys are never forgotten while the function lives: a
        key JAX holds compiled must stay the key of its content (a new
        identity would be a new static argument to JAX, so a new trace). A
        new content past the bound gets the plain tuple, which JAX hashes by
        value: one key per content all the same.
        """
        with self._lock:
            if len(self._interned) < MAX_STATIC_KEYS:
                return self._interned.setdefault(full, kind(full))
            if not self._bound_logged:
                self._bound_logged = True
                logger.warning(
                    "treespec: %s reached %d distinct static keys "
                    "(TREESPEC_MAX_STATIC_KEYS): newer ones are hashed by value on "
                    "each call, as jax.jit hashes its static arguments; nothing "
                    "compiled is traced again. Each distinct key is a program JAX "
                    "keeps: mark a leaf that takes ever new values Dynamic[...].",
                    self.ctx.spec.name,
                    MAX_STATIC_KEYS,
                )
            return self._interned.get(full, full)

    def _remember_leaf(self, leaf_type: type, key: Key) -> None:
        """One flattened argument that is a single traced leaf: its key is
        the same for every leaf of its type (the plan of a leaf is the same,
        its kind is decided by its type, and no static leaf is in the key), so
        the next call of that type skips the flatten and the plan."""
        with self._lock:
            if len(self._leaf_keys) < MAX_STATIC_KEYS:
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
        if not all(map(_immutable, leaves)):
            if type(mixed) is dict:
                self.probing = False
            if all(map(_by_value, leaves)):
                # Hashed by value, as jax.jit hashes a static argument: equal
                # configs of functions made afresh are then one entry in
                # JAX's global caches, which keep the first of them.
                return full
        try:
            key = self._interned.get(full) or self._add_key(full, StaticKey)
        except TypeError:
            # An unhashable static leaf: JAX refuses the key and `diagnose`
            # then names the leaf.
            return full
        if type(key) is not StaticKey:
            return key  # past the bound: no probe answers with it
        if type(mixed) is dict and self.probing:
            values = mixed.values()
            if all(type(k) is str for k in mixed) and all(map(_immutable, values)):
                if len(self.probes) >= MAX_STATIC_KEYS:
                    self.probes.clear()  # many key orders of few configs
                probe = (*mixed, *values, *map(type, values))
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
        flattened = (mixed,) if self._single else mixed
        args: list[Any] = [None] * self.npos
        for i, value in zip(self.whole_idx, dynamic[:n]):
            args[i] = value
        for i, value in zip(self.mixed_idx, flattened):
            args[i] = value
        return tuple(args), {}

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
        leaves, treedef = _flatten(self.get_mixed(args))
        plan = self._plans.get(treedef)
        pairs = plan.split(leaves).pairs(leaves) if plan is not None else []
        whole = self._whole(self.get_whole(args))
        return call_issues(self.ctx.spec, pairs, whole, check=self.ctx.validate)


class CallRoute(Route):
    """Any call: `(args, kwargs)` flattened together."""

    def split(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Key, Sequence[Any]]:
        leaves, treedef = _flatten((args, kwargs))
        plan = self._plans.get(treedef) or self._plan(args, kwargs, treedef)
        split = plan.fixed or plan.split(leaves)
        static = split.get_static(leaves)
        return make_key(split, static), split.get_dynamic(leaves)

    def rebuild(
        self, key: Key, dynamic: Sequence[Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        split = key_split(key)
        args, kwargs = jax.tree_util.tree_unflatten(
            split.plan.treedef, split.merge(key_static(key), dynamic)
        )
        return tuple(args), dict(kwargs)

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
        leaves, treedef = _flatten((args, kwargs))
        plan = self._plans.get(treedef)
        if plan is None:
            return []
        pairs = plan.split(leaves).pairs(leaves)
        return call_issues(self.ctx.spec, pairs, check=self.ctx.validate)
