import jax
import jax.numpy as jnp

import treespec
from treespec import Static


@treespec.jit
def f(x: jax.Array, n: Static[int]) -> jax.Array:
    return x * n


reveal_type(f(jnp.ones(2), 3))  # N: Revealed type is "jax._src.basearray.Array"
f(jnp.ones(2), "3")  # E: arg-type
f(jnp.ones(2))  # E: call-arg
lowered = f.lower(jnp.ones(2), 3)
reveal_type(f.spec)  # N: Revealed type is "treespec._model.spec.Spec"
f.clear_cache()
lowered.compile()
