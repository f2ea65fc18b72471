import equinox as eqx
import jax

from treespec import Static


class Model(eqx.Module):
    w: jax.Array
    depth: int


def f(m: Static[Model]) -> None: ...  # E: treespec-unhashable-static
