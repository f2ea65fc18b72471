"""Inner markers survive mypy's copies: fields with type arguments, generic
classes, and aliases."""

from typing import Generic, NamedTuple, TypedDict, TypeVar

import jax

import treespec
from treespec import Dynamic, Static

T = TypeVar("T")

Leaves = list[Dynamic[jax.Array]]
Named = dict[str, Static[str]]


class Batch(NamedTuple):
    x: jax.Array
    names: Static[tuple[str, ...]]


class Options(TypedDict):
    scale: jax.Array
    names: Static[tuple[str, ...]]


@treespec.dataclass
class Box(Generic[T]):
    value: T
    label: Static[str]


def f(
    b: Dynamic[Batch],
    o: Dynamic[Options],
    box: Dynamic[Box[jax.Array]],
    nested: Dynamic[Box[Box[jax.Array]]],
    leaves: Static[Leaves],
    named: Dynamic[Named],
) -> None: ...
