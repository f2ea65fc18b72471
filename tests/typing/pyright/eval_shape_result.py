"""eval_shape's result as pyright sees it."""

from typing import Any, assert_type

import jax
import jax.numpy as jnp

import treespec
from treespec import Static


def one(x: jax.Array, n: Static[int]) -> jax.Array:
    return x * n


def pair(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    return x, x


def several(x: jax.Array) -> tuple[jax.Array, ...]:
    return (x,)


def listed(x: jax.Array) -> list[jax.Array]:
    return [x]


def named(x: jax.Array) -> dict[str, jax.Array]:
    return {"a": x}


def mixed(x: jax.Array, name: Static[str]) -> tuple[jax.Array, str]:
    return x, name


x = jnp.ones(2)
assert_type(treespec.eval_shape(one, x, 3), jax.ShapeDtypeStruct)
assert_type(
    treespec.eval_shape(pair, x), tuple[jax.ShapeDtypeStruct, jax.ShapeDtypeStruct]
)
assert_type(treespec.eval_shape(several, x), tuple[jax.ShapeDtypeStruct, ...])
assert_type(treespec.eval_shape(listed, x), list[jax.ShapeDtypeStruct])
assert_type(treespec.eval_shape(named, x), dict[str, jax.ShapeDtypeStruct])


def returns_any(x: jax.Array) -> Any:
    return x, x


# A result that is Any says nothing: Any, not an array's struct.
assert_type(treespec.eval_shape(returns_any, x), Any)
shaped_pair = treespec.eval_shape(returns_any, x)
first, second = shaped_pair
# Other shapes are Any for pyright, never a type that claims arrays.
assert_type(treespec.eval_shape(mixed, x, "a"), Any)
treespec.eval_shape(one, x, "3")  # E: reportCallIssue, reportArgumentType
treespec.eval_shape(pair, x, 3)  # E: reportCallIssue
