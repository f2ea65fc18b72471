from jaxtyping import Array, Float

from treespec import Static


def f(x: Static[Float[Array, "n"]]) -> None: ...  # E: treespec-unhashable-static
