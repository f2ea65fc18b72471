"""A GRU written by hand over `jax.lax.scan`, its weights in a NamedTuple
(the functional style of JAX's own examples), batch-first data as a data
loader gives it. Twins with one planted bug are marked `# BUG: kind`."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

import treespec


class GRUParams(NamedTuple):
    w_h: Float[Array, "hidden 3*hidden"]
    w_x: Float[Array, "in_size 3*hidden"]
    b: Float[Array, " 3*hidden"]


def init_gru(key: Array, in_size: int, hidden: int) -> GRUParams:
    kx, kh = jax.random.split(key)
    return GRUParams(
        w_x=jax.random.normal(kx, (in_size, 3 * hidden)) / jnp.sqrt(in_size),
        w_h=jax.random.normal(kh, (hidden, 3 * hidden)) / jnp.sqrt(hidden),
        b=jnp.zeros(3 * hidden),
    )


@treespec.jit
def gru_cell(
    params: GRUParams, h: Float[Array, "batch hidden"], x: Float[Array, "batch in_size"]
) -> Float[Array, "batch hidden"]:
    gx = x @ params.w_x + params.b
    gh = h @ params.w_h
    xr, xz, xn = jnp.split(gx, 3, axis=-1)
    hr, hz, hn = jnp.split(gh, 3, axis=-1)
    r = jax.nn.sigmoid(xr + hr)
    z = jax.nn.sigmoid(xz + hz)
    n = jnp.tanh(xn + r * hn)
    return (1 - z) * n + z * h


@treespec.jit
def gru_cell_mixed(
    params: GRUParams, h: Float[Array, "batch hidden"], x: Float[Array, "batch in_size"]
) -> Float[Array, "batch hidden"]:
    gx = h @ params.w_x + params.b  # BUG: hidden state through the input weights
    gh = h @ params.w_h
    xr, xz, xn = jnp.split(gx, 3, axis=-1)
    hr, hz, hn = jnp.split(gh, 3, axis=-1)
    r = jax.nn.sigmoid(xr + hr)
    z = jax.nn.sigmoid(xz + hz)
    n = jnp.tanh(xn + r * hn)
    return (1 - z) * n + z * h


@treespec.jit
def gru(
    params: GRUParams,
    xs: Float[Array, "batch time in_size"],
    h0: Float[Array, "batch hidden"],
) -> tuple[Float[Array, "batch hidden"], Float[Array, "batch time hidden"]]:
    def step(
        h: Float[Array, "batch hidden"], x: Float[Array, "batch in_size"]
    ) -> tuple[Array, Array]:
        h = gru_cell(params, h, x)
        return h, h

    h, hs = jax.lax.scan(step, h0, jnp.swapaxes(xs, 0, 1))
    return h, jnp.swapaxes(hs, 0, 1)


@treespec.jit
def gru_time_major(
    params: GRUParams,
    xs: Float[Array, "batch time in_size"],
    h0: Float[Array, "batch hidden"],
) -> tuple[Float[Array, "batch hidden"], Float[Array, "batch time hidden"]]:
    def step(
        h: Float[Array, "batch hidden"], x: Float[Array, "batch in_size"]
    ) -> tuple[Array, Array]:
        h = gru_cell(params, h, x)
        return h, h

    h, hs = jax.lax.scan(step, h0, jnp.swapaxes(xs, 0, 1))
    return h, hs  # BUG: scan output left time-major


@treespec.jit
def encode(
    params: GRUParams,
    xs: Float[Array, "batch time in_size"],
    mask: Bool[Array, "batch time"],
) -> Float[Array, "batch hidden"]:
    """The last hidden state of each sequence of a padded batch: past its
    end (`mask` False) a sequence's state is carried unchanged."""
    batch, hidden = xs.shape[0], params.w_h.shape[0]

    def step(h: Array, inputs: tuple[Array, Array]) -> tuple[Array, None]:
        x, m = inputs
        h = jnp.where(m[:, None], gru_cell(params, h, x), h)
        return h, None

    h0 = jnp.zeros((batch, hidden))
    h, _ = jax.lax.scan(step, h0, (jnp.swapaxes(xs, 0, 1), mask.T))
    return h


@treespec.jit
def encode_mask_axis(
    params: GRUParams,
    xs: Float[Array, "batch time in_size"],
    mask: Bool[Array, "batch time"],
) -> Float[Array, "batch hidden"]:
    batch, hidden = xs.shape[0], params.w_h.shape[0]

    def step(h: Array, inputs: tuple[Array, Array]) -> tuple[Array, None]:
        x, m = inputs
        h = jnp.where(m[None, :], gru_cell(params, h, x), h)  # BUG: mask axis
        return h, None

    h0 = jnp.zeros((batch, hidden))
    h, _ = jax.lax.scan(step, h0, (jnp.swapaxes(xs, 0, 1), mask.T))
    return h
