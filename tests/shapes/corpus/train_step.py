"""Training a classifier: a cross-entropy loss, a plain SGD step with mixup
(a PRNG key mixes the batch), and an optax step that takes the optimizer
state in and hands it back (`optax.OptState`), gradients by
`eqx.filter_value_and_grad`. Twins with one planted bug are marked
`# BUG: kind`."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray

import treespec
from treespec import Dynamic


class Classifier(eqx.Module):
    w1: Float[Array, "n hidden"]
    b1: Float[Array, " hidden"]
    w2: Float[Array, "hidden classes"]
    b2: Float[Array, " classes"]

    def __call__(self, x: Float[Array, "b n"]) -> Float[Array, "b classes"]:
        return jax.nn.relu(x @ self.w1 + self.b1) @ self.w2 + self.b2


optimizer = optax.adamw(learning_rate=1e-3, weight_decay=1e-4)


@treespec.jit
def loss_fn(
    model: Classifier, x: Float[Array, "b n"], labels: Int[Array, " b"]
) -> Float[Array, ""]:
    logits = model(x)
    targets = jax.nn.one_hot(labels, logits.shape[-1])
    return optax.softmax_cross_entropy(logits, targets).mean()


@treespec.jit
def loss_fn_classes(
    model: Classifier, x: Float[Array, "b n"], labels: Int[Array, " b"]
) -> Float[Array, ""]:
    logits = model(x)
    targets = jax.nn.one_hot(labels, len(logits))
    return optax.softmax_cross_entropy(logits, targets).mean()  # BUG: one-hot width


@treespec.jit
def mixup_step(
    model: Classifier,
    key: PRNGKeyArray,
    x: Float[Array, "b n"],
    labels: Int[Array, " b"],
    learning_rate: Dynamic[float] = 0.1,
) -> tuple[Classifier, Float[Array, ""]]:
    def loss(model: Classifier) -> Array:
        logits = model(x_mixed)
        return optax.softmax_cross_entropy(logits, targets).mean()

    lam_key, perm_key = jax.random.split(key)
    lam = jax.random.beta(lam_key, 0.2, 0.2)
    perm = jax.random.permutation(perm_key, len(x))
    x_mixed = lam * x + (1 - lam) * x[perm]
    onehot = jax.nn.one_hot(labels, model.b2.shape[-1])
    targets = lam * onehot + (1 - lam) * onehot[perm]
    value, grads = jax.value_and_grad(loss)(model)
    model = jax.tree.map(lambda p, g: p - learning_rate * g, model, grads)
    return model, value


@treespec.jit
def mixup_step_perm(
    model: Classifier,
    key: PRNGKeyArray,
    x: Float[Array, "b n"],
    labels: Int[Array, " b"],
    learning_rate: Dynamic[float] = 0.1,
) -> tuple[Classifier, Float[Array, ""]]:
    def loss(model: Classifier) -> Array:
        logits = model(x_mixed)
        return optax.softmax_cross_entropy(logits, targets).mean()

    lam_key, perm_key = jax.random.split(key)
    lam = jax.random.beta(lam_key, 0.2, 0.2)
    perm = jax.random.permutation(perm_key, x.shape[-1])
    x_mixed = lam * x + (1 - lam) * x[perm]  # BUG: permutation of the features
    onehot = jax.nn.one_hot(labels, model.b2.shape[-1])
    targets = lam * onehot + (1 - lam) * onehot[perm]
    value, grads = jax.value_and_grad(loss)(model)
    model = jax.tree.map(lambda p, g: p - learning_rate * g, model, grads)
    return model, value


@treespec.jit
def train_step(
    model: Classifier,
    opt_state: optax.OptState,
    x: Float[Array, "b n"],
    labels: Int[Array, " b"],
) -> tuple[Classifier, optax.OptState, Float[Array, ""], Float[Array, ""]]:
    loss, grads = eqx.filter_value_and_grad(loss_fn)(model, x, labels)
    updates, opt_state = optimizer.update(grads, opt_state, model)
    model = eqx.apply_updates(model, updates)
    accuracy = jnp.mean(jnp.argmax(model(x), axis=-1) == labels)
    return model, opt_state, loss, accuracy


@treespec.jit
def train_step_accuracy(
    model: Classifier,
    opt_state: optax.OptState,
    x: Float[Array, "b n"],
    labels: Int[Array, " b"],
) -> tuple[Classifier, optax.OptState, Float[Array, ""], Float[Array, ""]]:
    loss, grads = eqx.filter_value_and_grad(loss_fn)(model, x, labels)
    updates, opt_state = optimizer.update(grads, opt_state, model)
    model = eqx.apply_updates(model, updates)
    accuracy = jnp.mean(jnp.argmax(model(x), axis=0) == labels)  # BUG: argmax axis
    return model, opt_state, loss, accuracy
