"""The three markers, as generic `typing.Annotated` aliases.

`Static[int]` is `Annotated[int, STATIC]`: a type checker sees plain `int`, while
treespec finds the marker object in `__metadata__` at runtime.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, TypeVar, get_args, get_origin

__all__ = ["Donate", "Dynamic", "Marker", "Static", "marker_of"]


class Marker(enum.Enum):
    """What a marker says about every leaf below it."""

    STATIC = "static"
    DYNAMIC = "dynamic"
    DONATE = "donate"

    @property
    def is_static(self) -> bool:
        return self is Marker.STATIC

    @property
    def title(self) -> str:
        return self.value.capitalize()

    def __repr__(self) -> str:
        return f"treespec.{self.title}"


_T = TypeVar("_T")

Static = Annotated[_T, Marker.STATIC]
"""Every leaf below is held static: part of the compile-cache key, must be hashable."""

Dynamic = Annotated[_T, Marker.DYNAMIC]
"""Every leaf below is traced: it must be array-like."""

Donate = Annotated[_T, Marker.DONATE]
"""Every leaf below is traced and its buffer donated to the computation."""


def marker_of(annotation: Any) -> tuple[Any, tuple[Marker, ...], tuple[Any, ...]]:
    """Split an annotation into (bare type, markers found, foreign metadata).

    `Static[Dynamic[int]]` flattens to `Annotated[int, DYNAMIC, STATIC]` in Python,
    so a nested marker shows up as two markers here.
    """
    if get_origin(annotation) is Annotated:
        args = get_args(annotation)
        base, metadata = args[0], args[1:]
        markers = tuple(m for m in metadata if isinstance(m, Marker))
        foreign = tuple(m for m in metadata if not isinstance(m, Marker))
        return base, markers, foreign
    return annotation, (), ()
