"""The same small computations as a 2-process job or as one process.

Run by `tests/test_multiprocess.py`: under `launch.run` (2 processes x 2 CPU
devices, global arrays from each process's rows) and as one process on 4
devices; each writes its numbers and trace counts to `<out>/<mode>-<index>.json`
for the test to compare. Asserts on the way; no output to read.
"""

from __future__ import annotations

import json
import os
import sys
from functools import partial
from pathlib import Path
from typing import TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))

import jax

if "TREESPEC_TEST_PROCESS_ID" in os.environ:
    from launch import init

    index, mode = init(), "multi"
else:
    index, mode = 0, "single"

import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import treespec
from treespec import Dynamic, Static

assert jax.device_count() == 4, jax.devices()
mesh = Mesh(np.array(jax.devices()), ("data",))
replicated = NamedSharding(mesh, P())
sharded = NamedSharding(mesh, P("data"))
rows = 16 // jax.process_count()  # this process's rows of the global batch


class Config(TypedDict):
    depth: Static[int]
    lr: Static[float]
    scale: Dynamic[float]


Params = dict[str, jax.Array]


def loss(params: Params, x: jax.Array, cfg: Config) -> jax.Array:
    h = x * cfg["scale"]
    for _ in range(cfg["depth"]):
        h = jnp.tanh(h @ params["w"] + params["b"])
    return jnp.mean(h**2)


@partial(
    treespec.jit,
    # Over the dynamic view: params (a prefix: every leaf), x, cfg['scale'].
    in_shardings=(replicated, sharded, replicated),
    out_shardings=replicated,
)
def train_step(params: Dynamic[Params], x: jax.Array, cfg: Config) -> tuple:
    value, grads = treespec.value_and_grad(loss)(params, x, cfg)  # grad inside jit
    new = jax.tree_util.tree_map(lambda p, g: p - cfg["lr"] * g, params, grads)
    return new, value


def objective(params: Params, x: jax.Array, cfg: Config):  # type: ignore[no-untyped-def]
    # No return annotation: jit(grad(f)) checks its output against f's.
    return loss(params, x, cfg)


grad_step = treespec.jit(treespec.grad(objective), out_shardings=replicated)


@treespec.jit
def scaled_sum(x: jax.Array, n: Static[int]) -> jax.Array:
    return jnp.sum(x) * n


def global_array(value: np.ndarray, sharding: NamedSharding) -> jax.Array:
    """A global array from this process's part (every row when replicated)."""
    if sharding is sharded:
        i = jax.process_index()
        value = value[i * rows : (i + 1) * rows]
    return jax.make_array_from_process_local_data(sharding, value)


rng = np.random.default_rng(0)
x_np = rng.normal(size=(16, 4)).astype(np.float32)
params_np = {
    "w": (rng.normal(size=(4, 4)) * 0.5).astype(np.float32),
    "b": np.zeros(4, np.float32),
}
x = global_array(x_np, sharded)
params = {k: global_array(v, replicated) for k, v in params_np.items()}
cfg: Config = {"depth": 2, "lr": 0.5, "scale": 1.0}

losses = []
for step in range(4):  # a training loop: one trace for all steps
    params, value = train_step(params, x, {**cfg, "scale": 1.0 + 0.001 * step})
    losses.append(float(value))
assert train_step.trace_count == 1, train_step.trace_count
assert losses[-1] < losses[0], losses
deeper, _ = train_step(params, x, {**cfg, "depth": 3})  # a new static key
assert train_step.trace_count == 2, train_step.trace_count

grads = grad_step(params, x, cfg)
grads = grad_step(params, x * 2.0, cfg)
assert grad_step.trace_count == 1

sums = [float(scaled_sum(x, n)) for n in (3, 4, 3)]
assert scaled_sum.trace_count == 2

results = {
    "losses": losses,
    "w": np.asarray(params["w"]).tolist(),
    "deeper_w": np.asarray(deeper["w"]).tolist(),
    "grad_w": np.asarray(grads["w"]).tolist(),
    "sums": sums,
    "traces": [train_step.trace_count, grad_step.trace_count, scaled_sum.trace_count],
    "processes": jax.process_count(),
}
out = Path(sys.argv[1]) / f"{mode}-{index}.json"
out.write_text(json.dumps(results))
