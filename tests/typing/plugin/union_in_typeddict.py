from typing import TypedDict, Union

import jax

from treespec import Dynamic, Static


class Config(TypedDict):
    scale: Union[Static[float], Dynamic[jax.Array]]  # E: treespec-conflicting-union
