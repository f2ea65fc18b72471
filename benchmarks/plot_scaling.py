"""Per-call time against the number of leaves: jax.jit, filter_jit, treespec.jit.

Run: python benchmarks/plot_scaling.py [--out PATH]  (default: docs/images/scaling.png)

Every contender gets a dict of N float32[2] arrays (traced) and N // 10 static
ints; jax.jit takes the statics as a hashable tuple through static_argnums.
Prints a markdown table and writes the plot.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from _timing import compare, machine

import treespec
from treespec import Dynamic, Static

SIZES = (1, 3, 10, 30, 100, 300, 1000)


def measure(n: int) -> dict[str, float]:
    params = {f"w{i:04d}": jnp.ones((2,), jnp.float32) for i in range(n)}
    statics = {f"s{i:04d}": i for i in range(max(1, n // 10))}
    static_tuple = tuple(statics.values())

    def body(params: Any, static: Any) -> Any:
        return params["w0000"]

    raw = jax.jit(body, static_argnums=1)
    eqx_f = eqx.filter_jit(body)

    @treespec.jit
    def ts(
        params: Dynamic[dict[str, jax.Array]], static: Static[dict[str, int]]
    ) -> Any:
        return params["w0000"]

    number = max(20, 4000 // n)
    return compare(
        {
            "jax.jit": lambda: raw(params, static_tuple),
            "equinox.filter_jit": lambda: eqx_f(params, statics),
            "treespec.jit": lambda: ts(params, statics),
        },
        number=number,
        repeat=9,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    default = Path(__file__).resolve().parent.parent / "docs/images/scaling.png"
    parser.add_argument("--out", type=Path, default=default)
    opts = parser.parse_args()
    results = {n: measure(n) for n in SIZES}
    names = list(results[SIZES[0]])
    print(f"{machine()}\n")
    print("| leaves | " + " | ".join(names) + " | treespec / jax |")
    print("| --- | " + " | ".join("---" for _ in names) + " | --- |")
    for n, times in results.items():
        cells = " | ".join(f"{times[k] * 1e6:.1f} us" for k in names)
        print(f"| {n} | {cells} | {times['treespec.jit'] / times['jax.jit']:.2f} |")
    fig, ax = plt.subplots(figsize=(6, 4))
    for name in names:
        ax.plot(SIZES, [results[n][name] * 1e6 for n in SIZES], marker="o", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("dynamic leaves (plus 10% static)")
    ax.set_ylabel("median time per call on a cache hit (us)")
    ax.set_title("Dispatch cost against tree size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    Path(opts.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(opts.out, dpi=120)
    print(f"\nwrote {opts.out}")


if __name__ == "__main__":
    main()
