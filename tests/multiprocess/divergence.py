"""A 2-process job whose processes disagree on static values; asserts on each.

Run by `tests/test_multiprocess.py` under `launch.run`. Each process checks
what it raised (type, leaf path, both values) and prints the messages, which
the test checks again.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))
import jax
import jax.numpy as jnp
import numpy as np
from jax._src import distributed
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from launch import init

import treespec
from treespec import Static

me = init()
client = distributed.global_state.client
mesh = Mesh(np.array(jax.devices()), ("data",))
ones = jax.make_array_from_process_local_data(
    NamedSharding(mesh, P("data")), np.ones(8, np.float32)
)  # 16 ones over 4 devices


class Config(TypedDict):
    n: Static[int]


@treespec.jit
def scaled_sum(x: jax.Array, cfg: Config) -> jax.Array:
    return jnp.sum(x) * cfg["n"]


def expect_error(call, *needles: str) -> str:  # type: ignore[no-untyped-def]
    try:
        call()
    except treespec.ValidationError as error:
        text = str(error)
        for needle in needles:
            assert needle in text, (needle, text)
        print(f"process {me} raised: {text}", flush=True)
        return text
    raise AssertionError(f"process {me}: no ValidationError")


# 1. Every process traces, the static keys differ: every process raises, before
# the (sharded, all-reducing) program runs.
expect_error(
    lambda: scaled_sum(ones, {"n": 3 if me == 0 else 4}),
    "cfg['n']",
    "3 on process 0",
    "4 on process 1",
    "Dynamic[...]",
)
assert scaled_sum.trace_count == 0

# 2. They agree: the right number (JAX alone gives a wrong one for the above).
assert float(scaled_sum(ones, {"n": 3})) == 48.0
assert float(scaled_sum(ones, {"n": 3})) == 48.0  # a hit
assert scaled_sum.trace_count == 1

# 3. Retrace explanations say which process logs them.
records: list[str] = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
logging.getLogger("treespec").addHandler(handler)
explained = treespec.jit(lambda x, n: x * n, explain_recompiles=True)
explained(jnp.ones(2), 1)
explained(jnp.ones(2), 2)
assert any(r.startswith(f"process {me}: treespec.jit: retracing") for r in records), (
    records
)

# 4. Off: by the argument or the environment, each process runs its own value
# (a process-local computation here, with no collective to mix).
local = jnp.ones(4)
unchecked = treespec.jit(lambda x, n: jnp.sum(x) * n, check_processes=False)
assert float(unchecked(local, 3 + me)) == 4.0 * (3 + me)
os.environ["TREESPEC_CHECK_PROCESSES"] = "0"
unchecked_env = treespec.jit(lambda x, n: jnp.sum(x) * n)
del os.environ["TREESPEC_CHECK_PROCESSES"]
assert float(unchecked_env(local, 3 + me)) == 4.0 * (3 + me)

# 5. One process traces, the other hits its cache: the one that traced waits
# (here 2 s) and names the process missing and its own static values.
os.environ["TREESPEC_PROCESS_TIMEOUT"] = "2"


@treespec.jit
def local_step(x: jax.Array, cfg: Config) -> jax.Array:
    return x * cfg["n"]


local_step(local, {"n": 1})  # both trace: they agree
if me == 0:
    expect_error(
        lambda: local_step(local, {"n": 2}),  # a miss here
        "no answer from process 1",
        "this is process 0",
        "cfg['n']=2",
    )
    client.key_value_set("test/reported", "1")
else:
    local_step(local, {"n": 1})  # a hit here: nothing to wait for
    client.blocking_key_value_get("test/reported", 30_000)

# ... and every later trace, on any process, reports the earlier miss.
expect_error(
    lambda: local_step(local, {"n": 5}),
    "waited in vain",
    "an earlier check failed",
)
print(f"process {me}: done", flush=True)
