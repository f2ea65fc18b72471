from jaxtyping import Array, Float, PyTree

from treespec import Dynamic


def f(
    x: Dynamic[Float[Array, "b n"]],
    tree: Dynamic[PyTree[Float[Array, "..."]]],
    y: Float[Array, "n"],
) -> Float[Array, "b"]:
    return x @ y
