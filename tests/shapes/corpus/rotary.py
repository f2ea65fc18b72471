"""Rotary and sinusoidal position encodings: Gemma's `apply_rope` (the head
dimension split in halves, sinusoidal frequencies), Llama's `rotate_half`
form with precomputed cos/sin tables indexed by position, and a diffusion
model's timestep embedding. Twins with one planted bug are marked
`# BUG: kind`."""

from __future__ import annotations

import math

import jax.numpy as jnp
from jaxtyping import Array, Float, Int

import treespec


@treespec.jit
def apply_rope(
    x: Float[Array, "t n h"], positions: Int[Array, " t"]
) -> Float[Array, "t n h"]:
    head_dim = x.shape[-1]
    fraction = 2 * jnp.arange(0, head_dim // 2) / head_dim
    timescale = 10_000**fraction
    sinusoid = positions[:, None] / timescale[None, :]
    sin = jnp.sin(sinusoid)[:, None, :]
    cos = jnp.cos(sinusoid)[:, None, :]
    first_half, second_half = jnp.split(x, 2, axis=-1)
    first_part = first_half * cos - second_half * sin
    second_part = second_half * cos + first_half * sin
    return jnp.concatenate([first_part, second_part], axis=-1)


@treespec.jit
def apply_rope_heads_axis(
    x: Float[Array, "t n h"], positions: Int[Array, " t"]
) -> Float[Array, "t n h"]:
    head_dim = x.shape[-1]
    fraction = 2 * jnp.arange(0, head_dim // 2) / head_dim
    timescale = 10_000**fraction
    sinusoid = positions[:, None] / timescale[None, :]
    sin = jnp.sin(sinusoid)
    cos = jnp.cos(sinusoid)
    first_half, second_half = jnp.split(x, 2, axis=-1)
    first_part = first_half * cos - second_half * sin  # BUG: no axis for the heads
    second_part = second_half * cos + first_half * sin
    return jnp.concatenate([first_part, second_part], axis=-1)


def rope_tables(
    max_len: int, head_dim: int, base: float = 10_000.0
) -> tuple[Float[Array, "l h"], Float[Array, "l h"]]:
    """Llama's cos/sin tables, once for every position up to `max_len`."""
    inv_freq = 1.0 / base ** (jnp.arange(0, head_dim, 2) / head_dim)
    angles = jnp.outer(jnp.arange(max_len), inv_freq)
    angles = jnp.concatenate([angles, angles], axis=-1)
    return jnp.cos(angles), jnp.sin(angles)


def rotate_half(x: Float[Array, "... h"]) -> Float[Array, "... h"]:
    half = x.shape[-1] // 2
    return jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)


@treespec.jit
def apply_rotary(
    q: Float[Array, "t n h"],
    cos: Float[Array, "l h"],
    sin: Float[Array, "l h"],
    positions: Int[Array, " t"],
) -> Float[Array, "t n h"]:
    cos = cos[positions][:, None, :]
    sin = sin[positions][:, None, :]
    return q * cos + rotate_half(q) * sin


@treespec.jit
def apply_rotary_table(
    q: Float[Array, "t n h"],
    cos: Float[Array, "l h"],
    sin: Float[Array, "l h"],
    positions: Int[Array, " t"],
) -> Float[Array, "t n h"]:
    cos = cos[:, None, :]
    sin = sin[:, None, :]
    return q * cos + rotate_half(q) * sin  # BUG: tables not indexed by position


@treespec.jit
def timestep_embedding(
    t: Float[Array, " b"], x: Float[Array, "b d"], max_period: float = 10_000.0
) -> Float[Array, "b d"]:
    """`x` plus the sinusoidal embedding of each example's diffusion time."""
    half = x.shape[-1] // 2
    freqs = jnp.exp(-math.log(max_period) * jnp.arange(half) / half)
    args = t[:, None] * freqs[None, :]
    emb = jnp.concatenate([jnp.cos(args), jnp.sin(args)], axis=-1)
    if x.shape[-1] % 2:  # an odd width: one column of zeros
        emb = jnp.pad(emb, ((0, 0), (0, 1)))
    return x + emb


@treespec.jit
def timestep_embedding_pad(
    t: Float[Array, " b"], x: Float[Array, "b d"], max_period: float = 10_000.0
) -> Float[Array, "b d"]:
    half = x.shape[-1] // 2
    freqs = jnp.exp(-math.log(max_period) * jnp.arange(half) / half)
    args = t[:, None] * freqs[None, :]
    emb = jnp.concatenate([jnp.cos(args), jnp.sin(args)], axis=-1)
    if x.shape[-1] % 2:
        return x + jnp.pad(emb, ((0, 1), (0, 0)))  # BUG: padded the batch axis
    return x + emb
