"""`treespec.jit`: `jax.jit` with a per-leaf static/dynamic/donate split."""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Concatenate, Protocol, Self, TypeVar, overload

import jax
from typing_extensions import ParamSpec

from .._model.errors import SpecError, location
from .._runtime.api import caller_namespace
from .._runtime.cache import JitState, freeze, shared_state
from .._runtime.layout import is_sharding
from .._runtime.partition import combine
from .._runtime.plan import CallView, Kind, Split
from .._runtime.processes import ProcessCheck, check_enabled, log_prefix
from .._runtime.retrace import (
    Seen,
    describe_retrace,
    describe_view,
    explain_enabled,
    log_retrace,
)
from .._runtime.routes import Key, key_split
from .base import BoundTransform, Transformed, weak_method
from .outputs import WithStatic
from .stages import Lowered, StagedCall, staged_jit

__all__ = ["Jitted", "jit"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

logger = logging.getLogger("treespec")

#: Retraces caused by one unmarked Python scalar before the warning comes.
RETRACE_WARNING_AFTER = 5


def retrace_warnings_enabled() -> bool:
    """Whether the retrace-storm warning is on (`TREESPEC_RETRACE_WARNING=0`: off)."""
    return os.environ.get("TREESPEC_RETRACE_WARNING", "1") not in ("", "0")


_FORBIDDEN = {
    "static_argnums": "mark the leaves Static[...] or pass static_flags=",
    "static_argnames": "mark the leaves Static[...] or pass static_flags=",
    "donate_argnums": "annotate the leaves Donate[...]",
    "donate_argnames": "annotate the leaves Donate[...]",
}


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


class Jitted(Transformed[_P, _R]):
    """A function compiled by [`treespec.jit`][treespec.jit]. Call it like the
    original.

    Besides the call: the stages, as `jax.jit`'s (`.trace(...)`, `.lower(...)`
    then `.compile()`, `.eval_shape(...)`; `jax.export.export(f)` works too,
    see [Ahead of time and export](aot.md)), `.spec` (the derived
    [`Spec`][treespec.Spec]), `.clear_cache()`, and `.trace_count` (how often
    it traced).

    !!! example

        ```python
        import jax.numpy as jnp
        import treespec
        from treespec import Static

        @treespec.jit
        def f(x, n: Static[int]):
            return x * n

        f(jnp.ones(2), 3)
        f(jnp.zeros(2), 3)
        assert f.trace_count == 1
        compiled = f.lower(jnp.ones(2), 3).compile()
        print(compiled(jnp.ones(2), 3))
        ```
    """

    _name = "jit"

    if TYPE_CHECKING:

        @overload
        def __get__(self, instance: None, owner: type | None = None) -> Self: ...

        @overload
        def __get__(
            self: Jitted[Concatenate[_S, _Q], _R],
            instance: _S,
            owner: type | None = None,
        ) -> BoundJitted[_Q, _R]: ...

        def __get__(self, instance: Any, owner: type | None = None) -> Any: ...

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
        check_processes: bool | None = None,
    ) -> None:
        for name, fix in _FORBIDDEN.items():
            if name in jax_kwargs:
                raise SpecError(
                    f"treespec.jit does not take {name}: {fix}. treespec decides "
                    "per leaf, not per argument."
                )
        kwargs = dict(jax_kwargs)
        in_shardings = kwargs.pop("in_shardings", None)
        self._explain = explain_enabled(explain_recompiles)
        # Multi-process jobs: compare each trace's key across processes.
        self._processes = ProcessCheck(fun) if check_enabled(check_processes) else None
        # A single sharding also covers the aux-only node of non-array outputs;
        # a tree of shardings must match the output exactly (checked at trace).
        if not is_sharding(kwargs.get("out_shardings")):
            self._output_tree = "out_shardings"
        self._jax_kwargs = kwargs
        #: What makes two wrappers of one function equal (they share a cache).
        self._options = (
            static_flags,
            default,
            validate,
            self._explain,
            self._processes is not None,
            jax_kwargs,
        )
        super().__init__(
            fun,
            static_flags=static_flags,
            default=default,
            validate=validate,
            localns=localns,
            allow_whole=True,
            in_shardings=in_shardings,
        )

    def _built(self) -> None:
        # The cache belongs to the wrapped function: an equal wrapper made
        # before (same function, same options) shares its state.
        def make() -> JitState:
            return JitState(self._splitter)

        try:
            # A method's `self` read from its class makes another splitter.
            options = freeze((*self._options, self._self_class))
        except TypeError:  # an option that cannot be hashed: nothing to share
            state = make()
        else:
            state = shared_state(self._fun, options, make)
        state.attach(self)
        self._splitter = state.splitter
        self._state = state
        self._callers = state.callers

    def _copied_from(self, other: Transformed[Any, Any]) -> None:
        self._state.attach(self)

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
        state = self._state
        with state.lock:
            for compiled in state.compiled.values():
                clear = getattr(compiled, "clear_cache", None)
                if clear is not None:
                    clear()
            state.splitter.clear()
            state.compiled.clear()
            state.callers.clear()
            state.traces.clear()
            state.scalar_changes.clear()
            state.warned_scalars = False

    def _caller(self, split: Split) -> Callable[..., Any]:
        state = self._state
        with state.lock:
            known = state.callers.get(split.token)
            if known is not None:
                return known
            route = split.plan.route
            donate = route.donate_argnums(split)
            in_sh = route.in_shardings(split)
            config = (donate, in_sh)
            compiled = state.compiled.get(config)
            if compiled is None:
                kwargs = dict(self._jax_kwargs)
                if in_sh is not None:
                    kwargs["in_shardings"] = in_sh
                # The state's body, not this wrapper's: the compiled function
                # must not keep a wrapper (and so the function) alive; and it
                # reaches the state weakly, so that the state (and with it
                # every program) goes as soon as its last wrapper does.
                compiled = jax.jit(
                    weak_method(state.traced),
                    static_argnums=0,
                    donate_argnums=donate,
                    **kwargs,
                )
                state.compiled[config] = compiled
            state.callers[split.token] = compiled
            return compiled

    def _traced(self, key: Key, *dynamic: Any) -> Any:
        view = self._splitter.view(key, dynamic)
        if self._processes is not None:
            self._processes.check(view)
        # Validated first: a call that fails validation is no retrace.
        checked = self._splitter.validate_view(view)
        now = describe_view(view)
        out = self._body(key, dynamic, checked)
        # Only a trace that completed counts, and is what later retraces
        # are explained against.
        state = self._state
        with state.lock:
            before = state.traces.completed(now)
            if before is not None:
                if self._explain:
                    log_retrace(
                        log_prefix(),
                        "jit",
                        self.__treespec_spec__.name,
                        state.traces.count,
                        "; ".join(describe_retrace(before, now)),
                    )
                self._watch_scalars(view, before, now)
        return out

    def _watch_scalars(
        self, view: CallView, before: dict[str, Seen], now: dict[str, Seen]
    ) -> None:
        """Warn once when unmarked Python scalars keep forcing new traces."""
        state = self._state
        if state.warned_scalars:
            return
        for info, kind, leaf in view.pairs:
            if (
                kind is not Kind.STATIC
                or not info.source.startswith("default 'infer'")
                or type(leaf) not in (int, float, complex)
                or before.get(info.path, now[info.path]) == now[info.path]
            ):
                continue
            changes = state.scalar_changes.get(info.path, 0) + 1
            state.scalar_changes[info.path] = changes
            if changes >= RETRACE_WARNING_AFTER and retrace_warnings_enabled():
                state.warned_scalars = True
                logger.warning(
                    "%streespec.jit: %s traced %d times, each time for a new value "
                    "of the unmarked Python %s at %s (now %r), which the 'infer' "
                    "default holds static: every new value compiles anew. Mark "
                    "it Dynamic[%s] (or give it static_flags=False) to trace it "
                    "instead. (This warning comes once per function; silence it "
                    "with TREESPEC_RETRACE_WARNING=0 or the 'treespec' logger.)",
                    log_prefix(),
                    self.__treespec_spec__.name,
                    state.traces.count,
                    type(leaf).__name__,
                    location(info.argument, info.path),
                    leaf,
                    type(leaf).__name__,
                )
                return

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        splitter = self._splitter
        route = splitter.positional
        call: tuple[Any, ...] = args
        named: dict[str, Any] = kwargs
        if named or len(call) != splitter.binder.direct_npos:
            call, named = splitter.bind(call, named)  # f(x, n=2) as f(x, 2)
        if not named and len(call) == route.npos:
            # The positional route, inlined: the common case. Arguments that
            # all go to JAX whole have one key; a plain dict of scalars whose
            # structure is all static is looked up by its probe, without a
            # flatten.
            key: Key | None = route.whole_key
            if key is not None and route.guard is not None:
                if type(call[0]) is not route.guard:
                    key = None  # a subclass's instance: `split` decides
            elif key is None:
                mixed = route.get_mixed(call)
                if type(mixed) is dict and route.probing:
                    values = mixed.values()
                    try:
                        key = route.probes.get((*mixed, *values, *map(type, values)))
                    except TypeError:  # an unhashable value: `split` stops probing
                        key = None
            if key is None:
                key, dynamic = route.split(call, named)
            else:
                dynamic = route.get_whole(call)
        else:
            key, dynamic = splitter.general.split(call, named)
        caller = self._callers.get(key[0])  # by the key's `SplitId`
        if caller is None:
            caller = self._caller(key_split(key))
        try:
            out = caller(key, *dynamic)
        except (TypeError, ValueError, RuntimeError):
            # JAX's refusal of a leaf (RuntimeError: a deleted buffer).
            error = splitter.diagnose(call, named)
            if error is None:
                raise
            # Raised from None: the JAX error stays reachable as __context__
            # without being printed ahead of the one that names the leaf.
            raise error from None
        if type(out) is WithStatic:  # inlined join_output: this is the hot path
            return combine(out.dynamic, out.static)  # type: ignore[no-any-return]
        return out  # type: ignore[no-any-return]

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
        traced: jax.stages.Traced = staged.trace(*call.args, **call.kwargs)
        return traced

    def lower(self, *args: _P.args, **kwargs: _P.kwargs) -> Lowered:
        """Lower for these arguments, as `jax.jit(...).lower`: a
        [`Lowered`][treespec._transforms.stages.Lowered], whose `.compile()` gives a
        [`Compiled`][treespec._transforms.stages.Compiled] called like the function."""
        call, staged = self._staged(args, kwargs)
        lowered = staged.lower(*call.args, **call.kwargs)
        return Lowered(lowered, call)

    def eval_shape(self, *args: _P.args, **kwargs: _P.kwargs) -> Any:
        """The output for these arguments without computing it: a
        `jax.ShapeDtypeStruct` for each array, the values of the rest."""
        call, staged = self._staged(args, kwargs)
        return call.output(staged.eval_shape(*call.args, **call.kwargs))

    def _staged(self, args: Any, kwargs: Any) -> tuple[StagedCall, Any]:
        """The call as its stages see it, and the `jax.jit` they are of."""
        call = self._staged_call(args, kwargs)
        return call, staged_jit(call, self._traced, self._jax_kwargs)

    def _staged_call(self, args: Any, kwargs: Any) -> StagedCall:
        try:
            return StagedCall(self._splitter, args, kwargs)
        except TypeError as error:
            if isinstance(error, SpecError):
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


