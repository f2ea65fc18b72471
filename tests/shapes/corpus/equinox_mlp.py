"""An MLP and multi-head self-attention written as Equinox's examples write
them: an `eqx.Module` with fields, drawn in `__init__`, applied by
`__call__`. Each clean module has twins (subclasses overriding `__call__`)
with one planted bug, on the line marked `# BUG: kind`."""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

import treespec
from treespec import Static


class Linear(eqx.Module):
    """Equinox's first example: the weights are plain arrays, made by
    `__init__` from the sizes."""

    weight: Array
    bias: Array

    def __init__(self, in_size: int, out_size: int, key: PRNGKeyArray) -> None:
        wkey, bkey = jax.random.split(key)
        self.weight = jax.random.normal(wkey, (out_size, in_size))
        self.bias = jax.random.normal(bkey, (out_size,))

    @treespec.jit
    def __call__(self, x: Float[Array, " in_size"]) -> Float[Array, " out_size"]:
        return self.weight @ x + self.bias


class LinearTransposed(Linear):
    @treespec.jit
    def __call__(self, x: Float[Array, " in_size"]) -> Float[Array, " out_size"]:
        return x @ self.weight + self.bias  # BUG: transposed weight


class MLP(eqx.Module):
    """A two-layer perceptron on a batch, its weights annotated."""

    w1: Float[Array, "width in_size"]
    b1: Float[Array, " width"]
    w2: Float[Array, "out_size width"]
    b2: Float[Array, " out_size"]

    def __init__(
        self, in_size: int, width: int, out_size: int, *, key: PRNGKeyArray
    ) -> None:
        k1, k2 = jax.random.split(key)
        self.w1 = jax.random.normal(k1, (width, in_size)) / math.sqrt(in_size)
        self.b1 = jnp.zeros(width)
        self.w2 = jax.random.normal(k2, (out_size, width)) / math.sqrt(width)
        self.b2 = jnp.zeros(out_size)

    @treespec.jit
    def __call__(
        self, x: Float[Array, "batch in_size"], normalize: Static[bool] = False
    ) -> Float[Array, "batch out_size"]:
        h = jax.nn.gelu(x @ self.w1.T + self.b1)
        if normalize:
            h = h / jnp.linalg.norm(h, axis=-1, keepdims=True)
        return h @ self.w2.T + self.b2


class MLPBiasWidth(MLP):
    @treespec.jit
    def __call__(
        self, x: Float[Array, "batch in_size"], normalize: Static[bool] = False
    ) -> Float[Array, "batch out_size"]:
        h = jax.nn.gelu(x @ self.w1.T + self.b2)  # BUG: bias of the wrong width
        if normalize:
            h = h / jnp.linalg.norm(h, axis=-1, keepdims=True)
        return h @ self.w2.T + self.b2


class MLPNormKeepdims(MLP):
    @treespec.jit
    def __call__(
        self, x: Float[Array, "batch in_size"], normalize: Static[bool] = False
    ) -> Float[Array, "batch out_size"]:
        h = jax.nn.gelu(x @ self.w1.T + self.b1)
        if normalize:
            h = h / jnp.linalg.norm(h, axis=-1)  # BUG: missing keepdims
        return h @ self.w2.T + self.b2


class SelfAttention(eqx.Module):
    """Multi-head self-attention, one projection per head."""

    wq: Float[Array, "d heads head_dim"]
    wk: Float[Array, "d heads head_dim"]
    wv: Float[Array, "d heads head_dim"]
    wo: Float[Array, "heads head_dim d"]

    def __init__(self, d: int, heads: int, *, key: PRNGKeyArray) -> None:
        head_dim = d // heads
        kq, kk, kv, ko = jax.random.split(key, 4)
        shape = (d, heads, head_dim)
        self.wq = jax.random.normal(kq, shape) / math.sqrt(d)
        self.wk = jax.random.normal(kk, shape) / math.sqrt(d)
        self.wv = jax.random.normal(kv, shape) / math.sqrt(d)
        self.wo = jax.random.normal(ko, (heads, head_dim, d)) / math.sqrt(d)

    @treespec.jit
    def __call__(
        self, x: Float[Array, "t d"], causal: Static[bool] = False
    ) -> Float[Array, "t d"]:
        q = jnp.einsum("td,dhk->thk", x, self.wq)
        k = jnp.einsum("td,dhk->thk", x, self.wk)
        v = jnp.einsum("td,dhk->thk", x, self.wv)
        scale = 1 / math.sqrt(q.shape[-1])
        logits = jnp.einsum("thk,shk->hts", q, k) * scale
        if causal:
            t = x.shape[0]
            mask = jnp.tril(jnp.ones((t, t), dtype=bool))
            logits = jnp.where(mask, logits, -jnp.inf)
        weights = jax.nn.softmax(logits, axis=-1)
        out = jnp.einsum("hts,shk->thk", weights, v)
        return jnp.einsum("thk,hkd->td", out, self.wo)


class AttentionOutputEinsum(SelfAttention):
    @treespec.jit
    def __call__(
        self, x: Float[Array, "t d"], causal: Static[bool] = False
    ) -> Float[Array, "t d"]:
        q = jnp.einsum("td,dhk->thk", x, self.wq)
        k = jnp.einsum("td,dhk->thk", x, self.wk)
        v = jnp.einsum("td,dhk->thk", x, self.wv)
        scale = 1 / math.sqrt(q.shape[-1])
        logits = jnp.einsum("thk,shk->hts", q, k) * scale
        if causal:
            t = x.shape[0]
            mask = jnp.tril(jnp.ones((t, t), dtype=bool))
            logits = jnp.where(mask, logits, -jnp.inf)
        weights = jax.nn.softmax(logits, axis=-1)
        out = jnp.einsum("hts,shk->thk", weights, v)
        return jnp.einsum("thk,khd->td", out, self.wo)  # BUG: einsum indices


class AttentionCausalMask(SelfAttention):
    @treespec.jit
    def __call__(
        self, x: Float[Array, "t d"], causal: Static[bool] = False
    ) -> Float[Array, "t d"]:
        q = jnp.einsum("td,dhk->thk", x, self.wq)
        k = jnp.einsum("td,dhk->thk", x, self.wk)
        v = jnp.einsum("td,dhk->thk", x, self.wv)
        scale = 1 / math.sqrt(q.shape[-1])
        logits = jnp.einsum("thk,shk->hts", q, k) * scale
        if causal:
            t = x.shape[-1]
            mask = jnp.tril(jnp.ones((t, t), dtype=bool))
            logits = jnp.where(mask, logits, -jnp.inf)  # BUG: length of the d axis
        weights = jax.nn.softmax(logits, axis=-1)
        out = jnp.einsum("hts,shk->thk", weights, v)
        return jnp.einsum("thk,hkd->td", out, self.wo)
