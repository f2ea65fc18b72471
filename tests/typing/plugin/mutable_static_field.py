import collections

import jax

import treespec
from treespec import Static


@treespec.dataclass
class Config:
    w: jax.Array
    sizes: Static[list[int]]  # E: treespec-mutable-static
    names: Static[dict[str, int]]  # E: treespec-mutable-static
    queue: Static[collections.deque[int]]  # E: treespec-unhashable-static, treespec-mutable-static
    ordered: Static[collections.OrderedDict[str, int]]  # E: treespec-mutable-static
    kept: Static[tuple[int, ...]]
    frozen: Static[frozenset[str]]
    traced: list[jax.Array]
