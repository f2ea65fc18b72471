"""Transformed methods: the bound form on an instance keeps what a bound method
is (Python's on a plain class, Equinox's BoundMethod on a Module), binds the
instance for `.spec`/`.trace_count`/`.lower`, and is fast."""

from __future__ import annotations

import copy
import inspect
import pickle
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, Float

import treespec
from treespec import Static


class _Probe(eqx.Module):
    def method(self) -> None: ...


#: Equinox's bound method class, found by its public behaviour (its module
#: is private and has moved between Equinox releases).
BoundMethod = type(_Probe().method)


class Model(eqx.Module):
    w: jax.Array
    b: jax.Array
    depth: int = eqx.field(static=True)

    @treespec.jit
    def apply(self, x: jax.Array) -> jax.Array:
        for _ in range(self.depth):
            x = jnp.tanh(x * self.w + self.b)
        return x

    @treespec.jit
    def scaled(self, x: jax.Array, k: Static[int]) -> jax.Array:
        return x * self.w * k


class Plain:
    def __init__(self, k: float) -> None:
        self.w = k * jnp.ones(3)

    @treespec.jit
    def apply(self, x: jax.Array) -> jax.Array:
        return x * self.w


class Unhashable(Plain):
    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = None  # type: ignore[assignment]


def _forward(self: Renamed, x: jax.Array) -> jax.Array:
    return x * self.w


class Renamed(eqx.Module):
    """A jitted method stored under another name than its function's."""

    w: jax.Array
    forward = treespec.jit(_forward)


def _model(scale: float = 1.0, depth: int = 2) -> Model:
    return Model(0.5 * scale * jnp.ones(3), 0.1 * jnp.ones(3), depth)


X = jnp.arange(3.0)


# -- what a bound method is, kept ------------------------------------------------


def test_a_module_method_is_equinoxs_bound_method_and_a_pytree_of_the_instance() -> (
    None
):
    m = _model()
    bound = m.apply
    assert isinstance(bound, BoundMethod)
    assert bound.__self__ is m and bound.__func__ is Model.__dict__["apply"]
    assert not inspect.ismethod(bound)  # as Equinox's BoundMethod
    assert (bound.__name__, bound.__module__) == ("apply", __name__)
    assert bound.__qualname__ == "Model.apply"
    leaves = jax.tree_util.tree_leaves(bound)
    assert len(leaves) == 2 and leaves[0] is m.w and leaves[1] is m.b
    moved = jax.tree_util.tree_map(lambda a: a + 1, bound)
    np.testing.assert_allclose(moved.__self__.w, m.w + 1)
    np.testing.assert_allclose(moved(X), Model.apply(moved.__self__, X), rtol=1e-6)


def test_transforms_of_a_module_method_differentiate_the_instance() -> None:
    m = _model()

    def loss(method: Any, x: jax.Array) -> jax.Array:
        return jnp.sum(method(x) ** 2)

    expected = jax.grad(lambda mod, x: loss(mod.apply, x))(m, X)
    by_jax = jax.grad(loss)(m.apply, X)
    by_eqx = eqx.filter_grad(loss)(m.apply, X)
    by_treespec = treespec.grad(loss)(m.apply, X)
    for grads in (by_jax, by_eqx, by_treespec):
        np.testing.assert_allclose(grads.__self__.w, expected.w, rtol=1e-6)
        np.testing.assert_allclose(grads.__self__.b, expected.b, rtol=1e-6)


def test_a_plain_class_method_is_pythons_bound_method_and_one_leaf() -> None:
    p = Plain(2.0)
    bound = p.apply
    assert inspect.ismethod(bound)
    assert bound.__self__ is p and bound.__func__ is Plain.__dict__["apply"]
    assert (bound.__name__, bound.__module__) == ("apply", __name__)
    assert jax.tree_util.tree_leaves([bound]) == [bound]
    assert jax.tree_util.tree_map(lambda leaf: leaf, {"f": bound})["f"] == bound


def test_deepcopy_and_pickle_as_a_bound_method_of_the_class() -> None:
    p = Plain(2.0)
    copied = copy.deepcopy(p.apply)
    assert inspect.ismethod(copied) and copied.__self__ is not p
    np.testing.assert_allclose(copied(X), p.apply(X))
    loaded = pickle.loads(pickle.dumps(p.apply))
    assert inspect.ismethod(loaded)
    np.testing.assert_allclose(loaded(X), p.apply(X))

    m = _model()
    copied_m = copy.deepcopy(m.apply)
    assert isinstance(copied_m, BoundMethod) and copied_m.__self__ is not m
    np.testing.assert_allclose(copied_m(X), m.apply(X), rtol=1e-6)
    loaded_m = pickle.loads(pickle.dumps(m.apply))
    assert isinstance(loaded_m, BoundMethod)
    np.testing.assert_allclose(loaded_m(X), m.apply(X), rtol=1e-6)
    plain_method = pickle.loads(pickle.dumps(m.apply.__self__.apply))
    np.testing.assert_allclose(plain_method(X), m.apply(X), rtol=1e-6)


def test_a_module_method_stored_under_another_name_pickles() -> None:
    # Pickled by the instance and the attribute it is stored under (`forward`),
    # not the function's own name (`_forward`, which the class does not have).
    m = Renamed(2.0 * jnp.ones(3))
    loaded = pickle.loads(pickle.dumps(m.forward))
    assert isinstance(loaded, BoundMethod)
    assert isinstance(loaded.__func__, treespec.Jitted)
    np.testing.assert_allclose(loaded(X), m.forward(X))


