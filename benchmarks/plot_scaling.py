"""Per-call time against the number of leaves: jax.jit, filter_jit, treespec.jit.

Run: python benchmarks/plot_scaling.py [--out PATH] [--no-plot]
(default: docs/images/scaling.png, and scaling-dark.png beside it)

Every contender gets a dict of N float32[2] arrays (traced) and N // 10 static
ints; jax.jit takes the statics as a hashable tuple through static_argnums.
Prints a markdown table and writes the plot, both sized to be read on a phone
(~390 px): short column headers, large labels on a small figure. The plot
comes in two variants on a transparent background, dark lines and text for
the light theme and light ones for the dark theme (the page shows the one
that matches). benchmarks/report.py redraws both from the printed table.
"""

from __future__ import annotations

import argparse
import sys
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


def parse(printed: str) -> dict[int, dict[str, float]]:
    """The results (seconds per call) back from the table `table` printed."""
    by_short = {short: name for name, short in SHORT.items()}
    lines = [line for line in printed.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    results = {}
    for line in lines[1:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if not cells[0].isdigit():
            continue
        results[int(cells[0])] = {
            by_short[short]: float(cell) / 1e6
            for short, cell in zip(header, cells)
            if short in by_short
        }
    return results


#: Line colours that read on a white page and on Material's dark slate alike.
COLOURS = {
    "jax.jit": "#1f77b4",
    "equinox.filter_jit": "#e8710a",
    "treespec.jit": "#2ca02c",
}
DARK_COLOURS = {
    "jax.jit": "#6cb4ff",
    "equinox.filter_jit": "#ffa657",
    "treespec.jit": "#56d364",
}


def plot(results: dict[int, dict[str, float]], out: Path, dark: bool = False) -> None:
    """The log-log plot, at a size and font that a phone shows whole, on a
    transparent background: dark ink for the light theme, light for the dark.

    The page shows it at the content's width: about 360 px on a phone, where
    an 11 pt label of this 4.8 in, 160 dpi figure is ~11 px high.
    """
    sizes = list(results)
    ink = "#e6e6e6" if dark else "#1a1a1a"
    colours = DARK_COLOURS if dark else COLOURS
    style = {
        "font.size": 11,
        "text.color": ink,
        "axes.labelcolor": ink,
        "axes.edgecolor": ink,
        "xtick.color": ink,
        "ytick.color": ink,
        "grid.color": ink,
    }
    with plt.rc_context(style):
        fig, ax = plt.subplots(figsize=(4.8, 3.6))
        for name in SHORT:
            times = [results[n][name] * 1e6 for n in sizes]
            ax.plot(
                sizes,
                times,
                marker="o",
                markersize=4,
                linewidth=2,
                label=name,
                color=colours[name],
            )
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
        fig.savefig(out, dpi=160, transparent=True)
        plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    default = Path(__file__).resolve().parent.parent / "docs/images/scaling.png"
    parser.add_argument("--out", type=Path, default=default)
    parser.add_argument("--no-plot", action="store_true", help="the table only")
    opts = parser.parse_args()
    results = {n: measure(n) for n in SIZES}
    print(f"{machine()}\n")
    print(table(results))
    if not opts.no_plot:
        dark = opts.out.with_name(f"{opts.out.stem}-dark{opts.out.suffix}")
        plot(results, opts.out)
        plot(results, dark, dark=True)
        print(f"wrote {opts.out} and {dark.name}", file=sys.stderr)


if __name__ == "__main__":
    main()
