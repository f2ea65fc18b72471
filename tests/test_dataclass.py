from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treespec
from treespec import Static


@treespec.dataclass
class Layer:
    w: jax.Array
    b: jax.Array
    activation: Static[str]
    width: Static[int] = 4


def test_static_fields_are_jax_metadata() -> None:
    layer = Layer(jnp.ones(2), jnp.zeros(2), "relu")
    assert jax.tree_util.tree_leaves(layer) == [layer.w, layer.b]
    other = Layer(jnp.ones(2), jnp.zeros(2), "gelu")
    assert jax.tree_util.tree_structure(layer) != jax.tree_util.tree_structure(other)


def test_frozen_and_round_trips_through_tree_map() -> None:
    layer = Layer(jnp.ones(2), jnp.zeros(2), "relu", 8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        layer.width = 3  # type: ignore[misc]
    doubled = jax.tree_util.tree_map(lambda x: 2 * x, layer)
    assert doubled.activation == "relu" and doubled.width == 8
    assert float(doubled.w[0]) == 2.0


def test_plain_jax_jit_agrees_that_static_fields_are_static() -> None:
    traces = []

    @jax.jit
    def f(layer: Layer) -> jax.Array:
        traces.append(layer.activation)
        return layer.w * (2 if layer.activation == "relu" else 3)

    assert float(f(Layer(jnp.ones(1), jnp.ones(1), "relu"))[0]) == 2.0
    assert float(f(Layer(jnp.ones(1), jnp.ones(1), "tanh"))[0]) == 3.0
    assert traces == ["relu", "tanh"]


def test_keyword_options_pass_through() -> None:
    @treespec.dataclass(kw_only=True)
    class Opt:
        lr: jax.Array
        steps: Static[int]

    opt = Opt(lr=jnp.ones(()), steps=3)
    assert jax.tree_util.tree_leaves(opt) == [opt.lr]


def test_init_false_field_is_refused() -> None:
    with pytest.raises(TypeError, match="init=False"):

        @treespec.dataclass
        class Bad:
            a: int
            b: int = dataclasses.field(init=False, default=0)


@pytest.mark.parametrize(
    "annotation",
    ["Static[list]", "Static[dict[str, int]]", "Static[set[int]]", "Static[List[int]]"],
)
def test_a_mutable_static_field_is_refused_at_class_definition(annotation: str) -> None:
    namespace: dict[str, Any] = {}
    source = (
        "import jax\n"
        "from typing import List\n"
        "from treespec import Static\n"
        "class DC:\n"
        "    w: jax.Array\n"
        f"    ks: {annotation}\n"
    )
    exec(source, namespace)
    with pytest.raises(treespec.SpecError) as info:
        treespec.dataclass(namespace["DC"])
    msg = str(info.value)
    assert "DC.ks" in msg and "stale" in msg and "tuple[...]" in msg


def test_immutable_static_fields_are_metadata_and_retrace_on_change(
    counter: dict[str, int],
) -> None:
    @treespec.dataclass
    class DC:
        w: jax.Array
        ks: Static[tuple[int, ...]]

    @treespec.jit
    def f(d: DC) -> jax.Array:
        counter["n"] += 1
        return d.w * sum(d.ks)

    np.testing.assert_allclose(f(DC(jnp.ones(1), (1, 2))), 3.0)
    np.testing.assert_allclose(f(DC(jnp.ones(1), (1, 2, 10))), 13.0)
    assert counter["n"] == 2
    assert jax.tree_util.tree_leaves(DC(jnp.ones(1), (1,))) == [jnp.ones(1)]


def test_a_mutable_static_field_is_refused_when_its_hint_evaluates() -> None:
    with pytest.raises(
        treespec.SpecError, match=r"DC\.ks is Static\[\.\.\.\] of a mutable dict"
    ):

        @treespec.dataclass
        class DC:
            w: jax.Array
            ks: Static[dict[str, int]]
