import jax
import jax.numpy as jnp

import treespec
from treespec import Static


class Scaler:
    def __init__(self, k: int) -> None:
        self.k = k

    @treespec.jit
    def apply(self, x: jax.Array, times: Static[int]) -> jax.Array:
        return x * self.k * times


s = Scaler(2)
reveal_type(s.apply(jnp.ones(2), 3))  # N: Revealed type is "jax._src.basearray.Array"
s.apply(jnp.ones(2), "3")  # E: arg-type
reveal_type(Scaler.apply.spec)  # N: Revealed type is "treespec._model.spec.Spec"
