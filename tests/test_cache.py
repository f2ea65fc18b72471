"""The cache belongs to the wrapped function
(`treespec._runtime.calling.cache`), as in JAX."""

from __future__ import annotations

import dataclasses
import gc
import weakref
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treespec
from treespec import Static


def test_a_new_jit_of_the_same_function_reuses_its_traces(
    counter: dict[str, int],
) -> None:
    def f(x: jax.Array, n: Static[int]) -> jax.Array:
        counter["n"] += 1
        return x * n

    for _ in range(3):
        np.testing.assert_allclose(treespec.jit(f)(jnp.ones(2), 3), 3.0)
    assert counter["n"] == 1
    assert treespec.jit(f).trace_count == 1  # the count is the function's too
    treespec.jit(f, validate=False)(jnp.ones(2), 3)  # other options: own cache
    assert counter["n"] == 2


def test_inline_jit_of_grad_and_grad_of_jit_trace_once(counter: dict[str, int]) -> None:
    def loss(w: jax.Array, k: Static[int]) -> jax.Array:
        counter["n"] += 1
        return jnp.sum(w**2) * k

    for i in range(3):
        g = treespec.jit(treespec.grad(loss))(jnp.full(2, float(i), jnp.float32), 2)
        np.testing.assert_allclose(g, jnp.full(2, 4.0 * i))
    assert counter["n"] == 1
    counter["n"] = 0
    for i in range(3):
        g = treespec.grad(treespec.jit(loss))(jnp.full(2, float(i), jnp.float32), 2)
        np.testing.assert_allclose(g, jnp.full(2, 4.0 * i))
    assert counter["n"] == 1
    counter["n"] = 0
    treespec.jit(treespec.grad(loss, has_aux=False, argnums=0))(jnp.ones(2), 2)
    assert counter["n"] == 0  # the same options spelled out: the same cache
    treespec.jit(treespec.value_and_grad(loss))(jnp.ones(2), 2)
    assert counter["n"] == 1  # another inner transform: another cache


_TRACES = {"n": 0}


class Counter(eqx.Module):
    increment: Any  # "infer" by value: a Python int static, an array traced

    def add(self, y: jax.Array) -> jax.Array:
        _TRACES["n"] += 1
        return y + self.increment


@pytest.mark.parametrize("afresh", [True, False])
def test_a_method_jitted_afresh_each_call_traces_once_per_structure(
    afresh: bool,
) -> None:
    # The equivalent of Equinox's filter_jit method test: the instance is an
    # argument (its arrays traced, its Python ints static), so instances of
    # one structure share a trace, however the method is jitted.
    class Decorated(Counter):
        @treespec.jit
        def add_jitted(self, y: jax.Array) -> jax.Array:
            return self.add(y)

    def run(m: Any) -> Any:
        if afresh:
            return treespec.jit(m.add)(jnp.ones(1))
        return m.add_jitted(jnp.ones(1))

    _TRACES["n"] = 0
    make = Decorated
    m = make(1)
    np.testing.assert_allclose(run(m), 2.0)
    np.testing.assert_allclose(run(m), 2.0)
    assert _TRACES["n"] == 1
    n = make(2)  # another static int: another trace
    np.testing.assert_allclose(run(n), 3.0)
    np.testing.assert_allclose(run(n), 3.0)
    assert _TRACES["n"] == 2
    o, p = make(jnp.array([5.0])), make(jnp.array([6.0]))  # arrays: traced
    np.testing.assert_allclose(run(o), 6.0)
    assert _TRACES["n"] == 3
    np.testing.assert_allclose(run(p), 7.0)
    assert _TRACES["n"] == 3


def test_no_function_is_kept_alive_by_having_been_jitted() -> None:
    def use() -> weakref.ref[Any]:
        # In a frame of its own: a decorating frame's locals snapshot (read
        # for forward references) holds `f` until the frame ends.
        def f(x: jax.Array) -> jax.Array:
            return x + 1

        jitted = treespec.jit(f)
        jitted(jnp.ones(1))
        treespec.jit(treespec.grad(lambda x: jnp.sum(f(x))))(jnp.ones(1))
        assert jitted.trace_count == 1
        return weakref.ref(f)

    ref = use()
    gc.collect()
    assert ref() is None


