"""The call layouts of treespec.jit's hot path, each held to the same behaviour.

- "static": every argument is wholly dynamic or wholly static; no plan per call.
- "fast": wholly dynamic arguments go to JAX unflattened, the rest is planned.
- "args"/"kwargs": everything flattened and planned.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, TypedDict

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treespec
from treespec import Donate, Dynamic, Static, ValidationError


class Config(TypedDict):
    depth: Static[int]
    name: Static[str]
    sizes: Static[list[int]]
    scale: Static[float | int | bool]


CFG = {"depth": 2, "name": "a", "sizes": [1, 2], "scale": 1}


def _make(counter: dict[str, int]) -> Any:
    @treespec.jit
    def f(params: Donate[dict[str, jax.Array]], x: Dynamic[jax.Array], cfg: Config):
        counter["n"] += 1
        return x * cfg["depth"] * sum(cfg["sizes"]) + 0 * params["w"], cfg["name"]

    return f


def test_static_layout_is_chosen() -> None:
    f = _make({"n": 0})
    assert f._splitter.static_layout
    g = treespec.jit(lambda p, x, c: x, static_flags=[False, False, True])
    assert g._splitter.static_layout
    h = treespec.jit(lambda x, c: x)  # "infer": must look at values
    assert not h._splitter.static_layout


def test_static_layout_cache_keys(counter: dict[str, int]) -> None:
    f = _make(counter)
    out, name = f({"w": jnp.ones(2)}, jnp.ones(2), dict(CFG))
    np.testing.assert_allclose(out, 6.0)
    assert name == "a"
    f({"w": jnp.ones(2)}, jnp.zeros(2), dict(CFG))
    assert counter["n"] == 1
    f({"w": jnp.ones(2)}, jnp.ones(2), {**CFG, "scale": 1.0})  # a float: a new key
    f({"w": jnp.ones(2)}, jnp.ones(2), {**CFG, "scale": True})
    assert counter["n"] == 3
    sizes = [1, 2]
    f({"w": jnp.ones(2)}, jnp.ones(2), {**CFG, "sizes": sizes})
    sizes.append(3)  # mutated in place: seen at the next call
    out, _ = f({"w": jnp.ones(2)}, jnp.ones(2), {**CFG, "sizes": sizes})
    np.testing.assert_allclose(out, 12.0)


def test_static_layout_donates_whole_arguments() -> None:
    f = _make({"n": 0})
    params = {"w": jnp.ones(2)}
    f(params, jnp.ones(2), CFG)
    assert params["w"].is_deleted()


def test_static_layout_validation_names_the_leaf() -> None:
    f = _make({"n": 0})
    with pytest.raises(ValidationError) as info:
        f({"w": jnp.ones(2)}, jnp.ones(2), {**CFG, "depth": "2"})
    assert "argument cfg, at cfg['depth']: expected Static[int], got str '2'" in str(
        info.value
    )
    with pytest.raises(ValidationError, match=r"cfg\['extra'\].*unexpected key"):
        f({"w": jnp.ones(2)}, jnp.ones(2), {**CFG, "extra": 1})
    with pytest.raises(ValidationError) as info:
        f({"w": jnp.ones(2)}, jnp.ones(2), {**CFG, "sizes": [np.ones(2)]})
    msg = str(info.value)
    assert "cfg['sizes'][0]" in msg and "hashable" in msg and "Dynamic" in msg


def test_static_layout_without_validation_still_names_bad_structure() -> None:
    @partial(treespec.jit, validate=False)
    def f(x: Dynamic[jax.Array], cfg: Config) -> Any:
        return x

    with pytest.raises(ValidationError, match=r"cfg\['extra'\]"):
        f(jnp.ones(1), {**CFG, "extra": jnp.ones(3)})


def test_static_layout_explains_recompiles(caplog: pytest.LogCaptureFixture) -> None:
    @partial(treespec.jit, explain_recompiles=True)
    def f(x: Dynamic[jax.Array], cfg: Config) -> Any:
        return x

    with caplog.at_level(logging.WARNING, logger="treespec"):
        f(jnp.ones(1), CFG)
        f(jnp.ones(1), {**CFG, "name": "b"})
    (record,) = caplog.records
    assert "cfg['name']: 'a' (str) -> 'b' (str)" in record.getMessage()


def test_static_layout_lower_shardings_and_clear_cache(counter: dict[str, int]) -> None:
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("d",))
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())

    @partial(treespec.jit, in_shardings=(replicated, None), out_shardings=replicated)
    def f(x: Dynamic[jax.Array], cfg: Config) -> jax.Array:
        counter["n"] += 1
        return x * cfg["depth"]

    assert f._splitter.static_layout
    out = f(jnp.ones(2), CFG)
    assert out.sharding == replicated
    compiled = f.lower(jnp.ones(2), CFG).compile()
    np.testing.assert_allclose(compiled(jnp.ones(2), CFG), 2.0)
    f.clear_cache()
    f(jnp.ones(2), CFG)
    assert counter["n"] >= 2


def test_static_layout_tracer_at_a_static_leaf() -> None:
    @treespec.jit
    def f(x: Dynamic[jax.Array], cfg: Config) -> jax.Array:
        return x * cfg["depth"]

    with pytest.raises(ValidationError) as info:
        jax.jit(lambda d: f(jnp.ones(2), {**CFG, "depth": d}))(3)
    msg = str(info.value)
    assert "cfg['depth']" in msg and "traced value reached a static leaf" in msg
