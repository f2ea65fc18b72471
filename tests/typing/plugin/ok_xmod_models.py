"""Classes another module (ok_xmod_train.py) puts under markers.

mypy has freed this module's class bodies by the time the other module is
analysed (and a warm cache never had them): what the plugin needs is kept in
the classes' metadata.
"""

import dataclasses
from typing import Generic, NamedTuple, TypedDict, TypeVar

import equinox as eqx
import jax
from flax import struct

import treespec
from treespec import Dynamic, Static

T = TypeVar("T")

Leaves = list[Dynamic[jax.Array]]
SInt = Static[int]
DArr = Dynamic[jax.Array]


class Model(eqx.Module):
    w: jax.Array
    act: str = eqx.field(static=True)
    sizes: list[int] = eqx.field(static=True)


class Lookup(eqx.Module):
    # Metadata, so no leaf that Static[Lookup] covers (tests/test_typing.py
    # edits the field specifier away: a set leaf under Static is refused).
    table: set[int] = eqx.field(static=True)


class Settings(eqx.Module):  # hashable: equinox.Module defines __hash__
    depth: int
    name: str


class FModel(struct.PyTreeNode):
    w: jax.Array
    act: str = struct.field(pytree_node=False)


class FSettings(struct.PyTreeNode):
    depth: int


@struct.dataclass
class FStruct:
    w: jax.Array
    act: str = struct.field(pytree_node=False)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class DModel:
    w: jax.Array
    act: str = dataclasses.field(metadata=dict(static=True))
    name: str = dataclasses.field(metadata={"static": True})


class Batch(NamedTuple):
    x: jax.Array
    names: Static[tuple[str, ...]]


class Config(TypedDict):
    scale: jax.Array
    names: Static[tuple[str, ...]]
    sizes: Static[dict[str, int]]


@treespec.dataclass
class Box(Generic[T]):
    value: T
    label: Static[str]


@jax.tree_util.register_pytree_node_class
class Registered:
    def __init__(self, name: str) -> None:
        self.name = name

    def tree_flatten(self) -> tuple[tuple[()], str]:
        return (), self.name

    @classmethod
    def tree_unflatten(cls, aux: str, children: tuple[()]) -> "Registered":
        return cls(aux)
