import equinox as eqx
import jax
from jaxtyping import Array, Float

import treespec
from treespec import Dynamic, Static


class MLP(eqx.Module):
    w: jax.Array
    b: jax.Array
    depth: Static[int]
    activation: Static[str] = "relu"


@treespec.jit
def apply(model: MLP, x: Float[Array, "b n"]) -> Float[Array, "b m"]:
    return x @ model.w + model.b


def g(m: Dynamic[MLP]) -> None: ...
