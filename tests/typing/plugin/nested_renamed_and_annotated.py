"""Markers are known by what they are, not by their spelling."""

from typing import Annotated, Optional

import jax

from treespec import Dynamic as D
from treespec._model.markers import Marker
from treespec import Static as S


def f(x: S[D[int]]) -> None: ...  # E: treespec-nested-marker
def g(x: S[Annotated[D[int], ""]]) -> None: ...  # E: treespec-nested-marker
def h(x: S[int] | D[jax.Array]) -> None: ...  # E: treespec-conflicting-union
def k(x: Annotated[str, Marker.DYNAMIC]) -> None: ...  # E: treespec-non-array-dynamic
def m(x: Annotated[int, Marker.STATIC, Marker.DYNAMIC]) -> None: ...  # E: treespec-nested-marker
def n(x: S[Optional[D[jax.Array]]]) -> None: ...  # E: treespec-nested-marker
def ok(x: Annotated[S[int], "doc"] | None, y: Annotated[jax.Array, Marker.DYNAMIC]) -> None: ...