def _unbind(fun: Any, static_flags: Any) -> tuple[Any, Any, Any] | None:
    """`(function, instance, flags for the function)` of a bound method."""
    # `types.MethodType`, and method objects like Equinox's bound methods.
    func = getattr(fun, "__func__", None)
    instance = getattr(fun, "__self__", None)
    if instance is None or isinstance(instance, type) or not inspect.isfunction(func):
        return None
    if static_flags is None or isinstance(static_flags, Mapping):
        return func, instance, static_flags
    if isinstance(static_flags, (list, tuple)) and not hasattr(static_flags, "_fields"):
        return func, instance, [None, *static_flags]  # nothing said for `self`
    names = list(inspect.signature(func).parameters)[1:]
    return func, instance, dict.fromkeys(names, static_flags)


@overload
def jit(
    fun: Callable[_P, _R],
    *,
    static_flags: Any = None,
    default: str = "infer",
    validate: bool = True,
    explain_recompiles: bool = False,
    check_processes: bool | None = None,
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
    check_processes: bool | None = None,
    **jax_jit_kwargs: Any,
) -> Callable[[Callable[_P, _R]], Jitted[_P, _R]]: ...


def jit(
    fun: Callable[_P, _R] | None = None,
    *,
    static_flags: Any = None,
    default: str = "infer",
    validate: bool = True,
    explain_recompiles: bool = False,
    check_processes: bool | None = None,
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
      one entry per positional parameter (and one for `*args`, covering every
      extra argument) or a dict keyed by parameter name; entries are `True`
      (static), `False` (traced), `None` (no say), a callable `leaf -> bool`,
      or a prefix tree of those.
    - `default`: the policy for leaves nothing else covers: `"infer"` (arrays
      traced, everything else static), `"static"`, `"dynamic"` or `"error"`.
    - `validate`: check arguments against their annotations (once per new tree
      structure or static key; free on a compile-cache hit).
    - `explain_recompiles`: log every retrace after the first on logger
      `treespec`, naming the leaves that changed (also
      `TREESPEC_EXPLAIN_RECOMPILES=1`). In a multi-process job each line
      starts with the process index (`process 1: `).
    - `check_processes`: under `jax.distributed` with more than one process,
      compare each trace's static key (a digest) with every other process's
      before the program runs, and raise
      [`ValidationError`][treespec.ValidationError] on every process when they
      differ (JAX would silently run a mix of programs). Once per compile-cache
      miss: free on a hit; no check at all with one process. `None` (the
      default): on, unless `TREESPEC_CHECK_PROCESSES=0`. A tracing process
      waits at most `TREESPEC_PROCESS_TIMEOUT` seconds (60 by default) for the
      others, then raises naming those that did not trace. See
      [Multi-host](multihost.md).
    - `**jax_jit_kwargs`: passed to `jax.jit` (`in_shardings` and
      `out_shardings` as prefix trees over the arguments and the output,
      `device`, `backend`, `keep_unused`, `compiler_options`, ...).
      `static_argnums`/`static_argnames`/`donate_argnums`/`donate_argnames`
      are refused: use `static_flags`/`Static` and `Donate`.

    **Returns:**

    A [`Jitted`][treespec.Jitted] wrapper with `fun`'s signature, plus
    `.lower(...)`, `.spec` and `.clear_cache()`. Outputs may hold non-array
    leaves; they come back as the Python objects.

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
        # A bound method: jit its function with the instance as an argument,
        # resolved like any other (its arrays traced), so the trace serves
        # every instance of the same structure, as `equinox.filter_jit(m.method)`.
        bound = _unbind(f, static_flags)
        target, flags = (bound[0], bound[2]) if bound else (f, static_flags)
        jitted = Jitted(
            target,
            static_flags=flags,
            default=default,
            validate=validate,
            explain_recompiles=explain_recompiles,
            jax_kwargs=jax_jit_kwargs,
            check_processes=check_processes,
            localns=localns,
        )
        if bound is not None:
            return jitted.__get__(bound[1], type(bound[1]))  # type: ignore[no-any-return]
        return jitted

    return wrap if fun is None else wrap(fun)
