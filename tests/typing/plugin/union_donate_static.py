from typing import Optional, Union

import jax

from treespec import Donate, Dynamic, Static


def f(x: Union[Donate[jax.Array], Static[int]]) -> None: ...  # E: treespec-conflicting-union


def g(x: Optional[Union[Static[int], Dynamic[float]]]) -> None: ...  # E: treespec-conflicting-union
