"""From a call's `(args, kwargs)` to a static key and the dynamic arguments, and back.

Every transform uses one `Splitter` per decorated function. The per-call path is
flatten, look up the plan by treedef, pick the static leaves, build the key
(which JAX hashes as the compiled call's static argument).

Arguments that are dynamic as a whole (`Dynamic[...]`/`Donate[...]` with no
marker below, or `static_flags` `False`) are not flattened here at all: they are
handed to JAX as they are, and checked against their annotation while tracing.
When every other argument is wholly static, no plan is looked up per call either
(see `_layout.py`).
"""

from __future__ import annotations

import enum
import inspect
import operator
import threading
from collections.abc import Callable, Sequence
from typing import Any

import jax
from jax.tree_util import keystr

from ._diagnose import aval, static_issue, traced_issue
from ._errors import Issue, ValidationError, describe_value, location
from ._flags import Flags
from ._layout import (
    BY_VALUE,
    NEVER,
    PROBE_SCALARS,
    StaticKey,
    StaticLayout,
    is_sharding,
    whole_kind,
    whole_static,
)
from ._plan import Kind, Plan, Split, _getter
from ._prefix import broadcast_call, top_entry
from ._resolve import build_plan, walk_value
from ._rules import is_array_like
from ._spec import AnyNode, Param, Spec
from ._validate import Pair, check_call, pairs_of, return_pairs

__all__ = ["Key", "Splitter", "key_split", "key_static"]

# The registry's own method: one Python frame less than `tree_flatten` per call.
_flatten = jax.tree_util.default_registry.flatten


#: The static part of one call: `(split, *static_leaves, *their_types)`, or in the
#: static layout `(layout, treedef, *static_leaves, *their_types)`.
#: JAX hashes it as the static argument of the compiled call, so `1`, `1.0` and
#: `True` (equal, same hash) still make three keys.
Key = tuple[Any, ...]

#: Distinct static-layout keys a function keeps interned before starting over
#: (like JAX's own bounded cache: only a function called with thousands of
#: static configurations, each compiled, ever reaches it).
MAX_STATIC_KEYS = 4096


def key_split(key: Key) -> Split:
    return key[0]  # type: ignore[no-any-return]


def key_static(key: Key) -> tuple[Any, ...]:
    split: Split = key[0]
    return key[1 : 1 + len(split.static_idx)]