def test_an_unhashable_plain_instance_is_not_a_static_leaf_of_a_tree() -> None:
    u = Unhashable(2.0)
    # The bound method stays one leaf of a tree: its instance is not exposed
    # as a leaf of its own (which "infer" would hold static, and fail to hash).
    assert jax.tree_util.tree_leaves({"f": u.apply}) == [u.apply]
    assert treespec.partition({"f": u.apply, "x": X}, None)[1]["f"] == u.apply


# -- bound: spec, trace_count, the stages -----------------------------------------


def test_spec_trace_count_and_the_stages_bind_the_instance() -> None:
    m = _model()
    bound = m.scaled
    assert [p.name for p in bound.spec.params] == ["x", "k"]
    bound(X, 2)
    assert bound.trace_count == Model.scaled.trace_count >= 1
    compiled = m.scaled.lower(X, 3).compile()
    np.testing.assert_allclose(compiled(X, 3), X * m.w * 3, rtol=1e-6)
    assert m.scaled.trace(X, 3).out_info.shape == (3,)
    assert m.scaled.eval_shape(X, 3).shape == (3,)
    # Through the class, with the instance first, as before.
    np.testing.assert_allclose(
        Model.scaled.lower(m, X, 3).compile()(m, X, 3), X * m.w * 3, rtol=1e-6
    )


@pytest.mark.parametrize("how", ["copy", "deepcopy"])
def test_a_copy_of_a_methods_stage_keeps_its_instance(how: str) -> None:
    # `m.scaled.lower(x, k)` binds `m`: the copies' `Compiled` is still
    # called with the arguments after the instance, and computes with it.
    copier = getattr(copy, how)
    m = _model(scale=3.0)
    lowered = m.scaled.lower(X, 2)
    compiled = lowered.compile()
    expected = X * m.w * 2
    np.testing.assert_allclose(copier(compiled)(X, 2), expected, rtol=1e-6)
    np.testing.assert_allclose(copier(lowered).compile()(X, 2), expected, rtol=1e-6)
    # A copy of a copy, and of the bound lowering JAX-side, still binds it.
    twice = copier(copier(lowered)).compile()
    np.testing.assert_allclose(copier(twice)(X, 2), expected, rtol=1e-6)


# -- one trace per instance structure ------------------------------------------------


def test_instances_of_one_structure_share_a_trace_and_a_static_field_retraces() -> None:
    calls = {"n": 0}

    class Counted(eqx.Module):
        w: jax.Array
        depth: int = eqx.field(static=True)

        @treespec.jit
        def apply(self, x: jax.Array) -> jax.Array:
            calls["n"] += 1
            return x * self.w * self.depth

    Counted(jnp.ones(3), 2).apply(X)
    Counted(5 * jnp.ones(3), 2).apply(X)
    assert calls["n"] == 1
    np.testing.assert_allclose(Counted(jnp.ones(3), 3).apply(X), 3 * X)
    assert calls["n"] == 2


def test_a_subclass_instance_with_more_fields_is_still_split_by_its_own() -> None:
    class Tagged(Model):
        tag: str = "t"  # a non-array data field: held static by "infer"

    t = Tagged(0.5 * jnp.ones(3), 0.1 * jnp.ones(3), 2, "a")
    np.testing.assert_allclose(t.apply(X), Model.apply(_model(), X), rtol=1e-6)


def test_the_field_annotations_validate_self() -> None:
    class Shaped(eqx.Module):
        w: Float[Array, "n"]

        @treespec.jit
        def apply(self, x: Float[Array, "n"]) -> jax.Array:
            return x * self.w

    np.testing.assert_allclose(Shaped(jnp.ones(3)).apply(X), X)
    with pytest.raises(treespec.ValidationError, match=r"self\.w"):
        Shaped(jnp.ones(4)).apply(X)


def test_a_bound_method_of_a_module_unwraps_to_the_method_as_written() -> None:
    # inspect.unwrap / inspect.signature follow __wrapped__ (JAX's transforms
    # ask them of the function they get): the method as written, bound to the
    # instance, never the transform bound again (a loop).
    class Model(eqx.Module):
        w: jax.Array

        @treespec.jit
        def loss(self, x: jax.Array, k: Static[int]) -> jax.Array:
            return jnp.sum(self.w * x) * k

    m = Model(jnp.ones(2))
    inner = inspect.unwrap(m.loss)
    assert inner.__self__ is m and inner.__func__.__name__ == "loss"
    assert list(inspect.signature(m.loss).parameters) == ["x", "k"]


class _Plain:
    def __init__(self) -> None:
        self.scale = 2.0

    def apply(self, x: jax.Array) -> jax.Array:
        return x * self.scale


class _Layer(eqx.Module):
    w: jax.Array

    def apply(self, x: jax.Array) -> jax.Array:
        return x * self.w


@treespec.dataclass
class _Cell:
    w: jax.Array
    k: Static[int] = 2

    def apply(self, x: jax.Array) -> jax.Array:
        return x * self.w * self.k


@pytest.mark.parametrize(
    "make",
    [_Plain, lambda: _Layer(jnp.ones(2)), lambda: _Cell(jnp.ones(2))],
    ids=["plain class", "equinox.Module", "treespec.dataclass"],
)
def test_a_jitted_bound_method_holds_its_instance_as_jax_jit_does(make: Any) -> None:
    # `treespec.jit(obj.method)` dropped with the instance: nothing of
    # treespec's (nor the keys JAX's caches keep) holds the instance, as
    # nothing of `jax.jit(obj.method)`'s does.
    import gc
    import weakref

    refs = []
    for _ in range(5):
        model = make()
        refs.append(weakref.ref(model))
        jitted = treespec.jit(model.apply)
        np.testing.assert_allclose(jitted(jnp.ones(2)), model.apply(jnp.ones(2)))
        del jitted, model
    gc.collect()
    assert [r() for r in refs] == [None] * 5
