"""MLP-Mixer and attention pieces written with einops."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from einops import rearrange, reduce, repeat
from jaxtyping import Array, Float

import treespec
from treespec import Static

# ---------------------------------------------------------------- relation


@treespec.jit
def to_patches(img: Float[Array, "b h w c"], patch: Static[int] = 2) -> Float[Array, "b n q"]:
    """einops patchify (h and w divisible by patch)."""
    return rearrange(img, "b (gh p1) (gw p2) c -> b (gh gw) (p1 p2 c)", p1=patch, p2=patch)


# ---------------------------------------------------------------- token mixing


@treespec.jit
def token_mixing(x: Float[Array, "b n c"], w1: Float[Array, "n f"], w2: Float[Array, "f n"]) -> Float[Array, "b n c"]:
    y = rearrange(x, "b n c -> b c n")
    y = jax.nn.gelu(y @ w1) @ w2
    return x + rearrange(y, "b c n -> b n c")


@treespec.jit
def token_mixing_bug(x: Float[Array, "b n c"], w1: Float[Array, "n f"], w2: Float[Array, "f n"]) -> Float[Array, "b n c"]:
    y = x  # BUG: tokens never moved to the last axis before the token MLP
    y = jax.nn.gelu(y @ w1) @ w2
    return x + rearrange(y, "b c n -> b n c")


# ---------------------------------------------------------------- positional embedding


@treespec.jit
def add_positions(x: Float[Array, "b n c"], pos: Float[Array, "n c"]) -> Float[Array, "b n c"]:
    return x + repeat(pos, "n c -> b n c", b=x.shape[0])


@treespec.jit
def add_positions_bug(x: Float[Array, "b n c"], pos: Float[Array, "n c"]) -> Float[Array, "b n c"]:
    return x + repeat(pos, "n c -> b c n", b=x.shape[0])  # BUG: repeated table transposed


# ---------------------------------------------------------------- pooled head


@treespec.jit
def pool_head(x: Float[Array, "b n c"], w: Float[Array, "c k"]) -> Float[Array, "b k"]:
    pooled = reduce(x, "b n c -> b c", "mean")
    return pooled @ w


@treespec.jit
def pool_head_bug(x: Float[Array, "b n c"], w: Float[Array, "c k"]) -> Float[Array, "b k"]:
    pooled = reduce(x, "b n c -> b n", "mean")  # BUG: reduced the channels, kept the tokens
    return pooled @ w


# ---------------------------------------------------------------- fused-qkv attention


@treespec.jit
def fused_attention(
    x: Float[Array, "b n d"], w_qkv: Float[Array, "d 3 h k"], w_o: Float[Array, "h k d"]
) -> Float[Array, "b n d"]:
    d, _, h, k = w_qkv.shape
    qkv = x @ w_qkv.reshape(d, 3 * h * k)
    q, kk, v = rearrange(qkv, "b n (t h k) -> t b h n k", t=3, h=h)
    logits = jnp.einsum("bhnk,bhmk->bhnm", q, kk) / jnp.sqrt(k)
    o = jax.nn.softmax(logits, axis=-1) @ v
    o = rearrange(o, "b h n k -> b n (h k)")
    return o @ w_o.reshape(h * k, d)


@treespec.jit
def fused_attention_bug(
    x: Float[Array, "b n d"], w_qkv: Float[Array, "d 3 h k"], w_o: Float[Array, "h k d"]
) -> Float[Array, "b n d"]:
    d, _, h, k = w_qkv.shape
    qkv = x @ w_qkv.reshape(d, 3 * h * k)
    q, kk, v = rearrange(qkv, "b n (t h k) -> t b h n k", t=3, h=h)
    logits = jnp.einsum("bhnk,bhmk->bhnm", q, kk) / jnp.sqrt(k)
    o = jax.nn.softmax(logits, axis=-1) @ v
    o = rearrange(o, "b h n k -> b h (n k)")  # BUG: merged positions with the head dim instead of heads
    return o @ w_o.reshape(h * k, d)


# ---------------------------------------------------------------- channel mixing with a per-token gate


@treespec.jit
def gated_channel_mix(
    x: Float[Array, "b n c"], w: Float[Array, "c e"], gate: Float[Array, "b n"]
) -> Float[Array, "b n e"]:
    g = rearrange(jax.nn.sigmoid(gate), "b n -> b n 1")
    return (x * g) @ w


@treespec.jit
def gated_channel_mix_bug(
    x: Float[Array, "b n c"], w: Float[Array, "c e"], gate: Float[Array, "b n"]
) -> Float[Array, "b n e"]:
    g = rearrange(jax.nn.sigmoid(gate), "b n -> b 1 n")  # BUG: gate broadcast over tokens, not channels
    return (x * g) @ w
