import jax

from treespec import Static


def f(x: Static[jax.Array]) -> None: ...  # E: treespec-unhashable-static
