import jax

from treespec import Dynamic


@jax.tree_util.register_pytree_node_class
class Pair:
    a: Dynamic[jax.Array]  # E: treespec-unfollowed-class
    name: str

    def __init__(self, a: jax.Array, name: str) -> None:
        self.a, self.name = a, name

    def tree_flatten(self) -> tuple[tuple[jax.Array], str]:
        return (self.a,), self.name

    @classmethod
    def tree_unflatten(cls, aux: str, children: tuple[jax.Array]) -> "Pair":
        return cls(children[0], aux)
