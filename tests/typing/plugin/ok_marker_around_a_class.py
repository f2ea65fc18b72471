"""Dynamic/Donate around a class cover the fields that can be traced: a field
that never can (a name, a layer's activation function) stays static, as at
run time, and as `eqx.filter_jit(donate="all")` treats a model."""

from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax

from treespec import Donate, Dynamic


class Model(eqx.Module):
    w: jax.Array
    act: str  # a leaf: not metadata
    kind: str = eqx.field(static=False)


class Batch(NamedTuple):
    x: jax.Array
    label: str


class Holder(eqx.Module):
    mlp: eqx.nn.MLP
    act: Callable[[jax.Array], jax.Array]


def f(m: Dynamic[Model], b: Dynamic[Batch], h: Donate[Holder]) -> None: ...
def g(ms: Dynamic[list[Model]]) -> None: ...
