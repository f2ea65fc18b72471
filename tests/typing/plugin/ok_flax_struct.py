import jax
from flax import struct

from treespec import Dynamic, Static


@struct.dataclass
class TrainState:
    params: Dynamic[dict[str, jax.Array]]
    step: Static[int]
    name: str = struct.field(pytree_node=False)


def f(s: TrainState, frozen: Static[TrainState]) -> None: ...
