"""Shared timing helpers for the benchmark scripts."""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax


def compare(
    contenders: dict[str, Callable[[], Any]], *, number: int, repeat: int
) -> dict[str, float]:
    """Median seconds per call of each contender.

    The contenders are timed in turns (one block of `number` calls each, `repeat`
    rounds), so a slow spell of the machine hits all of them alike.
    """
    for call in contenders.values():
        jax.block_until_ready(call())
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, call in contenders.items():
            start = time.perf_counter()
            for _ in range(number):
                call()
            samples[name].append((time.perf_counter() - start) / number)
            jax.block_until_ready(call())
    return {name: statistics.median(v) for name, v in samples.items()}


def table(title: str, times: dict[str, float], base: str) -> str:
    """A markdown table of per-call times and ratios to `base`."""
    lines = [f"### {title}", "", f"| contender | median per call | / {base} |"]
    lines.append("| --- | --- | --- |")
    for name, t in times.items():
        lines.append(f"| {name} | {t * 1e6:.1f} µs | {t / times[base]:.2f} |")
    return "\n".join(lines)


def machine() -> str:
    import equinox as eqx

    return (
        f"machine: {platform.platform()}, {platform.machine()}, "
        f"python {platform.python_version()}, jax {jax.__version__}, "
        f"equinox {eqx.__version__}, backend {jax.default_backend()}"
    )
