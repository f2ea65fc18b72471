"""Shardings on 8 host CPU devices (the parent test sets XLA_FLAGS): bare
PartitionSpecs under a mesh context, out_shardings, a sharding at a static
leaf, against jax.jit. Prints OK at the end."""

from __future__ import annotations

import logging
from typing import TypedDict

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import treespec
from treespec import SpecError, Static

assert jax.device_count() == 8, jax.devices()
mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("data", "model"))
x = jnp.arange(32.0).reshape(8, 4)
x2 = x + 1  # made outside the mesh context: uncommitted, as x
w = jnp.ones((4, 4))


class Config(TypedDict):
    n: Static[int]
    scale: float


def body(x: jax.Array, w: jax.Array) -> jax.Array:
    return jnp.tanh(x @ w)


# A bare P under jax.set_mesh, in in_shardings and out_shardings: single
# entries, as jax.jit takes them (a P is a tuple, never a prefix container).
with jax.set_mesh(mesh):
    theirs = jax.jit(body, in_shardings=(P("data"), P()), out_shardings=P("data"))
    ours = treespec.jit(body, in_shardings=(P("data"), P()), out_shardings=P("data"))
    expected, got = theirs(x, w), ours(x, w)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert got.sharding == expected.sharding, (got.sharding, expected.sharding)
    assert got.sharding.spec == P("data"), got.sharding
    ours(x2, w)
    theirs(x2, w)
    assert ours.trace_count == 1
    assert theirs._cache_size() == 1  # jax.jit's own count of traces

    # A P inside a prefix tree, at a leaf of a dict argument.
    nested = treespec.jit(
        lambda p, x: jnp.tanh(x @ p["w"]), in_shardings=({"w": P()}, P("data"))
    )
    np.testing.assert_allclose(nested({"w": w}, x), expected, rtol=1e-6)

# use_mesh too, where this JAX has it.
if hasattr(jax.sharding, "use_mesh"):
    with jax.sharding.use_mesh(mesh):
        got = treespec.jit(body, in_shardings=(P("data"), P()))(x, w)
        np.testing.assert_allclose(got, expected, rtol=1e-6)

# NamedShardings, with a static leaf beside them in a config.
sharded = NamedSharding(mesh, P("data"))
replicated = NamedSharding(mesh, P())


@treespec.jit(in_shardings=(sharded, {"scale": replicated}), out_shardings=sharded)
def scaled(x: jax.Array, cfg: Config) -> jax.Array:
    return x * cfg["scale"] * cfg["n"]


out = scaled(x, {"n": 2, "scale": jnp.float32(0.5)})
np.testing.assert_allclose(out, x)
assert out.sharding == sharded, out.sharding

# A sharding given for a static leaf: refused, naming the leaf.
try:
    treespec.jit(
        lambda x, cfg: x * cfg["n"], in_shardings=(sharded, {"n": replicated})
    )(x, {"n": 2})
except SpecError as error:
    text = str(error)
    assert "cfg['n']" in text and "static" in text, text
    assert "not placed on devices" in text, text
else:
    raise AssertionError("a sharding at a static leaf was ignored")

# The stages with shardings: the compiled program places as jax.jit's does.
with jax.set_mesh(mesh):
    compiled = treespec.jit(body, in_shardings=(P("data"), P())).lower(x, w).compile()
    assert compiled.input_shardings[0][0].spec == P("data"), compiled.input_shardings
    np.testing.assert_allclose(compiled(x, w), expected, rtol=1e-6)

# A retrace caused by a sharding the trace sees (a new mesh) names the leaf.
logged: list[str] = []


class _Keep(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        logged.append(record.getMessage())


logging.getLogger("treespec").addHandler(_Keep())
explained = treespec.jit(lambda x: x * 2, explain_recompiles=True)
explained(x)
explained(jax.device_put(x, sharded))
assert explained.trace_count == 2, explained.trace_count
(message,) = logged
assert "x: sharding NamedSharding(P(None, None), mesh none)" in message, message
assert "mesh data=4 model=2" in message, message

print("OK")
