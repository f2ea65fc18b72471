import equinox as eqx
import jax

from treespec import Dynamic


class Model(eqx.Module):
    w: jax.Array
    act: str  # a leaf: not metadata
    kind: str = eqx.field(static=False)


def f(m: Dynamic[Model]) -> None: ...  # E: treespec-non-array-dynamic
