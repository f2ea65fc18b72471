"""Data-parallel training over 8 host CPU devices with treespec.jit.

The batch is sharded over a 1-D device mesh, the parameters are replicated,
the config's activation is static and its learning rate traced (replicated
too). XLA's SPMD partitioner does the rest (gradients are all-reduced for us).
Run:

    python examples/data_parallel.py
"""

from __future__ import annotations

import os

# Must happen before JAX is imported: pretend this CPU is 8 devices.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

from functools import partial
from typing import Literal, TypedDict

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from jaxtyping import Array, Float

import treespec
from treespec import Dynamic, Static

Activation = Literal["tanh", "relu"]


class Config(TypedDict):
    learning_rate: Dynamic[float]  # traced: a schedule never recompiles
    activation: Static[Activation]


class Params(TypedDict):
    w1: Float[Array, "n h"]
    w2: Float[Array, "h 1"]


mesh = Mesh(np.array(jax.devices()), ("data",))
replicated = NamedSharding(mesh, P())
batch_sharded = NamedSharding(mesh, P("data"))


@treespec.jit
def loss_fn(
    params: Params,
    x: Float[Array, "b n"],
    y: Float[Array, "b 1"],
    activation: Static[Activation],
) -> Float[Array, ""]:
    act = jnp.tanh if activation == "tanh" else jax.nn.relu
    pred = act(x @ params["w1"]) @ params["w2"]
    return jnp.mean((pred - y) ** 2)


@partial(
    treespec.jit,
    # Over the dynamic view: params (a prefix: every leaf), x, y, and cfg's
    # traced learning rate.
    in_shardings=(replicated, batch_sharded, batch_sharded, replicated),
    out_shardings=replicated,
)
def train_step(
    params: Dynamic[Params],
    x: Float[Array, "b n"],
    y: Float[Array, "b 1"],
    cfg: Config,
) -> tuple[Params, Float[Array, ""]]:
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y, cfg["activation"])
    lr = cfg["learning_rate"]
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss


def main() -> None:
    print(f"devices: {jax.device_count()} ({jax.devices()[0].platform})")
    kx, k1, k2 = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(kx, (256, 4))
    y = jnp.sum(jnp.sin(x), axis=1, keepdims=True)
    params = {
        "w1": jax.random.normal(k1, (4, 32)) * 0.5,
        "w2": jax.random.normal(k2, (32, 1)) * 0.2,
    }
    x = jax.device_put(x, batch_sharded)
    y = jax.device_put(y, batch_sharded)
    params = jax.device_put(params, replicated)
    cfg: Config = {"learning_rate": 0.05, "activation": "tanh"}
    print(f"x sharding: {x.sharding.spec}, on {len(x.sharding.device_set)} devices")
    print(f"params['w1'] sharding: {params['w1'].sharding.spec} (replicated)")

    for i in range(201):
        params, loss = train_step(params, x, y, cfg)
        # XLA:CPU can deadlock when several steps' all-reduces are in flight
        # over 8 virtual devices on a small machine; real devices do not need
        # this wait, which costs little here.
        jax.block_until_ready(loss)
        if i % 50 == 0:
            print(f"step {i:3d}  loss {float(loss):.4f}")
    print(f"output params['w1'] sharding: {params['w1'].sharding.spec}")
    print(f"traces of train_step: {train_step.trace_count}")


if __name__ == "__main__":
    main()
