"""Per-call dispatch time of treespec.jit against jax.jit and equinox.filter_jit.

Run: python benchmarks/dispatch.py [--quick]

Prints, from one run in one process, the median per-call time of each contender
and the ratios the jit issue targets:

- S1: config + params (8 float32[4,4] arrays, x: float32[4,4], 4 static fields);
  the function returns x, so dispatch is all that is timed.
- S1 under other annotations: Static[dict[str, Any]], arrays left to "infer".
- S2: 10, 100, 1000 dynamic leaves plus 10% static leaves.
- S3: a dependent chain of 200 float32[256,256] matmul steps, one
  block_until_ready at the end (dispatch stays asynchronous).
- First call: trace + compile of S1, a fresh function each repeat.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any, NamedTuple, TypedDict

import equinox as eqx
import jax
import jax.numpy as jnp
from _timing import compare, machine, table

import treespec
from treespec import Dynamic, Static


class ConfigNT(NamedTuple):
    n_layers: int
    activation: str
    scale: float
    use_bias: bool


class ConfigTD(TypedDict):
    n_layers: Static[int]
    activation: Static[str]
    scale: Static[float]
    use_bias: Static[bool]


def scenario_s1(number: int, repeat: int) -> dict[str, float]:
    params = {f"w{i}": jnp.ones((4, 4), jnp.float32) for i in range(8)}
    x = jnp.ones((4, 4), jnp.float32)
    cfg_nt = ConfigNT(2, "relu", 0.5, True)
    cfg = {"n_layers": 2, "activation": "relu", "scale": 0.5, "use_bias": True}

    def body(params: Any, x: Any, cfg: Any) -> Any:
        return x

    raw = jax.jit(body, static_argnums=2)
    eqx_f = eqx.filter_jit(body)

    @treespec.jit
    def ts_hints(
        params: Dynamic[dict[str, jax.Array]], x: Dynamic[jax.Array], cfg: ConfigTD
    ) -> jax.Array:
        return x

    ts_flags = treespec.jit(body, static_flags=[False, False, True])
    return compare(
        {
            "jax.jit": lambda: raw(params, x, cfg_nt),
            "equinox.filter_jit": lambda: eqx_f(params, x, cfg),
            "treespec.jit (hints)": lambda: ts_hints(params, x, cfg),
            "treespec.jit (static_flags)": lambda: ts_flags(params, x, cfg),
        },
        number=number,
        repeat=repeat,
    )


def s1_signatures(number: int, repeat: int) -> dict[str, float]:
    """S1 under other annotations: what leaving arrays to "infer" costs."""
    params = {f"w{i}": jnp.ones((4, 4), jnp.float32) for i in range(8)}
    x = jnp.ones((4, 4), jnp.float32)
    cfg_nt = ConfigNT(2, "relu", 0.5, True)
    cfg = {"n_layers": 2, "activation": "relu", "scale": 0.5, "use_bias": True}
    raw = jax.jit(lambda params, x, cfg: x, static_argnums=2)

    @treespec.jit
    def marked(
        params: Dynamic[dict[str, jax.Array]], x: Dynamic[jax.Array], cfg: ConfigTD
    ) -> jax.Array:
        return x

    @treespec.jit
    def any_cfg(
        params: Dynamic[dict[str, jax.Array]],
        x: Dynamic[jax.Array],
        cfg: Static[dict[str, Any]],
    ) -> jax.Array:
        return x

    @treespec.jit
    def inferred(
        params: dict[str, jax.Array], x: jax.Array, cfg: ConfigTD
    ) -> jax.Array:
        return x

    return compare(
        {
            "jax.jit": lambda: raw(params, x, cfg_nt),
            "Dynamic params and x, cfg: ConfigTD": lambda: marked(params, x, cfg),
            "Dynamic params and x, cfg: Static[dict[str, Any]]": lambda: any_cfg(
                params, x, cfg
            ),
            "params and x inferred, cfg: ConfigTD": lambda: inferred(params, x, cfg),
        },
        number=number,
        repeat=repeat,
    )


def scenario_s2(n: int, number: int, repeat: int) -> dict[str, float]:
    params = {f"w{i:04d}": jnp.ones((2,), jnp.float32) for i in range(n)}
    n_static = max(1, n // 10)
    static = tuple(range(n_static))
    static_dict = {f"s{i:04d}": i for i in range(n_static)}

    def body(params: Any, static: Any) -> Any:
        return params["w0000"]

    raw = jax.jit(body, static_argnums=1)
    eqx_f = eqx.filter_jit(body)
    ts_f = treespec.jit(body, static_flags=[False, True])

    @treespec.jit
    def ts_hints(
        params: Dynamic[dict[str, jax.Array]], static: Static[dict[str, int]]
    ) -> jax.Array:
        return params["w0000"]

    return compare(
        {
            "jax.jit": lambda: raw(params, static),
            "equinox.filter_jit": lambda: eqx_f(params, static_dict),
            "treespec.jit (static_flags)": lambda: ts_f(params, static_dict),
            "treespec.jit (hints)": lambda: ts_hints(params, static_dict),
        },
        number=number,
        repeat=repeat,
    )


def scenario_s3(steps: int, repeat: int) -> dict[str, float]:
    x0 = jnp.ones((256, 256), jnp.float32) / 256.0
    w = jnp.eye(256, dtype=jnp.float32)

    def step(x: Any, w: Any, cfg: Any) -> Any:
        return jnp.tanh(x @ w) * cfg["scale"]

    cfg = {"scale": 1.0}
    raw = jax.jit(lambda x, w: jnp.tanh(x @ w) * 1.0)
    eqx_f = eqx.filter_jit(step)
    ts_f = treespec.jit(step)

    def chain(f: Callable[[Any], Any]) -> Callable[[], Any]:
        def run() -> Any:
            x = x0
            for _ in range(steps):
                x = f(x)
            return jax.block_until_ready(x)

        return run

    per_chain = compare(
        {
            "jax.jit": chain(lambda x: raw(x, w)),
            "equinox.filter_jit": chain(lambda x: eqx_f(x, w, cfg)),
            "treespec.jit": chain(lambda x: ts_f(x, w, cfg)),
        },
        number=1,
        repeat=repeat,
    )
    return {name: t / steps for name, t in per_chain.items()}


def first_call(repeat: int) -> dict[str, float]:
    params = {f"w{i}": jnp.ones((4, 4), jnp.float32) for i in range(8)}
    x = jnp.ones((4, 4), jnp.float32)
    cfg = {"n_layers": 2, "activation": "relu", "scale": 0.5, "use_bias": True}
    cfg_nt = ConfigNT(2, "relu", 0.5, True)
    times: dict[str, list[float]] = {"jax.jit": [], "treespec.jit": []}
    for i in range(repeat):

        def body(params: Any, x: Any, cfg: Any, i: int = i) -> Any:
            return jnp.sin(x) * i + sum(params.values())

        start = time.perf_counter()
        jax.block_until_ready(jax.jit(body, static_argnums=2)(params, x, cfg_nt))
        times["jax.jit"].append(time.perf_counter() - start)
        start = time.perf_counter()
        jax.block_until_ready(
            treespec.jit(body, static_flags=[False, False, True])(params, x, cfg)
        )
        times["treespec.jit"].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    opts = parser.parse_args()
    number, repeat = (200, 5) if opts.quick else (2000, 15)
    print(f"# treespec dispatch benchmark\n\n{machine()}\n")
    s1 = scenario_s1(number, repeat)
    print(table("S1: config + params", s1, "jax.jit"), "\n")
    ratios = {
        "S1 treespec.jit (hints) / jax.jit": s1["treespec.jit (hints)"] / s1["jax.jit"],
        "S1 treespec.jit (static_flags) / jax.jit": s1["treespec.jit (static_flags)"]
        / s1["jax.jit"],
        "S1 equinox.filter_jit / treespec.jit (hints)": s1["equinox.filter_jit"]
        / s1["treespec.jit (hints)"],
    }
    print(
        table("S1 under other annotations", s1_signatures(number, repeat), "jax.jit"),
        "\n",
    )
    for n in (10, 100, 1000):
        s2 = scenario_s2(n, max(20, number // max(1, n // 10)), repeat)
        print(
            table(f"S2: {n} dynamic leaves + {max(1, n // 10)} static", s2, "jax.jit"),
            "\n",
        )
        if n == 1000:
            ratios["S2 (1000 leaves) treespec.jit / jax.jit"] = (
                s2["treespec.jit (static_flags)"] / s2["jax.jit"]
            )
    # Each sample is one chain of 200 matmuls, whose time varies by +-15% on a
    # 2-core machine: many rounds, so the median settles.
    s3 = scenario_s3(200, 10 * repeat)
    print(table("S3: chain of 200 matmul steps (per step)", s3, "jax.jit"), "\n")
    ratios["S3 treespec.jit / jax.jit"] = s3["treespec.jit"] / s3["jax.jit"]
    fc = first_call(max(3, repeat // 3))
    print(table("First call (trace + compile)", fc, "jax.jit"), "\n")
    ratios["first call treespec.jit / jax.jit"] = fc["treespec.jit"] / fc["jax.jit"]
    print("### Ratios\n\n| ratio | value |\n| --- | --- |")
    for name, value in ratios.items():
        print(f"| {name} | {value:.2f} |")


if __name__ == "__main__":
    main()
