"""Routes: the ways a call is split into a static key and dynamic arguments.

A route owns, for the calls it takes:

- its split: `(args, kwargs)` to `(key, dynamic)`;
- its key, always `(split, *their_types, *static_leaves)` (`make_key`, read back
  by `key_split`/`key_static`), where `split` (a `Split`, one per tree
  structure and kinds) knows its route: `key_split(key).plan.route`;
- its rebuild: `(key, dynamic)` back to `(args, kwargs)`;
- the view that validation, retrace descriptions, diagnosis, donation and
  shardings read (`CallView`, `donate_argnums`, `in_shardings`, `diagnose`).

Two routes cover every call, a module each:

- `PositionalRoute` (`positional.py`): exactly the positional parameters, no
  keywords; arguments dynamic as a whole go to JAX unflattened, the rest is
  flattened, and all-static keys are interned;
- `CallRoute` (`call_route.py`): any other call (keywords, extra `*args`):
  `(args, kwargs)` flattened together.

This module holds what they share: the key (made here, read back only here),
the bound on interned keys, the context of one function, and the plan of a
tree structure. No code outside the routes asks which route a key belongs to.

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
import threading
from collections.abc import Callable, Sequence
from typing import Any

import jax

from ..._model.errors import Issue, SpecError, ValidationError
from ..._model.spec import Spec
from ..checking.call_checks import plan_issues
from ..checking.diagnose import comparison_issue
from ..planning.build import build_plan
from ..planning.graph import graph_of
from ..planning.graph_session import Session
from ..planning.nnx_objects import opaque_nodes
from ..planning.plan import CallView, Plan, Split
from ..planning.prefix import broadcast_call
from ..planning.values import is_hashable
from ..reading.flags import Flags
from .layout import PROBE_SCALARS, StaticKey, is_sharding, max_static_keys

__all__ = [
    "MAX_STATIC_KEYS",
    "CallView",
    "Key",
    "Route",
    "RouteContext",
    "StaleKey",
    "by_value",
    "flatten",
    "immutable",
    "key_split",
    "key_static",
    "make_key",
    "same_call",
]

#: The registry's own method: one Python frame less than `tree_flatten` per call.
flatten = jax.tree_util.default_registry.flatten

logger = logging.getLogger("treespec")

#: The static part of one call: `(split.token, *their_types, *static_leaves)`.
#: JAX hashes it as the static argument of the compiled call, so `1`, `1.0`
#: and `True` (equal, same hash) still make three keys; keys whose hashes
#: collide are compared types first, as JAX compares static arguments, so a
#: user's `__eq__` never sees an object of another class.
Key = tuple[Any, ...]

#: Distinct interned keys a route keeps (and probes it registers before it
#: starts its probes over). Past it, a new key is the plain tuple, hashed by
#: value on each call as `jax.jit` hashes its static arguments: slower per
#: call, never a new trace of a value compiled before. Only a function called
#: with thousands of static configurations, each compiled, reaches it; it is
#: logged once per function on logger `treespec`. Read as `routes.MAX_STATIC_KEYS`
#: where it is used, so that one assignment here changes it everywhere.
MAX_STATIC_KEYS = max_static_keys()


def immutable(value: Any) -> bool:
    """A leaf of an immutable builtin type or an enum member: one whose
    identity may stand for its value (`PROBE_SCALARS`)."""
    return type(value) in PROBE_SCALARS or isinstance(value, enum.Enum)


def by_value(value: Any) -> bool:
    """A static leaf a key may hold by value (JAX then hashes it on each call):
    an immutable builtin, an enum member or a frozen dataclass, which cannot
    change in place. Any other hashable object is interned, its key compared
    by identity: a next call finds it by its value at that call, so an object
    changed in place gets a new key (JAX would find the old one, JAX #9024)."""
    params = getattr(type(value), "__dataclass_params__", None)
    return getattr(params, "frozen", False) is True or immutable(value)


def make_key(split: Split, static: Sequence[Any]) -> Key:
    """The key of a call: the split's token, its static leaves' types, and the
    leaves (compared after their types)."""
    return (split.token, *map(type, static), *static)


class StaleKey(RuntimeError):
    """A call's key whose split was freed while the call ran: another thread
    cleared the function's cache. The call is made again (as a call of
    `jax.jit` that loses the race with `clear_cache` traces again)."""


def key_split(key: Key) -> Split:
    """The `Split` a key was made for (its route is `split.plan.route`).

    The key refers to it weakly: a split lives as long as its function's
    plans (until `clear_cache`), and whatever uses a key later keeps its
    split (`StagedCall` of `_transforms/stages.py`). `StaleKey` when it was
    freed.
    """
    split: Split | None = key[0].split()
    if split is None:
        raise StaleKey(
            "treespec: a call's key outlived its split (the function's cache was "
            "cleared during the call); call it again"
        )
    return split


def key_static(key: Key) -> tuple[Any, ...]:
    """The static leaves of a key, in the split's order."""
    return key[1 + (len(key) - 1) // 2 :]


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
    #: Whether the transform maps its arguments (`vmap`, `pmap`): a leaf is a
    #: batch of what its annotation describes, checked slice by slice while
    #: tracing, never whole.
    mapped: bool = False
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
        #: Keys by content -> the interned key JAX sees (see `find_key`).
        self._interned: dict[Key, StaticKey] = {}
        #: Whether reaching `MAX_STATIC_KEYS` was logged (once per function).
        self._bound_logged = False

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

    def root_of(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """What this route flattens of a call (its plans' structure is its)."""
        raise NotImplementedError

    def path_name(self, path: tuple[Any, ...]) -> str:
        """A path below `root_of`'s value, in the user's words (`model.lin`)."""
        raise NotImplementedError

    def whole_session(self, args: tuple[Any, ...]) -> Session | None:
        """While tracing: a `Session` over the NNX objects of the arguments
        handed to JAX whole, if any (what it changed cannot be written back,
        see `Session.refuse_changes`)."""
        return None

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

    def arg_names(self, split: Split) -> tuple[str, ...]:
        """What each dynamic argument of calls of `split` is, in the user's
        words: a leaf's key path (`cfg['scale']`), for JAX's messages."""
        infos = split.plan.infos
        return tuple(infos[i].path for i in split.dynamic_idx)

    # Shared.

    def clear(self) -> None:
        with self._lock:
            self._plans.clear()
            self._interned.clear()

    @property
    def checks_leaves(self) -> bool:
        """Whether a failed call's leaves are checked against their
        annotations (validation on, and the arguments not batches)."""
        return self.ctx.validate and not self.ctx.mapped

    def find_key(self, full: Key, kind: type[StaticKey], split: Split) -> Key:
        """`full` interned, its static leaves compared here by their value at
        this call (so an object changed in place gets a new key, and JAX
        compares keys by identity only). An unhashable leaf: `full` itself,
        which JAX refuses and `diagnose` names; a leaf whose `==` raises when
        compared with an earlier call's: a `ValidationError` naming it."""
        try:  # one hash of the leaves per call: the lookup's
            return self._interned.get(full) or self.add_key(full, kind)
        except Exception as error:
            if isinstance(error, TypeError) and not is_hashable(full):
                return full
            raise self._comparison_error(full, split, error) from None

    def _comparison_error(
        self, full: Key, split: Split, error: Exception
    ) -> ValidationError:
        """Which static leaf of `full` raised when compared with the same leaf
        of an earlier key (the first that does), as a `ValidationError`."""
        n = (len(full) - 1) // 2
        static = key_static(full)
        with self._lock:
            earlier = [k for k in self._interned if k[: 1 + n] == full[: 1 + n]]
        issues = []
        for i, value in enumerate(static):
            for key in earlier:
                other = key_static(key)[i]
                try:
                    bool(other == value)
                except Exception as raised:
                    info = split.plan.infos[split.static_idx[i]]
                    issues.append(comparison_issue(info, value, other, raised))
                    break
            if issues:
                break
        if not issues:  # not found again: name every leaf that compares itself
            issues = [
                comparison_issue(split.plan.infos[split.static_idx[i]], v, v, error)
                for i, v in enumerate(static)
                if not immutable(v)
            ]
        return ValidationError(issues, self.ctx.spec.name)

    def add_key(self, full: Key, kind: type[StaticKey]) -> Key:
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
                    ctx.spec,
                    ctx.flags,
                    plan,
                    args,
                    kwargs,
                    skip,
                    issues,
                    check=not ctx.mapped,
                )
            if issues:
                raise ValidationError(issues, ctx.spec.name)
            plan.route = self
            root = self.root_of(args, kwargs)
            opaque = opaque_nodes(plan.infos, jax.tree_util.tree_leaves(root))
            if opaque:
                raise ValidationError(opaque, ctx.spec.name)
            plan.graph = graph_of(root, treedef, self.path_name)
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
