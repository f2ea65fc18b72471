from typing import TypedDict

import jax

from treespec import Donate, Dynamic, Static


def f(x: Static[int] | Dynamic[jax.Array], y: int) -> None: ...  # E: treespec-conflicting-union


def g(x: Static[int] | None, y: list[Static[str] | str]) -> None: ...  # E: treespec-conflicting-union


class Config(TypedDict):
    scale: Static[float] | Donate[jax.Array]  # E: treespec-conflicting-union
    ok: Static[int] | Static[str] | None
