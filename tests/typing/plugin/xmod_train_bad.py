"""What the runtime refuses, with the classes from another module."""

from .xmod_models_bad import DArr, EqOnly, Holder, SInt, Unregistered
from treespec import Dynamic, Static


def g(u: Dynamic[Unregistered]) -> None: ...  # E: treespec-non-array-dynamic
def h(x: Static[Holder]) -> None: ...  # E: treespec-unhashable-static
def k(x: Static[EqOnly]) -> None: ...  # E: treespec-unhashable-static
def u(x: SInt | DArr) -> None: ...  # E: treespec-conflicting-union
