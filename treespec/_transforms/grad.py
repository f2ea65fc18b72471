"""`grad` / `value_and_grad`: differentiate dynamic inexact leaves, None elsewhere."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

import jax
import jax.numpy as jnp
import numpy as np
from typing_extensions import ParamSpec

from .._model.errors import (
    AT_THE_CALL,
    SpecError,
)
from .._runtime.api import caller_namespace
from .._runtime.calling.routes import key_split
from .._runtime.planning.graph import Updated
from .._runtime.planning.plan import Kind, Split, ask_callable
from .._runtime.planning.prefix import Entry, broadcast_tree
from .base import Transformed
from .bodies import as_users
from .outputs import check_aux_pair, split_output

__all__ = ["grad", "value_and_grad"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _inexact(leaf: Any) -> bool:
    if isinstance(leaf, (float, complex)):
        return True
    dtype = getattr(leaf, "dtype", None)
    # JAX's own test: it knows its extended dtypes (a PRNG key's `key<fry>`).
    return dtype is not None and bool(jnp.issubdtype(dtype, np.inexact))


def _is_wrt_entry(x: Any) -> bool:
    return x is None or isinstance(x, bool) or (callable(x) and not isinstance(x, type))


class _Targets:
    """What `grad` differentiates for calls of one split (one tree structure).

    `candidates`: `(argument, leaf within it, dynamic position, wrt entry)` for
    each traced leaf of a differentiated argument (whether it is inexact, and a
    callable `wrt` entry, are asked of each call's values); `arguments`: for
    each differentiated argument, its number of leaves and its structure.
    """

    __slots__ = ("arguments", "candidates")

    def __init__(
        self,
        candidates: list[tuple[int, int, int, Any]],
        arguments: list[tuple[int, int, Any]],
    ) -> None:
        self.candidates = candidates
        self.arguments = arguments


class _Grad(Transformed[_P, Any]):
    _name = "grad"

    def __init__(
        self,
        fun: Callable[_P, Any],
        *,
        argnums: int | Sequence[int],
        has_aux: bool,
        wrt: Any,
        with_value: bool,
        static_flags: Any,
        default: str,
        validate: bool,
        localns: Any,
    ) -> None:
        super().__init__(
            fun,
            static_flags=static_flags,
            default=default,
            validate=validate,
            localns=localns,
            float_args=frozenset(
                (argnums,) if isinstance(argnums, int) else tuple(argnums)
            ),
        )
        self._argnums = argnums
        self._has_aux = has_aux
        self._wrt = wrt
        self._with_value = with_value
        self._by_split: dict[Split, _Targets] = {}
        if with_value:
            self._name = "value_and_grad"

    def _cache_options(self) -> tuple[Any, ...]:
        return (
            *super()._cache_options(),
            self._argnums,
            self._has_aux,
            self._wrt,
            self._with_value,
        )

    def _selected(self, args: tuple[Any, ...]) -> list[tuple[int, list[Entry]]]:
        """For each differentiated argument: the `wrt` entry of each of its leaves."""
        single = isinstance(self._argnums, int)
        argnums: tuple[int, ...] = (
            (self._argnums,) if isinstance(self._argnums, int) else tuple(self._argnums)
        )
        wrts = (self._wrt,) if single else (self._wrt or (None,) * len(argnums))
        if len(wrts) != len(argnums):
            raise SpecError(
                f"wrt has {len(wrts)} entries but argnums names {len(argnums)} "
                "arguments; give one prefix tree per differentiated argument."
            )
        out = []
        for j, wrt in zip(argnums, wrts):
            if not 0 <= j < len(args):
                raise SpecError(
                    f"argnums {j} is out of range: {self.spec.name} was called with "
                    f"{len(args)} positional arguments."
                )
            out.append((j, broadcast_tree(wrt, args[j], _is_wrt_entry, "wrt")))
        return out

    def _targets(self, split: Split, args: tuple[Any, ...]) -> _Targets:
        """What to differentiate for calls of this split: known per structure."""
        found = self._by_split.get(split)
        if found is not None:
            return found
        selected = self._selected(args)
        # Leaf index ranges of each positional argument in the flattened call.
        starts = np.cumsum([0, *(len(jax.tree_util.tree_leaves(a)) for a in args)])
        position = {leaf: pos for pos, leaf in enumerate(split.dynamic_idx)}
        candidates: list[tuple[int, int, int, Any]] = []
        for j, entries in selected:
            for k, entry in enumerate(entries):
                leaf = int(starts[j]) + k
                pos = position.get(leaf)
                if pos is None or split.kinds[leaf] is Kind.STATIC:
                    continue
                candidates.append((j, k, pos, entry.value))
        arguments = [
            (j, len(entries), jax.tree_util.tree_structure(args[j]))
            for j, entries in selected
        ]
        found = _Targets(candidates, arguments)
        self._by_split[split] = found
        return found

    @staticmethod
    def _differentiated(
        split: Split, targets: _Targets, dynamic: Sequence[Any]
    ) -> list[tuple[int, int, int]]:
        """`(argument, leaf within it, dynamic position)` of each leaf this
        call differentiates: inexact, and what `wrt` selects."""
        diff = []
        for j, k, pos, want in targets.candidates:
            if not _inexact(dynamic[pos]):
                continue
            # A callable in `wrt` only ever sees differentiable leaves.
            if callable(want):
                info = split.plan.infos[split.dynamic_idx[pos]]
                want = ask_callable(want, dynamic[pos], "wrt (callable)", info.path)
            if want is None or want:
                diff.append((j, k, pos))
        return diff

    def _trees(
        self, targets: _Targets, diff: list[tuple[int, int, int]], grads: Any
    ) -> Any:
        """The gradients shaped like the differentiated arguments, `None` at
        the leaves not differentiated."""
        trees = []
        for j, n_leaves, treedef in targets.arguments:
            flat: list[Any] = [None] * n_leaves
            for (arg, k, _), g in zip(diff, grads):
                if arg == j:
                    flat[k] = g
            trees.append(jax.tree_util.tree_unflatten(treedef, flat))
        return trees[0] if isinstance(self._argnums, int) else tuple(trees)

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> Any:
        with AT_THE_CALL:
            # Bound first: argnums are positions of the bound call.
            bound, named = self._splitter.bind(args, kwargs)
            key, dynamic = self._splitter.split_bound(bound, named)
        split = key_split(key)
        targets = self._targets(split, bound)
        diff = self._differentiated(split, targets, dynamic)

        def inner(*values: Any) -> Any:
            current = list(dynamic)
            for (_, _, pos), value in zip(diff, values):
                current[pos] = value
            out = self._call_fun(key, tuple(current))
            changed = type(out) is Updated  # NNX objects the function changed
            result = out.result if changed else out
            aux = None
            if self._has_aux:
                check_aux_pair(result, self.spec.name)
                result, aux = result
            if changed:
                values = split_output(out.values)
                return result, Updated(
                    split_output(aux), out.indices, values, out.nodes
                )
            return result, split_output(aux)

        # One argument per differentiated leaf, named as the user's leaf.
        infos = split.plan.infos
        names = [infos[split.dynamic_idx[pos]].path for *_, pos in diff]
        body = as_users(inner, self._fun, names, keyed=False)
        transform = jax.value_and_grad if self._with_value else jax.grad
        argnums = tuple(range(len(diff))) or 0  # nothing to differentiate: 0
        values = [dynamic[p] for *_, p in diff] or [[]]
        with AT_THE_CALL:  # a refusal while tracing: from this call's frame
            result = transform(body, argnums=argnums, has_aux=True)(*values)
        if self._with_value:
            (value, aux), grads = result
        else:
            grads, aux = result
            value = None
        # What the function changed in NNX objects: on the caller's ones.
        aux = self._output(aux, key, bound, named)
        if self._has_aux:
            value = (value, aux) if self._with_value else aux
        tree = self._trees(targets, diff, grads)
        if self._with_value:
            return value, tree
        if self._has_aux:
            return tree, value
        return tree


def _decorate(
    fun: Callable[_P, Any] | None,
    with_value: bool,
    localns: Any,
    options: dict[str, Any],
) -> Transformed[_P, Any] | Callable[[Callable[_P, Any]], Transformed[_P, Any]]:
    """`fun` transformed, or, when omitted, the decorator that does it."""

    def wrap(f: Callable[_P, Any]) -> Transformed[_P, Any]:
        return _Grad(f, with_value=with_value, localns=localns, **options)

    return wrap if fun is None else wrap(fun)


@overload
def grad(
    fun: Callable[_P, Any],
    *,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    wrt: Any = None,
    static_flags: Any = None,
    default: str = "infer",
    validate: bool = True,
) -> Transformed[_P, Any]: ...


@overload
def grad(
    fun: None = None,
    *,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    wrt: Any = None,
    static_flags: Any = None,
    default: str = "infer",
    validate: bool = True,
) -> Callable[[Callable[_P, Any]], Transformed[_P, Any]]: ...


def grad(
    fun: Callable[_P, Any] | None = None,
    *,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    wrt: Any = None,
    static_flags: Any = None,
    default: str = "infer",
    validate: bool = True,
) -> Transformed[_P, Any] | Callable[[Callable[_P, Any]], Transformed[_P, Any]]:
    """`jax.grad` over the dynamic inexact leaves of the `argnums` arguments.

    **Arguments:**

    - `fun`: a function returning a scalar (and an auxiliary value if
      `has_aux`). Omit it to get a decorator
      (`@treespec.value_and_grad(has_aux=True)`, as Equinox's
      `filter_value_and_grad` takes it).
    - `argnums`: which positional argument(s) to differentiate.
    - `has_aux`: `fun` returns `(value, aux)`; aux may hold non-arrays.
    - `wrt`: narrows the leaves further: a prefix tree of the argument (a tuple
      of them for several `argnums`) with `True`/`False`/`None` or callables
      `leaf -> bool`, as `static_flags` takes.
    - `static_flags`, `default`, `validate`: as for
      [`treespec.jit`][treespec.jit].

    **Returns:**

    A function with `fun`'s signature returning gradients shaped like the
    argument, with `None` at static leaves, integer arrays and leaves `wrt`
    leaves out (so `jax.tree_util.tree_map(..., is_leaf=lambda x: x is None)`
    and optax updates work); `(grads, aux)` with `has_aux`.

    !!! example

        ```python
        import jax.numpy as jnp
        import treespec
        from treespec import Static

        def loss(params: dict, n: Static[int]) -> jnp.ndarray:
            return jnp.sum(params["w"] ** 2) * n

        grads = treespec.grad(loss)({"w": jnp.ones(3), "steps": 4}, 2)
        assert grads["steps"] is None and float(grads["w"][0]) == 4.0
        ```
    """
    options = {k: v for k, v in locals().items() if k != "fun"}
    return _decorate(fun, False, caller_namespace(1), options)


@overload
def value_and_grad(
    fun: Callable[_P, Any],
    *,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    wrt: Any = None,
    static_flags: Any = None,
    default: str = "infer",
    validate: bool = True,
) -> Transformed[_P, Any]: ...


@overload
def value_and_grad(
    fun: None = None,
    *,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    wrt: Any = None,
    static_flags: Any = None,
    default: str = "infer",
    validate: bool = True,
) -> Callable[[Callable[_P, Any]], Transformed[_P, Any]]: ...


def value_and_grad(
    fun: Callable[_P, Any] | None = None,
    *,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    wrt: Any = None,
    static_flags: Any = None,
    default: str = "infer",
    validate: bool = True,
) -> Transformed[_P, Any] | Callable[[Callable[_P, Any]], Transformed[_P, Any]]:
    """`jax.value_and_grad` over the dynamic inexact leaves; see `grad`.

    **Arguments:**

    As for [`treespec.grad`][treespec.grad].

    **Returns:**

    A function returning `(value, grads)`, or `((value, aux), grads)` with
    `has_aux`.

    !!! example

        ```python
        import jax.numpy as jnp
        import treespec

        value, grads = treespec.value_and_grad(lambda p: jnp.sum(p["w"] ** 2))(
            {"w": jnp.ones(2), "name": "layer"}
        )
        assert float(value) == 2.0 and grads["name"] is None
        ```
    """
    options = {k: v for k, v in locals().items() if k != "fun"}
    return _decorate(fun, True, caller_namespace(1), options)
