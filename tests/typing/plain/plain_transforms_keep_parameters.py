import jax
import jax.numpy as jnp

import treespec
from treespec import Static


def loss(w: jax.Array, n: Static[int]) -> jax.Array:
    return jnp.sum(w) * n


treespec.grad(loss)(jnp.ones(2), "n")  # E: arg-type
treespec.vmap(loss)(jnp.ones(2), 3)
reveal_type(treespec.vmap(loss)(jnp.ones(2), 3))  # N: Revealed type is "jax._src.basearray.Array"
treespec.checkpoint(loss)(jnp.ones(2), 3.5)  # E: arg-type
