"""CTC: a forward-algorithm loss with lax.scan, greedy decoding, optax's ctc_loss."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax import lax
from jaxtyping import Array, Float, Int

import treespec
from treespec import Static

NEG = -1e9


# ---------------------------------------------------------------- relation


@treespec.jit
def subsample_time(x: Float[Array, "b t c"], w: Float[Array, "q e"], factor: Static[int] = 2) -> Float[Array, "b s e"]:
    """Conformer-style stacking before the CTC head (t divisible by factor, q == factor * c)."""
    b, t, c = x.shape
    return x.reshape(b, t // factor, factor * c) @ w


# ---------------------------------------------------------------- forward algorithm


@treespec.jit
def ctc_forward(logits: Float[Array, "b t v"], labels: Int[Array, "b l"], blank: Static[int] = 0) -> Float[Array, " b"]:
    logp = jax.nn.log_softmax(logits, axis=-1)
    b, l = labels.shape
    ext = jnp.full((b, 2 * l + 1), blank, labels.dtype).at[:, 1::2].set(labels)
    emit = jnp.take_along_axis(logp, jnp.broadcast_to(ext[:, None, :], (b, logp.shape[1], 2 * l + 1)), axis=2)
    skip = jnp.concatenate([jnp.zeros((b, 2), bool), (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])], axis=1)
    alpha = jnp.full((b, 2 * l + 1), NEG).at[:, :2].set(emit[:, 0, :2])

    def step(alpha, e):
        a1 = jnp.pad(alpha, ((0, 0), (1, 0)), constant_values=NEG)[:, :-1]
        a2 = jnp.where(skip, jnp.pad(alpha, ((0, 0), (2, 0)), constant_values=NEG)[:, :-2], NEG)
        return jnp.logaddexp(jnp.logaddexp(alpha, a1), a2) + e, None

    alpha, _ = lax.scan(step, alpha, emit[:, 1:].swapaxes(0, 1))
    return -jnp.logaddexp(alpha[:, -1], alpha[:, -2])


@treespec.jit
def ctc_forward_bug(logits: Float[Array, "b t v"], labels: Int[Array, "b l"], blank: Static[int] = 0) -> Float[Array, " b"]:
    logp = jax.nn.log_softmax(logits, axis=-1)
    b, l = labels.shape
    ext = jnp.full((b, 2 * l + 1), blank, labels.dtype).at[:, 1::2].set(labels)
    emit = jnp.take_along_axis(logp, jnp.broadcast_to(ext[:, None, :], (b, logp.shape[1], 2 * l + 1)), axis=2)
    skip = jnp.concatenate([jnp.zeros((b, 2), bool), (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])], axis=1)
    alpha = jnp.full((b, 2 * l + 1), NEG).at[:, :2].set(emit[:, 0, :2])

    def step(alpha, e):
        a1 = jnp.pad(alpha, ((0, 0), (1, 0)), constant_values=NEG)[:, :-1]
        a2 = jnp.where(skip, jnp.pad(alpha, ((0, 0), (2, 0)), constant_values=NEG)[:, :-2], NEG)
        return jnp.logaddexp(jnp.logaddexp(alpha, a1), a2) + e, None

    alpha, _ = lax.scan(step, alpha, emit[:, 1:])  # BUG: scanned over the batch, time not moved to the front
    return -jnp.logaddexp(alpha[:, -1], alpha[:, -2])


# ---------------------------------------------------------------- greedy decoding


@treespec.jit
def greedy_decode(logits: Float[Array, "b t v"], pad: Float[Array, "b t"], blank: Static[int] = 0) -> Int[Array, "b t"]:
    best = jnp.argmax(logits, axis=-1)
    repeat = jnp.concatenate([jnp.zeros_like(best[:, :1], bool), best[:, 1:] == best[:, :-1]], axis=1)
    return jnp.where((pad > 0) | repeat, blank, best)


@treespec.jit
def greedy_decode_bug(logits: Float[Array, "b t v"], pad: Float[Array, "b t"], blank: Static[int] = 0) -> Int[Array, "b t"]:
    best = jnp.argmax(logits, axis=1)  # BUG: argmax over time instead of the vocabulary
    repeat = jnp.concatenate([jnp.zeros_like(best[:, :1], bool), best[:, 1:] == best[:, :-1]], axis=1)
    return jnp.where((pad > 0) | repeat, blank, best)


# ---------------------------------------------------------------- optax's CTC


@treespec.jit
def optax_ctc(
    logits: Float[Array, "b t v"], logit_pad: Float[Array, "b t"], labels: Int[Array, "b l"], label_pad: Float[Array, "b l"]
) -> Float[Array, ""]:
    per_seq = optax.ctc_loss(logits, logit_pad, labels, label_pad)
    return per_seq.mean()


@treespec.jit
def optax_ctc_bug(
    logits: Float[Array, "b t v"], logit_pad: Float[Array, "b t"], labels: Int[Array, "b l"], label_pad: Float[Array, "b l"]
) -> Float[Array, ""]:
    per_seq = optax.ctc_loss(logits, label_pad, labels, logit_pad)  # BUG: the two padding masks swapped
    return per_seq.mean()


# ---------------------------------------------------------------- framewise cross-entropy with a mask


@treespec.jit
def framewise_ce(logits: Float[Array, "b t v"], targets: Int[Array, "b t"], mask: Float[Array, "b t"]) -> Float[Array, ""]:
    logp = jax.nn.log_softmax(logits, axis=-1)
    nll = -jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    return (nll * mask).sum() / jnp.maximum(mask.sum(), 1.0)


@treespec.jit
def framewise_ce_bug(logits: Float[Array, "b t v"], targets: Int[Array, "b t"], mask: Float[Array, "b t"]) -> Float[Array, ""]:
    logp = jax.nn.log_softmax(logits, axis=-1)
    nll = -jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    return (nll * mask.T).sum() / jnp.maximum(mask.sum(), 1.0)  # BUG: mask transposed to time-major


# ---------------------------------------------------------------- Flax NNX conv head


class ConvCTCHead(nnx.Module):
    def __init__(self, d: int, v: int, *, rngs: nnx.Rngs):
        self.conv = nnx.Conv(d, v, kernel_size=(3,), padding="SAME", rngs=rngs)

    @treespec.jit
    def __call__(self, x: Float[Array, "b t d"]) -> Float[Array, "b t v"]:
        return jax.nn.log_softmax(self.conv(x), axis=-1)


class ConvCTCHeadBug(nnx.Module):
    def __init__(self, d: int, v: int, *, rngs: nnx.Rngs):
        self.conv = nnx.Conv(d, v, kernel_size=(3,), padding="SAME", rngs=rngs)

    @treespec.jit
    def __call__(self, x: Float[Array, "b t d"]) -> Float[Array, "b t v"]:
        return jax.nn.log_softmax(self.conv(x.swapaxes(1, 2)), axis=-1)  # BUG: channels-first input to a channels-last conv
