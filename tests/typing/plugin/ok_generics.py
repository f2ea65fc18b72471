import dataclasses
from typing import Generic, TypeVar

import jax

from treespec import Dynamic, Static

T = TypeVar("T")


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Box(Generic[T]):
    value: T


def f(b: Static[Box[int]], c: Dynamic[Box[float]], t: Static[T]) -> T:
    return t
