"""Run on 8 host CPU devices (the parent test sets XLA_FLAGS); prints OK at the end.

Each step is compared with the same computation on one device. Results are
waited for after every call: XLA:CPU can deadlock with several collective
programs in flight over 8 virtual devices on a small machine.
"""

from __future__ import annotations

from functools import partial
from typing import TypedDict

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import treespec
from treespec import Donate, Dynamic, Static

assert jax.device_count() == 8, jax.devices()
mesh = Mesh(np.array(jax.devices()), ("data",))
replicated = NamedSharding(mesh, P())
sharded = NamedSharding(mesh, P("data"))


class Config(TypedDict):
    depth: Static[int]
    lr: Static[float]


def loss_fn(params: dict[str, jax.Array], x: jax.Array, depth: int) -> jax.Array:
    h = x
    for _ in range(depth):
        h = jnp.tanh(h @ params["w"])
    return jnp.mean(h**2)


def reference_step(params: dict[str, jax.Array], x: jax.Array, cfg: Config) -> tuple:
    loss, grads = jax.value_and_grad(loss_fn)(params, x, cfg["depth"])
    return {k: params[k] - cfg["lr"] * grads[k] for k in params}, loss


params = {"w": jnp.eye(4) * 0.7 + 0.01}
x = jnp.linspace(-1.0, 1.0, 64).reshape(16, 4)
cfg: Config = {"depth": 3, "lr": 0.1}
expected_params, expected_loss = reference_step(params, x, cfg)

traces: list[int] = []


@partial(treespec.jit, in_shardings=(replicated, sharded), out_shardings=replicated)
def jit_step(params: Dynamic[dict[str, jax.Array]], x: jax.Array, cfg: Config) -> tuple:
    traces.append(cfg["depth"])
    return reference_step(params, x, cfg)


xs = jax.device_put(x, sharded)
ps = jax.device_put(params, replicated)
out_params, loss = jax.block_until_ready(jit_step(ps, xs, cfg))
np.testing.assert_allclose(loss, expected_loss, rtol=1e-5)
np.testing.assert_allclose(out_params["w"], expected_params["w"], rtol=1e-5)
assert out_params["w"].sharding.is_fully_replicated
jax.block_until_ready(jit_step(ps, xs * 0.5, cfg))
assert traces == [3], traces  # the config stayed static: one trace
jax.block_until_ready(jit_step(ps, xs, {**cfg, "depth": 2}))
assert traces == [3, 2], traces


def shard_step(params: dict[str, jax.Array], x: jax.Array, cfg: Config) -> tuple:
    def global_loss(p: dict[str, jax.Array]) -> jax.Array:
        return jax.lax.pmean(loss_fn(p, x, cfg["depth"]), "data")

    # params are replicated (unvarying): their gradient is already global.
    loss, grads = jax.value_and_grad(global_loss)(params)
    return {k: params[k] - cfg["lr"] * grads[k] for k in params}, loss


sm = treespec.jit(
    treespec.shard_map(shard_step, mesh, in_specs=(P(), P("data"), None), out_specs=P())
)
out_params, loss = jax.block_until_ready(sm(params, x, cfg))
np.testing.assert_allclose(loss, expected_loss, rtol=1e-5)
np.testing.assert_allclose(out_params["w"], expected_params["w"], rtol=1e-5)


def pmap_step(params: dict[str, jax.Array], x: jax.Array, cfg: Config) -> tuple:
    loss, grads = jax.value_and_grad(loss_fn)(params, x, cfg["depth"])
    loss = jax.lax.pmean(loss, "data")
    grads = jax.lax.pmean(grads, "data")
    return {k: params[k] - cfg["lr"] * grads[k] for k in params}, loss


pm = treespec.pmap(pmap_step, axis_name="data", in_axes=(None, 0, None))
out_params, loss = jax.block_until_ready(pm(params, x.reshape(8, 2, 4), cfg))
np.testing.assert_allclose(loss[0], expected_loss, rtol=1e-5)
np.testing.assert_allclose(out_params["w"][3], expected_params["w"], rtol=1e-5)


# Donation on 8 host devices, as the pmap and shard_map pages say: an input
# laid out across the devices is donated (deleted); one on a single device is
# copied first, and the copy donated; an eager shard_map donates nothing.
def bump(x: Donate[jax.Array]) -> jax.Array:
    return x + 1


laid_out = jax.device_put(jnp.ones((8, 2)), NamedSharding(mesh, P("data")))
treespec.pmap(bump)(laid_out)
assert laid_out.is_deleted()
on_one_device = jnp.ones((8, 2))
treespec.pmap(bump)(on_one_device)
assert not on_one_device.is_deleted()
sharded_bump = treespec.shard_map(bump, mesh, in_specs=P("data"), out_specs=P("data"))
laid_out = jax.device_put(jnp.ones(16), NamedSharding(mesh, P("data")))
sharded_bump(laid_out)
assert not laid_out.is_deleted()  # eager: nothing compiles, nothing donated
treespec.jit(sharded_bump)(laid_out)
assert laid_out.is_deleted()


# An array at a static leaf, named on 8 devices as on one (issue 29).
def depth_sum(x: jax.Array, cfg: dict[str, Static[int]]) -> jax.Array:
    return x * cfg["depth"]


for transform in (
    treespec.pmap(depth_sum),
    treespec.shard_map(depth_sum, mesh, in_specs=P("data"), out_specs=P("data")),
):
    try:
        transform(jnp.ones((8, 2)), {"depth": jnp.int32(2)})
    except treespec.ValidationError as error:
        assert "argument cfg, at cfg['depth']" in str(error), error
    else:
        raise AssertionError("an array at a static leaf was accepted")

print("OK")
