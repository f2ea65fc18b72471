"""ResNet-style building blocks in NHWC, written against lax.conv_general_dilated.

Parameters live in small Equinox modules whose fields carry jaxtyping
shapes (HWIO kernels), in the way hand-rolled JAX ResNets are written.
"""

from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float

import treespec
from treespec import Static

_DN = ("NHWC", "HWIO", "NHWC")


def conv2d(x, kernel, stride=1, padding="SAME", groups=1):
    return lax.conv_general_dilated(
        x,
        kernel,
        window_strides=(stride, stride),
        padding=padding,
        dimension_numbers=_DN,
        feature_group_count=groups,
    )


def batch_stats_norm(x, eps=1e-5):
    """Normalise each channel over batch and space (train-mode batch norm)."""
    mean = x.mean(axis=(0, 1, 2), keepdims=True)
    var = x.var(axis=(0, 1, 2), keepdims=True)
    return (x - mean) * lax.rsqrt(var + eps)


def avg_pool_2x2(x):
    window = (1, 2, 2, 1)
    return lax.reduce_window(x, 0.0, lax.add, window, window, "VALID") / 4.0


_ACTIVATIONS = {"relu": jax.nn.relu, "gelu": jax.nn.gelu}


# --------------------------------------------------------------------------
# Basic block with a projection shortcut (channels change, stride 1)
# --------------------------------------------------------------------------


class BasicBlock(eqx.Module):
    conv1: Float[Array, "3 3 c_in c_out"]
    conv2: Float[Array, "3 3 c_out c_out"]
    proj: Float[Array, "1 1 c_in c_out"]


@treespec.jit
def basic_block(
    p: BasicBlock,
    x: Float[Array, "b h w c_in"],
    activation: Static[Literal["relu", "gelu"]] = "relu",
) -> Float[Array, "b h w c_out"]:
    act = _ACTIVATIONS[activation]
    y = act(batch_stats_norm(conv2d(x, p.conv1)))
    y = batch_stats_norm(conv2d(y, p.conv2))
    shortcut = conv2d(x, p.proj)
    return act(y + shortcut)


@treespec.jit
def basic_block_no_proj(
    p: BasicBlock,
    x: Float[Array, "b h w c_in"],
    activation: Static[Literal["relu", "gelu"]] = "relu",
) -> Float[Array, "b h w c_out"]:
    act = _ACTIVATIONS[activation]
    y = act(batch_stats_norm(conv2d(x, p.conv1)))
    y = batch_stats_norm(conv2d(y, p.conv2))
    return act(y + x)  # BUG: identity shortcut although channels change (projection dropped)


# --------------------------------------------------------------------------
# Downsampling block: stride-2 3x3 conv, strided 1x1 projection shortcut
# --------------------------------------------------------------------------


class DownBlock(eqx.Module):
    conv1: Float[Array, "3 3 c_in c_out"]
    conv2: Float[Array, "3 3 c_out c_out"]
    proj: Float[Array, "1 1 c_in c_out"]


@treespec.jit
def downsample_block(
    p: DownBlock, x: Float[Array, "b h w c_in"]
) -> Float[Array, "b (h+1)//2 (w+1)//2 c_out"]:
    y = jax.nn.relu(batch_stats_norm(conv2d(x, p.conv1, stride=2)))
    y = batch_stats_norm(conv2d(y, p.conv2))
    shortcut = conv2d(x, p.proj, stride=2, padding="VALID")
    return jax.nn.relu(y + shortcut)


@treespec.jit
def downsample_block_avgpool(
    p: DownBlock, x: Float[Array, "b h w c_in"]
) -> Float[Array, "b (h+1)//2 (w+1)//2 c_out"]:
    y = jax.nn.relu(batch_stats_norm(conv2d(x, p.conv1, stride=2)))
    y = batch_stats_norm(conv2d(y, p.conv2))
    return jax.nn.relu(y + conv2d(avg_pool_2x2(x), p.proj))  # BUG: VALID 2x2 pool floors h/2, main path ceils


# --------------------------------------------------------------------------
# Bottleneck: 1x1 reduce, 3x3, 1x1 expand (1x1 convs as einsums)
# --------------------------------------------------------------------------


class Bottleneck(eqx.Module):
    reduce: Float[Array, "c_in c_mid"]
    conv: Float[Array, "3 3 c_mid c_mid"]
    expand: Float[Array, "c_mid c_out"]
    proj: Float[Array, "c_in c_out"]


