"""Literal static_flags= and default= at a transform's call."""

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
ok3 = treespec.jit(g, static_flags={"n": True}, default="static")
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
