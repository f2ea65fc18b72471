import jax
from flax import nnx

import treespec
from treespec import Donate, Dynamic, Static


class Net(nnx.Module):
    w: Dynamic[jax.Array]
    depth: Static[int]

    def __init__(self, rngs: nnx.Rngs) -> None:
        self.lin = nnx.Linear(2, 2, rngs=rngs)
        self.w = jax.numpy.ones(2)
        self.depth = 2


def f(m: Dynamic[Net], lin: Donate[nnx.Linear], s: Static[int]) -> None: ...


@treespec.jit
def apply(m: Net, x: jax.Array) -> jax.Array:
    return m.lin(x) * m.w
