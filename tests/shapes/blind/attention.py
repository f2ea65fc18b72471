"""Attention variants in einsum style: encoder-decoder cross-attention (query
length != key length), a padded-key mask, ALiBi causal self-attention,
T5-style relative position bias, fused-QKV attention, and block-local
windowed attention."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

import treespec
from treespec import Static


class CrossAttention(eqx.Module):
    wq: Float[Array, "d d"]
    wk: Float[Array, "e d"]
    wv: Float[Array, "e d"]
    wo: Float[Array, "d d"]


# --------------------------------------------------------------------------
# Cross-attention: decoder queries (q tokens) over encoder memory (k tokens)
# --------------------------------------------------------------------------


@treespec.jit
def cross_attention(
    p: CrossAttention,
    x: Float[Array, "b q d"],
    memory: Float[Array, "b k e"],
    num_heads: Static[int] = 4,
) -> Float[Array, "b q d"]:
    b, tq, d = x.shape
    tk = memory.shape[1]
    head_dim = d // num_heads
    q = (x @ p.wq).reshape(b, tq, num_heads, head_dim)
    k = (memory @ p.wk).reshape(b, tk, num_heads, head_dim)
    v = (memory @ p.wv).reshape(b, tk, num_heads, head_dim)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(head_dim)
    weights = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, tq, d)
    return out @ p.wo


@treespec.jit
def cross_attention_query_len(
    p: CrossAttention,
    x: Float[Array, "b q d"],
    memory: Float[Array, "b k e"],
    num_heads: Static[int] = 4,
) -> Float[Array, "b q d"]:
    b, tq, d = x.shape
    tk = memory.shape[1]
    head_dim = d // num_heads
    q = (x @ p.wq).reshape(b, tq, num_heads, head_dim)
    k = (memory @ p.wk).reshape(b, tq, num_heads, head_dim)  # BUG: keys reshaped with the query length
    v = (memory @ p.wv).reshape(b, tk, num_heads, head_dim)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(head_dim)
    weights = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, tq, d)
    return out @ p.wo


# --------------------------------------------------------------------------
# Cross-attention with a key padding mask, heads-first layout
# --------------------------------------------------------------------------


def _split_heads(t, num_heads):
    b, n, d = t.shape
    return t.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)


@treespec.jit
def masked_cross_attention(
    p: CrossAttention,
    x: Float[Array, "b q d"],
    memory: Float[Array, "b k e"],
    memory_mask: Bool[Array, "b k"],
    num_heads: Static[int] = 4,
) -> Float[Array, "b q d"]:
    q = _split_heads(x @ p.wq, num_heads)
    k = _split_heads(memory @ p.wk, num_heads)
    v = _split_heads(memory @ p.wv, num_heads)
    scores = q @ k.swapaxes(-1, -2) * q.shape[-1] ** -0.5
    scores = jnp.where(memory_mask[:, None, None, :], scores, -1e9)
    out = jax.nn.softmax(scores, axis=-1) @ v
    return out.transpose(0, 2, 1, 3).reshape(x.shape) @ p.wo


@treespec.jit
def masked_cross_attention_mask_axis(
    p: CrossAttention,
    x: Float[Array, "b q d"],
    memory: Float[Array, "b k e"],
    memory_mask: Bool[Array, "b k"],
    num_heads: Static[int] = 4,
) -> Float[Array, "b q d"]:
    q = _split_heads(x @ p.wq, num_heads)
    k = _split_heads(memory @ p.wk, num_heads)
    v = _split_heads(memory @ p.wv, num_heads)
    scores = q @ k.swapaxes(-1, -2) * q.shape[-1] ** -0.5
    scores = jnp.where(memory_mask[:, None, :, None], scores, -1e9)  # BUG: key mask placed on the query axis
    out = jax.nn.softmax(scores, axis=-1) @ v
    return out.transpose(0, 2, 1, 3).reshape(x.shape) @ p.wo


# --------------------------------------------------------------------------
# ALiBi causal self-attention (Press et al.): per-head linear distance bias
# --------------------------------------------------------------------------


class SelfAttention(eqx.Module):
    wq: Float[Array, "d d"]
    wk: Float[Array, "d d"]
    wv: Float[Array, "d d"]
    wo: Float[Array, "d d"]


def alibi_slopes(num_heads):
    return 2.0 ** (-8.0 * jnp.arange(1, num_heads + 1) / num_heads)


@treespec.jit
def alibi_attention(
    p: SelfAttention,
    x: Float[Array, "b t d"],
    num_heads: Static[int] = 4,
    causal: Static[bool] = True,
) -> Float[Array, "b t d"]:
    b, t, d = x.shape
    q = _split_heads(x @ p.wq, num_heads)
    k = _split_heads(x @ p.wk, num_heads)
    v = _split_heads(x @ p.wv, num_heads)
    pos = jnp.arange(t)
    distance = pos[None, :] - pos[:, None]
    bias = alibi_slopes(num_heads)[:, None, None] * distance
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(d // num_heads) + bias
    if causal:
        scores = jnp.where(jnp.tril(jnp.ones((t, t), dtype=bool)), scores, -jnp.inf)
    out = jax.nn.softmax(scores, axis=-1) @ v
    return out.transpose(0, 2, 1, 3).reshape(b, t, d) @ p.wo


@treespec.jit
def alibi_attention_slope_axis(
    p: SelfAttention,
    x: Float[Array, "b t d"],
    num_heads: Static[int] = 4,
    causal: Static[bool] = True,
) -> Float[Array, "b t d"]:
    b, t, d = x.shape
    q = _split_heads(x @ p.wq, num_heads)
    k = _split_heads(x @ p.wk, num_heads)
    v = _split_heads(x @ p.wv, num_heads)
    pos = jnp.arange(t)
    distance = pos[None, :] - pos[:, None]
    bias = alibi_slopes(num_heads)[None, :, None] * distance  # BUG: slopes laid along the query axis, not heads
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(d // num_heads) + bias
    if causal:
        scores = jnp.where(jnp.tril(jnp.ones((t, t), dtype=bool)), scores, -jnp.inf)
    out = jax.nn.softmax(scores, axis=-1) @ v
    return out.transpose(0, 2, 1, 3).reshape(b, t, d) @ p.wo


# --------------------------------------------------------------------------
# T5 relative position bias added to precomputed per-head q/k
# --------------------------------------------------------------------------


@treespec.jit
def t5_scores(
    q: Float[Array, "b h q d"],
    k: Float[Array, "b h k d"],
    table: Float[Array, "nb h"],
) -> Float[Array, "b h q k"]:
    tq, tk = q.shape[2], k.shape[2]
    num_buckets = table.shape[0]
    relative = jnp.arange(tk)[None, :] - jnp.arange(tq)[:, None]
    bucket = jnp.clip(relative + num_buckets // 2, 0, num_buckets - 1)
    bias = table[bucket]
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k)
    return scores + bias.transpose(2, 0, 1)


@treespec.jit
def t5_scores_bias_transposed(
    q: Float[Array, "b h q d"],
    k: Float[Array, "b h k d"],
    table: Float[Array, "nb h"],
) -> Float[Array, "b h q k"]:
    tq, tk = q.shape[2], k.shape[2]
    num_buckets = table.shape[0]
    relative = jnp.arange(tk)[None, :] - jnp.arange(tq)[:, None]
    bucket = jnp.clip(relative + num_buckets // 2, 0, num_buckets - 1)
    bias = table[bucket]
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k)
    return scores + bias.transpose(2, 1, 0)  # BUG: bias permuted to (h, k, q)


# --------------------------------------------------------------------------
# Fused QKV projection, stacked on a leading axis of 3
# --------------------------------------------------------------------------


class FusedAttention(eqx.Module):
    w_qkv: Float[Array, "3 d d"]
    w_out: Float[Array, "d d"]


@treespec.jit
def fused_attention(
    p: FusedAttention, x: Float[Array, "b t d"], num_heads: Static[int] = 4
) -> Float[Array, "b t d"]:
    b, t, d = x.shape
    qkv = jnp.einsum("btd,sde->sbte", x, p.w_qkv)
    q, k, v = (a.reshape(b, t, num_heads, d // num_heads) for a in qkv)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) * (d // num_heads) ** -0.5
    weights = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, v)
    return out.reshape(b, t, d) @ p.w_out


@treespec.jit
def fused_attention_value_layout(
    p: FusedAttention, x: Float[Array, "b t d"], num_heads: Static[int] = 4
) -> Float[Array, "b t d"]:
    b, t, d = x.shape
    qkv = jnp.einsum("btd,sde->sbte", x, p.w_qkv)
    q, k, v = (a.reshape(b, t, num_heads, d // num_heads) for a in qkv)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) * (d // num_heads) ** -0.5
    weights = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("bhqk,bhkd->bqhd", weights, v)  # BUG: values subscripted heads-first, v is (b, t, h, d)
    return out.reshape(b, t, d) @ p.w_out


# --------------------------------------------------------------------------
# Relation-only: block-local attention (window divides t, heads divide d)
# --------------------------------------------------------------------------


@treespec.jit
def local_window_attention(
    p: SelfAttention,
    x: Float[Array, "b t d"],
    window: Static[int] = 4,
    num_heads: Static[int] = 2,
) -> Float[Array, "b t d"]:
    b, t, d = x.shape
    n_win = t // window
    head_dim = d // num_heads

    def heads(a):
        return a.reshape(b, n_win, window, num_heads, head_dim)

    q, k, v = heads(x @ p.wq), heads(x @ p.wk), heads(x @ p.wv)
    scores = jnp.einsum("bnqhd,bnkhd->bnhqk", q, k) / math.sqrt(head_dim)
    out = jnp.einsum("bnhqk,bnkhd->bnqhd", jax.nn.softmax(scores, axis=-1), v)
    return out.reshape(b, t, d) @ p.wo
