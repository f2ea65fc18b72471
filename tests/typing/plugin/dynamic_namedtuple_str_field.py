from typing import NamedTuple

import jax

from treespec import Dynamic


class Batch(NamedTuple):
    x: jax.Array
    label: str


def f(b: Dynamic[Batch]) -> None: ...  # E: treespec-non-array-dynamic
