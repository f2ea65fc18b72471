"""A small CNN on one image (channels first, as `jax.lax.conv` takes it):
convolutions, a 2x2 max-pool (`jax.lax.reduce_window`) and an average pool
(by reshape), group norm, a global-average-pool head. Twins with one planted
bug are marked `# BUG: kind`."""

from __future__ import annotations

from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

import treespec
from treespec import Static


def conv2d(w: Array, x: Array) -> Array:
    """A 'SAME' convolution of one image `(c_in, h, w)` by `(c_out, c_in, k, k)`."""
    out = jax.lax.conv_general_dilated(
        x[None], w, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW")
    )
    return out[0]


@treespec.jit
def max_pool(x: Float[Array, "c h w"]) -> Float[Array, "c h//2 w//2"]:
    window = (1, 2, 2)
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, window, window, "VALID")


@treespec.jit
def max_pool_same(x: Float[Array, "c h w"]) -> Float[Array, "c h//2 w//2"]:
    window = (1, 2, 2)
    pooled = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, window, window, "SAME")
    return pooled  # BUG: SAME padding rounds h/2 up


@treespec.jit
def avg_pool(x: Float[Array, "c h w"]) -> Float[Array, "c h//2 w//2"]:
    c, h, w = x.shape
    patches = x.reshape(c, h // 2, 2, w // 2, 2)
    return patches.mean(axis=(2, 4))


@treespec.jit
def avg_pool_swapped(x: Float[Array, "c h w"]) -> Float[Array, "c h//2 w//2"]:
    c, h, w = x.shape
    patches = x.reshape(c, w // 2, 2, h // 2, 2)  # BUG: h and w swapped
    return patches.mean(axis=(2, 4))


@treespec.jit
def avg_pool_axes(x: Float[Array, "c h w"]) -> Float[Array, "c h//2 w//2"]:
    c, h, w = x.shape
    patches = x.reshape(c, h // 2, 2, w // 2, 2)
    return patches.mean(axis=(1, 3))  # BUG: pooled the wrong axes


@treespec.jit
def group_norm(
    x: Float[Array, "c h w"],
    scale: Float[Array, " c"],
    bias: Float[Array, " c"],
    groups: Static[int] = 32,
) -> Float[Array, "c h w"]:
    c, h, w = x.shape
    g = x.reshape(groups, c // groups, h, w)
    mean = g.mean(axis=(1, 2, 3), keepdims=True)
    var = g.var(axis=(1, 2, 3), keepdims=True)
    g = (g - mean) / jnp.sqrt(var + 1e-5)
    return g.reshape(c, h, w) * scale[:, None, None] + bias[:, None, None]


@treespec.jit
def group_norm_scale(
    x: Float[Array, "c h w"],
    scale: Float[Array, " c"],
    bias: Float[Array, " c"],
    groups: Static[int] = 32,
) -> Float[Array, "c h w"]:
    c, h, w = x.shape
    g = x.reshape(groups, c // groups, h, w)
    mean = g.mean(axis=(1, 2, 3), keepdims=True)
    var = g.var(axis=(1, 2, 3), keepdims=True)
    g = (g - mean) / jnp.sqrt(var + 1e-5)
    return g.reshape(c, h, w) * scale + bias  # BUG: scale on the w axis


class ConvNet(eqx.Module):
    stem: Float[Array, "c c_in 3 3"]
    blocks: Float[Array, "depth c c 3 3"]
    head: Float[Array, "c classes"]
    head_bias: Float[Array, " classes"]


@treespec.jit
def classify(
    net: ConvNet,
    x: Float[Array, "c_in h w"],
    pool: Static[Literal["max", "avg"]] = "max",
) -> Float[Array, " classes"]:
    h = jax.nn.relu(conv2d(net.stem, x))
    for i in range(net.blocks.shape[0]):
        r = conv2d(net.blocks[i], h)
        r = (r - r.mean(axis=(1, 2), keepdims=True)) / (
            r.std(axis=(1, 2), keepdims=True) + 1e-5
        )
        h = h + jax.nn.relu(r)
    h = max_pool(h) if pool == "max" else avg_pool(h)
    features = h.mean(axis=(1, 2))
    return features @ net.head + net.head_bias


@treespec.jit
def classify_pool_axes(
    net: ConvNet,
    x: Float[Array, "c_in h w"],
    pool: Static[Literal["max", "avg"]] = "max",
) -> Float[Array, " classes"]:
    h = jax.nn.relu(conv2d(net.stem, x))
    for i in range(net.blocks.shape[0]):
        r = conv2d(net.blocks[i], h)
        r = (r - r.mean(axis=(1, 2), keepdims=True)) / (
            r.std(axis=(1, 2), keepdims=True) + 1e-5
        )
        h = h + jax.nn.relu(r)
    h = max_pool(h) if pool == "max" else avg_pool(h)
    features = h.mean(axis=(0, 1))
    return features @ net.head + net.head_bias  # BUG: pooled c and h
