"""Audio front ends: strided 1-D conv stacks, dilated causal convs, framing."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float, PRNGKeyArray

import treespec
from treespec import Static


def _conv1d(x, w, stride=1, dilation=1, padding="VALID"):
    return lax.conv_general_dilated(
        x, w, (stride,), padding, rhs_dilation=(dilation,), dimension_numbers=("NWC", "WIO", "NWC")
    )


# ---------------------------------------------------------------- relation


@treespec.jit
def fold_frames(x: Float[Array, "b t c"], stride: Static[int] = 4) -> Float[Array, "b s d"]:
    """Stack `stride` consecutive frames into channels (t divisible by stride)."""
    b, t, c = x.shape
    return x.reshape(b, t // stride, stride * c)


# ---------------------------------------------------------------- strided conv stack


@treespec.jit
def strided_stack(
    x: Float[Array, "b t c"], w1: Float[Array, "k c h"], w2: Float[Array, "k h h"], stride: Static[int] = 2
) -> Float[Array, "b s h"]:
    y = jax.nn.gelu(_conv1d(x, w1, stride=stride))
    y = lax.conv_general_dilated(y, w2, (stride,), "VALID", dimension_numbers=("NWC", "WIO", "NWC"))
    return jax.nn.gelu(y)


@treespec.jit
def strided_stack_bug(
    x: Float[Array, "b t c"], w1: Float[Array, "k c h"], w2: Float[Array, "k h h"], stride: Static[int] = 2
) -> Float[Array, "b s h"]:
    y = jax.nn.gelu(_conv1d(x, w1, stride=stride))
    y = lax.conv_general_dilated(y, w2, (stride,), "VALID", dimension_numbers=("NCW", "WIO", "NWC"))  # BUG: input layout says channels-first
    return jax.nn.gelu(y)


# ---------------------------------------------------------------- dilated causal conv with residual


@treespec.jit
def causal_block(
    x: Float[Array, "b t c"], w: Float[Array, "k c o"], w_res: Float[Array, "c o"], dilation: Static[int] = 2
) -> Float[Array, "b t o"]:
    k = w.shape[0]
    xp = jnp.pad(x, ((0, 0), ((k - 1) * dilation, 0), (0, 0)))
    y = _conv1d(xp, w, dilation=dilation)
    return jnp.tanh(y) + x @ w_res


@treespec.jit
def causal_block_bug(
    x: Float[Array, "b t c"], w: Float[Array, "k c o"], w_res: Float[Array, "c o"], dilation: Static[int] = 2
) -> Float[Array, "b t o"]:
    k = w.shape[0]
    xp = jnp.pad(x, ((0, 0), (k - 1, 0), (0, 0)))  # BUG: causal padding ignores the dilation
    y = _conv1d(xp, w, dilation=dilation)
    return jnp.tanh(y) + x @ w_res


# ---------------------------------------------------------------- framing with a window


@treespec.jit
def frame_signal(x: Float[Array, "b n"], window: Float[Array, " l"], hop: Static[int] = 2) -> Float[Array, "b f l"]:
    n, l = x.shape[1], window.shape[0]
    n_frames = 1 + (n - l) // hop
    idx = hop * jnp.arange(n_frames)[:, None] + jnp.arange(l)[None, :]
    return x[:, idx] * window


@treespec.jit
def frame_signal_bug(x: Float[Array, "b n"], window: Float[Array, " l"], hop: Static[int] = 2) -> Float[Array, "b f l"]:
    n, l = x.shape[1], window.shape[0]
    n_frames = 1 + (n - l) // hop
    idx = hop * jnp.arange(n_frames)[:, None] + jnp.arange(hop)[None, :]  # BUG: frame length taken from the hop
    return x[:, idx] * window


# ---------------------------------------------------------------- mel projection


@treespec.jit
def log_mel(spec: Float[Array, "b f k"], mel: Float[Array, "k m"]) -> Float[Array, "b m f"]:
    power = spec**2
    return jnp.log(jnp.einsum("bfk,km->bmf", power, mel) ** 2 + 1e-6)


@treespec.jit
def log_mel_bug(spec: Float[Array, "b f k"], mel: Float[Array, "k m"]) -> Float[Array, "b m f"]:
    power = spec**2
    return jnp.log(jnp.einsum("bfk,mk->bmf", power, mel) ** 2 + 1e-6)  # BUG: filterbank indexed as (mel, bin)


# ---------------------------------------------------------------- Equinox conv encoder


class ConvEncoder(eqx.Module):
    conv1: eqx.nn.Conv1d
    conv2: eqx.nn.Conv1d
    proj: eqx.nn.Linear

    def __init__(self, c: int, h: int, d: int, *, key: PRNGKeyArray):
        k1, k2, k3 = jax.random.split(key, 3)
        self.conv1 = eqx.nn.Conv1d(c, h, kernel_size=3, padding="SAME", key=k1)
        self.conv2 = eqx.nn.Conv1d(h, h, kernel_size=3, padding="SAME", key=k2)
        self.proj = eqx.nn.Linear(h, d, key=k3)

    @treespec.jit
    def __call__(self, x: Float[Array, "c t"]) -> Float[Array, "t d"]:
        y = jax.nn.gelu(self.conv1(x))
        y = jax.nn.gelu(self.conv2(y))
        return jax.vmap(self.proj)(y.T)


class ConvEncoderBug(eqx.Module):
    conv1: eqx.nn.Conv1d
    conv2: eqx.nn.Conv1d
    proj: eqx.nn.Linear

    def __init__(self, c: int, h: int, d: int, *, key: PRNGKeyArray):
        k1, k2, k3 = jax.random.split(key, 3)
        self.conv1 = eqx.nn.Conv1d(c, h, kernel_size=3, padding="SAME", key=k1)
        self.conv2 = eqx.nn.Conv1d(h, h, kernel_size=3, padding="SAME", key=k2)
        self.proj = eqx.nn.Linear(h, d, key=k3)

    @treespec.jit
    def __call__(self, x: Float[Array, "c t"]) -> Float[Array, "t d"]:
        y = jax.nn.gelu(self.conv1(x))
        y = jax.nn.gelu(self.conv2(y))
        return jax.vmap(self.proj)(y)  # BUG: channels-first features fed to the Linear without a transpose
