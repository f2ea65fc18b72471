from functools import partial

import jax

import treespec
from treespec import Static


@treespec.jit(static_flags=[False, True], explain_recompiles=True)
def g(x: jax.Array, k: int) -> jax.Array:
    return x * k


@partial(treespec.jit, default="static")
def h(x: jax.Array, k: Static[int]) -> str:
    return "ok"


reveal_type(g)  # N: Revealed type is "treespec._transforms.jit.Jitted[[x: jax._src.basearray.Array, k: int], jax._src.basearray.Array]"
g(1, 2)  # E: arg-type
