"""Losses over embedding batches and vocabularies: CLIP and SigLIP
contrastive losses, a tied-embedding language-model loss, label-smoothed
cross entropy, InfoNCE with explicit negatives and masked mean pooling."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Bool, Float, Int

import treespec
from treespec import Static

# --------------------------------------------------------------------------
# CLIP: symmetric cross entropy over the n x n similarity matrix
# --------------------------------------------------------------------------


@treespec.jit
def clip_loss(
    image_feats: Float[Array, "n d_img"],
    text_feats: Float[Array, "n d_txt"],
    w_image: Float[Array, "d_img e"],
    w_text: Float[Array, "d_txt e"],
    log_scale: Float[Array, ""],
) -> Float[Array, ""]:
    zi = image_feats @ w_image
    zt = text_feats @ w_text
    zi = zi / jnp.linalg.norm(zi, axis=-1, keepdims=True)
    zt = zt / jnp.linalg.norm(zt, axis=-1, keepdims=True)
    logits = jnp.exp(log_scale) * zi @ zt.T
    labels = jnp.arange(logits.shape[0])
    loss_i = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    loss_t = optax.softmax_cross_entropy_with_integer_labels(logits.T, labels)
    return (loss_i.mean() + loss_t.mean()) / 2


@treespec.jit
def clip_loss_no_transpose(
    image_feats: Float[Array, "n d_img"],
    text_feats: Float[Array, "n d_txt"],
    w_image: Float[Array, "d_img e"],
    w_text: Float[Array, "d_txt e"],
    log_scale: Float[Array, ""],
) -> Float[Array, ""]:
    zi = image_feats @ w_image
    zt = text_feats @ w_text
    zi = zi / jnp.linalg.norm(zi, axis=-1, keepdims=True)
    zt = zt / jnp.linalg.norm(zt, axis=-1, keepdims=True)
    logits = jnp.exp(log_scale) * zi @ zt  # BUG: text embeddings not transposed
    labels = jnp.arange(logits.shape[0])
    loss_i = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    loss_t = optax.softmax_cross_entropy_with_integer_labels(logits.T, labels)
    return (loss_i.mean() + loss_t.mean()) / 2


# --------------------------------------------------------------------------
# SigLIP: pairwise sigmoid loss with a learned temperature and bias
# --------------------------------------------------------------------------


@treespec.jit
def siglip_loss(
    zimg: Float[Array, "n d"],
    ztxt: Float[Array, "n d"],
    t_prime: Float[Array, ""],
    bias: Float[Array, ""],
) -> Float[Array, ""]:
    n = zimg.shape[0]
    zimg = zimg / jnp.linalg.norm(zimg, axis=-1, keepdims=True)
    ztxt = ztxt / jnp.linalg.norm(ztxt, axis=-1, keepdims=True)
    logits = zimg @ ztxt.T * jnp.exp(t_prime) + bias
    labels = 2.0 * jnp.eye(n) - 1.0
    return -jnp.sum(jax.nn.log_sigmoid(labels * logits)) / n


@treespec.jit
def siglip_loss_norm_keepdims(
    zimg: Float[Array, "n d"],
    ztxt: Float[Array, "n d"],
    t_prime: Float[Array, ""],
    bias: Float[Array, ""],
) -> Float[Array, ""]:
    n = zimg.shape[0]
    zimg = zimg / jnp.linalg.norm(zimg, axis=-1, keepdims=True)
    ztxt = ztxt / jnp.linalg.norm(ztxt, axis=-1)  # BUG: norm without keepdims divides along the feature axis
    logits = zimg @ ztxt.T * jnp.exp(t_prime) + bias
    labels = 2.0 * jnp.eye(n) - 1.0
    return -jnp.sum(jax.nn.log_sigmoid(labels * logits)) / n


# --------------------------------------------------------------------------
# Language model with tied input/output embeddings, next-token loss
# --------------------------------------------------------------------------


class TiedLM(eqx.Module):
    embed: Float[Array, "v d"]
    norm_scale: Float[Array, " d"]


def _rms(h, eps=1e-6):
    return h * jax.lax.rsqrt(jnp.mean(h * h, axis=-1, keepdims=True) + eps)


@treespec.jit
def tied_lm_loss(p: TiedLM, tokens: Int[Array, "b t"]) -> Float[Array, ""]:
    h = p.embed[tokens] * math.sqrt(p.embed.shape[-1])
    h = _rms(h) * p.norm_scale
    logits = jnp.einsum("btd,vd->btv", h, p.embed)
    logp = jax.nn.log_softmax(logits[:, :-1], axis=-1)
    targets = tokens[:, 1:]
    nll = -jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    return nll.mean()


@treespec.jit
def tied_lm_loss_untransposed(p: TiedLM, tokens: Int[Array, "b t"]) -> Float[Array, ""]:
    h = p.embed[tokens] * math.sqrt(p.embed.shape[-1])
    h = _rms(h) * p.norm_scale
    logits = h @ p.embed  # BUG: tied output projection needs embed.T
    logp = jax.nn.log_softmax(logits[:, :-1], axis=-1)
    targets = tokens[:, 1:]
    nll = -jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    return nll.mean()


# --------------------------------------------------------------------------
# Label-smoothed cross entropy, per example
# --------------------------------------------------------------------------


@treespec.jit
def label_smoothing_ce(
    logits: Float[Array, "b c"], labels: Int[Array, " b"], smoothing: Static[float] = 0.1
) -> Float[Array, " b"]:
    num_classes = logits.shape[-1]
    targets = jax.nn.one_hot(labels, num_classes) * (1.0 - smoothing) + smoothing / num_classes
    return -jnp.sum(targets * jax.nn.log_softmax(logits, axis=-1), axis=-1)


@treespec.jit
def label_smoothing_ce_batch_classes(
    logits: Float[Array, "b c"], labels: Int[Array, " b"], smoothing: Static[float] = 0.1
) -> Float[Array, " b"]:
    num_classes = logits.shape[0]  # BUG: class count read from the batch axis
    targets = jax.nn.one_hot(labels, num_classes) * (1.0 - smoothing) + smoothing / num_classes
    return -jnp.sum(targets * jax.nn.log_softmax(logits, axis=-1), axis=-1)


# --------------------------------------------------------------------------
# InfoNCE with one positive and k explicit negatives per anchor
# --------------------------------------------------------------------------


@treespec.jit
def info_nce(
    anchor: Float[Array, "b d"],
    positive: Float[Array, "b d"],
    negatives: Float[Array, "b k d"],
    temperature: Static[float] = 0.07,
) -> Float[Array, ""]:
    pos = jnp.sum(anchor * positive, axis=-1, keepdims=True)
    neg = jnp.einsum("bd,bkd->bk", anchor, negatives)
    logits = jnp.concatenate([pos, neg], axis=1) / temperature
    return -jnp.mean(jax.nn.log_softmax(logits, axis=-1)[:, 0])


@treespec.jit
def info_nce_concat_batch(
    anchor: Float[Array, "b d"],
    positive: Float[Array, "b d"],
    negatives: Float[Array, "b k d"],
    temperature: Static[float] = 0.07,
) -> Float[Array, ""]:
    pos = jnp.sum(anchor * positive, axis=-1, keepdims=True)
    neg = jnp.einsum("bd,bkd->bk", anchor, negatives)
    logits = jnp.concatenate([pos, neg], axis=0) / temperature  # BUG: positives and negatives stacked on the batch axis
    return -jnp.mean(jax.nn.log_softmax(logits, axis=-1)[:, 0])


# --------------------------------------------------------------------------
# Masked mean pooling of token states into a sentence embedding
# --------------------------------------------------------------------------


@treespec.jit
def masked_mean_pool(
    h: Float[Array, "b t d"], mask: Bool[Array, "b t"]
) -> Float[Array, "b d"]:
    m = mask.astype(h.dtype)
    total = jnp.einsum("btd,bt->bd", h, m)
    return total / jnp.maximum(m.sum(axis=1, keepdims=True), 1.0)


@treespec.jit
def masked_mean_pool_count_axis(
    h: Float[Array, "b t d"], mask: Bool[Array, "b t"]
) -> Float[Array, "b d"]:
    m = mask.astype(h.dtype)
    total = jnp.einsum("btd,bt->bd", h, m)
    return total / jnp.maximum(m.sum(axis=1), 1.0)  # BUG: token counts (b,) divide along the feature axis
