from typing import Union

import jax

from treespec import Dynamic, Static


def f(x: Union[Static[int], Dynamic[jax.Array]]) -> None: ...  # E: treespec-conflicting-union
