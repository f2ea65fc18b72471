"""Normalisation layers: RMSNorm over the last axis, channels-first layer
norm, train-mode batch norm with a running mean, group RMSNorm, an Equinox
pre-norm feed-forward block (eqx.nn layers built in __init__) and a Flax NNX
adaptive layer norm (DiT-style shift/scale from a conditioning vector)."""

import equinox as eqx
import jax
import jax.numpy as jnp
from flax import nnx
from jax import lax
from jaxtyping import Array, Float

import treespec
from treespec import Static

# --------------------------------------------------------------------------
# RMSNorm (Gemma-style 1 + scale)
# --------------------------------------------------------------------------


@treespec.jit
def rms_norm(
    x: Float[Array, "*batch d"], scale: Float[Array, " d"], eps: Static[float] = 1e-6
) -> Float[Array, "*batch d"]:
    normed = x * lax.rsqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + eps)
    return normed * (1.0 + scale)


@treespec.jit
def rms_norm_no_keepdims(
    x: Float[Array, "*batch d"], scale: Float[Array, " d"], eps: Static[float] = 1e-6
) -> Float[Array, "*batch d"]:
    normed = x * lax.rsqrt(jnp.mean(jnp.square(x), axis=-1) + eps)  # BUG: mean-square without keepdims
    return normed * (1.0 + scale)


# --------------------------------------------------------------------------
# LayerNorm over channels in NCHW (ConvNeXt "channels_first")
# --------------------------------------------------------------------------


@treespec.jit
def layer_norm_nchw(
    x: Float[Array, "b c h w"], gamma: Float[Array, " c"], beta: Float[Array, " c"]
) -> Float[Array, "b c h w"]:
    mean = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    y = (x - mean) * lax.rsqrt(var + 1e-6)
    return y * gamma[:, None, None] + beta[:, None, None]


@treespec.jit
def layer_norm_nchw_last_axis_affine(
    x: Float[Array, "b c h w"], gamma: Float[Array, " c"], beta: Float[Array, " c"]
) -> Float[Array, "b c h w"]:
    mean = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    y = (x - mean) * lax.rsqrt(var + 1e-6)
    return y * gamma + beta  # BUG: channels-last broadcast of the affine in NCHW layout


# --------------------------------------------------------------------------
# Train-mode batch norm (NHWC) returning the updated running mean
# --------------------------------------------------------------------------


@treespec.jit
def batch_norm_train(
    x: Float[Array, "b h w c"],
    gamma: Float[Array, " c"],
    beta: Float[Array, " c"],
    running_mean: Float[Array, " c"],
    momentum: Static[float] = 0.9,
) -> tuple[Float[Array, "b h w c"], Float[Array, " c"]]:
    mean = jnp.mean(x, axis=(0, 1, 2))
    var = jnp.var(x, axis=(0, 1, 2))
    y = (x - mean) * lax.rsqrt(var + 1e-5) * gamma + beta
    return y, momentum * running_mean + (1.0 - momentum) * mean


@treespec.jit
def batch_norm_train_reduce_axes(
    x: Float[Array, "b h w c"],
    gamma: Float[Array, " c"],
    beta: Float[Array, " c"],
    running_mean: Float[Array, " c"],
    momentum: Static[float] = 0.9,
) -> tuple[Float[Array, "b h w c"], Float[Array, " c"]]:
    mean = jnp.mean(x, axis=(0, 1, 3))  # BUG: statistics reduced over channels instead of width
    var = jnp.var(x, axis=(0, 1, 2))
    y = (x - mean) * lax.rsqrt(var + 1e-5) * gamma + beta
    return y, momentum * running_mean + (1.0 - momentum) * mean


# --------------------------------------------------------------------------
# Equinox pre-norm feed-forward block, layers built in __init__
# --------------------------------------------------------------------------


class FeedForward(eqx.Module):
    norm: eqx.nn.LayerNorm
    up: eqx.nn.Linear
    down: eqx.nn.Linear

    def __init__(self, d_model: int, hidden: int, *, key):
        k_up, k_down = jax.random.split(key)
        self.norm = eqx.nn.LayerNorm(d_model)
        self.up = eqx.nn.Linear(d_model, hidden, key=k_up)
        self.down = eqx.nn.Linear(hidden, d_model, key=k_down)

    @treespec.jit
    def __call__(self, x: Float[Array, "t d_model"]) -> Float[Array, "t d_model"]:
        h = jax.vmap(self.norm)(x)
        h = jax.nn.gelu(jax.vmap(self.up)(h))
        return x + jax.vmap(self.down)(h)


class FeedForwardDownOnInput(eqx.Module):
    norm: eqx.nn.LayerNorm
    up: eqx.nn.Linear
    down: eqx.nn.Linear

    def __init__(self, d_model: int, hidden: int, *, key):
        k_up, k_down = jax.random.split(key)
        self.norm = eqx.nn.LayerNorm(d_model)
        self.up = eqx.nn.Linear(d_model, hidden, key=k_up)
        self.down = eqx.nn.Linear(hidden, d_model, key=k_down)

    @treespec.jit
    def __call__(self, x: Float[Array, "t d_model"]) -> Float[Array, "t d_model"]:
        h = jax.vmap(self.norm)(x)
        h = jax.nn.gelu(jax.vmap(self.up)(h))
        return x + jax.vmap(self.down)(x)  # BUG: down projection applied to the block input, not the hidden h


# --------------------------------------------------------------------------
# Flax NNX adaptive LayerNorm (adaLN): shift and scale from a condition
# --------------------------------------------------------------------------


class AdaLayerNorm(nnx.Module):
    def __init__(self, d_model: int, cond_dim: int, *, rngs: nnx.Rngs):
        self.norm = nnx.LayerNorm(d_model, use_scale=False, use_bias=False, rngs=rngs)
        self.proj = nnx.Linear(cond_dim, 2 * d_model, rngs=rngs)

    @treespec.jit
    def __call__(
        self, x: Float[Array, "b t d_model"], cond: Float[Array, "b cond_dim"]
    ) -> Float[Array, "b t d_model"]:
        scale, shift = jnp.split(self.proj(jax.nn.silu(cond)), 2, axis=-1)
        return self.norm(x) * (1.0 + scale[:, None, :]) + shift[:, None, :]


class AdaLayerNormNoTimeAxis(nnx.Module):
    def __init__(self, d_model: int, cond_dim: int, *, rngs: nnx.Rngs):
        self.norm = nnx.LayerNorm(d_model, use_scale=False, use_bias=False, rngs=rngs)
        self.proj = nnx.Linear(cond_dim, 2 * d_model, rngs=rngs)

    @treespec.jit
    def __call__(
        self, x: Float[Array, "b t d_model"], cond: Float[Array, "b cond_dim"]
    ) -> Float[Array, "b t d_model"]:
        scale, shift = jnp.split(self.proj(jax.nn.silu(cond)), 2, axis=-1)
        return self.norm(x) * (1.0 + scale) + shift  # BUG: (b, d) modulation without a time axis; batch meets time


# --------------------------------------------------------------------------
# Relation-only: group RMSNorm (groups divide d)
# --------------------------------------------------------------------------


@treespec.jit
def group_rms_norm(
    x: Float[Array, "b t d"], scale: Float[Array, " d"], groups: Static[int] = 4
) -> Float[Array, "b t d"]:
    b, t, d = x.shape
    xg = x.reshape(b, t, groups, d // groups)
    xg = xg * lax.rsqrt(jnp.mean(xg * xg, axis=-1, keepdims=True) + 1e-6)
    return xg.reshape(b, t, d) * scale
