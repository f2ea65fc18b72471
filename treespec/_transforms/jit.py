"""`treespec.jit`: `jax.jit` with a per-leaf static/dynamic/donate split."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, overload

import jax
from typing_extensions import ParamSpec

from .._model.errors import SpecError, ValidationError
from .._runtime.api import caller_namespace
from .._runtime.calling.cache import JitState, freeze, shared_state
from .._runtime.calling.layout import is_sharding
from .._runtime.calling.routes import Key, StaleKey, key_split
from .._runtime.checking.retrace import (
    checking_shapes,
    describe_retrace,
    describe_view,
    explain_enabled,
    log_retrace,
)
from .._runtime.partition import combine
from .._runtime.planning.graph import Updated
from .._runtime.planning.plan import Split
from .._runtime.planning.processes import ProcessCheck, check_enabled, log_prefix
from .base import Transformed
from .bodies import as_users, weak_method
from .jit_stages import JitStages
from .methods import unbind
from .outputs import WithStatic

__all__ = ["Jitted", "jit"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

logger = logging.getLogger("treespec")

_FORBIDDEN = {
    "static_argnums": "mark the leaves Static[...] or pass static_flags=",
    "static_argnames": "mark the leaves Static[...] or pass static_flags=",
    "donate_argnums": "annotate the leaves Donate[...]",
    "donate_argnames": "annotate the leaves Donate[...]",
    # Equinox's `filter_jit(donate="all")`: every array of every argument.
    "donate": "annotate the arguments to donate Donate[...] (around a model, "
    "it donates the model's arrays, as eqx.filter_jit(donate='all') does)",
}


def _refuse_per_argument(jax_kwargs: Mapping[str, Any]) -> None:
    """`jax.jit`'s per-argument options have per-leaf counterparts here."""
    for name, fix in _FORBIDDEN.items():
        if name in jax_kwargs:
            raise SpecError(
                f"treespec.jit does not take {name}=: {fix}. treespec decides "
                "per leaf, in the hints."
            )


class Jitted(JitStages[_P, _R]):
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
        _refuse_per_argument(jax_kwargs)
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

    def _caller(self, split: Split) -> Callable[..., Any]:
        state = self._state
        with state.lock:
            known = state.callers.get(split.token)
            if known is not None:
                return known
            route = split.plan.route
            donate = route.donate_argnums(split)
            in_sh = route.in_shardings(split)
            kwargs = dict(self._jax_kwargs)
            if in_sh is not None:
                kwargs["in_shardings"] = in_sh
            # The state's body, not this wrapper's: the compiled function
            # must not keep a wrapper (and so the function) alive; and it
            # reaches the state weakly, so that the state (and with it every
            # program) goes as soon as its last wrapper does. One per split,
            # named for JAX as the user's function and arguments.
            body = weak_method(state.traced)
            compiled = jax.jit(
                as_users(body, self._fun, route.arg_names(split)),
                static_argnums=0,
                donate_argnums=donate,
                **kwargs,
            )
            state.compiled[split.token] = compiled
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
        if checking_shapes():  # the shape check's trace: none of the user's
            return out
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
                state.scalars.seen(
                    self.__treespec_spec__.name, state.traces.count, view, before, now
                )
        return out

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        __tracebackhide__ = True  # pytest's and IPython's tracebacks
        splitter = self._splitter
        route = splitter.positional
        call: tuple[Any, ...] = args
        named: dict[str, Any] = kwargs
        if named or len(call) != splitter.binder.direct_npos:
            call, named = splitter.bind(call, named)  # f(x, n=2) as f(x, 2)
        try:
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
                            key = route.probes.get(
                                (*mixed, *map(type, values), *values)
                            )
                        except TypeError:  # an unhashable value: `split` stops probing
                            key = None
                if key is None:
                    key, dynamic = route.split(call, named)
                else:
                    dynamic = route.get_whole(call)
            else:
                key, dynamic = splitter.general.split(call, named)
        except ValidationError as refused:
            # Refused before JAX runs (a missing or unexpected key, another
            # container): raised from here, as what tracing refuses is, not
            # under the frames of the plan that found it (a cause it was
            # given, such as a static value's own error, stays). What
            # `AT_THE_CALL` does for the other transforms, inlined: a `try`
            # costs this hot path nothing, a `with` does.
            raise refused.with_traceback(None) from refused.__cause__
        caller = self._callers.get(key[0])  # by the key's `SplitId`
        try:
            if caller is None:
                caller = self._caller(key_split(key))
            out = caller(key, *dynamic)
        except StaleKey:  # another thread cleared the cache: this call again
            return self(*args, **kwargs)
        except (TypeError, ValueError, RuntimeError) as raised:
            # JAX's refusal of a leaf (RuntimeError: a deleted buffer).
            error = splitter.diagnose(call, named, raised)
            if error is None:
                raise
            raise error from None  # JAX's error stays the __context__
        if type(out) is WithStatic:  # inlined join_output: this is the hot path
            return combine(out.dynamic, out.static)  # type: ignore[no-any-return]
        if type(out) is Updated:  # NNX objects it changed: written back
            return self._output(out, key, call, named)  # type: ignore[no-any-return]
        return out  # type: ignore[no-any-return]


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
        # A bound method of a pytree: jit its function with the instance as
        # an argument, resolved like any other (its arrays traced), so the
        # trace serves every instance of the same structure, as
        # `equinox.filter_jit(m.method)` (see `unbind`).
        bound = unbind(f, static_flags)
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
