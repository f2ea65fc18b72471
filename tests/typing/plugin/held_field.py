import equinox as eqx
import jax
from flax import nnx, struct

import treespec
from treespec import Donate, Dynamic, Static


class Model(eqx.Module):
    w: jax.Array
    act: Static[str] = eqx.field(static=True)
    scale: Dynamic[float] = eqx.field(static=True)  # E: treespec-held-field


@struct.dataclass
class State:
    w: jax.Array
    name: Static[str] = struct.field(pytree_node=False)
    lr: Donate[float] = struct.field(pytree_node=False)  # E: treespec-held-field


@treespec.dataclass
class Layer:
    w: jax.Array
    label: Static[str]
    sizes: Static[tuple[Dynamic[float], ...]]  # E: treespec-held-field


class Scaled(nnx.Module):
    w: Dynamic[jax.Array]
    depth: Static[int]
    scale: Dynamic[float]  # E: treespec-held-field
    traced: Dynamic[float]

    def __init__(self) -> None:
        self.w = jax.numpy.ones(2)
        self.depth = 2
        self.scale = 0.5
        self.traced = nnx.data(0.5)


class Told(nnx.Pytree):
    n: Static[int] = nnx.data()  # E: treespec-held-field
    m: Donate[int] = nnx.static()  # E: treespec-held-field
