"""Deliberate type errors: pyright must report each, on its line, by its rule."""

import jax
import jax.numpy as jnp

import treespec
from treespec import Static


@treespec.jit
def f(x: jax.Array, n: Static[int]) -> jax.Array:
    return x * n


f(jnp.ones(2), "3")  # E: reportArgumentType
f(jnp.ones(2))  # E: reportCallIssue
name: str = f(jnp.ones(2), 3)  # E: reportAssignmentType
