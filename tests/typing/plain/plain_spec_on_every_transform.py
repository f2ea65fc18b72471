import jax
import jax.numpy as jnp

import treespec
from treespec import Spec, Static


def loss(w: jax.Array, n: Static[int]) -> jax.Array:
    return jnp.sum(w) * n


s1: Spec = treespec.grad(loss).spec
s2: Spec = treespec.value_and_grad(loss).spec
s3: Spec = treespec.vmap(loss).spec
s4: Spec = treespec.pmap(loss).spec
s5: Spec = treespec.checkpoint(loss).spec
s6: Spec = treespec.jit(loss).spec
count: int = treespec.jit(loss).trace_count


class Model:
    @treespec.jit
    def scaled(self, x: jax.Array, k: Static[int]) -> jax.Array:
        return x * k


s7: Spec = Model().scaled.spec
Model().scaled(jnp.ones(2), 2)
Model().scaled(jnp.ones(2), "2")  # E: arg-type
treespec.eval_shape(loss, jnp.ones(2), 3)
make = treespec.jit(static_flags=[False, True])  # the typed factory form
make(loss)(jnp.ones(2), 3)
make(loss)(jnp.ones(2), "3")  # E: arg-type
