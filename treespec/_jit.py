"""`treespec.jit`: `jax.jit` with a per-leaf static/dynamic/donate split."""

from __future__ import annotations

import functools
import inspect
import logging
import os
import re
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar, overload

import jax
from typing_extensions import ParamSpec

from ._api import _spec_for, caller_namespace
from ._errors import Issue, SpecError, ValidationError, describe_value
from ._flags import Flags, normalize_flags
from ._partition import combine
from ._plan import Plan, Split, _check_default, build_plan
from ._rules import is_array, is_array_like
from ._spec import Spec

__all__ = ["Jitted", "jit"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

logger = logging.getLogger("treespec")

_FORBIDDEN = {
    "static_argnums": "mark the leaves Static[...] or pass static_flags=",
    "static_argnames": "mark the leaves Static[...] or pass static_flags=",
    "donate_argnums": "annotate the leaves Donate[...]",
    "donate_argnames": "annotate the leaves Donate[...]",
}


class _WithStatic:
    """An output with non-array leaves: the arrays are children, the rest aux data."""

    __slots__ = ("dynamic", "static")

    def __init__(self, dynamic: Any, static: Any) -> None:
        self.dynamic = dynamic
        self.static = static


jax.tree_util.register_pytree_node(
    _WithStatic,
    lambda w: ((w.dynamic,), w.static),
    lambda static, children: _WithStatic(children[0], static),
)


def split_output(out: Any) -> Any:
    """Arrays stay in the traced output; everything else rides in aux data."""
    leaves, treedef = jax.tree_util.tree_flatten(out)
    mask = [is_array(leaf) for leaf in leaves]
    if all(mask):
        return out
    dynamic = [leaf if m else None for leaf, m in zip(leaves, mask)]
    static = [None if m else leaf for leaf, m in zip(leaves, mask)]
    return _WithStatic(
        jax.tree_util.tree_unflatten(treedef, dynamic),
        jax.tree_util.tree_unflatten(treedef, static),
    )


def join_output(out: Any) -> Any:
    """Undo `split_output` on the result of a compiled call."""
    if type(out) is _WithStatic:
        return combine(out.dynamic, out.static)
    return out


class _Key:
    """The static part of one call, interned: JAX hashes and compares it by identity."""

    __slots__ = ("index", "split", "static")

    def __init__(self, split: Split, static: tuple[Any, ...], index: int) -> None:
        self.split = split
        self.static = static
        self.index = index

    def __repr__(self) -> str:
        return f"<treespec static key #{self.index}>"


def _leaf_issue(split: Split, i: int, leaf: Any, static: bool) -> Issue | None:
    info = split.plan.infos[i]
    loc = f"argument {info.argument}, at {info.path}"
    if static:
        if isinstance(leaf, jax.core.Tracer):
            return Issue(
                loc,
                f"a static (hashable) value ({info.source})",
                describe_value(leaf),
                "a traced value reached a static leaf (this call is inside "
                "jax.jit/vmap/grad of your code): mark it Dynamic[...] or pass "
                "static_flags=False for it.",
            )
        try:
            hash(leaf)
        except TypeError:
            hint = "mark it Dynamic[...] (or static_flags=False) to trace it"
            if not is_array(leaf):
                hint = "static leaves must be hashable: use a tuple or frozenset"
            return Issue(
                loc,
                f"a hashable value, since it is static ({info.source})",
                describe_value(leaf),
                hint,
            )
        return None
    if not is_array_like(leaf):
        return Issue(
            loc,
            f"an array or Python scalar, since it is traced ({info.source})",
            describe_value(leaf),
            "mark it Static[...] (or static_flags=True) to hold it static",
        )
    return None


def diagnose(split: Split, leaves: Sequence[Any], name: str) -> ValidationError | None:
    """Find the leaves that made a call fail; `None` if they all look fine."""
    issues = []
    for i in split.static_idx:
        issue = _leaf_issue(split, i, leaves[i], True)
        if issue is not None:
            issues.append(issue)
    for i in split.dynamic_idx:
        issue = _leaf_issue(split, i, leaves[i], False)
        if issue is not None:
            issues.append(issue)
    return ValidationError(issues, name) if issues else None


def _leaf_signature(split: Split, key: _Key, dynamic: Sequence[Any]) -> dict[str, str]:
    described: dict[str, str] = {}
    for i, v in zip(split.static_idx, key.static):
        described[split.plan.infos[i].path] = f"{v!r} ({type(v).__name__})"
    for i, v in zip(split.dynamic_idx, dynamic):
        dims = ",".join(str(d) for d in getattr(v, "shape", ()))
        described[split.plan.infos[i].path] = f"{getattr(v, 'dtype', '?')}[{dims}]"
    return described


_TOKEN = re.compile(r"\[[^\]]*\]|\.\w+|^[^\[.]+")


def _common_prefix(paths: list[str]) -> str:
    """The deepest key path that every one of `paths` starts with."""
    split = [_TOKEN.findall(p) for p in paths]
    common: list[str] = []
    for tokens in zip(*split):
        if any(t != tokens[0] for t in tokens):
            break
        common.append(tokens[0])
    return "".join(common) or "the top level"


def describe_retrace(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """What changed between two traces, one phrase per changed leaf."""
    changes = []
    if old.keys() != new.keys():
        moved = sorted(set(old) ^ set(new))
        changes.append(f"structure changed at {_common_prefix(moved)}")
    for path in new:
        if path in old and old[path] != new[path]:
            changes.append(f"{path}: {old[path]} -> {new[path]}")
    return changes or ["no leaf changed (a new jax.jit cache entry was needed)"]


class Jitted(Generic[_P, _R]):
    """A function compiled by `treespec.jit`. Call it like the original."""

    __treespec_spec__: Spec

    def __init__(
        self,
        fun: Callable[_P, _R],
        *,
        static_flags: Any,
        default: str,
        validate: bool,
        explain_recompiles: bool,
        jax_kwargs: Mapping[str, Any],
        localns: Mapping[str, Any],
    ) -> None:
        for name, fix in _FORBIDDEN.items():
            if name in jax_kwargs:
                raise SpecError(
                    f"treespec.jit does not take {name}: {fix}. treespec decides "
                    "per leaf, not per argument."
                )
        _check_default(default)
        functools.update_wrapper(self, fun)
        self._fun = fun
        self.__treespec_spec__ = _spec_for(fun, localns)
        self._flags: Flags = normalize_flags(static_flags, self.__treespec_spec__)
        self._default = default
        self._validate = validate and os.environ.get("TREESPEC_VALIDATE", "1") != "0"
        env = os.environ.get("TREESPEC_EXPLAIN_RECOMPILES", "0") not in ("", "0")
        self._explain = explain_recompiles or env
        kwargs = dict(jax_kwargs)
        self._in_shardings = kwargs.pop("in_shardings", None)
        # A single sharding also covers the aux-only node of non-array outputs;
        # a tree of shardings must match the output exactly (checked at trace).
        out_shardings = kwargs.get("out_shardings")
        self._tree_out_shardings = out_shardings is not None and not isinstance(
            out_shardings, jax.sharding.Sharding
        )
        self._jax_kwargs = kwargs
        try:
            self._signature: inspect.Signature | None = inspect.signature(fun)
        except (TypeError, ValueError):
            self._signature = None
        self._lock = threading.RLock()
        # Plans by treedef: of `args` alone for calls without keywords, of
        # `(args, kwargs)` otherwise (two dicts: those treedefs can coincide).
        self._plans: dict[Any, Plan] = {}
        self._kw_plans: dict[Any, Plan] = {}
        self._keys: dict[tuple[Any, ...], _Key] = {}
        self._compiled: dict[tuple[Any, ...], Callable[..., Any]] = {}
        self._last_trace: dict[str, str] | None = None
        self.trace_count = 0

    @property
    def spec(self) -> Spec:
        """The `Spec` derived from the wrapped function's annotations."""
        return self.__treespec_spec__

    def clear_cache(self) -> None:
        """Drop every plan, key and compiled executable of this function."""
        with self._lock:
            for compiled in self._compiled.values():
                clear = getattr(compiled, "clear_cache", None)
                if clear is not None:
                    clear()
            self._plans.clear()
            self._kw_plans.clear()
            self._keys.clear()
            self._compiled.clear()
            self._last_trace = None

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return types.MethodType(self, instance)

    # ----------------------------------------------------------------- slow path
    def _plan(self, args: Any, kwargs: Any, treedef: Any) -> Plan:
        plans = self._kw_plans if kwargs else self._plans
        with self._lock:
            plan = plans.get(treedef)
            if plan is not None:
                return plan
            plan, issues = build_plan(
                self.__treespec_spec__,
                self._flags,
                self._default,
                args,
                kwargs,
                treedef,
                signature=self._signature,
                check=self._validate,
            )
            if issues:
                raise ValidationError(issues, self.__treespec_spec__.name)
            plan.shardings = self._leaf_shardings(args, kwargs)
            plan.with_kwargs = bool(kwargs)
            plans[treedef] = plan
            return plan

    def _leaf_shardings(self, args: Any, kwargs: Any) -> list[Any] | None:
        entries = self._in_shardings
        if entries is None:
            return None
        spec = self.__treespec_spec__
        per_arg: list[Any] = []
        for i, _ in enumerate(args):
            if isinstance(entries, (list, tuple)):
                per_arg.append(entries[i] if i < len(entries) else None)
            elif isinstance(entries, Mapping):
                name = spec.positional[i].name if i < len(spec.positional) else ""
                per_arg.append(entries.get(name))
            else:
                per_arg.append(entries)
        per_kw = {}
        for name in kwargs:
            if isinstance(entries, Mapping):
                per_kw[name] = entries.get(name)
            elif isinstance(entries, (list, tuple)):
                names = [p.name for p in spec.positional]
                pos = names.index(name) if name in names else len(entries)
                per_kw[name] = entries[pos] if pos < len(entries) else None
            else:
                per_kw[name] = entries
        try:
            nested = jax.tree_util.tree_map(
                lambda entry, sub: [entry] * len(jax.tree_util.tree_leaves(sub)),
                (tuple(per_arg), per_kw),
                (tuple(args), dict(kwargs)),
                is_leaf=lambda x: x is None or isinstance(x, jax.sharding.Sharding),
            )
        except ValueError as exc:
            raise SpecError(
                f"in_shardings is not a prefix of the arguments of "
                f"{self.__treespec_spec__.name}: {exc}"
            ) from None
        return [
            s
            for group in jax.tree_util.tree_leaves(
                nested, is_leaf=lambda x: isinstance(x, list)
            )
            for s in group
        ]

    def _caller(self, split: Split) -> Callable[..., Any]:
        with self._lock:
            if split.caller is not None:
                return split.caller  # type: ignore[no-any-return]
            shardings = split.plan.shardings
            in_sh = None
            if shardings is not None:
                in_sh = tuple(shardings[i] for i in split.dynamic_idx)
            config = (split.donate, in_sh)
            compiled = self._compiled.get(config)
            if compiled is None:
                kwargs = dict(self._jax_kwargs)
                if in_sh is not None:
                    kwargs["in_shardings"] = in_sh
                compiled = jax.jit(
                    self._traced,
                    static_argnums=0,
                    donate_argnums=tuple(1 + d for d in split.donate),
                    **kwargs,
                )
                self._compiled[config] = compiled
            split.caller = compiled
            return compiled

    def _key(
        self, split: Split, static: tuple[Any, ...], leaves: Sequence[Any]
    ) -> _Key:
        try:
            lookup = (split, *static, *map(type, static))
            hash(lookup)
        except TypeError:
            error = diagnose(split, leaves, self.__treespec_spec__.name)
            if error is not None:
                raise error from None
            raise
        with self._lock:
            key = self._keys.get(lookup)
            if key is None:
                key = _Key(split, static, len(self._keys))
                self._keys[lookup] = key
            return key

    def _traced(self, key: _Key, *dynamic: Any) -> Any:
        split = key.split
        self.trace_count += 1
        if self._explain:
            self._report_retrace(split, key, dynamic)
        leaves = split.merge(key.static, dynamic)
        tree = jax.tree_util.tree_unflatten(split.plan.treedef, leaves)
        args, kwargs = tree if split.plan.with_kwargs else (tree, {})
        out = split_output(self._fun(*args, **kwargs))
        if self._tree_out_shardings and type(out) is _WithStatic:
            raise SpecError(
                f"{self.__treespec_spec__.name} returns non-array leaves, which "
                "cannot be matched by a tree of out_shardings: pass one sharding "
                "for the whole output, or return arrays only."
            )
        return out

    def _report_retrace(self, split: Split, key: _Key, dynamic: Sequence[Any]) -> None:
        now = _leaf_signature(split, key, dynamic)
        before, self._last_trace = self._last_trace, now
        if before is None:
            return
        logger.warning(
            "treespec.jit: retracing %s (trace #%d): %s",
            self.__treespec_spec__.name,
            self.trace_count,
            "; ".join(describe_retrace(before, now)),
        )

    def _flatten(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[list[Any], Split]:
        if kwargs:
            leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
            plan = self._kw_plans.get(treedef)
        else:
            leaves, treedef = jax.tree_util.tree_flatten(args)
            plan = self._plans.get(treedef)
        if plan is None:
            plan = self._plan(args, kwargs, treedef)
        return leaves, plan.fixed or plan.split(leaves)

    # ------------------------------------------------------------------ hot path
    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        # Kept flat on purpose: every line here is paid on every call.
        if kwargs:
            leaves, split = self._flatten(args, kwargs)
        else:
            leaves, treedef = jax.tree_util.tree_flatten(args)
            plan = self._plans.get(treedef) or self._plan(args, kwargs, treedef)
            split = plan.fixed or plan.split(leaves)
        static = split.get_static(leaves)
        lookup = (split, *static, *map(type, static))
        try:
            key = self._keys[lookup]
        except (KeyError, TypeError):
            key = self._key(split, static, leaves)
        try:
            out = (split.caller or self._caller(split))(key, *split.get_dynamic(leaves))
        except TypeError:
            error = diagnose(split, leaves, self.__treespec_spec__.name)
            if error is not None:
                raise error from None
            raise
        if type(out) is _WithStatic:
            return combine(out.dynamic, out.static)  # type: ignore[no-any-return]
        return out  # type: ignore[no-any-return]

    def lower(self, *args: _P.args, **kwargs: _P.kwargs) -> Lowered:
        """Lower for these arguments, as `jax.jit(...).lower`; `.compile()` runs."""
        leaves, split = self._flatten(args, kwargs)
        key = self._key(split, split.get_static(leaves), leaves)
        caller: Any = split.caller or self._caller(split)
        return Lowered(caller.lower(key, *split.get_dynamic(leaves)), split)

    def __repr__(self) -> str:
        return f"<treespec.jit of {self.__treespec_spec__.name}>"


class Lowered:
    """The result of `Jitted.lower`: wraps `jax.stages.Lowered`."""

    def __init__(self, lowered: Any, split: Split) -> None:
        self._lowered = lowered
        self._split = split

    def as_text(self) -> str:
        """The lowered module as text (StableHLO)."""
        return str(self._lowered.as_text())

    def compile(self) -> Compiled:
        """Compile; the result is called with the same arguments as the function."""
        return Compiled(self._lowered.compile(), self._split)


class Compiled:
    """An executable for one set of shapes and static values."""

    def __init__(self, compiled: Any, split: Split) -> None:
        self._compiled = compiled
        self._split = split

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        plan = self._split.plan
        tree = (args, kwargs) if plan.with_kwargs else args
        leaves, treedef = jax.tree_util.tree_flatten(tree)
        if treedef != plan.treedef:
            raise ValidationError(
                [Issue("arguments", "the structure this was lowered for", str(treedef))]
            )
        return join_output(self._compiled(*self._split.get_dynamic(leaves)))

    def as_text(self) -> str:
        return str(self._compiled.as_text())


@overload
def jit(
    fun: Callable[_P, _R],
    *,
    static_flags: Any = None,
    default: str = "infer",
    validate: bool = True,
    explain_recompiles: bool = False,
    **jax_jit_kwargs: Any,
) -> Jitted[_P, _R]: ...


@overload
def jit(
    fun: None = None,
    *,
    static_flags: Any = None,
    default: str = "infer",
    validate: bool = True,
    explain_recompiles: bool = False,
    **jax_jit_kwargs: Any,
) -> Callable[[Callable[_P, _R]], Jitted[_P, _R]]: ...


def jit(
    fun: Callable[_P, _R] | None = None,
    *,
    static_flags: Any = None,
    default: str = "infer",
    validate: bool = True,
    explain_recompiles: bool = False,
    **jax_jit_kwargs: Any,
) -> Jitted[_P, _R] | Callable[[Callable[_P, _R]], Jitted[_P, _R]]:
    """`jax.jit` with a per-leaf static/dynamic/donate split.

    Which leaves are static comes, first match wins, from `static_flags`, then
    the nearest `Static`/`Dynamic`/`Donate` marker in the annotations, then
    `default`.

    **Arguments:**

    - `fun`: the function to compile. Omit it to get a decorator
      (`@jit(static_flags=...)`).
    - `static_flags`: explicit flags shaped like `vmap`'s `in_axes`: a list with
      one entry per positional parameter or a dict keyed by parameter name;
      entries are `True` (static), `False` (traced), `None` (no say), a callable
      `leaf -> bool`, or a prefix tree of those.
    - `default`: the policy for leaves nothing else covers: `"infer"` (arrays
      traced, everything else static), `"static"`, `"dynamic"` or `"error"`.
    - `validate`: check arguments against their annotations (once per new tree
      structure or static key; free on a compile-cache hit).
    - `explain_recompiles`: log every retrace after the first on logger
      `treespec`, naming the leaves that changed (also
      `TREESPEC_EXPLAIN_RECOMPILES=1`).
    - `**jax_jit_kwargs`: passed to `jax.jit` (`in_shardings` and
      `out_shardings` as prefix trees over the arguments and the output,
      `device`, `backend`, `keep_unused`, `compiler_options`, ...).
      `static_argnums`/`static_argnames`/`donate_argnums`/`donate_argnames`
      are refused: use `static_flags`/`Static` and `Donate`.

    **Returns:**

    A `Jitted` wrapper with `fun`'s signature, plus `.lower(...)`, `.spec` and
    `.clear_cache()`. Outputs may hold non-array leaves; they come back as the
    Python objects.

    !!! example

        ```python
        from functools import partial
        import jax.numpy as jnp
        import treespec

        @partial(treespec.jit, static_flags=[dict(x=True, y=False)])
        def fun(dic):
            return dic["x"] + dic["y"]

        assert fun({"x": 1, "y": jnp.float32(2.0)}) == 3.0
        ```
    """
    localns = caller_namespace(1)

    def wrap(f: Callable[_P, _R]) -> Jitted[_P, _R]:
        return Jitted(
            f,
            static_flags=static_flags,
            default=default,
            validate=validate,
            explain_recompiles=explain_recompiles,
            jax_kwargs=jax_jit_kwargs,
            localns=localns,
        )

    return wrap if fun is None else wrap(fun)
