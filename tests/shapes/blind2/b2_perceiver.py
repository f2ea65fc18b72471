"""A Perceiver: cross-attention from a latent array to the inputs, then latent self-attention."""

from __future__ import annotations

from typing import TypedDict

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Float

import treespec
from treespec import Static


class CrossParams(TypedDict):
    wq: Float[Array, "d k"]
    wk: Float[Array, "c k"]
    wv: Float[Array, "c k"]
    wo: Float[Array, "k d"]


# ---------------------------------------------------------------- relation


@treespec.jit
def split_heads(z: Float[Array, "b n d"], heads: Static[int] = 4) -> Float[Array, "b h n k"]:
    """Multi-head view of the latents (d divisible by heads)."""
    b, n, d = z.shape
    return z.reshape(b, n, heads, d // heads).transpose(0, 2, 1, 3)


# ---------------------------------------------------------------- cross-attention


@treespec.jit
def cross_attend(latents: Float[Array, "n d"], x: Float[Array, "b m c"], p: CrossParams) -> Float[Array, "b n d"]:
    q = latents @ p["wq"]
    k = x @ p["wk"]
    v = x @ p["wv"]
    logits = jnp.einsum("nk,bmk->bnm", q, k) / jnp.sqrt(q.shape[-1])
    attn = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("bnm,bmk->bnk", attn, v)
    return latents + out @ p["wo"]


@treespec.jit
def cross_attend_bug(latents: Float[Array, "n d"], x: Float[Array, "b m c"], p: CrossParams) -> Float[Array, "b n d"]:
    q = latents @ p["wq"]
    k = x @ p["wq"]  # BUG: keys projected with the query weight
    v = x @ p["wv"]
    logits = jnp.einsum("nk,bmk->bnm", q, k) / jnp.sqrt(q.shape[-1])
    attn = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("bnm,bmk->bnk", attn, v)
    return latents + out @ p["wo"]


@treespec.jit
def cross_attend_values_bug(latents: Float[Array, "n d"], x: Float[Array, "b m c"], p: CrossParams) -> Float[Array, "b n d"]:
    q = latents @ p["wq"]
    k = x @ p["wk"]
    v = x @ p["wv"]
    logits = jnp.einsum("nk,bmk->bnm", q, k) / jnp.sqrt(q.shape[-1])
    attn = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("bnm,bnk->bnk", attn, v)  # BUG: values indexed by the latent axis
    return latents + out @ p["wo"]


# ---------------------------------------------------------------- latent self-attention


@treespec.jit
def latent_self_attention(
    z: Float[Array, "b n d"], wqkv: Float[Array, "d 3 h k"], wo: Float[Array, "h k d"]
) -> Float[Array, "b n d"]:
    q, k, v = jnp.einsum("bnd,dshk->sbhnk", z, wqkv)
    logits = jnp.einsum("bhnk,bhjk->bhnj", q, k) * (q.shape[-1] ** -0.5)
    out = jnp.einsum("bhnj,bhjk->bnhk", jax.nn.softmax(logits, axis=-1), v)
    return z + jnp.einsum("bnhk,hkd->bnd", out, wo)


@treespec.jit
def latent_self_attention_bug(
    z: Float[Array, "b n d"], wqkv: Float[Array, "d 3 h k"], wo: Float[Array, "h k d"]
) -> Float[Array, "b n d"]:
    q, k, v = jnp.einsum("bnd,dshk->sbhnk", z, wqkv)
    logits = jnp.einsum("bhnk,bhjk->bhnj", q, k) * (q.shape[-1] ** -0.5)
    out = jnp.einsum("bhnj,bhjk->bhnk", jax.nn.softmax(logits, axis=-1), v)  # BUG: heads left before positions
    return z + jnp.einsum("bnhk,hkd->bnd", out, wo)


# ---------------------------------------------------------------- classification head


@treespec.jit
def latent_classifier(z: Float[Array, "b n d"], w_out: Float[Array, "d o"]) -> Float[Array, "b o"]:
    pooled = z.mean(axis=1)
    return pooled @ w_out


@treespec.jit
def latent_classifier_bug(z: Float[Array, "b n d"], w_out: Float[Array, "d o"]) -> Float[Array, "b o"]:
    pooled = z.mean(axis=-1)  # BUG: mean over the features instead of the latents
    return pooled @ w_out


# ---------------------------------------------------------------- Flax NNX block


class PerceiverBlock(nnx.Module):
    def __init__(self, d: int, c: int, k: int, *, rngs: nnx.Rngs):
        self.norm_latents = nnx.LayerNorm(d, rngs=rngs)
        self.norm_inputs = nnx.LayerNorm(c, rngs=rngs)
        self.q = nnx.Linear(d, k, rngs=rngs)
        self.kv = nnx.Linear(c, 2 * k, rngs=rngs)
        self.out = nnx.Linear(k, d, rngs=rngs)

    @treespec.jit
    def __call__(self, latents: Float[Array, "b n d"], x: Float[Array, "b m c"]) -> Float[Array, "b n d"]:
        q = self.q(self.norm_latents(latents))
        k, v = jnp.split(self.kv(self.norm_inputs(x)), 2, axis=-1)
        attn = jax.nn.softmax(jnp.einsum("bnk,bmk->bnm", q, k), axis=-1)
        return latents + self.out(jnp.einsum("bnm,bmk->bnk", attn, v))


class PerceiverBlockBug(nnx.Module):
    def __init__(self, d: int, c: int, k: int, *, rngs: nnx.Rngs):
        self.norm_latents = nnx.LayerNorm(d, rngs=rngs)
        self.norm_inputs = nnx.LayerNorm(d, rngs=rngs)  # BUG: input norm sized for the latent width
        self.q = nnx.Linear(d, k, rngs=rngs)
        self.kv = nnx.Linear(c, 2 * k, rngs=rngs)
        self.out = nnx.Linear(k, d, rngs=rngs)

    @treespec.jit
    def __call__(self, latents: Float[Array, "b n d"], x: Float[Array, "b m c"]) -> Float[Array, "b n d"]:
        q = self.q(self.norm_latents(latents))
        k, v = jnp.split(self.kv(self.norm_inputs(x)), 2, axis=-1)
        attn = jax.nn.softmax(jnp.einsum("bnk,bmk->bnm", q, k), axis=-1)
        return latents + self.out(jnp.einsum("bnm,bmk->bnk", attn, v))
