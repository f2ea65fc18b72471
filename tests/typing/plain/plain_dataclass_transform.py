import jax
import jax.numpy as jnp

import treespec
from treespec import Static


@treespec.dataclass
class Layer:
    w: jax.Array
    activation: Static[str]


Layer(jnp.ones(2), "relu")
Layer(jnp.ones(2))  # E: call-arg
layer = Layer(jnp.ones(2), "relu")
layer.activation = "gelu"  # E: misc
