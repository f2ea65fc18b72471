from typing import NamedTuple

from treespec import Static


class Pair(NamedTuple):
    name: str
    seen: set[int]


def f(x: Static[Pair]) -> None: ...  # E: treespec-unhashable-static
