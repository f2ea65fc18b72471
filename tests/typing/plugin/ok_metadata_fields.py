import dataclasses

import equinox as eqx
import jax
from flax import struct

from treespec import Dynamic, Static


class Model(eqx.Module):
    w: jax.Array
    act: str = eqx.field(static=True)
    sizes: list[int] = eqx.field(static=True)  # compared by ==, never hashed


@struct.dataclass
class FModel:
    w: jax.Array
    act: str = struct.field(pytree_node=False)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class DModel:
    w: jax.Array
    act: str = dataclasses.field(metadata=dict(static=True))
    name: str = dataclasses.field(metadata={"static": True})


# Metadata fields are never leaves, so Dynamic around the class is fine.
def f(m: Dynamic[Model], n: Dynamic[FModel], d: Dynamic[DModel]) -> None: ...
