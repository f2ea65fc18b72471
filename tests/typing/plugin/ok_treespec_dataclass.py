import jax
import jax.numpy as jnp

import treespec
from treespec import Static


@treespec.dataclass
class Layer:
    w: jax.Array
    activation: Static[str]


layer = Layer(jnp.ones(3), "relu")
reveal_type(layer.activation)  # N: Revealed type is "str"
