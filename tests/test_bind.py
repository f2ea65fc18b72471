"""The bound call (`treespec._runtime.calling.bind`): one key however the arguments
are passed."""

from __future__ import annotations

import inspect
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treespec
from treespec import Dynamic, Static
from treespec._runtime.calling.bind import Binder


def test_defaults_and_keywords_make_one_trace(counter: dict[str, int]) -> None:
    @treespec.jit
    def f(x: Dynamic[jax.Array], n: Static[int] = 2) -> jax.Array:
        counter["n"] += 1
        return x * n

    x = jnp.ones(2)
    for call in (lambda: f(x), lambda: f(x, 2), lambda: f(x, n=2), lambda: f(x=x, n=2)):
        np.testing.assert_allclose(call(), 2.0)
    assert counter["n"] == 1 and f.trace_count == 1
    np.testing.assert_allclose(f(x, n=3), 3.0)  # another value: another key
    assert counter["n"] == 2


def test_keyword_only_defaults_are_part_of_the_bound_call(
    counter: dict[str, int],
) -> None:
    @treespec.jit
    def f(x: jax.Array, *, scale: Static[float] = 1.0, **extra: Any) -> jax.Array:
        counter["n"] += 1
        return x * scale + sum(extra.values())

    x = jnp.ones(1)
    f(x)
    f(x, scale=1.0)
    assert counter["n"] == 1
    np.testing.assert_allclose(f(x, scale=1.0, b=2.0), 3.0)
    np.testing.assert_allclose(f(x, b=2.0), 3.0)
    assert counter["n"] == 2


def test_grad_and_lower_follow_the_bound_call() -> None:
    def loss(w: jax.Array, k: Static[int] = 3) -> jax.Array:
        return jnp.sum(w**2) * k

    g = treespec.grad(loss)
    np.testing.assert_allclose(g(w=jnp.ones(2)), jnp.full(2, 6.0))
    f = treespec.jit(loss)
    compiled = f.lower(jnp.ones(2)).compile()
    np.testing.assert_allclose(compiled(jnp.ones(2), k=3), 6.0)  # same bound call


def test_a_call_that_does_not_fit_the_signature_is_a_type_error() -> None:
    @treespec.jit
    def f(x: jax.Array, n: Static[int] = 2) -> jax.Array:
        return x * n

    with pytest.raises(TypeError, match=r"f\(\): .*unexpected keyword argument 'm'"):
        f(jnp.ones(1), m=3)
    with pytest.raises(TypeError, match=r"f\(\): .*multiple values for argument 'x'"):
        f(jnp.ones(1), x=jnp.ones(1))


def test_binder_rewrites_by_shape() -> None:
    def f(a, b=2, /, c=3, *rest, d, e=5, **more):  # type: ignore[no-untyped-def]
        return a

    binder = Binder(inspect.signature(f), "f")
    assert binder.bind((1,), {"d": 4}) == ((1, 2, 3), {"d": 4, "e": 5})
    assert binder.bind((1, 2, 9, 10), {"d": 4, "z": 0}) == (
        (1, 2, 9, 10),
        {"d": 4, "e": 5, "z": 0},
    )
    assert binder.bind((1,), {"c": 7, "d": 4}) == ((1, 2, 7), {"d": 4, "e": 5})
    # The same shape again: values picked by the remembered plan.
    assert binder.bind((8,), {"c": 6, "d": 1}) == ((8, 2, 6), {"d": 1, "e": 5})
    # b is positional-only: passed by name, it goes to **more, as in Python.
    assert binder.bind((1,), {"b": 9, "d": 4}) == ((1, 2, 3), {"d": 4, "e": 5, "b": 9})
    assert f(1, b=9, d=4) == 1


def test_a_positional_only_name_passed_by_keyword_goes_to_var_keyword() -> None:
    # Python's own rule on every version (Signature.bind follows it only
    # from 3.13 on): k keeps its default and more receives k.
    @treespec.jit
    def g(x: jax.Array, k: Static[int] = 2, /, **more: jax.Array) -> jax.Array:
        return x * k + sum(more.values())

    x = jnp.ones(2)
    np.testing.assert_allclose(g(x, k=jnp.full(2, 10.0)), jnp.full(2, 12.0))
    np.testing.assert_allclose(g(x, 3, k=jnp.ones(2)), jnp.full(2, 4.0))
    assert treespec.vmap(g)(x, k=x).shape == (2,)


def test_a_positional_only_name_by_keyword_without_var_keyword_is_refused() -> None:
    def h(a, b=2, /):  # type: ignore[no-untyped-def]
        return a

    binder = Binder(inspect.signature(h), "h")
    with pytest.raises(TypeError, match=r"h\(\): .*'b'"):
        binder.bind((1,), {"b": 2})


def test_vmap_keeps_the_call_as_written() -> None:
    # in_axes follows the positional arguments as given, as in jax.vmap.
    def f(x: jax.Array, k: Static[int] = 2) -> jax.Array:
        return x * k

    out = treespec.vmap(f, in_axes=(0,))(jnp.arange(3.0))
    np.testing.assert_allclose(out, jnp.arange(3.0) * 2)
