"""The three markers, as generic `typing.Annotated` aliases.

`Static[int]` is `Annotated[int, STATIC]`: a type checker sees plain `int`, while
treespec finds the marker object in `__metadata__` at runtime.
"""

from __future__ import annotations

import enum
import re
from typing import Annotated, Any, TypeVar, get_args, get_origin

__all__ = ["Donate", "Dynamic", "Marker", "Static", "marker_of", "mentions_marker"]


class Marker(enum.Enum):
    """What a marker says about every leaf below it."""

    STATIC = "static"
    DYNAMIC = "dynamic"
    DONATE = "donate"

    @property
    def title(self) -> str:
        return self.value.capitalize()

    def __repr__(self) -> str:
        return f"treespec.{self.title}"


_T = TypeVar("_T")

Static = Annotated[_T, Marker.STATIC]
"""`Static[T]`: every leaf below is held static (part of the compile-cache key).

Such leaves must be hashable; they reach the traced function as Python values.
To a type checker `Static[T]` is `T`.

```python
from typing import TypedDict
from treespec import Static

class Config(TypedDict):
    n_layers: Static[int]
```
"""

Dynamic = Annotated[_T, Marker.DYNAMIC]
"""`Dynamic[T]`: every leaf below is traced; it must be array-like.

Arrays and Python/NumPy scalars qualify. To a type checker `Dynamic[T]` is `T`.

```python
import jax
from treespec import Dynamic

def step(params: Dynamic[dict[str, jax.Array]], lr: Dynamic[float]): ...
```
"""

Donate = Annotated[_T, Marker.DONATE]
"""`Donate[T]`: every leaf below is traced and its buffer donated.

The computation may reuse the donated buffers for its outputs; do not use a
donated array after the call. To a type checker `Donate[T]` is `T`.

```python
import jax
from treespec import Donate

def update(state: Donate[dict[str, jax.Array]]): ...
```
"""


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


#: A marker written in a string annotation (`from __future__ import annotations`).
_MARKER_TEXT = re.compile(r"\b(?:Static|Dynamic|Donate)\[")


def mentions_marker(annotation: Any, depth: int = 0) -> bool:
    """Whether a marker is written anywhere in an annotation (in a string one,
    by its text), without evaluating it."""
    if isinstance(annotation, str):
        return bool(_MARKER_TEXT.search(annotation))
    if depth > 20:
        return False
    if any(isinstance(m, Marker) for m in getattr(annotation, "__metadata__", ())):
        return True
    return any(mentions_marker(a, depth + 1) for a in get_args(annotation))
