import jax

from treespec import Donate, Dynamic


def f(x: Donate[Dynamic[jax.Array]]) -> None: ...  # E: treespec-nested-marker
