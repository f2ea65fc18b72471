"""Classes that xmod_train_bad.py puts under markers the runtime refuses."""

import dataclasses
from typing import TypeAlias

import jax

from treespec import Dynamic, Static

SInt = Static[int]
DArr = Dynamic[jax.Array]
MixedAlias = Static[int] | Dynamic[jax.Array]  # E: treespec-conflicting-union


@dataclasses.dataclass(frozen=True)
class Unregistered:  # not a pytree: a leaf to JAX
    w: jax.Array


@dataclasses.dataclass(frozen=True)
class Holder:  # frozen, but hashing it hashes a list
    sizes: list[int]


class EqOnly:
    def __eq__(self, other: object) -> bool:
        return True


Explicit: TypeAlias = Static[str] | Dynamic[jax.Array]  # E: treespec-conflicting-union