@treespec.jit
def bottleneck(
    p: Bottleneck, x: Float[Array, "b h w c_in"]
) -> Float[Array, "b h w c_out"]:
    y = jax.nn.relu(batch_stats_norm(jnp.einsum("bhwc,cd->bhwd", x, p.reduce)))
    y = jax.nn.relu(batch_stats_norm(conv2d(y, p.conv)))
    y = batch_stats_norm(jnp.einsum("bhwc,cd->bhwd", y, p.expand))
    return jax.nn.relu(y + jnp.einsum("bhwc,cd->bhwd", x, p.proj))


@treespec.jit
def bottleneck_expand_transposed(
    p: Bottleneck, x: Float[Array, "b h w c_in"]
) -> Float[Array, "b h w c_out"]:
    y = jax.nn.relu(batch_stats_norm(jnp.einsum("bhwc,cd->bhwd", x, p.reduce)))
    y = jax.nn.relu(batch_stats_norm(conv2d(y, p.conv)))
    y = batch_stats_norm(jnp.einsum("bhwc,dc->bhwd", y, p.expand))  # BUG: expand weight read as (out, in)
    return jax.nn.relu(y + jnp.einsum("bhwc,cd->bhwd", x, p.proj))


# --------------------------------------------------------------------------
# Depthwise-separable conv (MobileNet): feature_group_count = channels
# --------------------------------------------------------------------------


class SeparableConv(eqx.Module):
    depthwise: Float[Array, "k k 1 c"]
    pointwise: Float[Array, "c c_out"]


@treespec.jit
def separable_conv(
    p: SeparableConv, x: Float[Array, "b h w c"]
) -> Float[Array, "b h w c_out"]:
    y = conv2d(x, p.depthwise, groups=x.shape[-1])
    y = jax.nn.relu6(batch_stats_norm(y))
    return jnp.einsum("bhwc,cd->bhwd", y, p.pointwise)


@treespec.jit
def separable_conv_nchw_groups(
    p: SeparableConv, x: Float[Array, "b h w c"]
) -> Float[Array, "b h w c_out"]:
    y = conv2d(x, p.depthwise, groups=x.shape[1])  # BUG: group count read from axis 1 (NCHW habit) in NHWC code
    y = jax.nn.relu6(batch_stats_norm(y))
    return jnp.einsum("bhwc,cd->bhwd", y, p.pointwise)


# --------------------------------------------------------------------------
# Classifier head: global average pool + linear
# --------------------------------------------------------------------------


@treespec.jit
def classifier_head(
    x: Float[Array, "b h w c"], w: Float[Array, "c n"], bias: Float[Array, " n"]
) -> Float[Array, "b n"]:
    return x.mean(axis=(1, 2)) @ w + bias


@treespec.jit
def classifier_head_pool_axes(
    x: Float[Array, "b h w c"], w: Float[Array, "c n"], bias: Float[Array, " n"]
) -> Float[Array, "b n"]:
    return x.mean(axis=(1, 3)) @ w + bias  # BUG: pooled over height and channels instead of height and width


# --------------------------------------------------------------------------
# Stem: 7x7/2 conv (pad 3) then 3x3/2 max-pool (pad 1): ceil(h/4)
# --------------------------------------------------------------------------


@treespec.jit
def stem(
    x: Float[Array, "b h w 3"], kernel: Float[Array, "7 7 3 c"]
) -> Float[Array, "b (h+3)//4 (w+3)//4 c"]:
    y = conv2d(x, kernel, stride=2, padding=((3, 3), (3, 3)))
    y = jax.nn.relu(batch_stats_norm(y))
    pad = ((0, 0), (1, 1), (1, 1), (0, 0))
    return lax.reduce_window(y, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), pad)


@treespec.jit
def stem_pad2(
    x: Float[Array, "b h w 3"], kernel: Float[Array, "7 7 3 c"]
) -> Float[Array, "b (h+3)//4 (w+3)//4 c"]:
    y = conv2d(x, kernel, stride=2, padding=((2, 2), (2, 2)))  # BUG: padding 2 for a 7x7 kernel (should be 3)
    y = jax.nn.relu(batch_stats_norm(y))
    pad = ((0, 0), (1, 1), (1, 1), (0, 0))
    return lax.reduce_window(y, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), pad)


# --------------------------------------------------------------------------
# Relation-only: ResNeXt grouped conv (c_in == groups * c_g, groups | c_out)
# --------------------------------------------------------------------------


@treespec.jit
def grouped_conv(
    x: Float[Array, "b h w c_in"],
    kernel: Float[Array, "3 3 c_g c_out"],
    groups: Static[int] = 4,
) -> Float[Array, "b h w c_out"]:
    return jax.nn.relu(batch_stats_norm(conv2d(x, kernel, groups=groups)))