def test_unhashable_options_just_do_not_share(counter: dict[str, int]) -> None:
    def f(x: jax.Array, cfg: Any) -> jax.Array:
        counter["n"] += 1
        return x * cfg["k"]

    flags = [False, {"k": lambda v: True}]  # a new lambda each time: a new key
    treespec.jit(f, static_flags=flags)(jnp.ones(1), {"k": 2})
    treespec.jit(f, static_flags=[False, {"k": True}])(jnp.ones(1), {"k": 2})
    treespec.jit(f, static_flags=[False, {"k": True}])(jnp.ones(1), {"k": 2})
    assert counter["n"] == 2


class _Scaled:
    def __init__(self, w: jax.Array) -> None:
        self.w = w

    @treespec.jit
    def f(self, x: jax.Array) -> jax.Array:
        return x * self.w


class _ScaledModule(eqx.Module):
    w: jax.Array

    @treespec.jit
    def f(self, x: jax.Array) -> jax.Array:
        return x * self.w


@pytest.mark.parametrize("make", [_Scaled, _ScaledModule], ids=["plain", "module"])
def test_a_jit_of_a_transformed_method_of_another_instance_is_not_shared(
    make: Any,
) -> None:
    # `treespec.jit(m.f)` traces m.f with m bound (its arrays are constants of
    # that trace): the wrapper of another instance's m.f must not reuse it.
    m1, m2 = make(jnp.ones(2)), make(10 * jnp.ones(2))
    np.testing.assert_allclose(treespec.jit(m1.f)(jnp.ones(2)), 1.0)
    np.testing.assert_allclose(treespec.jit(m2.f)(jnp.ones(2)), 10.0)
    np.testing.assert_allclose(treespec.jit(m1.f)(jnp.ones(2)), 1.0)


def test_dict_options_in_another_key_order_share_one_cache(
    counter: dict[str, int],
) -> None:
    def f(k: int, m: int) -> int:
        counter["n"] += 1
        return k + m

    assert treespec.jit(f, static_flags={"k": True, "m": True})(1, 2) == 3
    # The same flags written in another order: the same options, the same trace.
    assert treespec.jit(f, static_flags={"m": True, "k": True})(1, 2) == 3
    assert counter["n"] == 1
    assert treespec.jit(f, static_flags={"m": True, "k": True}).trace_count == 1


@dataclasses.dataclass(frozen=True)
class _Sweep:
    """A static config of a sweep: equal values are equal keys."""

    scale: int


def _one_trial(make: Any, cfg: _Sweep) -> tuple[weakref.ref[Any], Any]:
    """A step function built, called once and dropped, as a sweep does per trial
    (in a frame of its own, see above); weak references to its config and to
    what it compiled (the state of a treespec transform, else the function)."""
    offset = jnp.full(3, float(cfg.scale))  # a closure, as a trial's step is

    def step(x: jax.Array, cfg: Static[_Sweep]) -> jax.Array:
        return jnp.sin(x) * cfg.scale + offset

    jitted = make(step)
    np.testing.assert_allclose(jitted(jnp.zeros((1, 3)), cfg), float(cfg.scale))
    state = getattr(jitted, "_state", step)
    return weakref.ref(cfg), weakref.ref(state)


_TRIALS = {
    "jit": treespec.jit,
    "jit of grad": lambda f: treespec.jit(
        treespec.grad(lambda x, cfg: jnp.sum(f(x, cfg)))
    ),
    "jit of vmap": lambda f: treespec.jit(treespec.vmap(f, in_axes=(0, None))),
    "jit of checkpoint": lambda f: treespec.jit(treespec.checkpoint(f)),
    "checkpoint": treespec.checkpoint,
    "pmap": treespec.pmap,
}


@pytest.mark.parametrize("transform", list(_TRIALS))
def test_a_dropped_jitted_function_releases_what_it_compiled(transform: str) -> None:
    make = _TRIALS[transform]
    refs = [_one_trial(make, _Sweep(100 + i)) for i in range(3)]
    gc.collect()
    assert [state() for _, state in refs] == [None] * 3
    # Its static values go as jax.jit's do: JAX's own caches hold them (by
    # value, bounded) until jax.clear_caches().
    jax.clear_caches()
    gc.collect()
    assert [cfg() for cfg, _ in refs] == [None] * 3