class Splitter:
    """Splits calls of one function into (static key, dynamic arguments)."""

    def __init__(
        self,
        spec: Spec,
        flags: Flags,
        default: str,
        *,
        validate: bool,
        signature: inspect.Signature | None,
        in_shardings: Any = None,
        allow_whole: bool = True,
    ) -> None:
        self.spec = spec
        self.flags = flags
        self.default = default
        self.validate = validate
        self.signature = signature
        self.in_shardings = in_shardings
        positional = spec.positional
        self.npos = len(positional)
        kinds = [
            whole_kind(p, flags.by_name.get(p.name)) if allow_whole else None
            for p in positional
        ]
        self.whole_idx = tuple(i for i, k in enumerate(kinds) if k is not None)
        self.whole_kinds = tuple(k for k in kinds if k is not None)
        self.mixed_idx = tuple(i for i, k in enumerate(kinds) if k is None)
        # When every other argument is wholly static, the call needs no plan.
        self.layout = StaticLayout()
        verdicts = [
            whole_static(positional[i], flags.by_name.get(positional[i].name), default)
            for i in self.mixed_idx
        ]
        self.static_layout = allow_whole and bool(verdicts) and NEVER not in verdicts
        #: With an `Any` below a static argument, whether the call has only
        #: static leaves depends on the value (a pytree class there may bring
        #: markers of its own): decided once per tree structure; when not, the
        #: call takes the planned path.
        self._fits: dict[Any, bool] | None = (
            {} if self.static_layout and BY_VALUE in verdicts else None
        )
        self._static_plans: dict[Any, Plan] = {}
        self._static_keys: dict[Key, StaticKey] = {}
        #: `(*keys, *values, *value types)` of a plain dict of scalars -> its key;
        #: read by `Jitted.__call__` before it falls back to `static_key`.
        self.static_probes: dict[Key, StaticKey] = {}
        #: Off once a dict that cannot be probed came: its calls would pay for
        #: a failed probe on top of the flatten.
        self.probing = True
        self.fast = bool(self.whole_idx)
        self.get_whole = _getter(self.whole_idx)
        # One partly static argument (the common case) is flattened on its own,
        # not inside a 1-tuple: a tree level less on every call.
        self.single_mixed = len(self.mixed_idx) == 1
        if self.single_mixed:
            self.get_mixed: Callable[[Sequence[Any]], Any] = operator.itemgetter(
                self.mixed_idx[0]
            )
        else:
            self.get_mixed = _getter(self.mixed_idx)
        self._lock = threading.RLock()
        # Plans by treedef, one dict per layout: their treedefs can coincide.
        self._plans: dict[Any, Plan] = {}
        self._kw_plans: dict[Any, Plan] = {}
        self._fast_plans: dict[Any, Plan] = {}

    def clear(self) -> None:
        with self._lock:
            self._plans.clear()
            self._kw_plans.clear()
            self._fast_plans.clear()
            self._static_plans.clear()
            self._static_keys.clear()
            self.static_probes.clear()
            if self._fits is not None:
                self._fits.clear()
            self.probing = True
            self.layout.caller = None

    def _static_fits(self, treedef: Any, args: tuple[Any, ...]) -> bool:
        """Whether every leaf of this structure is static (in the static layout)."""
        if self._fits is None:
            return True
        fits = self._fits.get(treedef)
        if fits is None:
            plan, _ = self._build_static_plan(args, treedef, check=False)
            fits = all(info.kind is Kind.STATIC for info in plan.infos)
            self._fits[treedef] = fits
        return fits

    def _build_static_plan(
        self, args: tuple[Any, ...], treedef: Any, *, check: bool
    ) -> tuple[Plan, list[Issue]]:
        """The plan of the static arguments of `args` (static layout)."""
        return build_plan(
            self.spec,
            self.flags,
            self.default,
            args,
            {},
            treedef,
            check=check,
            skip=frozenset(self.whole_idx),
        )

    def static_key(self, args: tuple[Any, ...], mixed: Any) -> Key | None:
        """The interned key of `mixed`, the static arguments of `args` (static layout).

        The key is a `StaticKey` made once per distinct content. For a plain dict
        whose keys are strings and whose values are `PROBE_SCALARS` or enum
        members (singletons: equal means identical), it also registers the
        dict's probe `(*keys, *values, *value types)`, which `Jitted.__call__`
        looks up instead of flattening the dict; any other dict turns probing
        off for this function. Equal probes make equal keys: a probe holds
        every key in order and every value with its exact type (so `1`, `1.0`
        and `True` stay apart); the same dict in another key order only costs
        one more miss here.

        `None` when the value holds a pytree class where the annotation says
        `Any` (its fields may carry markers): that call takes the planned path.
        """
        leaves, treedef = _flatten(mixed)
        if not self._static_fits(treedef, args):
            return None
        full = (self.layout, treedef, *leaves, *map(type, leaves))
        try:
            key = self._static_keys.get(full)
        except TypeError:
            # An unhashable static leaf: JAX refuses the key and `diagnose` then
            # names the leaf.
            return full
        if key is None:
            if len(self._static_keys) >= MAX_STATIC_KEYS:
                self.static_probes.clear()
                self._static_keys.clear()
            key = self._static_keys.setdefault(full, StaticKey(full))
        if type(mixed) is dict and self.probing:
            values = mixed.values()
            if all(type(k) is str for k in mixed) and all(
                type(v) in PROBE_SCALARS or isinstance(v, enum.Enum) for v in values
            ):
                if len(self.static_probes) >= MAX_STATIC_KEYS:
                    self.static_probes.clear()  # many key orders of few configs
                probe = (*mixed, *values, *map(type, values))
                self.static_probes[probe] = key
            else:
                self.probing = False
        return key

    def split_call(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Key, Sequence[Any]]:
        """The static key and the dynamic arguments of one call."""
        if self.static_layout and not kwargs and len(args) == self.npos:
            key = self.static_key(args, self.get_mixed(args))
            if key is not None:
                return key, self.get_whole(args)
        return self.split_planned(args, kwargs)

    def split_planned(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Key, Sequence[Any]]:
        """`split_call` by a plan per tree structure (all but the static layout)."""
        if kwargs:
            leaves, treedef = _flatten((args, kwargs))
            plan = self._kw_plans.get(treedef) or self._plan(
                args, kwargs, treedef, "kwargs"
            )
            split = plan.fixed or plan.split(leaves)
            static = split.get_static(leaves)
            return (split, *static, *map(type, static)), split.get_dynamic(leaves)
        if self.fast and len(args) == self.npos:
            leaves, treedef = _flatten(self.get_mixed(args))
            plan = self._fast_plans.get(treedef) or self._plan(
                args, {}, treedef, "fast"
            )
            split = plan.fixed or plan.split(leaves)
            static = split.get_static(leaves)
            return (
                (split, *static, *map(type, static)),
                (*self.get_whole(args), *split.get_dynamic(leaves)),
            )
        leaves, treedef = _flatten(args)
        plan = self._plans.get(treedef) or self._plan(args, {}, treedef, "args")
        split = plan.fixed or plan.split(leaves)
        static = split.get_static(leaves)
        return (split, *static, *map(type, static)), split.get_dynamic(leaves)

    def _plan(self, args: Any, kwargs: Any, treedef: Any, layout: str) -> Plan:
        plans = {"kwargs": self._kw_plans, "fast": self._fast_plans}.get(
            layout, self._plans
        )
        with self._lock:
            plan = plans.get(treedef)
            if plan is not None:
                return plan
            plan, issues = build_plan(
                self.spec,
                self.flags,
                self.default,
                args,
                kwargs,
                treedef,
                signature=self.signature,
                check=self.validate,
                skip=frozenset(self.whole_idx) if layout == "fast" else frozenset(),
            )
            if issues:
                raise ValidationError(issues, self.spec.name)
            plan.layout = layout
            if self.in_shardings is not None:
                plan.shardings = self._shardings(args, kwargs, layout)
            plans[treedef] = plan
            return plan

    def _shardings(self, args: Any, kwargs: Any, layout: str) -> list[Any]:
        """`in_shardings` entries: one per whole argument, then one per leaf."""

        is_entry = is_sharding
        names = [p.name for p in self.spec.positional]
        whole_idx = self.whole_idx if layout == "fast" else ()
        whole = [
            top_entry(self.in_shardings, names[i], i, is_entry, "in_shardings")[0]
            for i in whole_idx
        ]
        leaves = broadcast_call(
            self.in_shardings,
            self.spec,
            args,
            kwargs,
            is_entry,
            "in_shardings",
            skip=frozenset(whole_idx),
        )
        return [*whole, *(entry.value for entry in leaves)]

    def donate_argnums(
        self, split: Split | StaticLayout, offset: int = 1
    ) -> tuple[int, ...]:
        """Positions of donated dynamic arguments in the call `(key, *dynamic)`."""
        whole = [offset + j for j, k in enumerate(self.whole_kinds) if k is Kind.DONATE]
        if isinstance(split, StaticLayout):
            return tuple(whole)
        n_whole = len(self.whole_idx) if split.plan.layout == "fast" else 0
        return (
            *(whole if n_whole else ()),
            *(offset + n_whole + d for d in split.donate),
        )

    def in_shardings_for(self, split: Split | StaticLayout) -> tuple[Any, ...] | None:
        if self.in_shardings is None:
            return None
        if isinstance(split, StaticLayout):
            names = [p.name for p in self.spec.positional]
            return tuple(
                top_entry(self.in_shardings, names[i], i, is_sharding, "in_shardings")[
                    0
                ]
                for i in self.whole_idx
            )
        shardings = split.plan.shardings
        if shardings is None:
            return None
        n_whole = len(self.whole_idx) if split.plan.layout == "fast" else 0
        return (
            *shardings[:n_whole],
            *(shardings[n_whole + i] for i in split.dynamic_idx),
        )

    def rebuild(
        self, key: Key, dynamic: Sequence[Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The call's `(args, kwargs)` from its key and (traced) dynamic arguments."""
        if key[0] is self.layout:
            treedef = key[1]
            values = jax.tree_util.tree_unflatten(
                treedef, key[2 : 2 + treedef.num_leaves]
            )
            return self._assemble(dynamic, (values,) if self.single_mixed else values)
        split = key_split(key)
        plan = split.plan
        static = key_static(key)
        if plan.layout == "fast":
            n = len(self.whole_idx)
            mixed = jax.tree_util.tree_unflatten(
                plan.treedef, split.merge(static, dynamic[n:])
            )
            return self._assemble(dynamic[:n], (mixed,) if self.single_mixed else mixed)
        tree = jax.tree_util.tree_unflatten(plan.treedef, split.merge(static, dynamic))
        if plan.layout == "kwargs":
            return tree[0], tree[1]
        return tree, {}

    def _assemble(
        self, whole: Sequence[Any], mixed: Sequence[Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Positional arguments back in order from the whole and the other ones."""
        args: list[Any] = [None] * self.npos
        for i, value in zip(self.whole_idx, whole):
            args[i] = value
        for i, value in zip(self.mixed_idx, mixed):
            args[i] = value
        return tuple(args), {}

    def _static_plan(self, key: Key, args: tuple[Any, ...]) -> Plan:
        """The plan of the wholly static arguments (static layout), while tracing."""
        treedef = key[1]
        plan = self._static_plans.get(treedef)
        if plan is not None:
            return plan
        with self._lock:
            plan, issues = self._build_static_plan(args, treedef, check=self.validate)
            leaves = key[2 : 2 + treedef.num_leaves]
            issues += [
                Issue(
                    location(info.argument, info.path),
                    f"a leaf of the annotation, which is static ({info.source})",
                    describe_value(leaf),
                    "the value's structure does not match its annotation",
                )
                for info, leaf in zip(plan.infos, leaves)
                if info.resolve(leaf) is not Kind.STATIC
            ]
            if issues:
                raise ValidationError(issues, self.spec.name)
            self._static_plans[treedef] = plan
            return plan

    def _static_pairs(self, key: Key, dynamic: Sequence[Any]) -> list[Pair]:
        args, _ = self.rebuild(key, dynamic)
        plan = self._static_plan(key, args)
        leaves = key[2 : 2 + key[1].num_leaves]
        return [(info, Kind.STATIC, leaf) for info, leaf in zip(plan.infos, leaves)]

    def whole_values(self, key: Key, dynamic: Sequence[Any]) -> list[tuple[Param, Any]]:
        if key[0] is not self.layout and key_split(key).plan.layout != "fast":
            return []
        positional = self.spec.positional
        return [(positional[i], v) for i, v in zip(self.whole_idx, dynamic)]

    def validate_call(self, key: Key, dynamic: Sequence[Any]) -> list[Pair]:
        """Validate one call; its leaves and kinds, for checking the return.

        The transforms run this while tracing, so once per compile-cache miss;
        `checked` on every call. It checks the structure of whole-dynamic
        arguments, every static leaf against its type (beartype), every traced
        leaf's shape and dtype (jaxtyping), dimension names bound across all.
        """
        if not self.validate:
            return []
        issues: list[Issue] = []
        pairs: list[Pair] = []
        for param, value in self.whole_values(key, dynamic):
            infos, found, _ = walk_value(
                value,
                param.node,
                path=param.name,
                argument=param.name,
                default="dynamic",
                check=True,
            )
            issues.extend(found)
            pairs.extend(pairs_of(infos, jax.tree_util.tree_leaves(value)))
        if key[0] is self.layout:
            pairs.extend(self._static_pairs(key, dynamic))
        else:
            split = key_split(key)
            n = len(self.whole_idx) if split.plan.layout == "fast" else 0
            leaves = split.merge(key_static(key), dynamic[n:])
            pairs.extend(zip(split.plan.infos, split.kinds, leaves))
        order = {p.name: i for i, p in enumerate(self.spec.params)}
        pairs.sort(
            key=lambda pair: order.get(pair[0].argument.split("[")[0], len(order))
        )
        issues.extend(check_call(pairs))
        if issues:
            raise ValidationError(issues, self.spec.name)
        return pairs

    def validate_return(self, result: Any, arguments: Sequence[Pair]) -> None:
        """Check the return value against the return annotation.

        `arguments` (what `validate_call` returned) are checked again first, so
        that dimension names they bound apply to the return value too.
        """
        returns = self.spec.returns
        if not self.validate or isinstance(returns, AnyNode):
            return
        returned, issues = return_pairs(result, returns)
        issues += check_call(arguments, returned)
        if issues:
            raise ValidationError(issues, self.spec.name)

    def describe(self, key: Key, dynamic: Sequence[Any]) -> dict[str, str]:
        """`{leaf path: value or shape}` of one trace, to explain retraces."""
        described: dict[str, str] = {}
        for param, value in self.whole_values(key, dynamic):
            for path, leaf in jax.tree_util.tree_flatten_with_path(value)[0]:
                described[param.name + keystr(path)] = aval(leaf)
        if key[0] is self.layout:
            for info, _, v in self._static_pairs(key, dynamic):
                described[info.path] = f"{v!r} ({type(v).__name__})"
            return described
        split = key_split(key)
        n = len(self.whole_idx) if split.plan.layout == "fast" else 0
        for i, v in zip(split.static_idx, key_static(key)):
            described[split.plan.infos[i].path] = f"{v!r} ({type(v).__name__})"
        for i, v in zip(split.dynamic_idx, dynamic[n:]):
            described[split.plan.infos[i].path] = aval(v)
        return described

    def diagnose(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> ValidationError | None:
        """Find the leaves that made a call fail; `None` if they all look fine."""
        issues: list[Issue] = []
        plan: Plan | None = None
        by_layout = self.fast or self.static_layout
        if not kwargs and by_layout and len(args) == self.npos:
            positional = self.spec.positional
            for i in self.whole_idx:
                param = positional[i]
                for path, leaf in jax.tree_util.tree_flatten_with_path(args[i])[0]:
                    where = param.name + keystr(path)
                    if not is_array_like(leaf):
                        issues.append(
                            traced_issue(
                                param.name,
                                where,
                                leaf,
                                "marker or flag on the whole argument",
                            )
                        )
            leaves, treedef = _flatten(self.get_mixed(args))
            if self.static_layout and self._static_fits(treedef, args):
                static_plan, _ = self._build_static_plan(args, treedef, check=False)
                for info, leaf in zip(static_plan.infos, leaves):
                    issue = static_issue(info, leaf)
                    if issue is not None:
                        issues.append(issue)
            elif self.fast:
                plan = self._fast_plans.get(treedef)
            else:
                leaves, treedef = _flatten(args)
                plan = self._plans.get(treedef)
        else:
            tree = (args, kwargs) if kwargs else args
            leaves, treedef = _flatten(tree)
            plan = (self._kw_plans if kwargs else self._plans).get(treedef)
        if plan is not None:
            found = self._diagnose_split(plan.fixed or plan.split(leaves), leaves)
            if found is not None:
                issues.extend(found.issues)
        return ValidationError(issues, self.spec.name) if issues else None

    def _diagnose_split(
        self, split: Split, leaves: Sequence[Any]
    ) -> ValidationError | None:
        issues = []
        for i in split.static_idx:
            issue = static_issue(split.plan.infos[i], leaves[i])
            if issue is not None:
                issues.append(issue)
        for i in split.dynamic_idx:
            info = split.plan.infos[i]
            if not is_array_like(leaves[i]):
                issues.append(
                    traced_issue(info.argument, info.path, leaves[i], info.source)
                )
        return ValidationError(issues, self.spec.name) if issues else None
