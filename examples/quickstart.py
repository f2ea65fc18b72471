"""treespec quickstart: train a 2-layer MLP with a typed, partly static config.

The config is a TypedDict. Its `Static` fields are compile-time constants (the
number of hidden units, the activation), so changing one recompiles. The
learning rate is `Dynamic`: traced like the parameters, so a schedule never
recompiles. Run: python examples/quickstart.py

`python -m treespec check examples/quickstart.py` checks both functions'
shapes for every size and each activation, without data (`step`'s config,
whose `hidden` has no value to take from its annotation, is built as
`check_with` says beside it).
"""

from __future__ import annotations

import logging
import sys
from typing import Literal, TypedDict

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

import treespec
from treespec import Dynamic, Static

Activation = Literal["tanh", "relu", "gelu"]


class Config(TypedDict):
    hidden: Static[int]
    activation: Static[Activation]
    learning_rate: Dynamic[float]  # traced: a new value does not recompile


class Params(TypedDict):
    w1: Float[Array, "n h"]
    b1: Float[Array, " h"]  # the space: ruff would read "h" as a name
    w2: Float[Array, "h 1"]
    b2: Float[Array, "1"]


def init(key: jax.Array, n_in: int, hidden: int) -> Params:
    k1, k2 = jax.random.split(key)
    return {
        "w1": jax.random.normal(k1, (n_in, hidden)) / jnp.sqrt(n_in),
        "b1": jnp.zeros(hidden),
        "w2": jax.random.normal(k2, (hidden, 1)) / jnp.sqrt(hidden),
        "b2": jnp.zeros(1),
    }


@treespec.jit
def mlp(
    params: Params, x: Float[Array, "b n"], activation: Static[Activation]
) -> Float[Array, "b 1"]:
    act = {"tanh": jnp.tanh, "relu": jax.nn.relu, "gelu": jax.nn.gelu}[activation]
    h = act(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


# What the shape check calls `step` with: each activation is tried anyway.
@treespec.check_with(cfg={"hidden": 32, "activation": "tanh", "learning_rate": 0.1})
@treespec.jit(explain_recompiles=True)
def step(
    params: Dynamic[Params],
    x: Float[Array, "b n"],
    y: Float[Array, "b 1"],
    cfg: Config,
) -> tuple[Params, Float[Array, ""]]:
    """One step of gradient descent on the mean squared error."""

    def loss_fn(p: Params) -> jax.Array:
        return jnp.mean((mlp(p, x, cfg["activation"]) - y) ** 2)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    lr = cfg["learning_rate"]
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss


def main() -> None:
    logging.basicConfig(stream=sys.stdout, format="%(name)s: %(message)s")
    key_x, key_p = jax.random.split(jax.random.key(0))
    x = jax.random.uniform(key_x, (256, 2), minval=-2.0, maxval=2.0)
    y = jnp.sin(x[:, :1]) * jnp.cos(x[:, 1:])  # the function to learn

    cfg: Config = {"hidden": 32, "activation": "tanh", "learning_rate": 0.1}
    params = init(key_p, 2, cfg["hidden"])

    print("How treespec resolves the step function's arguments:")
    treespec.explain(step, params, x, y, cfg)
    print()

    first = None
    for i in range(300):
        params, loss = step(params, x, y, cfg)
        if i % 50 == 0 or i == 299:
            print(f"step {i:3d}  loss {float(loss):.5f}")
            first = first if first is not None else float(loss)
    assert first is not None and float(loss) < first, "the loss should go down"

    print(f"\nTraced {step.trace_count} time(s) so far.")
    cfg = {**cfg, "learning_rate": 0.05}  # Dynamic: no new trace
    for _ in range(50):
        params, loss = step(params, x, y, cfg)
    print(f"50 more steps at learning_rate 0.05: loss {float(loss):.5f}")
    print(f"Still {step.trace_count} trace(s): the learning rate is traced.")

    print("\nChanging a static field recompiles, and treespec says why:")
    cfg = {**cfg, "activation": "gelu"}
    for _ in range(50):
        params, loss = step(params, x, y, cfg)
    print(f"50 more steps with gelu: loss {float(loss):.5f}")


if __name__ == "__main__":
    main()
