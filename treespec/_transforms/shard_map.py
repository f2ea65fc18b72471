"""`shard_map`: `in_specs` over the dynamic view, static leaves passed through."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import jax
from jax.sharding import PartitionSpec
from typing_extensions import ParamSpec

from .._model.errors import AT_THE_CALL, SpecError
from .._runtime.api import caller_namespace
from .._runtime.calling.routes import Key, key_split
from .._runtime.planning.plan import Kind
from .._runtime.planning.prefix import broadcast_call
from .base import Counted
from .bodies import as_users
from .outputs import join_output

__all__ = ["shard_map"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


_REPLICATED = PartitionSpec()  # type: ignore[no-untyped-call]


def _is_spec_entry(x: Any) -> bool:
    return x is None or isinstance(x, PartitionSpec)


class _ShardMapped(Counted[_P, _R]):
    _name = "shard_map"
    _writes_back = False
    _unchanged = (
        "no leaf changed: an eager shard_map call traces each time it runs, "
        "as jax.shard_map's does; wrap it in treespec.jit to trace it once"
    )

    def __init__(
        self,
        fun: Callable[_P, _R],
        *,
        mesh: Any,
        in_specs: Any,
        out_specs: Any,
        jax_kwargs: dict[str, Any],
        **kw: Any,
    ) -> None:
        # Prefix trees (in_axes, in_specs) follow the call as written.
        super().__init__(fun, bind_calls=False, **kw)
        self._mesh = mesh
        self._in_specs = in_specs
        self._out_specs = out_specs
        self._jax_kwargs = jax_kwargs
        self._mapped: dict[Key, Callable[..., Any]] = {}
        self._lock = threading.Lock()

    def _cache_options(self) -> tuple[Any, ...]:
        return (
            *super()._cache_options(),
            self._mesh,
            self._in_specs,
            self._out_specs,
            self._jax_kwargs,
        )

    def _specs(self, key: Key, args: Any, kwargs: Any) -> tuple[Any, ...]:
        split = key_split(key)
        entries = broadcast_call(
            self._in_specs, self.spec, args, kwargs, _is_spec_entry, "in_specs"
        )
        specs = []
        for i, entry in enumerate(entries):
            if split.kinds[i] is Kind.STATIC:
                # `P()` too (an empty tuple): written at a static leaf, any
                # spec would be ignored, as jit's in_shardings refuses.
                if entry.exact and entry.value is not None:
                    info = split.plan.infos[i]
                    raise SpecError(
                        f"{entry.where} shards {info.path}, which is static "
                        f"({info.source}); static leaves are passed to every shard "
                        "whole: give None there, or mark the leaf Dynamic."
                    )
                continue
            specs.append(_REPLICATED if entry.value is None else entry.value)
        return tuple(specs)

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with AT_THE_CALL:
            key, dynamic = self._splitter.split_call(args, kwargs)
        try:
            mapped = self._mapped.get(key)
        except TypeError as raised:  # an unhashable static leaf: named
            self._refuse(args, kwargs, raised)
            raise
        if mapped is None:
            specs = self._specs(key, args, kwargs)

            def body(*leaves: Any) -> Any:
                return self._traced(key, *leaves)

            split = key_split(key)
            names = split.plan.route.arg_names(split)
            mapped = jax.shard_map(
                as_users(body, self._fun, names, keyed=False),
                mesh=self._mesh,
                in_specs=specs,
                out_specs=self._out_specs,
                **self._jax_kwargs,
            )
            with self._lock:
                self._mapped[key] = mapped
        with AT_THE_CALL:  # a refusal while tracing: from this call's frame
            return join_output(mapped(*dynamic))  # type: ignore[no-any-return]


def shard_map(
    fun: Callable[_P, _R],
    mesh: Any,
    in_specs: Any,
    out_specs: Any,
    *,
    check_vma: bool = True,
    static_flags: Any = None,
    default: str = "infer",
    validate: bool = True,
    explain_recompiles: bool = False,
) -> Counted[_P, _R]:
    """`jax.shard_map` whose `in_specs` cover only the dynamic leaves.

    **Arguments:**

    - `fun`: the per-shard function.
    - `mesh`: a `jax.sharding.Mesh`.
    - `in_specs`: a `PartitionSpec` (or None: replicated) for everything, a
      tuple with one per positional argument, a dict by parameter name, or
      prefix trees below; entries at static leaves are ignored (a spec written
      at a static leaf itself is a [`SpecError`][treespec.SpecError]). Static
      leaves reach every shard as the Python values.
    - `out_specs`: as in JAX, over the array outputs.
    - `check_vma`: as in JAX.
    - `static_flags`, `default`, `validate`, `explain_recompiles`: as for
      [`treespec.jit`][treespec.jit]. `Donate` leaves are not donated by an
      eager call (JAX's eager `shard_map` runs without compiling): wrap the
      sharded function in [`treespec.jit`][treespec.jit] to donate them.

    **Returns:**

    The sharded function. Its `.trace_count` says how often it traced: an
    eager call traces each time it runs (as `jax.shard_map`'s does); inside
    `treespec.jit` it traces once per static key.

    !!! example

        ```python
        import jax
        import jax.numpy as jnp
        import numpy as np
        import treespec
        from jax.sharding import Mesh, PartitionSpec as P
        from treespec import Static

        mesh = Mesh(np.array(jax.devices()), ("d",))

        def shard_sum(x: jnp.ndarray, k: Static[int]) -> jnp.ndarray:
            return jax.lax.psum(jnp.sum(x) * k, "d")

        total = treespec.shard_map(shard_sum, mesh, in_specs=P("d"), out_specs=P())
        assert float(total(jnp.ones(len(jax.devices()) * 2), 3)) == 6.0 * len(
            jax.devices()
        )
        ```
    """
    return _ShardMapped(
        fun,
        mesh=mesh,
        in_specs=in_specs,
        out_specs=out_specs,
        jax_kwargs={"check_vma": check_vma},
        static_flags=static_flags,
        default=default,
        validate=validate,
        explain_recompiles=explain_recompiles,
        localns=caller_namespace(1),
    )
