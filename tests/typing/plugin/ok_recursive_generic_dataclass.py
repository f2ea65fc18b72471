"""Recursive generic classes and library aliases: followed, never forever."""

from __future__ import annotations

import dataclasses
from typing import Generic, TypeVar, Union

import jax

import treespec
from treespec import Donate, Dynamic, Static

T = TypeVar("T")


@treespec.dataclass
class Tree(Generic[T]):
    value: T
    children: tuple[Tree[T], ...]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Growing(Generic[T]):
    value: T
    deeper: Growing[list[T]] | None


Nested = Union[jax.Array, list["Nested"], dict[str, "Nested"], "Tree[Nested]"]


def f(t: Dynamic[Tree[jax.Array]], s: Static[Tree[int]], g: Donate[Growing[jax.Array]]) -> None: ...


def g(n: Dynamic[Nested]) -> None: ...
