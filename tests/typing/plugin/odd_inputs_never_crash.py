"""Odd annotations under markers: forward references, ParamSpec, TypeVarTuple,
NewType, protocols, Annotated metadata that is not a marker, recursive generic
classes, methods, lambdas. Plain verdicts, no crash and no internal note."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Annotated, Any, Generic, Literal, NewType, ParamSpec, Protocol, TypeVar, TypeVarTuple, Unpack

import jax

import treespec
from treespec import Donate, Dynamic, Static
from treespec._model.markers import Marker

T = TypeVar("T")
P = ParamSpec("P")
Ts = TypeVarTuple("Ts")
UserId = NewType("UserId", int)


def a(x: Static[Later], y: Dynamic[Later]) -> None: ...  # E: treespec-non-array-dynamic
def b(x: Static[Callable[P, int]], y: Static[type[int]], z: Static[Literal[1, "a"]]) -> None: ...
def c(x: Static[tuple[Unpack[Ts]]], y: Dynamic[Iterable[float]], z: Static[UserId]) -> None: ...
def d(x: Annotated[int, Marker], y: Annotated[int, Marker.STATIC.value], w: Static[Any]) -> None: ...
def e(x: Static["Undefined"], y: Dynamic[T]) -> T:  # E: name-defined
    return y


class Proto(Protocol):
    def __eq__(self, other: object) -> bool: ...


@dataclasses.dataclass(frozen=True)
class Later:
    child: Later | None
    n: int


@treespec.dataclass
class Rec(Generic[T]):
    v: T
    nxt: Rec[tuple[T, T]] | None


def f(p: Static[Proto], r: Dynamic[Rec[jax.Array]], q: Static[Rec[int]]) -> None: ...


class Meth:
    def m(self, x: Static[int], y: Dynamic[Meth]) -> None: ...  # E: treespec-non-array-dynamic
    @staticmethod
    def s(x: Donate[list[jax.Array]]) -> None: ...


g: Callable[[Static[int]], Dynamic[jax.Array]] = lambda n: jax.numpy.ones(n)
h = treespec.jit(lambda x: x, static_flags=[True])


def unnamed(fn: Callable[..., int]) -> None:
    treespec.jit(fn, default="static")  # parameters mypy has no name for
