"""partition / combine / flag_tree, with property tests and Equinox as an oracle."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import treespec
from treespec import SpecError, Static

leaves = st.one_of(
    st.integers(-5, 5),
    st.floats(allow_nan=False, width=32),
    st.booleans(),
    st.text(max_size=3),
    st.none(),
    st.builds(lambda n: np.arange(n, dtype=np.float32), st.integers(0, 3)),
    st.builds(lambda n: jnp.full((n,), 1.5), st.integers(0, 3)),
)

trees = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.tuples(children, children),
        st.dictionaries(st.sampled_from("abcd"), children, max_size=3),
    ),
    max_leaves=12,
)


def _flags_for(tree: Any, draw: Any) -> Any:
    """A random prefix flag tree for `tree`."""
    if tree is None or draw(st.booleans()):
        return draw(st.sampled_from([True, False, None, eqx.is_array]))
    if isinstance(tree, dict):
        return {k: _flags_for(v, draw) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_flags_for(v, draw) for v in tree)
    return draw(st.sampled_from([True, False, None]))


@st.composite
def tree_and_flags(draw: Any) -> tuple[Any, Any]:
    tree = draw(trees)
    return tree, _flags_for(tree, draw)


def _same(a: Any, b: Any) -> None:
    la, da = jax.tree_util.tree_flatten(a, is_leaf=lambda x: x is None)
    lb, db = jax.tree_util.tree_flatten(b, is_leaf=lambda x: x is None)
    assert da == db
    for x, y in zip(la, lb):
        assert type(x) is type(y)
        if isinstance(x, (np.ndarray, jax.Array)):
            np.testing.assert_array_equal(x, y)
        else:
            assert x == y or (x != x and y != y)


@settings(max_examples=150, deadline=None)
@given(tree_and_flags())
def test_combine_inverts_partition(case: tuple[Any, Any]) -> None:
    tree, flags = case
    dynamic, static = treespec.partition(tree, flags)
    _same(treespec.combine(dynamic, static), tree)


@settings(max_examples=150, deadline=None)
@given(trees)
def test_flag_tree_with_a_callable_agrees_with_equinox_partition(tree: Any) -> None:
    flags = treespec.flag_tree(tree, flags=eqx.is_array)
    chosen, rest = eqx.partition(tree, eqx.is_array)
    expected = jax.tree_util.tree_map(eqx.is_array, tree)
    assert jax.tree_util.tree_structure(flags) == jax.tree_util.tree_structure(expected)
    assert jax.tree_util.tree_leaves(flags) == jax.tree_util.tree_leaves(expected)
    # partition by the same flags gives equinox's halves (static = "chosen").
    dynamic, static = treespec.partition(tree, flags)
    _same(static, chosen)
    _same(dynamic, rest)


def test_none_leaves_and_empty_containers_round_trip() -> None:
    tree = {"a": None, "b": [], "c": {}, "d": (None, 1, jnp.ones(2)), "e": ()}
    dynamic, static = treespec.partition(tree, None)
    assert static["d"] == (None, 1, None)
    assert dynamic["b"] == [] and static["c"] == {}
    _same(treespec.combine(dynamic, static), tree)


def test_combine_rejects_mismatched_halves() -> None:
    import pytest

    with pytest.raises(SpecError, match="same structure"):
        treespec.combine({"a": None}, {"b": 1})


def test_flag_tree_from_annotation_and_from_function() -> None:
    def step(cfg: dict[str, Static[int]], x):  # type: ignore[no-untyped-def]
        return x * cfg["n"] + cfg["m"], isinstance(cfg["n"], int)

    args = ({"n": 1, "m": 2}, jnp.ones(2))
    flags = treespec.flag_tree(args, step)
    assert flags == ({"n": True, "m": True}, False)
    # The result is the static_flags form: feeding it back changes nothing,
    # the same leaves are static (new values retrace) and traced (they do not).
    by_hints = treespec.jit(step)
    by_flags = treespec.jit(step, static_flags=list(flags))
    calls = [
        args,
        ({"n": 1, "m": 2}, jnp.zeros(2)),  # a new traced value: no retrace
        ({"n": 3, "m": 2}, jnp.ones(2)),  # a new static value: a retrace
        ({"n": 3, "m": 5}, jnp.ones(2)),
    ]
    for call in calls:
        (out_h, static_h), (out_f, static_f) = by_hints(*call), by_flags(*call)
        np.testing.assert_array_equal(out_f, out_h)
        np.testing.assert_allclose(out_f, call[1] * call[0]["n"] + call[0]["m"])
        assert static_f is static_h is True
    assert by_flags.trace_count == by_hints.trace_count == 3
    assert treespec.flag_tree(args, by_flags) == flags
    assert treespec.flag_tree({"n": 1}, dict[str, Static[int]]) == {"n": True}
    assert treespec.flag_tree([1, jnp.ones(1)], None) == [True, False]
