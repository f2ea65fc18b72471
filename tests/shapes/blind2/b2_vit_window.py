"""ViT patch embedding, class token and Swin-style window attention."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

import treespec
from treespec import Static

# ---------------------------------------------------------------- relations


@treespec.jit
def patchify(img: Float[Array, "b h w c"], patch: Static[int] = 4) -> Float[Array, "b n q"]:
    """Cut an image into non-overlapping patches (h and w divisible by patch)."""
    b, h, w, c = img.shape
    x = img.reshape(b, h // patch, patch, w // patch, patch, c)
    x = x.transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(b, (h // patch) * (w // patch), patch * patch * c)


# ---------------------------------------------------------------- class token


@treespec.jit
def prepend_cls(
    x: Float[Array, "b n e"], cls: Float[Array, "1 1 e"], pos: Float[Array, "n+1 e"]
) -> Float[Array, "b n+1 e"]:
    b, n, e = x.shape
    tok = jnp.broadcast_to(cls, (b, 1, e))
    x = jnp.concatenate([tok, x], axis=1)
    return x + pos[None]


@treespec.jit
def prepend_cls_bug(
    x: Float[Array, "b n e"], cls: Float[Array, "1 1 e"], pos: Float[Array, "n+1 e"]
) -> Float[Array, "b n+1 e"]:
    b, n, e = x.shape
    tok = jnp.broadcast_to(cls, (n, 1, e))  # BUG: batch size read from the token axis
    x = jnp.concatenate([tok, x], axis=1)
    return x + pos[None]


# ---------------------------------------------------------------- patch embedding (Equinox)


class PatchEmbed(eqx.Module):
    weight: Float[Array, "q e"]
    bias: Float[Array, " e"]
    pos: Float[Array, "n e"]

    @treespec.jit
    def __call__(self, patches: Float[Array, "b n q"]) -> Float[Array, "b n e"]:
        x = patches @ self.weight + self.bias
        return x + self.pos


class PatchEmbedBug(eqx.Module):
    weight: Float[Array, "q e"]
    bias: Float[Array, " e"]
    pos: Float[Array, "n e"]

    @treespec.jit
    def __call__(self, patches: Float[Array, "b n q"]) -> Float[Array, "b n e"]:
        x = patches @ self.weight.T + self.bias  # BUG: weight transposed (torch layout)
        return x + self.pos


# ---------------------------------------------------------------- window partition


@treespec.jit
def window_partition(x: Float[Array, "b h w c"], window: Static[int] = 2) -> Float[Array, "m s s c"]:
    b, h, w, c = x.shape
    x = x.reshape(b, h // window, window, w // window, window, c)
    x = x.transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, window, window, c)


@treespec.jit
def window_partition_bug(x: Float[Array, "b h w c"], window: Static[int] = 2) -> Float[Array, "m s s c"]:
    b, h, w, c = x.shape
    x = x.reshape(b, h // window, window, h // window, window, c)  # BUG: width split with the height
    x = x.transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, window, window, c)


# ---------------------------------------------------------------- window attention


@treespec.jit
def window_attention(
    x: Float[Array, "m n c"],
    wq: Float[Array, "c h k"],
    wk: Float[Array, "c h k"],
    wv: Float[Array, "c h k"],
    wo: Float[Array, "h k c"],
    rel_bias: Float[Array, "h n n"],
    mask: Float[Array, "m n n"],
) -> Float[Array, "m n c"]:
    q = jnp.einsum("mnc,chk->mhnk", x, wq) * (wq.shape[-1] ** -0.5)
    k = jnp.einsum("mnc,chk->mhnk", x, wk)
    v = jnp.einsum("mnc,chk->mhnk", x, wv)
    logits = jnp.einsum("mhnk,mhjk->mhnj", q, k)
    logits = logits + rel_bias[None] + mask[:, None]
    attn = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("mhnj,mhjk->mnhk", attn, v)
    return jnp.einsum("mnhk,hkc->mnc", out, wo)


@treespec.jit
def window_attention_bug(
    x: Float[Array, "m n c"],
    wq: Float[Array, "c h k"],
    wk: Float[Array, "c h k"],
    wv: Float[Array, "c h k"],
    wo: Float[Array, "h k c"],
    rel_bias: Float[Array, "h n n"],
    mask: Float[Array, "m n n"],
) -> Float[Array, "m n c"]:
    q = jnp.einsum("mnc,chk->mhnk", x, wq) * (wq.shape[-1] ** -0.5)
    k = jnp.einsum("mnc,chk->mhnk", x, wk)
    v = jnp.einsum("mnc,chk->mhnk", x, wv)
    logits = jnp.einsum("mhnk,mhjk->mhnj", q, k)
    logits = logits + rel_bias[None] + mask[None]  # BUG: window mask broadcast over the head axis
    attn = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("mhnj,mhjk->mnhk", attn, v)
    return jnp.einsum("mnhk,hkc->mnc", out, wo)


# ---------------------------------------------------------------- pooled classification loss


@treespec.jit
def vit_loss(
    x: Float[Array, "b n e"], head: Float[Array, "e k"], labels: Int[Array, " b"]
) -> Float[Array, ""]:
    pooled = x.mean(axis=1)
    logp = jax.nn.log_softmax(pooled @ head, axis=-1)
    nll = -jnp.take_along_axis(logp, labels[:, None], axis=1)
    return nll.mean()


@treespec.jit
def vit_loss_bug(
    x: Float[Array, "b n e"], head: Float[Array, "e k"], labels: Int[Array, " b"]
) -> Float[Array, ""]:
    pooled = x.mean(axis=0)  # BUG: pooled over the batch instead of the tokens
    logp = jax.nn.log_softmax(pooled @ head, axis=-1)
    nll = -jnp.take_along_axis(logp, labels[:, None], axis=1)
    return nll.mean()
