"""`vmap` and `pmap`: static leaves are never mapped, whatever `in_axes` says."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import jax
import numpy as np
from typing_extensions import ParamSpec

from .._model.errors import (
    AT_THE_CALL,
    Issue,
    SpecError,
    ValidationError,
    describe_value,
    location,
)
from .._runtime.api import caller_namespace
from .._runtime.calling.routes import Key, key_split
from .._runtime.planning.plan import Kind, Split
from .._runtime.planning.prefix import Entry, broadcast_call
from .base import Counted, Transformed
from .bodies import as_users, weak_method
from .mapped_graph import MappedGraph
from .out_axes import OutAxes, has_callable
from .outputs import join_output

__all__ = ["pmap", "vmap"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _is_axis_entry(x: Any) -> bool:
    return x is None or isinstance(x, int) or (callable(x) and not isinstance(x, type))


def _dynamic_entries(
    transform: Transformed[Any, Any],
    in_axes: Any,
    split: Split,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> list[Entry]:
    """The `in_axes` entry of each dynamic leaf; depends on the structure only."""
    entries = broadcast_call(
        in_axes,
        transform.spec,
        args,
        kwargs,
        _is_axis_entry,
        "in_axes",
        kwarg_default=0,
    )
    dynamic: list[Entry] = []
    for i, entry in enumerate(entries):
        if split.kinds[i] is not Kind.STATIC:
            dynamic.append(entry)
        elif entry.exact and entry.value is not None and not callable(entry.value):
            info = split.plan.infos[i]
            raise SpecError(
                f"{entry.where} maps axis {entry.value} of {info.path}, which is "
                f"static ({info.source}); static leaves are never mapped: give "
                "None there, or mark the leaf Dynamic."
            )
    return dynamic


def _resolve_axes(
    transform: Transformed[Any, Any],
    split: Split,
    entries: Sequence[Entry],
    dynamic: Sequence[Any],
) -> tuple[Any, ...]:
    """One axis (or None) per dynamic leaf of this call, checked against its rank."""
    axes: list[Any] = []
    issues: list[Issue] = []
    for i, entry, leaf in zip(split.dynamic_idx, entries, dynamic):
        axis = entry.value(leaf) if callable(entry.value) else entry.value
        if axis is not None:
            ndim = np.ndim(leaf)
            if not -ndim <= axis < max(ndim, 1) or ndim == 0:
                info = split.plan.infos[i]
                issues.append(
                    Issue(
                        location(info.argument, info.path),
                        f"an array with an axis {axis} to map over ({entry.where})",
                        describe_value(leaf),
                    )
                )
        axes.append(axis)
    if issues:
        raise ValidationError(issues, transform.spec.name)
    return tuple(axes)


class _AxisMapped(Transformed[_P, _R]):
    """What vmap and pmap share: `in_axes` over the dynamic leaves, JAX options."""

    _maps_arguments = True

    def __init__(
        self,
        fun: Callable[_P, _R],
        *,
        in_axes: Any,
        jax_kwargs: dict[str, Any],
        **kw: Any,
    ) -> None:
        # Prefix trees (in_axes, in_specs) follow the call as written.
        super().__init__(fun, bind_calls=False, **kw)
        self._in_axes = in_axes
        self._entries: dict[Split, list[Entry]] = {}
        out_axes = jax_kwargs.get("out_axes", 0)
        #: `out_axes` with callables in it (`eqx.if_array(0)`): chosen per
        #: output leaf while tracing, see `OutAxes`.
        self._out_axes: OutAxes | None = None
        if has_callable(out_axes):
            self._out_axes = OutAxes(out_axes)
            jax_kwargs = {**jax_kwargs, "out_axes": (0, None)}
        elif not isinstance(out_axes, (int, type(None))):
            self._output_tree = "out_axes"
        self._jax_kwargs = jax_kwargs

    def _cache_options(self) -> tuple[Any, ...]:
        return (*super()._cache_options(), self._in_axes, self._jax_kwargs)

    def _axes(
        self,
        split: Split,
        dynamic: Sequence[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> tuple[Any, ...]:
        """The axis of each dynamic leaf; the prefix walk once per tree structure."""
        entries = self._entries.get(split)
        if entries is None:
            entries = _dynamic_entries(self, self._in_axes, split, args, kwargs)
            self._entries[split] = entries
        return _resolve_axes(self, split, entries, dynamic)


class _VMapped(_AxisMapped[_P, _R]):
    _name = "vmap"

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with AT_THE_CALL:
            key, dynamic = self._splitter.split_call(args, kwargs)
            split = key_split(key)
            axes = self._axes(split, dynamic, args, kwargs)
        names = split.plan.route.arg_names(split)
        if split.plan.graph is not None:  # NNX objects: changes written back
            graph = self._mapped_graph(key, split, dynamic, axes, names, args, kwargs)
            return graph  # type: ignore[no-any-return]
        out_axes = self._out_axes
        if out_axes is None:

            def body(*leaves: Any) -> Any:
                return self._traced(key, *leaves)

            named = as_users(body, self._fun, names, keyed=False)
            mapped = jax.vmap(named, in_axes=axes, **self._jax_kwargs)
            with AT_THE_CALL:  # a refusal while tracing: from this frame
                return join_output(mapped(*dynamic))  # type: ignore[no-any-return]
        record: dict[str, Any] = {}

        def grouped(*leaves: Any) -> Any:
            return out_axes.split(self._traced(key, *leaves), record)

        named = as_users(grouped, self._fun, names, keyed=False)
        with AT_THE_CALL:
            groups = jax.vmap(named, in_axes=axes, **self._jax_kwargs)(*dynamic)
        return out_axes.join(groups, record)  # type: ignore[no-any-return]

    def _mapped_graph(
        self,
        key: Key,
        split: Split,
        dynamic: Sequence[Any],
        axes: tuple[Any, ...],
        names: Sequence[str],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """The call of one holding NNX objects (see `mapped_graph.py`)."""
        graph = MappedGraph(split.plan.graph, split, axes)
        out_axes = self._out_axes
        record: dict[str, Any] = {}

        def result(out: Any) -> Any:
            return out if out_axes is None else out_axes.split(out, record)

        def traced(*leaves: Any) -> Any:
            return self._traced(key, *leaves)

        body = as_users(graph.body(traced, result), self._fun, names, keyed=False)
        given = (0, None) if out_axes is not None else self._jax_kwargs["out_axes"]
        options = {**self._jax_kwargs, "out_axes": graph.out_axes(given)}
        try:
            with AT_THE_CALL:
                out, groups = jax.vmap(body, in_axes=axes, **options)(*dynamic)
        except ValueError as error:
            refused = graph.refused(error, self.spec.name)
            if refused is None:
                raise
            raise refused from None
        if out_axes is not None:
            out = out_axes.join(out, record)
        return self._output(graph.updated(out, groups), key, args, kwargs)


def vmap(
    fun: Callable[_P, _R],
    in_axes: Any = 0,
    out_axes: Any = 0,
    *,
    axis_name: Any = None,
    axis_size: int | None = None,
    static_flags: Any = None,
    default: str = "infer",
    validate: bool = True,
) -> Transformed[_P, _R]:
    """`jax.vmap` that never maps a static leaf.

    **Arguments:**

    - `fun`: the function to map.
    - `in_axes`: as in JAX (an int or None for everything, a tuple with one
      entry per positional argument, a dict by parameter name, or prefix trees
      below), and entries may be callables `leaf -> axis or None`. Static
      leaves are never mapped; an axis written at a static leaf itself is a
      [`SpecError`][treespec.SpecError]. Keyword arguments are mapped over axis 0
      unless a dict names them.
    - `out_axes`, `axis_name`, `axis_size`: as in JAX.
    - `static_flags`, `default`, `validate`: as for
      [`treespec.jit`][treespec.jit].

    **Returns:**

    The mapped function; non-array outputs come back as Python objects.

    !!! example

        ```python
        import jax.numpy as jnp
        import treespec
        from treespec import Static

        def scale(x: jnp.ndarray, cfg: dict[str, Static[int]]) -> jnp.ndarray:
            return x * cfg["k"]

        out = treespec.vmap(scale)(jnp.ones((4, 3)), {"k": 2})
        assert out.shape == (4, 3)
        ```
    """
    return _VMapped(
        fun,
        in_axes=in_axes,
        jax_kwargs={
            "out_axes": out_axes,
            "axis_name": axis_name,
            "axis_size": axis_size,
        },
        static_flags=static_flags,
        default=default,
        validate=validate,
        localns=caller_namespace(1),
    )


class _PMapped(_AxisMapped[_P, _R], Counted[_P, _R]):
    _name = "pmap"
    _writes_back = False

    def __init__(self, fun: Callable[_P, _R], **kw: Any) -> None:
        super().__init__(fun, **kw)
        self._compiled: dict[tuple[Any, ...], Callable[..., Any]] = {}
        self._records: dict[Key, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def _compiled_for(self, split: Split, axes: tuple[Any, ...]) -> Callable[..., Any]:
        route = split.plan.route
        config = (split.token, route.donate_argnums(split), axes)
        compiled = self._compiled.get(config)
        if compiled is None:
            body = weak_method(
                self._traced if self._out_axes is None else self._grouped
            )
            with self._lock:
                compiled = self._compiled.setdefault(
                    config,
                    jax.pmap(
                        as_users(body, self._fun, route.arg_names(split)),
                        static_broadcasted_argnums=0,
                        in_axes=(None, *axes),
                        donate_argnums=config[1],
                        **self._jax_kwargs,
                    ),
                )
        return compiled

    def _grouped(self, key: Key, *leaves: Any) -> Any:
        """The traced body with callable `out_axes`: the output in two groups,
        the axes recorded per key (pmap traces once per key)."""
        assert self._out_axes is not None
        record = self._records.setdefault(key, {})
        return self._out_axes.split(self._traced(key, *leaves), record)

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        key: Key
        with AT_THE_CALL:
            key, dynamic = self._splitter.split_call(args, kwargs)
            split = key_split(key)
            axes = self._axes(split, dynamic, args, kwargs)
        try:
            with AT_THE_CALL:  # a refusal while tracing: from this frame
                out = self._compiled_for(split, axes)(key, *dynamic)
        except (TypeError, ValueError) as raised:
            # `jax.pmap` hashes the key before anything traces: a leaf it
            # refuses (an array at a static leaf) is named, as under jit.
            self._refuse(args, kwargs, raised)
            raise
        if self._out_axes is not None:
            return self._out_axes.join(out, self._records[key])  # type: ignore[no-any-return]
        return join_output(out)  # type: ignore[no-any-return]


def pmap(
    fun: Callable[_P, _R],
    axis_name: Any = None,
    *,
    in_axes: Any = 0,
    out_axes: Any = 0,
    devices: Sequence[Any] | None = None,
    backend: str | None = None,
    axis_size: int | None = None,
    static_flags: Any = None,
    default: str = "infer",
    validate: bool = True,
    explain_recompiles: bool = False,
) -> Counted[_P, _R]:
    """`jax.pmap` with static leaves broadcast as static, never mapped.

    **Arguments:**

    - `fun`: the function to run once per device.
    - `axis_name`, `out_axes`, `devices`, `backend`, `axis_size`: as in JAX.
    - `in_axes`: as for [`treespec.vmap`][treespec.vmap] (static leaves are
      never mapped).
    - `static_flags`, `default`, `validate`, `explain_recompiles`: as for
      [`treespec.jit`][treespec.jit]. `Donate` leaves are given to
      `jax.pmap`'s `donate_argnums`: what that does depends on the backend
      (see [pmap](transforms/pmap.md)).

    **Returns:**

    The parallel function; compiled once per tree structure, static values
    and axes, like `jax.pmap` with `static_broadcasted_argnums`. Its
    `.trace_count` says how often it traced.

    !!! example

        ```python
        import jax
        import jax.numpy as jnp
        import treespec
        from treespec import Static

        def step(x: jnp.ndarray, k: Static[int]) -> jnp.ndarray:
            return x * k

        n = jax.local_device_count()
        out = treespec.pmap(step)(jnp.ones((n, 3)), 2)
        assert out.shape == (n, 3)
        ```
    """
    return _PMapped(
        fun,
        in_axes=in_axes,
        jax_kwargs={
            "axis_name": axis_name,
            "out_axes": out_axes,
            "devices": devices,
            "backend": backend,
            "axis_size": axis_size,
        },
        static_flags=static_flags,
        default=default,
        validate=validate,
        explain_recompiles=explain_recompiles,
        localns=caller_namespace(1),
    )
