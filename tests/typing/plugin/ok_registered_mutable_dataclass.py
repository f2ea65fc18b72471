"""A registered pytree is flattened, never hashed whole: under Static its leaves
are judged, not the class (a mutable dataclass has no __hash__)."""

import dataclasses

import jax

from treespec import Static


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Settings:
    depth: int
    name: str


def f(s: Static[Settings]) -> None: ...
