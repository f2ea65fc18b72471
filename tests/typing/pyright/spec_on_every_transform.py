"""`.spec`, `.trace_count` and parameters, as pyright sees them."""

import jax
import jax.numpy as jnp

import treespec
from treespec import Spec, Static


def loss(w: jax.Array, n: Static[int]) -> jax.Array:
    return jnp.sum(w) * n


s1: Spec = treespec.grad(loss).spec
s2: Spec = treespec.vmap(loss).spec
s3: Spec = treespec.checkpoint(loss).spec
count: int = treespec.jit(loss).trace_count


class Model:
    @treespec.jit
    def scaled(self, x: jax.Array, k: Static[int]) -> jax.Array:
        return x * k


s4: Spec = Model().scaled.spec
make = treespec.jit(static_flags=[False, True])
make(loss)(jnp.ones(2), "3")  # E: reportArgumentType