@pytest.mark.parametrize("transform", ["jit", "jit of grad"])
def test_a_dropped_closures_static_config_dies_when_jax_jits_would(
    transform: str,
) -> None:
    # A sweep builds a new step per trial, with configs equal to earlier ones:
    # JAX's global caches keep the first of equal static values, no other.
    def alive(make: Any, scale: int) -> list[bool]:
        refs = [_one_trial(make, _Sweep(scale)) for _ in range(4)]
        gc.collect()
        return [cfg() is not None for cfg, _ in refs]

    # Values no other test uses: JAX's caches are the process's.
    scale = 1000 + len(transform)
    expected = alive(lambda f: jax.jit(f, static_argnums=1), scale)
    # The test can fail: JAX 0.9 and newer keep the first config (its global
    # caches), JAX 0.8 keeps none; treespec must keep what jax.jit keeps.
    assert expected in ([True, False, False, False], [False] * 4)
    assert alive(_TRIALS[transform], -scale) == expected


def test_a_dropped_jitted_function_goes_without_waiting_for_a_collection() -> None:
    # As jax.jit's: its programs are freed when its last user goes, not at
    # the next collection (in a loop of trials, they would pile up until
    # then: memory the allocator keeps).
    _one_trial(treespec.jit, _Sweep(99))  # the first trace's one-off caches
    gc.collect()
    gc.disable()
    try:
        _, state = _one_trial(treespec.jit, _Sweep(98))
        assert state() is None
    finally:
        gc.enable()


def test_at_most_max_variants_option_sets_are_kept_the_oldest_released() -> None:
    from treespec._runtime.calling import cache

    def f(x: jax.Array) -> jax.Array:
        return x + 1

    states = []
    for i in range(cache.MAX_VARIANTS + 1):  # one option set more than kept
        wrapper = treespec.jit(f, static_flags=[(lambda leaf, i=i: False)])
        wrapper(jnp.ones(1))
        states.append(weakref.ref(wrapper._state))
        del wrapper
    gc.collect()
    assert states[0]() is None  # the oldest option set: released
    assert states[1]() is not None and states[-1]() is not None
    assert sum(s() is not None for s in states) == cache.MAX_VARIANTS


def test_a_new_instance_at_a_dead_instances_address_gets_its_own_state() -> None:
    class Model:
        def apply(self, x: jax.Array) -> jax.Array:
            return x * 2

    first = Model()
    address = id(first)
    treespec.jit(first.apply)(jnp.ones(1))
    assert treespec.jit(first.apply).trace_count == 1
    del first
    gc.collect()
    made = [Model() for _ in range(10_000)]  # CPython reuses the freed block
    second = next((m for m in made if id(m) == address), None)
    if second is None:
        pytest.skip("no instance landed at the dead instance's address")
    again = treespec.jit(second.apply)
    assert again.trace_count == 0  # not the dead instance's state
    again(jnp.ones(1))
    assert again.trace_count == 1


def test_what_a_bound_method_compiled_goes_with_its_instance() -> None:
    # `treespec.jit(model.apply)` of a plain class: the programs compiled for
    # that instance go when the instance does (as `jax.jit(model.apply)`'s
    # go with the method), not when the function's variants overflow.
    class Model:
        def __init__(self, k: float) -> None:
            self.k = k

        def apply(self, x: jax.Array) -> jax.Array:
            return x * self.k

    states = []
    for k in range(3):
        model = Model(float(k))
        jitted = treespec.jit(model.apply)
        np.testing.assert_allclose(jitted(jnp.ones(2)), float(k))
        states.append(weakref.ref(jitted._state))
        del jitted, model
    gc.collect()
    assert [state() for state in states] == [None] * 3


@pytest.mark.parametrize("how", ["copy", "deepcopy"])
def test_a_copy_of_a_jitted_function_outlives_the_original(how: str) -> None:
    # The copy is a wrapper of the same function with the same cache: once
    # the original is dropped, it still calls what was compiled (no trace),
    # traces a new key itself, and counts as the original did.
    import copy

    runs: list[int] = []

    def f(x: jax.Array, n: Static[int]) -> jax.Array:
        runs.append(n)
        return x * n

    jitted = treespec.jit(f)
    jitted(jnp.ones(2), 2)
    again = getattr(copy, how)(jitted)
    del jitted
    gc.collect()
    np.testing.assert_allclose(again(jnp.ones(2), 2), 2.0)
    assert runs == [2] and again.trace_count == 1
    np.testing.assert_allclose(again(jnp.ones(2), 3), 3.0)
    assert runs == [2, 3] and again.trace_count == 2
    np.testing.assert_allclose(
        again.lower(jnp.ones(2), 4).compile()(jnp.ones(2), 4), 4.0
    )
    assert runs == [2, 3, 4] and again.trace_count == 3
    again.clear_cache()
    np.testing.assert_allclose(again(jnp.ones(2), 2), 2.0)
    assert runs == [2, 3, 4, 2] and again.trace_count == 4
