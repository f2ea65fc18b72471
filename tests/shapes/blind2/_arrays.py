"""Random arrays for the blind2 cases: shapes written as annotation strings."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp

_seed = itertools.count()


def _shape(s: dict, dims: str) -> tuple[int, ...]:
    out = []
    for d in dims.split():
        out.append(int(d) if d.isdigit() else eval(d, {}, dict(s)))
    return tuple(out)


def rand(s: dict, dims: str) -> jax.Array:
    """A float32 array of the named sizes (expressions like n+1 allowed)."""
    key = jax.random.PRNGKey(next(_seed))
    return jax.random.normal(key, _shape(s, dims), jnp.float32)


def randint(s: dict, dims: str, hi: int) -> jax.Array:
    """An int32 array of the named sizes with values in [0, hi)."""
    key = jax.random.PRNGKey(next(_seed))
    return jax.random.randint(key, _shape(s, dims), 0, max(hi, 1), jnp.int32)



def key() -> jax.Array:
    return jax.random.PRNGKey(next(_seed))
