"""BatchNorm with Equinox state (eqx.nn.State, eqx.nn.make_with_state) and by hand."""

from __future__ import annotations

from typing import TypedDict

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

import treespec
from treespec import Static

# ---------------------------------------------------------------- conv + BN


class ConvBN(eqx.Module):
    conv: eqx.nn.Conv1d
    bn: eqx.nn.BatchNorm

    def __init__(self, c: int, h: int, *, key: PRNGKeyArray):
        self.conv = eqx.nn.Conv1d(c, h, kernel_size=3, padding="SAME", key=key)
        self.bn = eqx.nn.BatchNorm(h, axis_name="batch", mode="ema")

    @treespec.jit
    def __call__(self, x: Float[Array, "b c t"], state: eqx.nn.State) -> tuple[Float[Array, "b h t"], eqx.nn.State]:
        def one(xi, st):
            y, st = self.bn(self.conv(xi), st)
            return jax.nn.relu(y), st

        return jax.vmap(one, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, state)


class ConvBNBug(eqx.Module):
    conv: eqx.nn.Conv1d
    bn: eqx.nn.BatchNorm

    def __init__(self, c: int, h: int, *, key: PRNGKeyArray):
        self.conv = eqx.nn.Conv1d(c, h, kernel_size=3, padding="SAME", key=key)
        self.bn = eqx.nn.BatchNorm(c, axis_name="batch", mode="ema")  # BUG: norm sized for the input channels

    @treespec.jit
    def __call__(self, x: Float[Array, "b c t"], state: eqx.nn.State) -> tuple[Float[Array, "b h t"], eqx.nn.State]:
        def one(xi, st):
            y, st = self.bn(self.conv(xi), st)
            return jax.nn.relu(y), st

        return jax.vmap(one, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, state)


# ---------------------------------------------------------------- MLP + BN


class MLPBN(eqx.Module):
    lin1: eqx.nn.Linear
    bn: eqx.nn.BatchNorm
    lin2: eqx.nn.Linear

    def __init__(self, d: int, f: int, o: int, *, key: PRNGKeyArray):
        k1, k2 = jax.random.split(key)
        self.lin1 = eqx.nn.Linear(d, f, key=k1)
        self.bn = eqx.nn.BatchNorm(f, axis_name="batch", mode="ema")
        self.lin2 = eqx.nn.Linear(f, o, key=k2)

    @treespec.jit
    def __call__(self, x: Float[Array, "b d"], state: eqx.nn.State) -> tuple[Float[Array, "b o"], eqx.nn.State]:
        def one(xi, st):
            y, st = self.bn(jax.nn.gelu(self.lin1(xi)), st)
            return self.lin2(y), st

        return jax.vmap(one, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, state)


class MLPBNBug(eqx.Module):
    lin1: eqx.nn.Linear
    bn: eqx.nn.BatchNorm
    lin2: eqx.nn.Linear

    def __init__(self, d: int, f: int, o: int, *, key: PRNGKeyArray):
        k1, k2 = jax.random.split(key)
        self.lin1 = eqx.nn.Linear(d, f, key=k1)
        self.bn = eqx.nn.BatchNorm(f, axis_name="batch", mode="ema")
        self.lin2 = eqx.nn.Linear(f, o, key=k2)

    @treespec.jit
    def __call__(self, x: Float[Array, "b d"], state: eqx.nn.State) -> tuple[Float[Array, "b o"], eqx.nn.State]:
        def one(xi, st):
            y, st = self.bn(jax.nn.gelu(self.lin1(xi)), st)
            return self.lin2(y), st

        return jax.vmap(one, axis_name="batch", in_axes=(1, None), out_axes=(0, None))(x, state)  # BUG: mapped over the feature axis


# ---------------------------------------------------------------- channels-last images through a model argument


class ImageBN(eqx.Module):
    conv: eqx.nn.Conv2d
    bn: eqx.nn.BatchNorm
    head: eqx.nn.Linear

    def __init__(self, c: int, f: int, k: int, *, key: PRNGKeyArray):
        k1, k2 = jax.random.split(key)
        self.conv = eqx.nn.Conv2d(c, f, kernel_size=3, padding=1, key=k1)
        self.bn = eqx.nn.BatchNorm(f, axis_name="batch", mode="ema")
        self.head = eqx.nn.Linear(f, k, key=k2)


@treespec.jit
def image_forward(
    model: ImageBN, state: eqx.nn.State, x: Float[Array, "b h w c"]
) -> tuple[Float[Array, "b k"], eqx.nn.State]:
    x = jnp.moveaxis(x, -1, 1)

    def one(xi, st):
        y, st = model.bn(model.conv(xi), st)
        return model.head(jax.nn.relu(y).mean(axis=(1, 2))), st

    return jax.vmap(one, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, state)


@treespec.jit
def image_forward_bug(
    model: ImageBN, state: eqx.nn.State, x: Float[Array, "b h w c"]
) -> tuple[Float[Array, "b k"], eqx.nn.State]:
    x = jnp.moveaxis(x, 1, -1)  # BUG: moveaxis arguments swapped (channels not moved first)

    def one(xi, st):
        y, st = model.bn(model.conv(xi), st)
        return model.head(jax.nn.relu(y).mean(axis=(1, 2))), st

    return jax.vmap(one, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, state)


# ---------------------------------------------------------------- by hand, running stats in a TypedDict


class BNStats(TypedDict):
    mean: Float[Array, " c"]
    var: Float[Array, " c"]


@treespec.jit
def batch_norm_train(
    x: Float[Array, "b t c"],
    gamma: Float[Array, " c"],
    beta: Float[Array, " c"],
    stats: BNStats,
    momentum: Static[float] = 0.9,
) -> tuple[Float[Array, "b t c"], BNStats]:
    mean = x.mean(axis=(0, 1))
    var = x.var(axis=(0, 1))
    new = BNStats(
        mean=momentum * stats["mean"] + (1 - momentum) * mean,
        var=momentum * stats["var"] + (1 - momentum) * var,
    )
    y = (x - mean) * jax.lax.rsqrt(var + 1e-5)
    return y * gamma + beta, new


@treespec.jit
def batch_norm_train_bug(
    x: Float[Array, "b t c"],
    gamma: Float[Array, " c"],
    beta: Float[Array, " c"],
    stats: BNStats,
    momentum: Static[float] = 0.9,
) -> tuple[Float[Array, "b t c"], BNStats]:
    mean = x.mean(axis=(0, 2))  # BUG: statistics over batch and channels instead of batch and time
    var = x.var(axis=(0, 1))
    new = BNStats(
        mean=momentum * stats["mean"] + (1 - momentum) * mean,
        var=momentum * stats["var"] + (1 - momentum) * var,
    )
    y = (x - mean) * jax.lax.rsqrt(var + 1e-5)
    return y * gamma + beta, new


@treespec.jit
def batch_norm_eval(
    x: Float[Array, "b c"], gamma: Float[Array, " c"], beta: Float[Array, " c"], stats: BNStats
) -> Float[Array, "b c"]:
    y = (x - stats["mean"]) / jnp.sqrt(stats["var"] + 1e-5)
    return y * gamma + beta


@treespec.jit
def batch_norm_eval_bug(
    x: Float[Array, "b c"], gamma: Float[Array, " c"], beta: Float[Array, " c"], stats: BNStats
) -> Float[Array, "b c"]:
    y = (x - stats["mean"][:, None]) / jnp.sqrt(stats["var"] + 1e-5)  # BUG: running mean made a column
    return y * gamma + beta
