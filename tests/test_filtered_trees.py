"""Trees that Equinox's `filter`/`partition` made: a module's class with `None`
in its filtered-out fields (optax states, `filter_grad` results) validates;
nothing else is loosened."""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jaxtyping import Array, Float

import treespec
from treespec import ValidationError


class Net(eqx.Module):
    l1: eqx.nn.Linear
    bn: eqx.nn.BatchNorm
    drop: eqx.nn.Dropout
    l2: eqx.nn.Linear

    def __init__(self, key: jax.Array) -> None:
        k1, k2 = jax.random.split(key)
        self.l1 = eqx.nn.Linear(3, 8, key=k1)
        self.bn = eqx.nn.BatchNorm(8, axis_name="batch")
        self.drop = eqx.nn.Dropout(0.5)
        self.l2 = eqx.nn.Linear(8, 1, key=k2)

    def __call__(self, x: Any, state: Any, key: Any) -> Any:
        x, state = self.bn(self.l1(x), state)
        x = self.drop(jax.nn.relu(x), key=key)
        return self.l2(x), state


TX = optax.adam(1e-2)


def step(model: Net, state: Any, opt_state: Any, x: Any, y: Any, key: Any) -> Any:
    """The standard Equinox + optax step, with BatchNorm's state and Dropout."""

    def loss(model: Net, state: Any) -> Any:
        keys = jax.random.split(key, x.shape[0])
        batched = jax.vmap(
            model, axis_name="batch", in_axes=(0, None, 0), out_axes=(0, None)
        )
        pred, state = batched(x, state, keys)
        return jnp.mean((pred[:, 0] - y) ** 2), state

    (value, state), grads = eqx.filter_value_and_grad(loss, has_aux=True)(model, state)
    updates, opt_state = TX.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), state, opt_state, value


@pytest.mark.parametrize("keep", ["is_array", "is_inexact_array"])
def test_the_standard_equinox_optax_loop_runs_as_under_filter_jit(keep: str) -> None:
    model, state = eqx.nn.make_with_state(Net)(jax.random.key(0))
    opt_state = TX.init(eqx.filter(model, getattr(eqx, keep)))
    x = jax.random.normal(jax.random.key(1), (16, 3))
    y = x.sum(1)
    results = []
    for jit in (eqx.filter_jit, treespec.jit):
        m, s, o = model, state, opt_state
        f = jit(step)
        losses = []
        for i in range(3):
            m, s, o, value = f(m, s, o, x, y, jax.random.key(i))
            losses.append(value)
        results.append((losses, m))
    (theirs, m_theirs), (ours, m_ours) = results
    np.testing.assert_array_equal(np.array(ours), np.array(theirs))
    for a, b in zip(
        jax.tree.leaves(eqx.filter(m_ours, eqx.is_array)),
        jax.tree.leaves(eqx.filter(m_theirs, eqx.is_array)),
    ):
        np.testing.assert_array_equal(a, b)


class Scaled(eqx.Module):
    w: Float[Array, " n"]
    scale: float
    training: bool


class Outer(eqx.Module):
    inner: Scaled
    name: str


def test_none_in_an_unannotated_filtered_copy_validates_nested_too() -> None:
    def apply(model: Scaled, grads, n: int) -> jax.Array:  # type: ignore[no-untyped-def]
        return model.w - grads.w

    f = treespec.jit(apply)
    model = Scaled(jnp.ones(3), 2.0, True)
    grads = eqx.filter(model, eqx.is_inexact_array)  # scale, training: None
    assert grads.scale is None and grads.training is None
    np.testing.assert_array_equal(f(model, grads, 1), jnp.zeros(3))
    # Nested: the copy's inner instance is no instance the signature names.
    outer = eqx.filter(Outer(model, "o"), eqx.is_array)
    assert outer.inner.scale is None and outer.name is None
    g = treespec.jit(lambda m, copy: m.w - copy.inner.w)
    np.testing.assert_array_equal(g(model, outer), jnp.zeros(3))
    # A None where no class field was filtered is still refused.
    with pytest.raises(ValidationError, match=r"argument n, at n: expected int"):
        f(model, grads, None)


def test_none_in_an_instance_the_signature_names_is_refused_naming_the_field() -> None:
    def apply(model: Scaled, grads: Scaled) -> jax.Array:
        return model.w - grads.w

    f = treespec.jit(apply)
    model = Scaled(jnp.ones(3), 2.0, True)
    grads = eqx.filter(model, eqx.is_inexact_array)
    with pytest.raises(ValidationError) as info:
        f(model, grads)
    text = str(info.value)
    assert "at grads.scale: expected float" in text, text
    assert "at grads.training: expected bool" in text, text
    no_w = Scaled(None, 2.0, True)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"at grads\.w: expected Float"):
        f(model, no_w)
    # Nested: an annotated field's instance is named too.
    named = treespec.jit(_outer_w)
    with pytest.raises(ValidationError, match=r"at o\.inner\.scale: expected float"):
        named(Outer(Scaled(jnp.ones(3), None, True), "o"))  # type: ignore[arg-type]

    def typed(cfg: dict[str, int]) -> int:
        return 0

    with pytest.raises(ValidationError, match=r"cfg\['k'\]"):
        treespec.jit(typed)({"k": None})


def _outer_w(o: Outer) -> jax.Array:
    return o.inner.w


class Pair(NamedTuple):
    name: str
    w: jax.Array


class Holder(eqx.Module):
    items: list[int]
    w: jax.Array


def _pair_w(p: Pair) -> jax.Array:
    return p.w


def _holder_w(h: Holder) -> jax.Array:
    return h.w


def test_none_in_a_named_tuple_or_list_field_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"at p\.name: expected str"):
        treespec.jit(_pair_w)(Pair(None, jnp.ones(2)))  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"at h\.items"):
        treespec.jit(_holder_w)(Holder(None, jnp.ones(2)))  # type: ignore[arg-type]
