"""`checkpoint` (rematerialisation) and `eval_shape`, with static leaves static."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Never, TypeVar, overload

import jax
from typing_extensions import ParamSpec

from .._model.errors import AT_THE_CALL
from .._runtime.api import caller_namespace
from .._runtime.calling.routes import Key, key_split
from .base import Transformed
from .bodies import as_users, weak_method

__all__ = ["checkpoint", "eval_shape"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_K = TypeVar("_K")


class _Checkpointed(Transformed[_P, _R]):
    _name = "checkpoint"

    def __init__(
        self, fun: Callable[_P, _R], *, jax_kwargs: dict[str, Any], **kw: Any
    ) -> None:
        super().__init__(fun, **kw)
        self._jax_kwargs = jax_kwargs
        #: The `jax.checkpoint` of each split, by its `SplitId`: named for
        #: JAX as the user's function and arguments.
        self._remats: dict[Any, Callable[..., Any]] = {}

    def _remat(self, key: Key) -> Callable[..., Any]:
        remat = self._remats.get(key[0])
        if remat is None:
            split = key_split(key)
            body = weak_method(self._traced)
            names = split.plan.route.arg_names(split)
            remat = jax.checkpoint(
                as_users(body, self._fun, names),
                static_argnums=(0,),
                **self._jax_kwargs,
            )
            remat = self._remats.setdefault(key[0], remat)
        return remat

    def _cache_options(self) -> tuple[Any, ...]:
        return (*super()._cache_options(), self._jax_kwargs)

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with AT_THE_CALL:
            key, dynamic = self._splitter.split_call(args, kwargs)
        try:
            out = self._remat(key)(key, *dynamic)
        except (TypeError, ValueError) as raised:  # a leaf JAX refuses: named
            error = self._splitter.diagnose(args, kwargs, raised)
            if error is None:
                raise
            raise error from None
        return self._output(out, key, args, kwargs)  # type: ignore[no-any-return]


def checkpoint(
    fun: Callable[_P, _R],
    *,
    policy: Callable[..., bool] | None = None,
    prevent_cse: bool = True,
    static_flags: Any = None,
    default: str = "infer",
    validate: bool = True,
) -> Transformed[_P, _R]:
    """`jax.checkpoint` with static leaves held static (not saved, not traced).

    **Arguments:**

    - `fun`: the function whose intermediates are recomputed on the backward
      pass.
    - `policy`, `prevent_cse`: as in JAX.
    - `static_flags`, `default`, `validate`: as for
      [`treespec.jit`][treespec.jit].

    **Returns:**

    The checkpointed function, with `fun`'s signature.

    !!! example

        ```python
        import jax
        import jax.numpy as jnp
        import treespec
        from treespec import Static

        def block(x: jnp.ndarray, depth: Static[int]) -> jnp.ndarray:
            for _ in range(depth):
                x = jnp.sin(x)
            return jnp.sum(x)

        g = jax.grad(treespec.checkpoint(block))(jnp.ones(3), 2)
        assert g.shape == (3,)
        ```
    """
    return _Checkpointed(
        fun,
        jax_kwargs={"policy": policy, "prevent_cse": prevent_cse},
        static_flags=static_flags,
        default=default,
        validate=validate,
        localns=caller_namespace(1),
    )


# The result is `fun`'s result with `jax.ShapeDtypeStruct` for each array.
# No annotation maps a type that way, so the overloads spell the common shapes
# (for pyright, and mypy without the plugin); the mypy plugin maps any result
# type. Anything else is `Any`, never a type that claims arrays. The first
# overload takes a `fun` whose result is `Any` (as `Any` is assignable to
# `Never`), which would otherwise match the array overload: `-> Any`, an
# unannotated callable, jaxtyping's `PyTree[...]` (`Any` to a type checker).
@overload
def eval_shape(
    fun: Callable[_P, Never], *args: _P.args, **kwargs: _P.kwargs
) -> Any: ...
@overload
def eval_shape(
    fun: Callable[_P, jax.Array], *args: _P.args, **kwargs: _P.kwargs
) -> jax.ShapeDtypeStruct: ...
@overload
def eval_shape(
    fun: Callable[_P, tuple[jax.Array, jax.Array]],
    *args: _P.args,
    **kwargs: _P.kwargs,
) -> tuple[jax.ShapeDtypeStruct, jax.ShapeDtypeStruct]: ...
@overload
def eval_shape(
    fun: Callable[_P, tuple[jax.Array, ...]], *args: _P.args, **kwargs: _P.kwargs
) -> tuple[jax.ShapeDtypeStruct, ...]: ...
@overload
def eval_shape(
    fun: Callable[_P, list[jax.Array]], *args: _P.args, **kwargs: _P.kwargs
) -> list[jax.ShapeDtypeStruct]: ...
@overload
def eval_shape(
    fun: Callable[_P, dict[_K, jax.Array]], *args: _P.args, **kwargs: _P.kwargs
) -> dict[_K, jax.ShapeDtypeStruct]: ...
@overload
def eval_shape(fun: Callable[_P, _R], *args: _P.args, **kwargs: _P.kwargs) -> Any: ...
def eval_shape(fun: Callable[_P, _R], *args: _P.args, **kwargs: _P.kwargs) -> Any:
    """`jax.eval_shape` with static leaves passed as values.

    **Arguments:**

    - `fun`: the function (its annotations decide static/dynamic, default
      "infer").
    - `*args`, `**kwargs`: the arguments; arrays may be `jax.ShapeDtypeStruct`.

    **Returns:**

    The output with `jax.ShapeDtypeStruct` for every array and the Python
    objects for every static (non-array) output leaf.

    !!! example

        ```python
        import jax.numpy as jnp
        import treespec
        from treespec import Static

        def f(x: jnp.ndarray, name: Static[str]):
            return {"y": x @ x.T, "name": name}

        out = treespec.eval_shape(f, jnp.ones((3, 2)), "gram")
        assert out["y"].shape == (3, 3) and out["name"] == "gram"
        ```
    """
    shaped = _EvalShape(
        fun,
        static_flags=None,
        default="infer",
        validate=True,
        localns=caller_namespace(1),
    )
    with AT_THE_CALL:
        key, dynamic = shaped._splitter.split_call(args, kwargs)
    try:
        out = jax.eval_shape(lambda *leaves: shaped._traced(key, *leaves), *dynamic)
    except (TypeError, ValueError) as raised:  # a leaf JAX refuses: named
        error = shaped._splitter.diagnose(args, kwargs, raised)
        if error is None:
            raise
        raise error from None
    # Abstract values: the caller's NNX objects stay as they were.
    return shaped._output(out, key, args, kwargs, write=False)


class _EvalShape(Transformed[..., Any]):
    _name = "eval_shape"
