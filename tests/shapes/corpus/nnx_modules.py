"""Flax NNX modules as Flax's guides write them: layers (`nnx.Linear`,
`nnx.Conv`, `nnx.LayerNorm`, `nnx.MultiHeadAttention`) made in `__init__`
from integer sizes and `rngs: nnx.Rngs`; applied by a jitted method or by a
jitted function taking the module. Twins with one planted bug are marked
`# BUG: kind`."""

from __future__ import annotations

from functools import partial

import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Bool, Float

import treespec
from treespec import Static


class MLP(nnx.Module):
    def __init__(self, din: int, dmid: int, dout: int, *, rngs: nnx.Rngs) -> None:
        self.linear1 = nnx.Linear(din, dmid, rngs=rngs)
        self.norm = nnx.LayerNorm(dmid, rngs=rngs)
        self.linear2 = nnx.Linear(dmid, dout, rngs=rngs)

    @treespec.jit
    def __call__(self, x: Float[Array, "b din"]) -> Float[Array, "b dout"]:
        h = nnx.gelu(self.norm(self.linear1(x)))
        return self.linear2(h)


class MLPResidual(MLP):
    @treespec.jit
    def __call__(self, x: Float[Array, "b din"]) -> Float[Array, "b dout"]:
        h = nnx.gelu(self.norm(self.linear1(x)))
        return x + self.linear2(h)  # BUG: residual across a change of width


class CNN(nnx.Module):
    """The Flax NNX MNIST tutorial's CNN, with a global average pool."""

    def __init__(self, in_features: int, num_classes: int, *, rngs: nnx.Rngs) -> None:
        self.conv1 = nnx.Conv(in_features, 32, kernel_size=(3, 3), rngs=rngs)
        self.conv2 = nnx.Conv(32, 64, kernel_size=(3, 3), rngs=rngs)
        self.avg_pool = partial(nnx.avg_pool, window_shape=(2, 2), strides=(2, 2))
        self.linear = nnx.Linear(64, num_classes, rngs=rngs)

    def __call__(self, x: Array) -> Array:
        x = self.avg_pool(nnx.relu(self.conv1(x)))
        x = self.avg_pool(nnx.relu(self.conv2(x)))
        return self.linear(x.mean(axis=(1, 2)))


@treespec.jit
def apply_cnn(
    model: CNN, images: Float[Array, "b in_features height width"]
) -> Float[Array, "b num_classes"]:
    """Images as a PyTorch data loader gives them, channels first."""
    return model(jnp.transpose(images, (0, 2, 3, 1)))


@treespec.jit
def apply_cnn_layout(
    model: CNN, images: Float[Array, "b in_features height width"]
) -> Float[Array, "b num_classes"]:
    return model(images)  # BUG: channels-first images to an NHWC conv


class EncoderBlock(nnx.Module):
    def __init__(
        self, d_model: int, num_heads: int, d_ff: int, *, rngs: nnx.Rngs
    ) -> None:
        self.attn = nnx.MultiHeadAttention(
            num_heads=num_heads, in_features=d_model, decode=False, rngs=rngs
        )
        self.norm1 = nnx.LayerNorm(d_model, rngs=rngs)
        self.norm2 = nnx.LayerNorm(d_model, rngs=rngs)
        self.ff1 = nnx.Linear(d_model, d_ff, rngs=rngs)
        self.ff2 = nnx.Linear(d_ff, d_model, rngs=rngs)

    @treespec.jit
    def __call__(
        self,
        x: Float[Array, "b t d_model"],
        padding: Bool[Array, "b t"],
        causal: Static[bool] = False,
    ) -> Float[Array, "b t d_model"]:
        mask = nnx.make_attention_mask(padding, padding)
        if causal:
            mask = nnx.combine_masks(mask, nnx.make_causal_mask(padding))
        x = x + self.attn(self.norm1(x), mask=mask)
        return x + self.ff2(nnx.gelu(self.ff1(self.norm2(x))))


class EncoderBlockSeqFirst(EncoderBlock):
    @treespec.jit
    def __call__(
        self,
        x: Float[Array, "b t d_model"],
        padding: Bool[Array, "b t"],
        causal: Static[bool] = False,
    ) -> Float[Array, "b t d_model"]:
        mask = nnx.make_attention_mask(padding, padding)
        if causal:
            mask = nnx.combine_masks(mask, nnx.make_causal_mask(padding))
        h = jnp.swapaxes(self.norm1(x), 0, 1)  # (t, b, d), as PyTorch's attention
        x = x + self.attn(h, mask=mask)  # BUG: sequence-first layout
        return x + self.ff2(nnx.gelu(self.ff1(self.norm2(x))))
