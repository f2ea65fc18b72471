"""A long life: memory growth and traces of jax.jit, equinox.filter_jit and
treespec.jit when functions and static values come and go.

Run: python benchmarks/long_life.py [--quick] [--only closures|churn|methods]

Two scenarios, each contender in a fresh process (so that one's freed memory
is not another's), its resident memory read after `gc.collect()` (and glibc's
`malloc_trim`) before and after the scenario. Each contender runs each
scenario 3 times, each time in a new process, and the table shows the median
growth: a run's growth varies by about half a MB (how the allocator's arenas
happen to fall), which is an eighth of the dropped closures' few MB. Counts
(traces, what is alive) are the largest of the runs.

- dropped closures: 500 step functions, each a closure over an array of its
  own (as a sweep's step per trial, or a notebook cell run again), jitted,
  called once with a static config (a frozen dataclass, 7 distinct values)
  and dropped. Also: how many of the functions and of the config objects are
  still alive (JAX's own caches keep the first of equal static values).
- static churn: 300 distinct `Static[int]` values cycled 4 times (1,200
  calls) with treespec's static-key bound lowered to 250
  (`TREESPEC_MAX_STATIC_KEYS`): past it, no value is traced twice.
- bound methods: 200 models, each holding 256 KB of its own, whose method is
  jitted as it is (`jit(model.apply)`, a notebook or a sweep that jits a
  model's method per trial), called once and dropped with the model; once
  for a plain class, once for an `equinox.Module`. Also: how many models are
  still alive. `jax.jit` gets `jax.jit(model.apply)` for the plain class and
  a closure over the model for the Module (whose bound method it cannot
  hash).

`--quick`: 100 closures; 60 values cycled 4 times past a bound of 50; 50
models; one run each. `--only`: one scenario (on an accelerator each
contender's process opens the device afresh, some seconds each: a run there
fits a time limit in parts).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import gc
import json
import os
import statistics
import subprocess
import sys
import weakref
from typing import Any

import equinox as eqx
import jax

# Read at import: the parent sets TREESPEC_MAX_STATIC_KEYS for the churn.
from treespec import Static

CONTENDERS = ("jax.jit", "equinox.filter_jit", "treespec.jit")


@dataclasses.dataclass(frozen=True)
class Config:
    scale: int


def _rss() -> int:
    """Resident memory of this process after a collection, in bytes (Linux).

    The C allocator is asked to give back the memory it holds free first
    (glibc's `malloc_trim`): what is measured is what is still in use, not
    how the allocator's free lists happened to fragment.
    """
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: as it is
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def _device() -> int | None:
    """Bytes in use on the first device after a collection: an accelerator's
    allocator says (a TPU's, a GPU's); the CPU reports none."""
    gc.collect()
    stats = jax.local_devices()[0].memory_stats()
    return int(stats["bytes_in_use"]) if stats and "bytes_in_use" in stats else None


def _device_growth(before: int | None) -> dict[str, int]:
    """`{"device": growth}` where the device reports its memory, else nothing."""
    after = _device()
    return {} if before is None or after is None else {"device": after - before}


def _jitter(name: str) -> Any:
    """`make(fun, static_argnum)`: the contender's jit."""
    import equinox as eqx
    import jax

    import treespec

    if name == "jax.jit":
        return lambda fun, n: jax.jit(fun, static_argnums=n)
    if name == "equinox.filter_jit":
        return lambda fun, n: eqx.filter_jit(fun)  # non-arrays are static
    return lambda fun, n: treespec.jit(fun)  # the Static hints say it


def _closures(name: str, count: int) -> dict[str, Any]:
    import jax.numpy as jnp

    make = _jitter(name)
    traces = [0]
    refs: list[tuple[weakref.ref[Any], weakref.ref[Any]]] = []

    def trial(i: int) -> None:
        table = jnp.full((256, 256), float(i))  # the trial's own data: 256 KB

        def step(x: Any, cfg: Static[Config]) -> Any:
            traces[0] += 1
            return (x @ table) * cfg.scale

        cfg = Config(i % 7)
        make(step, 1)(jnp.ones((4, 256)), cfg).block_until_ready()
        refs.append((weakref.ref(step), weakref.ref(cfg)))

    trial(-1)  # the first compile's one-off costs, outside the measurement
    refs.clear()
    traces[0] = 0
    gc.collect()
    before, device = _rss(), _device()
    for i in range(count):
        trial(i)
    gc.collect()
    return {
        **_device_growth(device),
        "growth": _rss() - before,
        "traces": traces[0],
        "functions": sum(f() is not None for f, _ in refs),
        "configs": sum(c() is not None for _, c in refs),
    }


class Layer(eqx.Module):
    """A model as an `equinox.Module`, holding 256 KB of its own."""

    table: jax.Array

    def apply(self, x: jax.Array) -> jax.Array:
        return x @ self.table


class Plain:
    """A model as a plain class, holding 256 KB of its own."""

    def __init__(self, table: jax.Array) -> None:
        self.table = table

    def apply(self, x: jax.Array) -> jax.Array:
        return x @ self.table


def _models(module: bool) -> Any:
    """A model of trial `i`: a plain class, or an `equinox.Module`."""
    import jax.numpy as jnp

    kind = Layer if module else Plain
    return lambda i: kind(jnp.full((256, 256), float(i)))


def _methods(name: str, count: int, module: bool) -> dict[str, Any]:
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    import treespec

    make = _models(module)
    refs: list[weakref.ref[Any]] = []

    def jitted(model: Any) -> Any:
        if name == "jax.jit":
            return jax.jit((lambda x: model.apply(x)) if module else model.apply)
        if name == "equinox.filter_jit":
            return eqx.filter_jit(model.apply)
        return treespec.jit(model.apply)

    def trial(i: int) -> None:
        model = make(i)
        jitted(model)(jnp.ones((4, 256))).block_until_ready()
        refs.append(weakref.ref(model))

    trial(-1)  # the first compile's one-off costs, outside the measurement
    refs.clear()
    gc.collect()
    before, device = _rss(), _device()
    for i in range(count):
        trial(i)
    gc.collect()
    alive = sum(r() is not None for r in refs)
    return {**_device_growth(device), "growth": _rss() - before, "models": alive}


def _churn(name: str, distinct: int, cycles: int) -> dict[str, Any]:
    import jax.numpy as jnp

    traces = [0]

    def f(x: Any, s: Static[int]) -> Any:
        traces[0] += 1
        return x * s

    jitted = _jitter(name)(f, 1)
    x = jnp.ones(4)
    jitted(x, -1).block_until_ready()
    traces[0] = 0
    gc.collect()
    before, device = _rss(), _device()
    for _ in range(cycles):
        for s in range(distinct):
            jitted(x, s).block_until_ready()
    gc.collect()
    return {**_device_growth(device), "growth": _rss() - before, "traces": traces[0]}


def _child(scenario: str, name: str, quick: bool) -> None:
    if scenario == "closures":
        result = _closures(name, 100 if quick else 500)
    elif scenario.startswith("methods"):
        result = _methods(name, 50 if quick else 200, scenario == "methods-module")
    else:
        result = _churn(name, 60 if quick else 300, 4)
    print(json.dumps(result))


#: Runs of each scenario per contender, each in a new process (one if --quick).
RUNS = 3


def _once(scenario: str, name: str, quick: bool, bound: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", scenario, name]
    if quick:
        command.append("--quick")
    env = {**os.environ, "TREESPEC_MAX_STATIC_KEYS": str(bound)}
    if scenario != "churn":
        env.pop("TREESPEC_MAX_STATIC_KEYS")
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"long_life.py: the {scenario} run of {name} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def combine(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from several runs: the median growth, the largest counts (a
    count that differs between runs shows its worst, never hides it)."""
    row = {key: max(run[key] for run in runs) for key in runs[0]}
    row["growth"] = int(statistics.median(run["growth"] for run in runs))
    if "device" in row:
        row["device"] = int(statistics.median(run["device"] for run in runs))
    return row


def _run(scenario: str, name: str, quick: bool, bound: int) -> dict[str, Any]:
    runs = 1 if quick else RUNS
    return combine([_once(scenario, name, quick, bound) for _ in range(runs)])


def _mb(n: int) -> str:
    return f"{n / 2**20:+.1f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller scenarios")
    parser.add_argument(
        "--only", choices=("closures", "churn", "methods"), help="one scenario"
    )
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        _child(*opts.child, opts.quick)
        return

    sys.path.insert(0, os.path.dirname(__file__))
    from _timing import machine

    count = 100 if opts.quick else 500
    distinct, bound = (60, 50) if opts.quick else (300, 250)

    def scenario(name: str) -> dict[str, dict[str, Any]]:
        """Each contender's row of one scenario; none when `--only` says another."""
        if opts.only not in (None, name.split("-")[0]):
            return {}
        return {each: _run(name, each, opts.quick, bound) for each in CONTENDERS}

    closures, churn = scenario("closures"), scenario("churn")
    methods = {
        kind: rows
        for kind in ("plain", "module")
        if (rows := scenario(f"methods-{kind}"))
    }
    models = 50 if opts.quick else 200
    print(render(machine(), closures, churn, count, distinct, bound, methods, models))


def render(
    machine: str,
    closures: dict[str, dict[str, Any]],
    churn: dict[str, dict[str, Any]],
    count: int,
    distinct: int,
    bound: int,
    methods: dict[str, dict[str, dict[str, Any]]] | None = None,
    models: int = 0,
) -> str:
    """The tables of one run (`benchmarks/report.py` holds its ratios to
    targets)."""
    lines = ["# A long life", "", machine]
    if closures:
        lines += [
            "",
            f"### {count} dropped closures, each called once",
            "",
            "| contender | traces | functions alive | configs alive | memory |",
            "| --- | --- | --- | --- | --- |",
        ]
    for name, r in closures.items():
        lines.append(
            f"| {name} | {r['traces']} | {r['functions']} | {r['configs']} "
            f"| {_mb(r['growth'])} |"
        )
    if churn:
        lines += [
            "",
            f"### static churn: {distinct} values cycled 4 times, "
            f"TREESPEC_MAX_STATIC_KEYS={bound}",
            "",
            "| contender | traces | memory |",
            "| --- | --- | --- |",
        ]
    for name, r in churn.items():
        lines.append(f"| {name} | {r['traces']} | {_mb(r['growth'])} |")
    for kind, results in (methods or {}).items():
        what = "a plain class" if kind == "plain" else "an equinox.Module"
        lines += [
            "",
            f"### {models} jitted bound methods of {what}, dropped with the model",
            "",
            "| contender | models alive | memory |",
            "| --- | --- | --- |",
        ]
        for name, r in results.items():
            lines.append(f"| {name} | {r['models']} | {_mb(r['growth'])} |")
    lines += _device_table(closures, churn, methods or {})
    lines += ["", "### Ratios", "", "| ratio | value |", "| --- | --- |"]
    for title, results in (("dropped closures", closures), ("static churn", churn)):
        if not results:
            continue
        base, ours = results["jax.jit"], results["treespec.jit"]
        memory = ours["growth"] / max(base["growth"], 1)
        traces = ours["traces"] / max(base["traces"], 1)
        lines.append(f"| {title}: memory treespec.jit / jax.jit | {memory:.2f} |")
        lines.append(f"| {title}: traces treespec.jit / jax.jit | {traces:.2f} |")
    for kind, results in (methods or {}).items():
        base, ours = results["jax.jit"], results["treespec.jit"]
        memory = ours["growth"] / max(base["growth"], 1)
        title = f"bound methods ({kind})"
        lines.append(f"| {title}: memory treespec.jit / jax.jit | {memory:.2f} |")
    return "\n".join(lines)


def _device_table(
    closures: dict[str, dict[str, Any]],
    churn: dict[str, dict[str, Any]],
    methods: dict[str, dict[str, dict[str, Any]]],
) -> list[str]:
    """Device memory in use, after less before each scenario, where the
    device reports it (an accelerator): nothing on the CPU."""
    scenarios = {"dropped closures": closures, "static churn": churn}
    scenarios.update({f"bound methods ({k})": v for k, v in methods.items()})
    scenarios = {title: results for title, results in scenarios.items() if results}
    if not all(
        "device" in r for results in scenarios.values() for r in results.values()
    ):
        return []
    lines = [
        "",
        "### Device memory (in use after a scenario, less before it)",
        "",
        f"| scenario | {' | '.join(CONTENDERS)} |",
        f"| --- |{' --- |' * len(CONTENDERS)}",
    ]
    for title, results in scenarios.items():
        cells = " | ".join(_mb(results[name]["device"]) for name in CONTENDERS)
        lines.append(f"| {title} | {cells} |")
    return lines


if __name__ == "__main__":
    main()
