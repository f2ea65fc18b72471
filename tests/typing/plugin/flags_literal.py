"""Literal static_flags= and default= at a transform's call, a decorator
(also on methods, in function bodies, through functools.partial)."""

import functools

import jax

import treespec
from treespec import Static


def f(x: jax.Array, n: int, cfg: dict[str, int]) -> jax.Array:
    return x * n


def g(x: jax.Array, *, n: Static[int]) -> jax.Array:
    return x * n


a = treespec.jit(f, static_flags={"nn": True})  # E: treespec-bad-flags
b = treespec.jit(f, static_flags=[False, True, True, True])  # E: treespec-bad-flags
c = treespec.jit(f, static_flags=[False, "yes", None])  # E: treespec-bad-flags
d = treespec.jit(f, static_flags={"x": True})  # E: treespec-bad-flags
e = treespec.jit(f, default="dynamc")  # E: treespec-bad-default
k = treespec.jit(static_flags=[1])  # E: treespec-bad-flags
ok1 = treespec.jit(f, static_flags=[False, True, {"a": True}], default="error")
ok2 = treespec.jit(f, static_flags=dict(n=True, cfg=lambda leaf: True))
ok3 = treespec.jit(g, static_flags={"x": False}, default="static")
# default="static" holds the unmarked array x static, which the call refuses:
bad3 = treespec.jit(g, static_flags={"n": True}, default="static")  # E: treespec-bad-default
bad4 = treespec.jit(f, default="error")  # E: treespec-bad-default
ok6 = treespec.jit(f, static_flags=[False, True, True], default="error")
ok4 = treespec.grad(f, static_flags={"n": True})
ok5 = treespec.vmap(f, static_flags=[None, True, True])


@treespec.jit(static_flags={"m": True})  # E: treespec-bad-flags
def h(x: jax.Array, n: int) -> jax.Array:
    return x * n


@treespec.jit(static_flags=[False, True])
def h_ok(x: jax.Array, n: int) -> jax.Array:
    return x * n


class Model:
    @treespec.jit(static_flags={"n": True})
    def apply(self, x: jax.Array, n: int) -> jax.Array:
        return x * n


short = treespec.jit(f, static_flags=[False, True])  # E: treespec-bad-flags


@functools.partial(treespec.jit, static_flags={"nn": True})  # E: treespec-bad-flags
def p(x: jax.Array, n: int) -> jax.Array:
    return x * n


@functools.partial(treespec.jit, static_flags=[False, True], default="error")
def p_ok(x: jax.Array, n: int) -> jax.Array:
    return x * n


# The partial keeps the decorated function's signature (mypy's own partial
# support gives up on the overloaded `jit`).
y: jax.Array = p_ok(jax.numpy.ones(2), 3)
p_ok(jax.numpy.ones(2), "3")  # E: arg-type


class Layer:
    # A method's flags are the function's: `self` has the first entry.
    @treespec.jit(static_flags=[None, False, True])
    def apply(self, x: jax.Array, n: int) -> jax.Array:
        return x * n

    @treespec.jit(static_flags=[False, True])  # E: treespec-bad-flags
    def short(self, x: jax.Array, n: int) -> jax.Array:
        return x * n

    @treespec.jit(static_flags=[None, True, True])  # E: treespec-bad-flags
    def array_static(self, x: jax.Array, n: int) -> jax.Array:
        return x * n

    @staticmethod
    @treespec.jit(static_flags=[False, True, False])  # E: treespec-bad-flags
    def many(x: jax.Array, n: int) -> jax.Array:
        return x * n


def main() -> None:
    @treespec.jit(static_flags={"m": True})  # E: treespec-bad-flags
    def inner(x: jax.Array, n: int) -> jax.Array:
        return x * n

    if inner is not None:
        with open(__file__) as _:

            @treespec.jit(default="dynamc")  # E: treespec-bad-default
            def deeper(x: jax.Array) -> jax.Array:
                return x
