"""Data-parallel training as a 2-process `jax.distributed` job, on one machine.

    python examples/multihost.py            # trains; global loss, traces per process
    python examples/multihost.py --diverge  # process 1's config differs: both raise

It launches its own 2 local processes (2 host CPU devices each, gloo
collectives): the same program that runs one process per host on a cluster,
where `jax.distributed.initialize()` finds the coordinator by itself. Each
process feeds its own rows of the global batch; the config is static. With
`--diverge`, process 1 uses another activation: every process traced a
different program, and treespec raises a `ValidationError` on each of them
before any step runs, where JAX alone would run the mix.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TypedDict

PROCESSES = 2


def launch(diverge: bool) -> int:
    """Start the processes, wait (at most 120 s), show what each printed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = str(Path(__file__).resolve().parent.parent)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH", "")) if p
        ),
        "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
        # CPU devices and collectives, also on a machine with an accelerator.
        "JAX_PLATFORMS": "cpu",
    }
    args = [sys.executable, __file__, "--worker", str(port)]
    procs = [
        subprocess.Popen(
            [*args, str(i), *(["--diverge"] if diverge else [])],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(PROCESSES)
    ]
    deadline = time.monotonic() + 120
    outputs = []
    try:
        for p in procs:
            outputs.append(
                p.communicate(timeout=max(1, deadline - time.monotonic()))[0]
            )
    finally:
        for p in procs:  # on a timeout or Ctrl-C too
            if p.poll() is None:
                p.kill()
                p.wait()
    noise = ("W0000", "I0000", "E0000", "[Gloo]", "WARNING: All log")
    for i, out in enumerate(outputs):
        for line in out.splitlines():
            if not line.startswith(noise) and "connected peer ranks" not in line:
                print(f"[process {i}] {line}")
    return max(p.returncode or 0 for p in procs)


class Config(TypedDict):
    activation: "Static[str]"  # noqa: F821 (the names come in `worker`)
    hidden: "Static[int]"  # noqa: F821
    learning_rate: "Dynamic[float]"  # noqa: F821 (traced: a schedule never retraces)


def worker(port: int, index: int, diverge: bool) -> None:
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    # On a cluster (SLURM, TPU pods, ...): jax.distributed.initialize()
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}",
        num_processes=PROCESSES,
        process_id=index,
    )
    from functools import partial

    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    import treespec
    from treespec import Dynamic, Static

    globals().update(Static=Static, Dynamic=Dynamic)  # for Config's hints
    Params = dict[str, jax.Array]

    mesh = Mesh(np.array(jax.devices()), ("data",))  # all 4 devices, 2 processes
    replicated = NamedSharding(mesh, P())
    batch = NamedSharding(mesh, P("data"))

    def loss_fn(params: Params, x: jax.Array, y: jax.Array, act: str) -> jax.Array:
        pred = getattr(jax.nn, act)(x @ params["w1"]) @ params["w2"]
        return jnp.mean((pred - y) ** 2)

    @partial(
        treespec.jit,
        in_shardings=(replicated, batch, batch),
        out_shardings=replicated,
    )
    def train_step(
        params: Dynamic[Params], x: jax.Array, y: jax.Array, cfg: Config
    ) -> tuple[Params, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y, cfg["activation"])
        lr = cfg["learning_rate"]
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss

    cfg: Config = {"activation": "tanh", "hidden": 16, "learning_rate": 0.1}
    if diverge and index == 1:
        cfg = {**cfg, "activation": "relu"}  # the mistake treespec catches

    # The same global data on every process; each one feeds its own rows.
    rng = np.random.default_rng(0)
    x_all = rng.normal(size=(64, 4)).astype(np.float32)
    y_all = np.sin(x_all).sum(axis=1, keepdims=True).astype(np.float32)
    rows = slice(index * 32, (index + 1) * 32)
    x = jax.make_array_from_process_local_data(batch, x_all[rows])
    y = jax.make_array_from_process_local_data(batch, y_all[rows])
    params = {
        "w1": rng.normal(size=(4, cfg["hidden"])).astype(np.float32) * 0.5,
        "w2": rng.normal(size=(cfg["hidden"], 1)).astype(np.float32) * 0.2,
    }
    params = {
        k: jax.make_array_from_process_local_data(replicated, v)
        for k, v in params.items()
    }

    devices = f"{jax.local_device_count()} of {jax.device_count()} devices"
    print(f"process {index} of {jax.process_count()}: {devices}")
    try:
        for step in range(31):
            params, loss = train_step(params, x, y, cfg)
            if step % 10 == 0:
                print(f"step {step:2d}  global loss {float(loss):.4f}")
    except treespec.ValidationError as error:
        print(error)
        sys.exit(1)
    print(f"traces of train_step on process {index}: {train_step.trace_count}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--diverge",
        action="store_true",
        help="give process 1 another static learning rate",
    )
    parser.add_argument(
        "--worker", nargs=2, type=int, metavar=("PORT", "INDEX"), help=argparse.SUPPRESS
    )
    opts = parser.parse_args()
    if opts.worker:
        worker(*opts.worker, opts.diverge)
    else:
        sys.exit(launch(opts.diverge))


if __name__ == "__main__":
    main()
