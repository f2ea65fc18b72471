"""A Gemma-style decoder block on one sequence, after the layout of Gemma's
own JAX code: RMSNorm with a `1 + scale`, grouped-query attention (fewer key
and value heads than query heads) with RoPE and a "global" or
"local_sliding" attention type, and a gated-GELU feed-forward. The weights
are `flax.struct` dataclasses. Twins with one planted bug are marked
`# BUG: kind`."""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
from flax import struct
from jaxtyping import Array, Bool, Float, Int

import treespec
from treespec import Static

AttentionType = Literal["global", "local_sliding"]
K_MASK = -2.3819763e38  # Gemma's mask value


@struct.dataclass
class AttentionWeights:
    q_einsum: Float[Array, "heads d head_dim"]
    kv_einsum: Float[Array, "2 kv_heads d head_dim"]
    attn_vec_einsum: Float[Array, "heads head_dim d"]


@struct.dataclass
class BlockWeights:
    pre_attention_norm: Float[Array, " d"]
    attn: AttentionWeights
    pre_ffw_norm: Float[Array, " d"]
    gating_einsum: Float[Array, "2 d ffw"]
    linear: Float[Array, "ffw d"]


def apply_rope(
    inputs: Float[Array, "t n h"],
    positions: Int[Array, " t"],
    max_wavelength: int = 10_000,
) -> Float[Array, "t n h"]:
    head_dim = inputs.shape[-1]
    fraction = 2 * jnp.arange(0, head_dim // 2) / head_dim
    timescale = max_wavelength**fraction
    sinusoid_inp = positions[:, None] / timescale[None, :]
    sinusoid_inp = sinusoid_inp[:, None, :]
    sin, cos = jnp.sin(sinusoid_inp), jnp.cos(sinusoid_inp)
    first_half, second_half = jnp.split(inputs, 2, axis=-1)
    first_part = first_half * cos - second_half * sin
    second_part = second_half * cos + first_half * sin
    return jnp.concatenate([first_part, second_part], axis=-1)


@treespec.jit
def rms_norm(x: Float[Array, "t d"], scale: Float[Array, " d"]) -> Float[Array, "t d"]:
    var = jnp.mean(jnp.square(x), axis=-1, keepdims=True)
    normed = x * jax.lax.rsqrt(var + 1e-6)
    return normed * (1 + scale)


@treespec.jit
def rms_norm_keepdims(
    x: Float[Array, "t d"], scale: Float[Array, " d"]
) -> Float[Array, "t d"]:
    var = jnp.mean(jnp.square(x), axis=-1)
    normed = x * jax.lax.rsqrt(var + 1e-6)  # BUG: missing keepdims
    return normed * (1 + scale)


@treespec.jit
def attention(
    w: AttentionWeights,
    x: Float[Array, "t d"],
    positions: Int[Array, " t"],
    attn_mask: Bool[Array, "t t"],
    attn_type: Static[AttentionType] = "global",
    sliding_window: Static[int] = 4096,
) -> Float[Array, "t d"]:
    query = jnp.einsum("td,ndh->tnh", x, w.q_einsum)
    key, value = jnp.einsum("td,ckdh->ctkh", x, w.kv_einsum)
    query = apply_rope(query, positions)
    key = apply_rope(key, positions)
    t, num_heads, head_dim = query.shape
    num_kv_heads = key.shape[1]
    query = query * head_dim**-0.5
    # Grouped-query attention: each key/value head serves a group of queries.
    query = query.reshape(t, num_kv_heads, num_heads // num_kv_heads, head_dim)
    logits = jnp.einsum("tkgh,skh->tkgs", query, key)
    if attn_type == "local_sliding":
        distance = positions[:, None] - positions[None, :]
        attn_mask = attn_mask & (distance < sliding_window)
    logits = jnp.where(attn_mask[:, None, None, :], logits, K_MASK)
    probs = jax.nn.softmax(logits, axis=-1)
    encoded = jnp.einsum("tkgs,skh->tkgh", probs, value)
    encoded = encoded.reshape(t, num_heads, head_dim)
    return jnp.einsum("tnh,nhd->td", encoded, w.attn_vec_einsum)


@treespec.jit
def attention_groups(
    w: AttentionWeights,
    x: Float[Array, "t d"],
    positions: Int[Array, " t"],
    attn_mask: Bool[Array, "t t"],
    attn_type: Static[AttentionType] = "global",
    sliding_window: Static[int] = 4096,
) -> Float[Array, "t d"]:
    query = jnp.einsum("td,ndh->tnh", x, w.q_einsum)
    key, value = jnp.einsum("td,ckdh->ctkh", x, w.kv_einsum)
    query = apply_rope(query, positions)
    key = apply_rope(key, positions)
    t, num_heads, head_dim = query.shape
    num_kv_heads = key.shape[1]
    query = query * head_dim**-0.5
    query = query.reshape(t, num_kv_heads, num_heads // num_kv_heads, head_dim)
    logits = jnp.einsum("tgkh,skh->tkgs", query, key)  # BUG: kv heads and groups mixed
    if attn_type == "local_sliding":
        distance = positions[:, None] - positions[None, :]
        attn_mask = attn_mask & (distance < sliding_window)
    logits = jnp.where(attn_mask[:, None, None, :], logits, K_MASK)
    probs = jax.nn.softmax(logits, axis=-1)
    encoded = jnp.einsum("tkgs,skh->tkgh", probs, value)
    encoded = encoded.reshape(t, num_heads, head_dim)
    return jnp.einsum("tnh,nhd->td", encoded, w.attn_vec_einsum)


@treespec.jit
def attention_window(
    w: AttentionWeights,
    x: Float[Array, "t d"],
    positions: Int[Array, " t"],
    attn_mask: Bool[Array, "t t"],
    attn_type: Static[AttentionType] = "global",
    sliding_window: Static[int] = 4096,
) -> Float[Array, "t d"]:
    query = jnp.einsum("td,ndh->tnh", x, w.q_einsum)
    key, value = jnp.einsum("td,ckdh->ctkh", x, w.kv_einsum)
    query = apply_rope(query, positions)
    key = apply_rope(key, positions)
    t, num_heads, head_dim = query.shape
    num_kv_heads = key.shape[1]
    query = query * head_dim**-0.5
    query = query.reshape(t, num_kv_heads, num_heads // num_kv_heads, head_dim)
    logits = jnp.einsum("tkgh,skh->tkgs", query, key)
    if attn_type == "local_sliding":
        band = jnp.tril(jnp.ones((sliding_window, sliding_window), dtype=bool))
        attn_mask = attn_mask & band  # BUG: band made at the window's size
    logits = jnp.where(attn_mask[:, None, None, :], logits, K_MASK)
    probs = jax.nn.softmax(logits, axis=-1)
    encoded = jnp.einsum("tkgs,skh->tkgh", probs, value)
    encoded = encoded.reshape(t, num_heads, head_dim)
    return jnp.einsum("tnh,nhd->td", encoded, w.attn_vec_einsum)


@treespec.jit
def feed_forward(
    gating_einsum: Float[Array, "2 d ffw"],
    linear: Float[Array, "ffw d"],
    x: Float[Array, "t d"],
) -> Float[Array, "t d"]:
    gate, up = jnp.einsum("td,cdf->ctf", x, gating_einsum)
    return (jax.nn.gelu(gate) * up) @ linear


@treespec.jit
def feed_forward_einsum(
    gating_einsum: Float[Array, "2 d ffw"],
    linear: Float[Array, "ffw d"],
    x: Float[Array, "t d"],
) -> Float[Array, "t d"]:
    gate, up = jnp.einsum("td,cfd->ctf", x, gating_einsum)  # BUG: einsum indices
    return (jax.nn.gelu(gate) * up) @ linear


@treespec.jit
def block(
    w: BlockWeights,
    x: Float[Array, "t d"],
    positions: Int[Array, " t"],
    attn_mask: Bool[Array, "t t"],
    attn_type: Static[AttentionType] = "global",
) -> Float[Array, "t d"]:
    h = rms_norm(x, w.pre_attention_norm)
    x = x + attention(w.attn, h, positions, attn_mask, attn_type)
    h = rms_norm(x, w.pre_ffw_norm)
    return x + feed_forward(w.gating_einsum, w.linear, h)


@treespec.jit
def block_no_down_projection(
    w: BlockWeights,
    x: Float[Array, "t d"],
    positions: Int[Array, " t"],
    attn_mask: Bool[Array, "t t"],
    attn_type: Static[AttentionType] = "global",
) -> Float[Array, "t d"]:
    h = rms_norm(x, w.pre_attention_norm)
    x = x + attention(w.attn, h, positions, attn_mask, attn_type)
    h = rms_norm(x, w.pre_ffw_norm)
    gate, up = jnp.einsum("td,cdf->ctf", h, w.gating_einsum)
    return x + jax.nn.gelu(gate) * up  # BUG: no down projection
