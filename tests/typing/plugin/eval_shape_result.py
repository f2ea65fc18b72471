"""eval_shape's result with the plugin: fun's result type, arrays mapped to
jax.ShapeDtypeStruct at any depth; a pytree class stays itself."""

from typing import Any, NamedTuple, Optional, TypedDict, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from typing_extensions import assert_type

import treespec
from treespec import Static


def mixed(x: jax.Array, name: Static[str]) -> tuple[jax.Array, str]:
    return x, name


def nested(x: jax.Array) -> dict[str, list[tuple[jax.Array, int]]]:
    return {"a": [(x, 1)]}


def maybe(x: jax.Array) -> Optional[jax.Array]:
    return x


def host(x: np.ndarray) -> np.ndarray:
    return x


class Out(NamedTuple):
    y: jax.Array
    name: str


def as_named(x: jax.Array) -> Out:
    return Out(x, "a")


class Stats(TypedDict):
    mean: jax.Array
    count: int


def stats(x: jax.Array) -> Stats:
    return {"mean": x, "count": 1}


@treespec.dataclass
class Model:
    w: jax.Array
    depth: Static[int]


def build(w: jax.Array, depth: Static[int]) -> Model:
    return Model(w, depth)


x = jnp.ones(2)
assert_type(treespec.eval_shape(mixed, x, "a"), tuple[jax.ShapeDtypeStruct, str])
assert_type(
    treespec.eval_shape(nested, x),
    dict[str, list[tuple[jax.ShapeDtypeStruct, int]]],
)
assert_type(treespec.eval_shape(maybe, x), Optional[jax.ShapeDtypeStruct])
assert_type(treespec.eval_shape(host, np.ones(2)), jax.ShapeDtypeStruct)
y, name = treespec.eval_shape(as_named, x)
assert_type(y, jax.ShapeDtypeStruct)
assert_type(name, str)
shaped_stats = treespec.eval_shape(stats, x)
assert_type(shaped_stats["mean"], jax.ShapeDtypeStruct)
assert_type(shaped_stats["count"], int)
assert_type(treespec.eval_shape(build, x, 3), Model)
assert_type(treespec.eval_shape(Model, x, 3), Model)
treespec.eval_shape(mixed, x, 3)  # E: call-overload


T = TypeVar("T")


def ident(x: T) -> T:
    return x


def returns_any(x: jax.Array) -> Any:
    return x, x


# A generic function: mypy solves T from the call, the overloads map it.
assert_type(treespec.eval_shape(ident, x), jax.ShapeDtypeStruct)
first, second = treespec.eval_shape(returns_any, x)
