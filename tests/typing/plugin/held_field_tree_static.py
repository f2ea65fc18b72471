import dataclasses

import jax

from treespec import Dynamic, Static


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Op:
    x: jax.Array
    op: Static[str] = jax.tree.static(default="add")
    scale: Dynamic[float] = jax.tree.static(default=1.0)  # E: treespec-held-field
