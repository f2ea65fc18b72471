"""Cost of the mypy plugin: mypy on a generated ~5,000-line module, with and without.

Run: python benchmarks/mypy_plugin.py

The module has 100 TypedDicts and 300 annotated functions using the markers.
mypy runs with no cache, three times each way, in fresh processes; the script
prints the median times and their ratio (target: with / without <= 1.15).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def generate() -> str:
    lines = [
        "from typing import Literal, NamedTuple, Optional, TypedDict",
        "import jax",
        "import jax.numpy as jnp",
        "from jaxtyping import Array, Float",
        "from treespec import Donate, Dynamic, Static",
        "",
    ]
    for i in range(100):
        lines += [
            f"class Config{i}(TypedDict):",
            f"    depth_{i}: Static[int]",
            f"    name_{i}: Static[str]",
            f"    mode_{i}: Static[Literal['a', 'b']]",
            f"    sizes_{i}: Static[tuple[int, ...]]",
            f"    scale_{i}: Dynamic[float]",
            f"    weights_{i}: Dynamic[dict[str, Float[Array, 'n m']]]",
            f"    bias_{i}: Optional[Dynamic[Float[Array, 'm']]]",
            f"    extra_{i}: Static[list[int]]",
            "",
            "",
        ]
    for i in range(300):
        c = i % 100
        lines += [
            f"def step_{i}(",
            "    params: Donate[dict[str, Float[Array, 'n m']]],",
            "    x: Float[Array, 'b n'],",
            f"    cfg: Config{c},",
            "    flag: Static[bool] = False,",
            ") -> Float[Array, 'b m']:",
            f"    w = params['w{i}']",
            "    y = x @ w",
            f"    for _ in range(cfg['depth_{c}']):",
            "        y = jnp.tanh(y)",
            "    return y",
            "",
            "",
        ]
    return "\n".join(lines) + "\n"


def run_mypy(path: Path, config: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-incremental",
            "--cache-dir=/dev/null",
            "--config-file",
            str(config),
            str(path),
        ],
        check=True,
        cwd=ROOT,
        capture_output=True,
        env={"MYPYPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    return time.perf_counter() - start


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        module = Path(tmp) / "generated_specs.py"
        module.write_text(generate())
        with_plugin = Path(tmp) / "with.ini"
        with_plugin.write_text("[mypy]\nplugins = treespec.mypy_plugin\n")
        without = Path(tmp) / "without.ini"
        without.write_text("[mypy]\n")
        n_lines = len(module.read_text().splitlines())
        times: dict[str, list[float]] = {"without plugin": [], "with plugin": []}
        for _ in range(3):
            times["without plugin"].append(run_mypy(module, without))
            times["with plugin"].append(run_mypy(module, with_plugin))
    medians = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"# mypy plugin benchmark\n\nmodule: {n_lines} lines, 100 TypedDicts, "
        "300 annotated functions; mypy --no-incremental, median of 3\n"
    )
    print("| run | median |\n| --- | --- |")
    for name, t in medians.items():
        print(f"| {name} | {t:.2f} s |")
    ratio = medians["with plugin"] / medians["without plugin"]
    print(f"\n| ratio | value |\n| --- | --- |\n| with / without | {ratio:.2f} |")


if __name__ == "__main__":
    main()
