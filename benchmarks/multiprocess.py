"""What the cross-process check costs on a compile-cache hit, in a 2-process job.

Run: python benchmarks/multiprocess.py [--quick]

It launches its own 2 local processes (`jax.distributed` on localhost, gloo,
2 host CPU devices each) and times, in each process, the same call (a `TypedDict`
config with a static and a dynamic field, a process-local array):
`treespec.jit` with the check on (the default) vs `check_processes=False`.
The check runs once per trace, so a hit should cost the same (target <= 1.02).
The processes take turns (the other one waits), the contenders swap places
every round, and each process prints its table.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

ROOT = Path(__file__).resolve().parent.parent


class Config(TypedDict):
    n_layers: "Static[int]"  # noqa: F821 (imported in the worker)
    scale: "Dynamic[float]"  # noqa: F821


def launch(quick: bool) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
        ),
        "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
        "TREESPEC_BENCH_PORT": str(port),
    }
    args = [sys.executable, __file__, *(["--quick"] if quick else [])]
    procs = [
        subprocess.Popen(
            args,
            env={**env, "TREESPEC_BENCH_PROCESS_ID": str(i)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    deadline = time.monotonic() + 600
    try:
        outputs = [
            p.communicate(timeout=max(1, deadline - time.monotonic()))[0] for p in procs
        ]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for i, (p, out) in enumerate(zip(procs, outputs)):
        lines = [
            line
            for line in out.splitlines()
            if not line.startswith(("W0000", "I0000", "[Gloo]", "WARNING: All log"))
        ]
        print(f"## process {i} (exit {p.returncode})\n")
        print("\n".join(lines), "\n")
    return max(p.returncode for p in procs)


def alternating(
    contenders: dict[str, Callable[[], Any]], *, number: int, repeat: int
) -> dict[str, float]:
    """Median seconds per call of each contender; they swap places every round."""
    import jax

    samples: dict[str, list[float]] = {name: [] for name in contenders}
    order = list(contenders)
    for _ in range(repeat):
        for name in order:
            call = contenders[name]
            start = time.perf_counter()
            for _ in range(number):
                call()
            samples[name].append((time.perf_counter() - start) / number)
            jax.block_until_ready(call())
        order.reverse()
    return {name: statistics.median(v) for name, v in samples.items()}


def worker(quick: bool) -> None:
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{os.environ['TREESPEC_BENCH_PORT']}",
        num_processes=2,
        process_id=int(os.environ["TREESPEC_BENCH_PROCESS_ID"]),
    )
    import numpy as np
    from _timing import machine, table
    from jax._src import distributed

    import treespec
    from treespec import Dynamic, Static

    globals().update(Static=Static, Dynamic=Dynamic)  # for Config's hints

    def body(x: jax.Array, cfg: Config) -> jax.Array:
        for _ in range(cfg["n_layers"]):
            x = x * cfg["scale"]
        return x

    number, repeat = (200, 6) if quick else (500, 60)
    # A process-local array: the call's dispatch, not 4-device execution on 2
    # shared cores, is what is timed (the hit path is the same for any input).
    x = jax.device_put(np.ones((8, 4), np.float32), jax.local_devices()[0])
    cfg: Config = {"n_layers": 2, "scale": 0.5}
    checked = treespec.jit(body)
    unchecked = treespec.jit(body, check_processes=False)
    for call in (checked, unchecked):  # trace (the check runs for `checked`)
        jax.block_until_ready(call(x, cfg))
    me = jax.process_index()
    client = distributed.global_state.client
    if me == 1:  # take turns: timing on 2 shared cores, one process at a time
        client.blocking_key_value_get("bench/turn/1", 600_000)
    times = alternating(
        {
            "treespec.jit (check_processes=False)": lambda: unchecked(x, cfg),
            "treespec.jit (checked)": lambda: checked(x, cfg),
        },
        number=number,
        repeat=repeat,
    )
    if me == 0:
        client.key_value_set("bench/turn/1", "go")
        client.blocking_key_value_get("bench/done", 600_000)  # idle meanwhile
    else:
        client.key_value_set("bench/done", "1")
    assert checked.trace_count == unchecked.trace_count == 1
    ratio = (
        times["treespec.jit (checked)"] / times["treespec.jit (check_processes=False)"]
    )
    print(f"process {jax.process_index()} of {jax.process_count()}; {machine()}\n")
    print(table("Cache hit", times, "treespec.jit (check_processes=False)"), "\n")
    print(f"| treespec.jit checked / check_processes=False | {ratio:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    opts = parser.parse_args()
    if "TREESPEC_BENCH_PROCESS_ID" in os.environ:
        worker(opts.quick)
    else:
        sys.exit(launch(opts.quick))


if __name__ == "__main__":
    main()
