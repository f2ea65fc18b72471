"""What a jitted function offers beside the call, as `jax.jit`'s does: the
stages (`trace`, `lower`, `eval_shape`), how often it traced, `clear_cache`.

`Jitted` takes them from `JitStages`; what a jitted method is on an instance,
to a type checker, is `BoundJitted`. Each stage sees the call as `StagedCall`
(`stages.py`) gives it: the user's arguments with `None` at each static leaf,
and the wholly static arguments left out (as `jax.jit`'s `static_argnums`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Concatenate, Protocol, Self, TypeVar, overload

import jax
from typing_extensions import ParamSpec

from .._model.errors import AT_THE_CALL, SpecError, ValidationError
from .._runtime.calling.cache import JitState
from .._runtime.calling.routes import StaleKey, key_split
from .._runtime.planning.plan import Split
from .base import BoundTransform, Transformed
from .stages import Lowered, StagedCall, staged_jit

__all__ = ["BoundJitted", "JitStages"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_Q = ParamSpec("_Q")
_S = TypeVar("_S")
_R_co = TypeVar("_R_co", covariant=True)


class BoundJitted(BoundTransform[_Q, _R_co], Protocol[_Q, _R_co]):
    """What a jitted method is on an instance, to a type checker: a
    `BoundTransform` (the method with `self` bound, its `.spec`), and the
    stages with the instance bound (on an Equinox Module; on other classes
    they are the function's)."""

    @property
    def trace_count(self) -> int: ...

    def lower(self, *args: _Q.args, **kwargs: _Q.kwargs) -> Lowered: ...

    def trace(self, *args: _Q.args, **kwargs: _Q.kwargs) -> jax.stages.Traced: ...

    def eval_shape(self, *args: _Q.args, **kwargs: _Q.kwargs) -> Any: ...


class JitStages(Transformed[_P, _R]):
    """The stages of a jitted function and the handles on its cache, as
    `jax.jit`'s (see `Jitted`)."""

    #: The options `jax.jit` is given, and the cache (set by `Jitted`).
    _jax_kwargs: Mapping[str, Any]
    _state: JitState
    _callers: Mapping[int, Callable[..., Any]]

    if TYPE_CHECKING:

        def _caller(self, split: Split) -> Callable[..., Any]:
            """The `jax.jit` of a split, made once (`Jitted`)."""

        @overload
        def __get__(self, instance: None, owner: type | None = None) -> Self: ...

        @overload
        def __get__(
            self: JitStages[Concatenate[_S, _Q], _R],
            instance: _S,
            owner: type | None = None,
        ) -> BoundJitted[_Q, _R]: ...

        def __get__(self, instance: Any, owner: type | None = None) -> Any: ...

    @property
    def trace_count(self) -> int:
        """How often this function traced (shared by equal wrappers of it).

        A trace that raised (a `ValidationError`, an error in the function)
        is not counted: only traces that completed, each a program JAX then
        keeps for its key.
        """
        return self._state.traces.count

    def clear_cache(self) -> None:
        """Drop this function's compiled programs, plans and keys.

        Frees what treespec keeps for the function (its plans, keys and
        interned keys, the retrace history) and empties its `jax.jit` caches,
        so the next call traces and compiles again. It does not free what
        JAX's own global caches keep, exactly as for `jax.jit`: the keys of
        past calls, and so their static values (bounded caches, by value),
        and traced programs JAX may still reuse. `jax.clear_caches()` empties
        those, for every function.

        A function that is dropped needs neither: when its last wrapper and
        the function go, everything it compiled goes with them. A long sweep
        that builds a step function per trial grows no more than with
        `jax.jit` if each trial's step is dropped (or goes out of scope)
        before the next; a function that lives on and is called with ever
        new static values keeps one program per value, as `jax.jit` does:
        call `clear_cache()` between phases, or mark such a leaf
        `Dynamic[...]`. See [Performance](performance.md#a-long-life).
        Other threads may be calling the function meanwhile: a call that
        loses the race traces again, as under `jax.jit`.

        !!! example

            ```python
            import jax.numpy as jnp
            import treespec
            from treespec import Static

            @treespec.jit
            def f(x, n: Static[int]):
                return x * n

            for n in range(3):
                f(jnp.ones(2), n)
            assert f.trace_count == 3
            f.clear_cache()
            f(jnp.ones(2), 0)  # traced and compiled again
            assert f.trace_count == 4
            ```
        """
        self._state.clear()

    def trace(self, *args: _P.args, **kwargs: _P.kwargs) -> jax.stages.Traced:
        """Trace for these arguments, as `jax.jit(...).trace`: JAX's `Traced`
        (`.jaxpr`, `.out_info`, `.lower()`).

        Its arguments are the user's with `None` at each static leaf (the
        static values are constants of the trace), without the arguments
        whose every leaf is static (as `jax.jit`'s `static_argnums`), and so
        are those of what it lowers and compiles to. `jax.export.export(f)`
        calls this: see [Ahead of time and export](aot.md).
        """
        call, staged = self._staged(args, kwargs)
        try:
            traced: jax.stages.Traced = staged.trace(*call.args, **call.kwargs)
        except (TypeError, ValueError) as raised:
            # A leaf JAX refuses is named, as by a call. Raised here, in each
            # stage, not by a helper: the stage's is the one frame of
            # treespec's the user's traceback shows.
            error = self._splitter.diagnose(args, kwargs, raised)
            if error is None:
                raise
            raise error from None
        return traced

    def lower(self, *args: _P.args, **kwargs: _P.kwargs) -> Lowered:
        """Lower for these arguments, as `jax.jit(...).lower`: a
        [`Lowered`][treespec._transforms.stages.Lowered], whose `.compile()` gives a
        [`Compiled`][treespec._transforms.stages.Compiled] called like the function."""
        call, staged = self._staged(args, kwargs)
        try:
            lowered = staged.lower(*call.args, **call.kwargs)
        except (TypeError, ValueError) as raised:  # named, as in `trace`
            error = self._splitter.diagnose(args, kwargs, raised)
            if error is None:
                raise
            raise error from None
        return Lowered(lowered, call)

    def eval_shape(self, *args: _P.args, **kwargs: _P.kwargs) -> Any:
        """The output for these arguments without computing it: a
        `jax.ShapeDtypeStruct` for each array, the values of the rest."""
        call, staged = self._staged(args, kwargs)
        try:
            out = staged.eval_shape(*call.args, **call.kwargs)
        except (TypeError, ValueError) as raised:  # named, as in `trace`
            error = self._splitter.diagnose(args, kwargs, raised)
            if error is None:
                raise
            raise error from None
        return call.result(out)

    def _staged(self, args: Any, kwargs: Any) -> tuple[StagedCall, Any]:
        """The call as its stages see it, and the `jax.jit` they are of."""
        with AT_THE_CALL:
            call = self._staged_call(args, kwargs)
        return call, staged_jit(call, self._run_bound, self._jax_kwargs)

    def _run_bound(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A bound call as the staged program runs it: the trace of the
        call's own `jax.jit` for the call's route and key (JAX's cache has
        it after a call, and keeps it for one), its program inlined; the
        non-array outputs not put back."""
        key, dynamic = self._splitter.split_bound(args, kwargs)
        try:
            caller: Any = self._callers.get(key[0]) or self._caller(key_split(key))
            traced = caller.trace(key, *dynamic)
        except StaleKey:  # another thread cleared the cache: split again
            return self._run_bound(args, kwargs)
        program = traced.jaxpr
        leaves = jax.tree_util.tree_leaves(dynamic)
        if len(program.jaxpr.invars) != len(leaves):
            # Arguments of its own (it closes over a value traced outside):
            # JAX's call binds them.
            return caller(key, *dynamic)
        out = jax.core.eval_jaxpr(program.jaxpr, program.consts, *leaves)
        return jax.tree_util.tree_unflatten(traced.out_tree, out)

    def _staged_call(self, args: Any, kwargs: Any) -> StagedCall:
        try:
            return StagedCall(self._splitter, args, kwargs)
        except TypeError as error:
            if isinstance(error, (SpecError, ValidationError)):
                raise
            params = self.spec.params
            if not params or params[0].name not in ("self", "cls"):
                raise
            name = self.spec.name
            raise TypeError(
                f"{error}. A method's stages take the instance first: "
                f"{name}.lower(instance, ...) (an instance's method does not "
                "bind it for `lower`)"
            ) from None
