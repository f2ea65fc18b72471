"""A registered pytree class, FrozenDict and object under Dynamic: the runtime
accepts values of these, so the plugin says nothing."""

import jax
from flax.core import FrozenDict

from treespec import Dynamic


@jax.tree_util.register_pytree_node_class
class Pair:
    def __init__(self, a: jax.Array, name: str) -> None:
        self.a = a
        self.name = name

    def tree_flatten(self) -> tuple[tuple[jax.Array], str]:
        return (self.a,), self.name

    @classmethod
    def tree_unflatten(cls, aux: str, children: tuple[jax.Array]) -> "Pair":
        return cls(children[0], aux)


def f(p: Dynamic[Pair], d: Dynamic[FrozenDict[str, jax.Array]], o: Dynamic[object]) -> None: ...
