"""Per-call time against the number of leaves: jax.jit, filter_jit, treespec.jit.

Run: python benchmarks/plot_scaling.py [--out PATH]  (default: docs/images/scaling.png)

Every contender gets a dict of N float32[2] arrays (traced) and N // 10 static
ints; jax.jit takes the statics as a hashable tuple through static_argnums.
Prints a markdown table and writes the plot, both sized to be read on a phone
(~390 px): short column headers, large labels on a small figure.
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
from matplotlib.ticker import NullFormatter, ScalarFormatter

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


#: The contenders, by the short names the table's headers use.
SHORT = {"jax.jit": "jit", "equinox.filter_jit": "eqx", "treespec.jit": "ts"}


def table(results: dict[int, dict[str, float]]) -> str:
    """A markdown table narrow enough for a phone: times in µs, a ratio."""
    names = list(SHORT)
    legend = ", ".join(f"{short}: {name}" for name, short in SHORT.items())
    lines = [
        f"Median µs per call on a cache hit; {legend}.",
        "",
        "| leaves | " + " | ".join(SHORT.values()) + " | ts / jit |",
        "| ---: | " + " | ".join("---:" for _ in names) + " | ---: |",
    ]
    for n, times in results.items():
        cells = " | ".join(f"{times[k] * 1e6:.1f}" for k in names)
        ratio = times["treespec.jit"] / times["jax.jit"]
        lines.append(f"| {n} | {cells} | {ratio:.2f} |")
    return "\n".join(lines)


def plot(results: dict[int, dict[str, float]], out: Path) -> None:
    """The log-log plot, at a size and font that a phone shows whole.

    The page shows it at the content's width: about 360 px on a phone, where
    an 11 pt label of this 4.8 in, 160 dpi figure is ~11 px high.
    """
    sizes = list(results)
    plt.rcParams["font.size"] = 11
    fig, ax = plt.subplots(figsize=(4.8, 3.6))
    for name in SHORT:
        times = [results[n][name] * 1e6 for n in sizes]
        ax.plot(sizes, times, marker="o", markersize=4, linewidth=2, label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    # Plain numbers (1, 10, 100), not powers of ten; no minor labels.
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(ScalarFormatter())
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("dynamic leaves (+10% static)")
    ax.set_ylabel("µs per call")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(frameon=False, loc="upper left")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=160)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    default = Path(__file__).resolve().parent.parent / "docs/images/scaling.png"
    parser.add_argument("--out", type=Path, default=default)
    opts = parser.parse_args()
    results = {n: measure(n) for n in SIZES}
    print(f"{machine()}\n")
    print(table(results))
    plot(results, opts.out)
    print(f"\nwrote {opts.out}")


if __name__ == "__main__":
    main()
