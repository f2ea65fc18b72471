"""Classes registered by a call at the top of their module are pytrees."""

import dataclasses

import jax

from treespec import Dynamic


class Pair:
    def __init__(self, a: jax.Array, name: str) -> None:
        self.a = a
        self.name = name


jax.tree_util.register_pytree_node(
    Pair, lambda p: ((p.a,), p.name), lambda name, children: Pair(children[0], name)
)


@dataclasses.dataclass
class Layer:
    w: jax.Array
    act: str


jax.tree_util.register_dataclass(Layer, data_fields=["w"], meta_fields=["act"])


class Unregistered:
    w: jax.Array


def f(p: Dynamic[Pair], layer: Dynamic[Layer]) -> None: ...


def g(u: Dynamic[Unregistered]) -> None: ...  # E: treespec-non-array-dynamic
