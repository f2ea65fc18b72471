"""Modules made of Equinox's layers (`eqx.nn.Linear`, `LayerNorm`,
`MultiheadAttention`, `GRUCell`, `Conv2d`, `MaxPool2d`), built in `__init__`
from integer sizes and a key; the fields say no shape, so the sizes live in
the constructor's parameters. Applied by a jitted method, or by a jitted
function taking the module. Twins with one planted bug are marked
`# BUG: kind`."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

import treespec
from treespec import Static


class MLPBlock(eqx.Module):
    norm: eqx.nn.LayerNorm
    fc1: eqx.nn.Linear
    fc2: eqx.nn.Linear

    def __init__(self, d_model: int, hidden_size: int, *, key: PRNGKeyArray) -> None:
        k1, k2 = jax.random.split(key)
        self.norm = eqx.nn.LayerNorm(d_model)
        self.fc1 = eqx.nn.Linear(d_model, hidden_size, key=k1)
        self.fc2 = eqx.nn.Linear(hidden_size, d_model, key=k2)


@treespec.jit
def apply_block(
    block: MLPBlock, x: Float[Array, "batch d_model"]
) -> Float[Array, "batch d_model"]:
    h = jax.vmap(block.norm)(x)
    h = jax.vmap(block.fc2)(jax.nn.gelu(jax.vmap(block.fc1)(h)))
    return x + h


@treespec.jit
def apply_block_norm_axis(
    block: MLPBlock, x: Float[Array, "batch d_model"]
) -> Float[Array, "batch d_model"]:
    h = jax.vmap(block.norm, in_axes=1, out_axes=1)(x)  # BUG: normalized over batch
    h = jax.vmap(block.fc2)(jax.nn.gelu(jax.vmap(block.fc1)(h)))
    return x + h


@treespec.jit
def apply_block_no_fc2(
    block: MLPBlock, x: Float[Array, "batch d_model"]
) -> Float[Array, "batch d_model"]:
    h = jax.vmap(block.norm)(x)
    h = jax.nn.gelu(jax.vmap(block.fc1)(h))
    return x + h  # BUG: no down projection


class RNN(eqx.Module):
    """Equinox's RNN example: a GRU cell scanned over the sequence, a linear
    read-out of the last state."""

    hidden_size: int = eqx.field(static=True)
    cell: eqx.nn.GRUCell
    linear: eqx.nn.Linear
    bias: Array

    def __init__(
        self, in_size: int, out_size: int, hidden_size: int, *, key: PRNGKeyArray
    ) -> None:
        ckey, lkey = jax.random.split(key)
        self.hidden_size = hidden_size
        self.cell = eqx.nn.GRUCell(in_size, hidden_size, key=ckey)
        self.linear = eqx.nn.Linear(hidden_size, out_size, use_bias=False, key=lkey)
        self.bias = jnp.zeros(out_size)

    @treespec.jit
    def __call__(self, xs: Float[Array, "seq in_size"]) -> Float[Array, " out_size"]:
        hidden = jnp.zeros((self.hidden_size,))

        def f(carry: Array, inp: Array) -> tuple[Array, None]:
            return self.cell(inp, carry), None

        out, _ = jax.lax.scan(f, hidden, xs)
        return jax.nn.sigmoid(self.linear(out) + self.bias)


class RNNLastInput(RNN):
    @treespec.jit
    def __call__(self, xs: Float[Array, "seq in_size"]) -> Float[Array, " out_size"]:
        hidden = jnp.zeros((self.hidden_size,))

        def f(carry: Array, inp: Array) -> tuple[Array, None]:
            return self.cell(inp, carry), None

        out, _ = jax.lax.scan(f, hidden, xs)  # noqa: RUF059 (the bug's)
        return jax.nn.sigmoid(self.linear(xs[-1]) + self.bias)  # BUG: last input


class ConvBlock(eqx.Module):
    conv1: eqx.nn.Conv2d
    conv2: eqx.nn.Conv2d
    pool: eqx.nn.MaxPool2d

    def __init__(
        self, in_channels: int, out_channels: int, *, key: PRNGKeyArray
    ) -> None:
        k1, k2 = jax.random.split(key)
        self.conv1 = eqx.nn.Conv2d(in_channels, out_channels, 3, padding=1, key=k1)
        self.conv2 = eqx.nn.Conv2d(out_channels, out_channels, 3, padding=1, key=k2)
        self.pool = eqx.nn.MaxPool2d(2, 2)

    @treespec.jit
    def __call__(
        self, x: Float[Array, "in_channels h w"]
    ) -> Float[Array, "out_channels h//2 w//2"]:
        h = jax.nn.relu(self.conv1(x))
        h = h + jax.nn.relu(self.conv2(h))
        return self.pool(h)


class ConvBlockSkip(ConvBlock):
    @treespec.jit
    def __call__(
        self, x: Float[Array, "in_channels h w"]
    ) -> Float[Array, "out_channels h//2 w//2"]:
        h = jax.nn.relu(self.conv1(x))
        h = x + jax.nn.relu(self.conv2(h))  # BUG: skip across a change of channels
        return self.pool(h)


class TransformerBlock(eqx.Module):
    attention: eqx.nn.MultiheadAttention
    norm1: eqx.nn.LayerNorm
    norm2: eqx.nn.LayerNorm
    mlp: eqx.nn.MLP

    def __init__(
        self, d_model: int, num_heads: int, mlp_size: int, *, key: PRNGKeyArray
    ) -> None:
        k1, k2 = jax.random.split(key)
        self.attention = eqx.nn.MultiheadAttention(num_heads, d_model, key=k1)
        self.norm1 = eqx.nn.LayerNorm(d_model)
        self.norm2 = eqx.nn.LayerNorm(d_model)
        self.mlp = eqx.nn.MLP(d_model, d_model, mlp_size, 1, key=k2)

    @treespec.jit
    def __call__(
        self, x: Float[Array, "seq d_model"], causal: Static[bool] = False
    ) -> Float[Array, "seq d_model"]:
        seq = x.shape[0]
        mask = jnp.tril(jnp.ones((seq, seq), dtype=bool)) if causal else None
        h = jax.vmap(self.norm1)(x)
        x = x + self.attention(h, h, h, mask=mask)
        return x + jax.vmap(self.mlp)(jax.vmap(self.norm2)(x))


class TransformerBlockMask(TransformerBlock):
    @treespec.jit
    def __call__(
        self, x: Float[Array, "seq d_model"], causal: Static[bool] = False
    ) -> Float[Array, "seq d_model"]:
        seq = x.shape[-1]
        mask = jnp.tril(jnp.ones((seq, seq), dtype=bool)) if causal else None
        h = jax.vmap(self.norm1)(x)
        x = x + self.attention(h, h, h, mask=mask)  # BUG: mask of d_model's length
        return x + jax.vmap(self.mlp)(jax.vmap(self.norm2)(x))
