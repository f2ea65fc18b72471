"""Beam search: top-k over beams x vocab, history gathers, a scanned decoder."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float, Int

import treespec
from treespec import Static

# ---------------------------------------------------------------- one step of top-k over beams x vocab


@treespec.jit
def beam_step(
    log_probs: Float[Array, "b k v"], scores: Float[Array, "b k"]
) -> tuple[Float[Array, "b k"], Int[Array, "b k"], Int[Array, "b k"]]:
    b, k, v = log_probs.shape
    total = scores[:, :, None] + log_probs
    top, idx = lax.top_k(total.reshape(b, k * v), k)
    return top, idx // v, idx % v


@treespec.jit
def beam_step_bug(
    log_probs: Float[Array, "b k v"], scores: Float[Array, "b k"]
) -> tuple[Float[Array, "b k"], Int[Array, "b k"], Int[Array, "b k"]]:
    b, k, v = log_probs.shape
    total = scores[:, None, :] + log_probs  # BUG: beam scores broadcast along the vocabulary axis
    top, idx = lax.top_k(total.reshape(b, k * v), k)
    return top, idx // v, idx % v


# ---------------------------------------------------------------- history gather


@treespec.jit
def reorder_history(
    hist: Int[Array, "b k t"], parent: Int[Array, "b k"], tokens: Int[Array, "b k"]
) -> Int[Array, "b k t+1"]:
    b = hist.shape[0]
    kept = hist[jnp.arange(b)[:, None], parent]
    return jnp.concatenate([kept, tokens[:, :, None]], axis=-1)


@treespec.jit
def reorder_history_bug(
    hist: Int[Array, "b k t"], parent: Int[Array, "b k"], tokens: Int[Array, "b k"]
) -> Int[Array, "b k t+1"]:
    b = hist.shape[0]
    kept = hist[jnp.arange(b)[None, :], parent]  # BUG: batch index laid along the beam axis
    return jnp.concatenate([kept, tokens[:, :, None]], axis=-1)


# ---------------------------------------------------------------- scanned decoder with tied embeddings


@treespec.jit
def beam_decode(
    emb: Float[Array, "v e"],
    w_h: Float[Array, "e e"],
    start: Int[Array, " b"],
    beam: Static[int] = 3,
    steps: Static[int] = 4,
) -> tuple[Int[Array, "b k s"], Float[Array, "b k"]]:
    b = start.shape[0]
    v = emb.shape[0]
    tokens = jnp.broadcast_to(start[:, None], (b, beam))
    scores = jnp.concatenate([jnp.zeros((b, 1)), jnp.full((b, beam - 1), -1e9)], axis=1)
    hist = jnp.zeros((b, beam, steps), jnp.int32)

    def step(carry, i):
        tokens, scores, hist = carry
        h = jnp.tanh(emb[tokens] @ w_h)
        logp = jax.nn.log_softmax(h @ emb.T, axis=-1)
        flat = (scores[:, :, None] + logp).reshape(b, -1)
        scores, idx = lax.top_k(flat, beam)
        parent, tokens = idx // v, idx % v
        hist = jnp.take_along_axis(hist, parent[:, :, None], axis=1)
        hist = hist.at[:, :, i].set(tokens)
        return (tokens, scores, hist), None

    (tokens, scores, hist), _ = lax.scan(step, (tokens, scores, hist), jnp.arange(steps))
    return hist, scores


@treespec.jit
def beam_decode_bug(
    emb: Float[Array, "v e"],
    w_h: Float[Array, "e e"],
    start: Int[Array, " b"],
    beam: Static[int] = 3,
    steps: Static[int] = 4,
) -> tuple[Int[Array, "b k s"], Float[Array, "b k"]]:
    b = start.shape[0]
    v = emb.shape[0]
    tokens = jnp.broadcast_to(start[:, None], (b, beam))
    scores = jnp.concatenate([jnp.zeros((b, 1)), jnp.full((b, beam - 1), -1e9)], axis=1)
    hist = jnp.zeros((b, beam, steps), jnp.int32)

    def step(carry, i):
        tokens, scores, hist = carry
        h = jnp.tanh(emb[tokens] @ w_h)
        logp = jax.nn.log_softmax(h @ emb, axis=-1)  # BUG: tied output embedding not transposed
        flat = (scores[:, :, None] + logp).reshape(b, -1)
        scores, idx = lax.top_k(flat, beam)
        parent, tokens = idx // v, idx % v
        hist = jnp.take_along_axis(hist, parent[:, :, None], axis=1)
        hist = hist.at[:, :, i].set(tokens)
        return (tokens, scores, hist), None

    (tokens, scores, hist), _ = lax.scan(step, (tokens, scores, hist), jnp.arange(steps))
    return hist, scores


# ---------------------------------------------------------------- final selection with a length penalty


@treespec.jit
def pick_best(
    hist: Int[Array, "b k t"], scores: Float[Array, "b k"], lengths: Int[Array, "b k"], alpha: Static[float] = 0.6
) -> Int[Array, "b t"]:
    penalty = ((5.0 + lengths) / 6.0) ** alpha
    best = jnp.argmax(scores / penalty, axis=1)
    return jnp.take_along_axis(hist, best[:, None, None], axis=1)[:, 0]


@treespec.jit
def pick_best_bug(
    hist: Int[Array, "b k t"], scores: Float[Array, "b k"], lengths: Int[Array, "b k"], alpha: Static[float] = 0.6
) -> Int[Array, "b t"]:
    penalty = ((5.0 + lengths) / 6.0) ** alpha
    best = jnp.argmax(scores / penalty, axis=0)  # BUG: argmax over the batch instead of the beams
    return jnp.take_along_axis(hist, best[:, None, None], axis=1)[:, 0]


# ---------------------------------------------------------------- fori_loop greedy-to-beam cache reorder


@treespec.jit
def reorder_cache(
    cache: Float[Array, "b k l d"], parents: Int[Array, "s b k"]
) -> Float[Array, "b k l d"]:
    def body(i, c):
        return jnp.take_along_axis(c, parents[i][:, :, None, None], axis=1)

    return lax.fori_loop(0, parents.shape[0], body, cache)


@treespec.jit
def reorder_cache_bug(
    cache: Float[Array, "b k l d"], parents: Int[Array, "s b k"]
) -> Float[Array, "b k l d"]:
    def body(i, c):
        return jnp.take_along_axis(c, parents[:, i][:, :, None, None], axis=1)  # BUG: step index on the batch axis

    return lax.fori_loop(0, parents.shape[0], body, cache)
