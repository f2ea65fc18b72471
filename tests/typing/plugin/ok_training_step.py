from typing import Literal, TypedDict

import jax.numpy as jnp
from jaxtyping import Array, Float

import treespec
from treespec import Donate, Static


class Config(TypedDict):
    hidden: Static[int]
    activation: Static[Literal["relu", "gelu"]]
    learning_rate: Static[float]


Params = dict[str, Float[Array, "..."]]


@treespec.jit
def step(
    params: Donate[Params],
    x: Float[Array, "b n"],
    y: Float[Array, "b 1"],
    cfg: Config,
) -> tuple[Params, Float[Array, ""]]:
    loss = jnp.mean((x @ params["w"] - y) ** 2)
    return params, loss
