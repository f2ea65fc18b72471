import equinox as eqx
import jax
import jax.numpy as jnp

import treespec
from treespec import Static


class Model(eqx.Module):
    w: jax.Array

    @treespec.jit
    def apply(self, x: jax.Array, k: Static[int]) -> jax.Array:
        return x * self.w * k


m = Model(jnp.ones(2))
reveal_type(m.apply(jnp.ones(2), 2))  # N: Revealed type is "jax._src.basearray.Array"
reveal_type(m.apply.lower(jnp.ones(2), 2))  # N: Revealed type is "treespec._transforms.stages.Lowered"
reveal_type(m.apply.trace_count)  # N: Revealed type is "int"
m.apply.lower(jnp.ones(2), "2")  # E: arg-type
