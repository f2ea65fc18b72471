"""Equinox programs run with the migration page's table applied and nothing
else (`filter_jit` -> `jit`, `filter_value_and_grad` -> `value_and_grad`,
...): the same numbers and traces as Equinox's own transforms.

Each program follows one of Equinox's examples (`docs/examples/`: a CNN with
max-pooling fed NumPy batches, a stateful BatchNorm/SpectralNorm model, a
frozen layer, a transformer block with attention and Dropout); each defect
a user met migrating them has its own test beside.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jaxtyping import Array, Float, Float32, Int

import treespec
from treespec import Donate, ValidationError

#: The migration page's table, as a program uses the transforms.
EQX = {
    "jit": eqx.filter_jit,
    "value_and_grad": eqx.filter_value_and_grad,
    "grad": eqx.filter_grad,
}
OURS = {
    "jit": treespec.jit,
    "value_and_grad": treespec.value_and_grad,
    "grad": treespec.grad,
}


def _counted(jit: Callable[..., Any], fun: Callable[..., Any], count: list[int]) -> Any:
    def body(*args: Any, **kwargs: Any) -> Any:
        count.append(1)
        return fun(*args, **kwargs)

    body.__annotations__ = dict(getattr(fun, "__annotations__", {}))
    return jit(body)


def _same_trees(a: Any, b: Any) -> None:
    leaves_a = jax.tree_util.tree_leaves(eqx.filter(a, eqx.is_array))
    leaves_b = jax.tree_util.tree_leaves(eqx.filter(b, eqx.is_array))
    assert len(leaves_a) == len(leaves_b)
    for x, y in zip(leaves_a, leaves_b):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6, atol=1e-7)


# -- a CNN with max-pooling, NumPy batches (Equinox's MNIST example) -----------


class CNN(eqx.Module):
    layers: list[Any]

    def __init__(self, key: jax.Array) -> None:
        k1, k2 = jax.random.split(key)
        self.layers = [
            eqx.nn.Conv2d(1, 3, kernel_size=4, key=k1),
            eqx.nn.MaxPool2d(kernel_size=2),  # init: int | float | Array = -inf
            jax.nn.relu,
            jnp.ravel,
            eqx.nn.Linear(3 * 6 * 6, 10, key=k2),
            jax.nn.log_softmax,
        ]

    def __call__(self, x: Float[Array, "1 10 10"]) -> Float[Array, "10"]:
        for layer in self.layers:
            x = layer(x)
        return x


def _cnn_loss(model: CNN, x: Float[Array, "b 1 10 10"], y: Int[Array, " b"]) -> Array:
    pred = jax.vmap(model)(x)
    return -jnp.mean(jnp.take_along_axis(pred, y[:, None], axis=1))


def _cnn_run(t: dict[str, Any]) -> tuple[list[float], Any, int]:
    model = CNN(jax.random.key(0))
    optim = optax.adamw(1e-2)
    opt_state = optim.init(eqx.filter(model, eqx.is_array))
    traces: list[int] = []

    def make_step(
        model: CNN, opt_state: Any, x: Float[Array, "b 1 10 10"], y: Int[Array, " b"]
    ) -> Any:
        loss, grads = t["value_and_grad"](_cnn_loss)(model, x, y)
        updates, opt_state = optim.update(
            grads, opt_state, eqx.filter(model, eqx.is_array)
        )
        return eqx.apply_updates(model, updates), opt_state, loss

    step = _counted(t["jit"], make_step, traces)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(3):  # NumPy batches, as a data loader hands them over
        x = rng.normal(size=(8, 1, 10, 10)).astype(np.float32)
        y = rng.integers(0, 10, 8)
        model, opt_state, loss = step(model, opt_state, x, y)
        losses.append(float(loss))
    return losses, model, len(traces)


def test_a_cnn_with_max_pooling_fed_numpy_batches_trains_as_under_equinox() -> None:
    (theirs, m_theirs, n_theirs), (ours, m_ours, n_ours) = _cnn_run(EQX), _cnn_run(OURS)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    _same_trees(m_ours, m_theirs)
    assert n_ours == n_theirs == 1


def test_a_union_of_array_and_scalar_types_lets_the_value_choose() -> None:
    # MaxPool2d.init is `int | float | Array`: -inf is held static (a traced
    # init has no JVP in a max-pool), an array there is traced.
    from .conftest import resolve

    def f(pool: eqx.nn.MaxPool2d) -> None: ...

    kinds = resolve(f, eqx.nn.MaxPool2d(kernel_size=2))
    assert kinds["pool.init"] == "static", kinds

    def g(init: int | float | jax.Array, arraylike: jax.typing.ArrayLike) -> None: ...

    kinds = resolve(g, 2.0, 2.0)
    assert kinds == {"init": "static", "arraylike": "dynamic"}, kinds
    assert resolve(g, jnp.float32(2.0), 2.0)["init"] == "dynamic"


def test_an_error_in_the_body_with_numpy_batches_stays_the_users() -> None:
    @treespec.jit
    def wrong(x: Float[Array, " b"]) -> Float[Array, " b"]:
        return x @ jnp.ones((5, 5))  # the body's own shape error

    for batch in (np.ones(3, np.float32), jnp.ones(3)):
        with pytest.raises(TypeError) as info:
            wrong(batch)
        assert not isinstance(info.value, ValidationError), info.value
        assert "dot_general" in str(info.value)
    with pytest.raises(ValidationError, match=r"argument x, at x: expected Float"):
        wrong(np.ones((3, 2), np.float32))  # a wrong argument is still refused
    gone = jnp.ones(3)
    gone.delete()  # what treespec would name, were the error not the body's
    with pytest.raises(TypeError, match="dot_general"):
        wrong(gone)


def test_grad_takes_numpy_where_jit_and_jax_grad_take_it() -> None:
    def loss(w: Float[Array, " n"], x: Float[Array, " n"]) -> Array:
        return jnp.sum(w * x)

    x = np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(treespec.grad(loss)(jnp.ones(3), x), x)

    # NumPy's float64, which JAX takes as float32 (no x64), at `Float32`.
    def loss32(w: Float32[Array, " n"], x: Float32[Array, " n"]) -> Array:
        return jnp.sum(w * x)

    np.testing.assert_allclose(treespec.grad(loss32)(jnp.ones(3), np.arange(3.0)), x)
    np.testing.assert_allclose(treespec.grad(loss)(np.ones(3, np.float32), x), x)
    value, _ = treespec.value_and_grad(loss)(jnp.ones(3), x)
    assert float(value) == 3.0
    with pytest.raises(ValidationError, match=r"argument x, at x: expected Float"):
        treespec.grad(loss)(jnp.ones(3), np.ones(4, np.float32))


# -- a stateful model: BatchNorm and SpectralNorm (Equinox's stateful example) --


class Stateful(eqx.Module):
    norm: eqx.nn.BatchNorm
    spectral: eqx.nn.SpectralNorm[eqx.nn.Linear]
    out: eqx.nn.Linear

    def __init__(self, key: jax.Array) -> None:
        k1, k2, k3 = jax.random.split(key, 3)
        self.norm = eqx.nn.BatchNorm(3, axis_name="batch", mode="batch")
        self.spectral = eqx.nn.SpectralNorm(
            eqx.nn.Linear(3, 8, key=k1), "weight", key=k2
        )
        self.out = eqx.nn.Linear(8, 3, key=k3)

    def __call__(self, x: Array, state: eqx.nn.State) -> tuple[Array, eqx.nn.State]:
        x, state = self.norm(x, state)
        x, state = self.spectral(x, state)
        return self.out(jax.nn.relu(x)), state


def _stateful_run(t: dict[str, Any]) -> tuple[Any, Any, Any, int]:
    model, state = eqx.nn.make_with_state(Stateful)(jax.random.key(5))
    xs = jax.random.normal(jax.random.key(1), (10, 3))
    ys = jnp.sin(xs) + 1
    optim = optax.adam(3e-2)
    opt_state = optim.init(eqx.filter(model, eqx.is_inexact_array))
    traces: list[int] = []

    def loss(model: Stateful, state: eqx.nn.State, xs: Array, ys: Array) -> Any:
        batched = jax.vmap(
            model, axis_name="batch", in_axes=(0, None), out_axes=(0, None)
        )
        pred, state = batched(xs, state)
        return jnp.mean((pred - ys) ** 2), state

    def make_step(
        model: Stateful, state: Any, opt_state: Any, xs: Array, ys: Array
    ) -> Any:
        grads, state = t["grad"](loss, has_aux=True)(model, state, xs, ys)
        updates, opt_state = optim.update(grads, opt_state)
        return eqx.apply_updates(model, updates), state, opt_state

    step = _counted(t["jit"], make_step, traces)
    for _ in range(4):
        model, state, opt_state = step(model, state, opt_state, xs, ys)
    inference = eqx.Partial(eqx.nn.inference_mode(model), state=state)
    evaluate = t["jit"](lambda m, xs: jax.vmap(m)(xs)[0])
    return model, state, evaluate(inference, xs[:5]), len(traces)


def test_a_stateful_batchnorm_spectralnorm_model_trains_as_under_equinox() -> None:
    theirs, ours = _stateful_run(EQX), _stateful_run(OURS)
    _same_trees(ours[0], theirs[0])
    _same_trees(ours[1], theirs[1])
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-6)
    assert ours[3] == theirs[3] == 1


# -- a frozen layer: a filter spec and a gradient of one half ------------------


def _frozen_run(t: dict[str, Any]) -> tuple[Any, Any]:
    model = eqx.nn.MLP(1, 1, 8, 1, key=jax.random.key(0))
    spec = jax.tree_util.tree_map(lambda _: False, model)
    spec = eqx.tree_at(
        lambda m: (m.layers[-1].weight, m.layers[-1].bias), spec, replace=(True, True)
    )
    optim = optax.sgd(3e-2)
    opt_state = optim.init(model)
    x = jax.random.normal(jax.random.key(1), (32, 1))
    y = 5 * x - 2

    def make_step(model: Any, x: Array, y: Array, opt_state: Any) -> Any:
        @t["grad"]
        def loss(diff: Any, static: Any, x: Array, y: Array) -> Array:
            return jnp.mean((y - jax.vmap(eqx.combine(diff, static))(x)) ** 2)

        diff, static = eqx.partition(model, spec)
        updates, opt_state = optim.update(loss(diff, static, x, y), opt_state)
        return eqx.apply_updates(model, updates), opt_state

    step = t["jit"](make_step)
    original = model
    for _ in range(5):
        model, opt_state = step(model, x, y, opt_state)
    return original, model


def test_a_frozen_layer_stays_frozen_and_the_rest_trains_as_under_equinox() -> None:
    (before, theirs), (_, ours) = _frozen_run(EQX), _frozen_run(OURS)
    _same_trees(ours, theirs)
    np.testing.assert_array_equal(ours.layers[0].weight, before.layers[0].weight)
    assert not np.array_equal(ours.layers[-1].weight, before.layers[-1].weight)


# -- attention with Dropout (Equinox's ViT example) ------------------------------


class Block(eqx.Module):
    attention: eqx.nn.MultiheadAttention
    dropout: eqx.nn.Dropout
    norm: eqx.nn.LayerNorm

    def __init__(self, key: jax.Array) -> None:
        self.attention = eqx.nn.MultiheadAttention(2, 8, dropout_p=0.0, key=key)
        self.dropout = eqx.nn.Dropout(0.2)
        self.norm = eqx.nn.LayerNorm(8)

    def __call__(self, x: Array, key: jax.Array) -> Array:
        y = jax.vmap(self.norm)(x)
        y = self.attention(y, y, y)  # dropout 0: called without a key, as the ViT is
        return x + self.dropout(y, key=key)


def test_attention_with_dropout_trains_under_value_and_grad_as_under_equinox() -> None:
    x = jax.random.normal(jax.random.key(2), (5, 8))

    def loss(block: Block, x: Array, key: jax.Array) -> Array:
        return jnp.sum(block(x, key) ** 2)

    block = Block(jax.random.key(0))
    results = []
    for t in (EQX, OURS):
        value, grads = t["jit"](t["value_and_grad"](loss))(block, x, jax.random.key(3))
        results.append((value, grads))
        # Dropout's p and the attention's own (annotated float) are no gradient.
        assert grads.dropout.p is None and grads.attention.dropout.p is None
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-6)
    _same_trees(results[1][1], results[0][1])


# -- the rest of what an Equinox user meets -----------------------------------


def test_partition_by_the_flag_tree_of_a_callable_module() -> None:
    mlp = eqx.nn.MLP(2, 2, 4, 1, key=jax.random.key(0))
    flags = treespec.flag_tree(mlp, eqx.nn.MLP)
    assert callable(flags)  # itself an MLP: a flag tree, never a predicate
    dynamic, static = treespec.partition(mlp, flags)
    assert static.activation is mlp.activation and dynamic.activation is None
    assert dynamic.layers[0].weight is mlp.layers[0].weight
    rebuilt = treespec.combine(dynamic, static)
    np.testing.assert_array_equal(rebuilt(jnp.ones(2)), mlp(jnp.ones(2)))

    apply = treespec.jit(lambda m, x: m(x), static_flags=[flags, None])
    np.testing.assert_allclose(apply(mlp, jnp.ones(2)), mlp(jnp.ones(2)), rtol=1e-6)


def test_donate_around_a_model_holding_an_mlp_donates_its_arrays() -> None:
    class Model(eqx.Module):
        mlp: eqx.nn.MLP

    @treespec.jit
    def step(model: Donate[Model], x: Array) -> Model:
        return eqx.tree_at(
            lambda m: m.mlp.layers[0].bias, model, model.mlp.layers[0].bias + x[0]
        )

    model = Model(eqx.nn.MLP(2, 2, 4, 1, key=jax.random.key(0)))
    bias = np.asarray(model.mlp.layers[0].bias)
    new = step(model, jnp.ones(2))
    np.testing.assert_allclose(new.mlp.layers[0].bias, bias + 1)
    assert new.mlp.activation is model.mlp.activation  # held static
    if jax.default_backend() != "cpu" or model.mlp.layers[0].weight.is_deleted():
        assert model.mlp.layers[0].weight.is_deleted()  # donated where JAX donates


def test_grad_and_value_and_grad_are_decorator_factories() -> None:
    @treespec.value_and_grad(has_aux=True)
    def loss(w: Array) -> tuple[Array, str]:
        return jnp.sum(w**2), "aux"

    (value, aux), grads = loss(jnp.ones(2))
    assert float(value) == 2.0 and aux == "aux"
    np.testing.assert_allclose(grads, [2.0, 2.0])

    @treespec.grad(wrt=eqx.is_inexact_array)
    def loss2(params: dict[str, Any]) -> Array:
        return jnp.sum(params["w"] ** 2) * params["scale"]

    grads = loss2({"w": jnp.ones(2), "scale": 3.0})
    assert grads["scale"] is None
    np.testing.assert_allclose(grads["w"], [6.0, 6.0])
