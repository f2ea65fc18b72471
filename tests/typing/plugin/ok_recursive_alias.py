"""A recursive alias under a marker: followed without recursing forever."""

from typing import Union

import jax

from treespec import Dynamic

Tree = Union[jax.Array, list["Tree"], dict[str, "Tree"]]


def f(t: Dynamic[Tree]) -> None: ...
