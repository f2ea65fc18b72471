from collections.abc import Callable

import jax

from treespec import Dynamic


def f(act: Dynamic[Callable[[jax.Array], jax.Array]]) -> None: ...  # E: treespec-non-array-dynamic
