"""What validation costs on a compile-cache hit.

Run: python benchmarks/validation.py [--quick]

- `treespec.jit` validated vs `treespec.jit(validate=False)`: treespec checks
  once per cache miss, so a hit should cost the same (target <= 1.05).
- `treespec.jit` validated vs the usual per-call pattern,
  `jaxtyped(typechecker=beartype)` around a `jax.jit` function with the same
  annotations: that checks on every call, which treespec avoids.
"""

from __future__ import annotations

import argparse
from typing import TypedDict

import jax
import jax.numpy as jnp
from _timing import compare, machine, table
from beartype import beartype
from jaxtyping import Array, Float, jaxtyped

import treespec
from treespec import Static


class Config(TypedDict):
    n_layers: Static[int]
    activation: Static[str]


def body(
    x: Float[Array, "b n"], w: Float[Array, "n m"], cfg: Config
) -> Float[Array, "b m"]:
    return x @ w


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    opts = parser.parse_args()
    number, repeat = (200, 5) if opts.quick else (2000, 15)

    x, w = jnp.ones((8, 4)), jnp.ones((4, 2))
    cfg: Config = {"n_layers": 2, "activation": "relu"}

    checked = treespec.jit(body)
    unchecked = treespec.jit(body, validate=False)
    raw = jax.jit(lambda x, w: x @ w)

    @jaxtyped(typechecker=beartype)
    def per_call(x: Float[Array, "b n"], w: Float[Array, "n m"]) -> Float[Array, "b m"]:
        return raw(x, w)

    times = compare(
        {
            "treespec.jit (validate=False)": lambda: unchecked(x, w, cfg),
            "treespec.jit (validated)": lambda: checked(x, w, cfg),
            "jaxtyped(beartype) + jax.jit": lambda: per_call(x, w),
        },
        number=number,
        repeat=repeat,
    )
    print(f"# treespec validation benchmark\n\n{machine()}\n")
    print(table("Cache hit", times, "treespec.jit (validate=False)"), "\n")
    print("### Ratios\n\n| ratio | value |\n| --- | --- |")
    hit = times["treespec.jit (validated)"] / times["treespec.jit (validate=False)"]
    per = times["jaxtyped(beartype) + jax.jit"] / times["treespec.jit (validated)"]
    print(f"| treespec.jit validated / validate=False | {hit:.2f} |")
    print(f"| jaxtyped(beartype)+jax.jit / treespec.jit validated | {per:.2f} |")


if __name__ == "__main__":
    main()
