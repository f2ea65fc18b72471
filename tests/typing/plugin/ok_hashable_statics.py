import dataclasses
from collections.abc import Callable
from typing import Literal

from treespec import Static


@dataclasses.dataclass(frozen=True)
class Settings:
    depth: int
    name: str


def f(
    a: Static[Settings],
    b: Static[tuple[int, str]],
    c: Static[frozenset[int]],
    d: Static[Callable[[int], int]],
    e: Static[Literal["relu", "gelu"]],
    g: Static[list[int]],
) -> None: ...
