"""Flax NNX keeps reference semantics under every treespec transform
(`_runtime/planning/graph.py`, `_runtime/planning/graph_session.py`,
`_transforms/graph_calls.py`, `_transforms/mapped_graph.py`).

What a function changes in the NNX objects of its call (a `Variable`'s value,
the optimizer's step and moments, an RNG stream's count, BatchNorm
statistics) is on the caller's objects after the call, as `nnx.jit` leaves
it; shared references stay shared; a change of the structure is an error
naming it. Each case is compared with `nnx.jit` (or NNX's own transform) on
the same program.
"""

from __future__ import annotations

from typing import Any

import flax.errors
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxtyping import Array, Float

import treespec
from treespec import Donate, Dynamic, ValidationError


class Net(nnx.Module):
    def __init__(self, rngs: nnx.Rngs) -> None:
        self.lin = nnx.Linear(4, 8, rngs=rngs)
        self.bn = nnx.BatchNorm(8, rngs=rngs)
        self.drop = nnx.Dropout(0.5, rngs=rngs)
        self.out = nnx.Linear(8, 1, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.out(self.drop(nnx.relu(self.bn(self.lin(x)))))


def _loss(model: Net, x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.mean((model(x) - y) ** 2)


X = jax.random.normal(jax.random.key(0), (16, 4))
Y = jax.random.normal(jax.random.key(1), (16, 1))


def _state(*objects: Any) -> list[np.ndarray]:
    """Every array of the objects' NNX state, as NumPy (keys as their data)."""
    leaves = jax.tree_util.tree_leaves(nnx.state(objects))
    return [
        np.asarray(
            jax.random.key_data(x)
            if jnp.issubdtype(x.dtype, jax.dtypes.prng_key)
            else x
        )
        for x in leaves
    ]


def _train(jit: Any, value_and_grad: Any, steps: int = 3) -> dict[str, Any]:
    """The NNX training idiom, run `steps` times under `jit`."""
    model = Net(nnx.Rngs(0, dropout=1))
    optimizer = nnx.Optimizer(model, optax.adam(1e-1), wrt=nnx.Param)
    traces = {"n": 0}

    @jit
    def train_step(
        model: Net, optimizer: nnx.Optimizer, x: jax.Array, y: jax.Array
    ) -> jax.Array:
        traces["n"] += 1
        loss, grads = value_and_grad(_loss)(model, x, y)
        optimizer.update(model, grads)
        return loss

    losses = [float(train_step(model, optimizer, X, Y)) for _ in range(steps)]
    return {
        "losses": losses,
        "step": int(optimizer.step[...]),
        "state": _state(model, optimizer),
        "traces": traces["n"],
        "count": int(model.drop.rngs.count[...]),
    }


def _same(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    np.testing.assert_allclose(ours["losses"], theirs["losses"], rtol=1e-5)
    assert ours["step"] == theirs["step"]
    assert ours["traces"] == theirs["traces"]
    assert ours["count"] == theirs["count"]
    assert len(ours["state"]) == len(theirs["state"])
    for a, b in zip(ours["state"], theirs["state"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


NNX_RUN = _train(nnx.jit, nnx.value_and_grad)


def test_the_nnx_training_step_trains_as_under_nnx_jit() -> None:
    ours = _train(treespec.jit, nnx.value_and_grad)
    assert ours["losses"][0] != ours["losses"][2]  # it trains
    assert ours["step"] == 3 and ours["count"] == 3
    _same(ours, NNX_RUN)


@pytest.mark.parametrize("value_and_grad", [treespec.value_and_grad])
def test_the_step_with_treespecs_value_and_grad_trains_as_under_nnx(
    value_and_grad: Any,
) -> None:
    _same(_train(treespec.jit, value_and_grad), NNX_RUN)


def test_the_step_with_treespecs_grad_trains_as_under_nnx() -> None:
    def vg(f: Any) -> Any:
        grad = treespec.grad(f)
        return lambda *a: (f(*a), grad(*a))

    def nnx_vg(f: Any) -> Any:
        grad = nnx.grad(f)
        return lambda *a: (f(*a), grad(*a))

    # The loss runs twice per step in both (an extra Dropout draw each).
    _same(_train(treespec.jit, vg), _train(nnx.jit, nnx_vg))


def test_dropout_draws_a_new_mask_on_every_call_as_under_nnx_jit() -> None:
    masks = {}
    for jit in (nnx.jit, treespec.jit):
        drop = nnx.Dropout(0.5, rngs=nnx.Rngs(dropout=3))
        apply = jit(lambda d, x: d(x))
        masks[jit] = [np.asarray(apply(drop, jnp.ones(64))) for _ in range(3)]
    ours, theirs = masks[treespec.jit], masks[nnx.jit]
    assert not np.array_equal(ours[0], ours[1])
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)


def test_grad_outside_jit_updates_the_callers_batch_statistics() -> None:
    ours, theirs = Net(nnx.Rngs(0, dropout=1)), Net(nnx.Rngs(0, dropout=1))
    g_ours = treespec.grad(_loss)(ours, X, Y)
    g_theirs = nnx.grad(_loss)(theirs, X, Y)
    np.testing.assert_allclose(ours.bn.mean[...], theirs.bn.mean[...], rtol=1e-6)
    assert int(ours.drop.rngs.count[...]) == int(theirs.drop.rngs.count[...]) == 1
    np.testing.assert_allclose(
        g_ours.lin.kernel[...], g_theirs["lin"]["kernel"][...], rtol=1e-5
    )
    assert float(jnp.abs(ours.bn.mean[...]).sum()) > 0


class Counter(nnx.Module):
    def __init__(self, start: Any = 0) -> None:
        self.count = nnx.Variable(start)
        self.w = nnx.Param(jnp.ones(3))

    def __call__(self, x: jax.Array) -> jax.Array:
        self.count[...] += 1
        return x * self.w[...]


def test_a_python_scalar_in_a_variable_is_traced_as_nnx_traces_it() -> None:
    for jit in (nnx.jit, treespec.jit):
        counter = Counter(0)
        apply = jit(lambda m, x: m(x))
        for _ in range(3):
            apply(counter, jnp.ones(3))
        assert int(counter.count[...]) == 3, jit
    assert apply.trace_count == 1  # a new count is no new static value


def test_a_decorated_method_of_an_nnx_module_updates_its_instance() -> None:
    class Stepper(nnx.Module):
        def __init__(self) -> None:
            self.count = nnx.Variable(jnp.zeros((), jnp.int32))
            self.w = nnx.Param(jnp.ones(2))

        @treespec.jit
        def __call__(self, x: jax.Array) -> jax.Array:
            self.count[...] += 1
            self.w[...] = self.w[...] * 2
            return x * self.w[...]

    stepper = Stepper()
    for _ in range(3):
        out = stepper(jnp.ones(2))
    np.testing.assert_allclose(out, [8.0, 8.0])
    assert int(stepper.count[...]) == 3
    assert Stepper.__call__.trace_count == 1


class Lin(nnx.Module):
    def __init__(self) -> None:
        self.w = nnx.Param(jnp.ones(2))


def _twice(a: Lin, b: Lin) -> jax.Array:
    a.w[...] = a.w[...] + 1
    b.w[...] = b.w[...] * 3
    return a.w[...] + b.w[...]


def test_a_module_passed_twice_is_one_object_inside_as_under_nnx_jit() -> None:
    results = {}
    for jit in (nnx.jit, treespec.jit):
        same = Lin()
        out = jit(_twice)(same, same)
        one, two = Lin(), Lin()
        out2 = jit(_twice)(one, two)
        results[jit] = [out, same.w[...], out2, one.w[...], two.w[...]]
    for a, b in zip(results[treespec.jit], results[nnx.jit]):
        np.testing.assert_allclose(a, b)
    np.testing.assert_allclose(results[treespec.jit][1], [6.0, 6.0])


def test_calls_that_share_and_calls_that_do_not_are_traced_apart() -> None:
    jitted = treespec.jit(_twice)
    one, two = Lin(), Lin()
    jitted(one, two)  # not shared: a program of its own
    same = Lin()
    np.testing.assert_allclose(jitted(same, same), [12.0, 12.0])
    np.testing.assert_allclose(same.w[...], [6.0, 6.0])
    assert jitted.trace_count == 2


def test_a_shared_submodule_stays_shared_inside() -> None:
    class Tied(nnx.Module):
        def __init__(self) -> None:
            self.a = Lin()
            self.b = self.a

    def bump(t: Tied) -> jax.Array:
        t.a.w[...] += 1
        return t.b.w[...]

    for jit in (nnx.jit, treespec.jit):
        tied = Tied()
        np.testing.assert_allclose(jit(bump)(tied), [2.0, 2.0])
        np.testing.assert_allclose(tied.b.w[...], [2.0, 2.0])
        assert tied.a is tied.b


def test_dropout_layers_sharing_one_rng_stream_draw_distinct_masks() -> None:
    class TwoDrops(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.d1 = nnx.Dropout(0.5, rngs=rngs)
            self.d2 = nnx.Dropout(0.5, rngs=rngs)
            self.d2.rngs = self.d1.rngs  # one stream, drawn from twice a call

        def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
            return self.d1(x), self.d2(x)

    outs = {}
    for jit in (nnx.jit, treespec.jit):
        model = TwoDrops(nnx.Rngs(dropout=5))
        assert model.d1.rngs is model.d2.rngs
        apply = jit(lambda m, x: m(x))
        outs[jit] = [apply(model, jnp.ones(32)) for _ in range(2)]
        outs[jit].append(int(model.d1.rngs.count[...]))
    ours, theirs = outs[treespec.jit], outs[nnx.jit]
    assert ours[2] == theirs[2] == 4
    assert not np.array_equal(ours[0][0], ours[0][1])  # two draws, two masks
    for a, b in zip(
        jax.tree_util.tree_leaves(ours[:2]), jax.tree_util.tree_leaves(theirs[:2])
    ):
        np.testing.assert_array_equal(a, b)


def test_a_returned_argument_module_is_the_callers_own_object() -> None:
    def bumped(m: Lin, x: jax.Array) -> tuple[Lin, jax.Array]:
        m.w[...] += x
        return m, m.w[...]

    for jit in (nnx.jit, treespec.jit):
        lin = Lin()
        back, w = jit(bumped)(lin, jnp.float32(1.0))
        assert back is lin, jit
        np.testing.assert_allclose(lin.w[...], [2.0, 2.0])
        np.testing.assert_allclose(w, [2.0, 2.0])


def test_an_attribute_added_inside_is_an_error_naming_it() -> None:
    def grow(m: Lin) -> jax.Array:
        m.extra = Lin()
        return m.w[...]

    lin = Lin()
    with pytest.raises(ValidationError) as info:
        treespec.jit(grow)(lin)
    text = str(info.value)
    assert "m.extra" in text and "Lin (an NNX module), added" in text, text
    assert "in __init__" in text, text
    assert not hasattr(lin, "extra")


def test_a_static_attribute_set_inside_is_an_error_naming_it() -> None:
    class Depth(nnx.Module):
        def __init__(self) -> None:
            self.depth = 2
            self.w = nnx.Param(jnp.ones(1))

    def deepen(m: Depth) -> jax.Array:
        m.depth = m.depth + 1
        return m.w[...]

    with pytest.raises(ValidationError) as info:
        treespec.jit(deepen)(Depth())
    text = str(info.value)
    assert "m.depth" in text and "int 2" in text and "int 3, set" in text, text


def test_a_variable_replaced_by_another_type_is_an_error_naming_it() -> None:
    def retype(m: Lin) -> jax.Array:
        m.w = nnx.BatchStat(m.w[...])
        return m.w[...]

    with pytest.raises(ValidationError) as info:
        treespec.jit(retype)(Lin())
    assert "m.w" in str(info.value) and "BatchStat" in str(info.value)


def test_an_nnx_module_with_a_wrong_shaped_input_is_still_refused() -> None:
    @treespec.jit
    def apply(model: Net, x: Float[Array, "b 4"]) -> Float[Array, "b 1"]:
        return model(x)

    model = Net(nnx.Rngs(0, dropout=1))
    with pytest.raises(ValidationError) as info:
        apply(model, jnp.ones((16, 5)))
    assert "argument x" in str(info.value)
    assert int(model.drop.rngs.count[...]) == 0  # nothing ran, nothing written


def test_vmap_writes_an_unmapped_update_back_as_nnx_vmap_does() -> None:
    for transform in (nnx.vmap, treespec.vmap):
        counter = Counter(jnp.zeros((), jnp.int32))
        out = transform(lambda m, x: m(x), in_axes=(None, 0))(counter, jnp.ones((4, 3)))
        assert out.shape == (4, 3)
        assert int(counter.count[...]) == 1


def test_vmap_writes_a_mapped_update_back_on_its_axis() -> None:
    @nnx.vmap(in_axes=0, out_axes=0)
    def ensemble(seed: jax.Array) -> Counter:
        return Counter(jnp.zeros((), jnp.int32))

    models = ensemble(jnp.arange(3))
    out = treespec.vmap(lambda m, x: m(x), in_axes=(0, None))(models, jnp.ones(3))
    assert out.shape == (3, 3)
    np.testing.assert_array_equal(models.count[...], [1, 1, 1])


def test_vmap_refuses_a_batched_value_set_into_a_broadcast_variable() -> None:
    class Norm(nnx.Module):
        def __init__(self) -> None:
            self.bn = nnx.BatchNorm(3, rngs=nnx.Rngs(0))

    norm = Norm()
    with pytest.raises(ValidationError) as info:
        treespec.vmap(lambda m, x: m.bn(x), in_axes=(None, 0))(
            norm, jnp.arange(24.0).reshape(4, 2, 3)
        )
    assert "m.bn.mean" in str(info.value) and "in_axes" in str(info.value)
    np.testing.assert_array_equal(norm.bn.mean[...], np.zeros(3))


def test_the_stages_write_back_and_eval_shape_does_not() -> None:
    @treespec.jit
    def step(m: Counter, x: jax.Array) -> jax.Array:
        return m(x)

    counter = Counter(jnp.zeros(()))
    compiled = step.lower(counter, jnp.ones(3)).compile()
    assert step.lower(counter, jnp.ones(3)).out_info.shape == (3,)
    compiled(counter, jnp.ones(3))
    assert float(counter.count[...]) == 1.0
    assert step.eval_shape(counter, jnp.ones(3)).shape == (3,)
    assert treespec.eval_shape(step, counter, jnp.ones(3)).shape == (3,)
    assert float(counter.count[...]) == 1.0


def test_checkpoint_writes_its_change_back() -> None:
    def bump(m: Counter, x: jax.Array) -> jax.Array:
        return jnp.sum(m(x))

    counter = Counter(jnp.zeros(()))
    assert float(treespec.checkpoint(bump)(counter, jnp.ones(3))) == 3.0
    assert float(counter.count[...]) == 1.0


def test_an_argument_traced_whole_refuses_a_change_it_cannot_write_back() -> None:
    @treespec.jit
    def bump(m: Dynamic[Any], x: jax.Array) -> jax.Array:
        m.count[...] += 1
        return x

    with pytest.raises(ValidationError) as info:
        bump(Counter(jnp.zeros(())), jnp.ones(2))
    text = str(info.value)
    assert "argument m, at m.count" in text and "traced whole" in text, text
    assert "(m: Counter)" in text, text

    @treespec.jit
    def read(m: Dynamic[Any], x: jax.Array) -> jax.Array:
        return m.w[...] * x  # reads only: fine

    np.testing.assert_allclose(read(Counter(jnp.zeros(())), jnp.ones(3)), 1.0)


def test_inside_another_trace_nnx_refuses_what_it_refuses_under_nnx_jit() -> None:
    for jit in (nnx.jit, treespec.jit):
        inner = jit(lambda m, x: m(x))
        outside = Counter(jnp.zeros(()))  # made outside the outer trace
        with pytest.raises(flax.errors.TraceContextError):
            jax.jit(lambda x, inner=inner, m=outside: inner(m, x))(jnp.ones(3))

        def made_inside(x: jax.Array, inner: Any = inner) -> jax.Array:
            model = Counter(jnp.zeros(()))
            inner(model, x)
            inner(model, x)
            return model.count[...]

        assert float(jax.jit(made_inside)(jnp.ones(3))) == 2.0, jit


def test_pmap_refuses_a_change_it_cannot_write_back() -> None:
    counter = Counter(jnp.zeros(()))
    step = treespec.pmap(lambda m, x: m(x), in_axes=(None, 0))
    with pytest.raises(ValidationError) as info:
        step(counter, jnp.ones((1, 3)))
    assert "m.count" in str(info.value) and "treespec.jit" in str(info.value)
    assert float(counter.count[...]) == 0.0


def test_a_donated_module_holds_live_buffers_after_the_call() -> None:
    @treespec.jit
    def read(m: Donate[Counter], x: jax.Array) -> jax.Array:
        return m.w[...] * x  # changes nothing: its buffers come back all the same

    counter = Counter(jnp.zeros(()))
    read(counter, jnp.ones(3))
    np.testing.assert_allclose(counter.w[...] + 1, 2.0)  # not a deleted buffer
    np.testing.assert_allclose(read(counter, jnp.ones(3)), 1.0)


# -- shared Variables, any pattern: the same as running eagerly ---------------


class Slots(nnx.Module):
    """Slots holding some of a few `Variable`s, each maybe more than once."""

    def __init__(self, pool: list[nnx.Variable[Any]], picks: list[int]) -> None:
        self.slots = nnx.List([Holder(pool[i]) for i in picks])


class Holder(nnx.Module):
    def __init__(self, v: nnx.Variable[Any]) -> None:
        self.v = v


def _program(writes: list[tuple[int, float]]) -> Any:
    def run(model: Slots) -> jax.Array:
        total = jnp.zeros(())
        for slot, scale in writes:
            holder = model.slots[slot]
            holder.v[...] = holder.v[...] * scale + 1.0
            total = total + jnp.sum(holder.v[...])
        return total

    return run


@settings(max_examples=25, deadline=None)
@given(
    picks=st.lists(st.integers(0, 3), min_size=1, max_size=6),
    writes=st.lists(
        st.tuples(st.integers(0, 5), st.sampled_from([0.5, 2.0, -1.0])), max_size=6
    ),
)
def test_any_sharing_pattern_computes_what_eager_code_computes(
    picks: list[int], writes: list[tuple[int, float]]
) -> None:
    writes = [(slot % len(picks), scale) for slot, scale in writes]
    run = _program(writes)
    results = []
    for jit in (lambda f: f, treespec.jit):
        pool = [nnx.Param(jnp.full(2, float(i + 1))) for i in range(4)]
        model = Slots(pool, picks)
        out = jit(run)(model)
        results.append((out, [np.asarray(v[...]) for v in pool]))
        for holder, i in zip(model.slots, picks):
            assert holder.v is pool[i]
    (eager, eager_pool), (ours, our_pool) = results
    np.testing.assert_allclose(ours, eager, rtol=1e-6)
    for a, b in zip(our_pool, eager_pool):
        np.testing.assert_allclose(a, b, rtol=1e-6)


# -- plain array attributes: NNX data outside a Variable --------------------


class Plain(nnx.Module):
    def __init__(self) -> None:
        self.count = jnp.array(0)
        self.w = jax.random.normal(jax.random.key(0), (2, 2))

    def __call__(self, x: jax.Array) -> jax.Array:
        self.count += 1
        return x @ self.w


def test_a_plain_array_attribute_changed_inside_is_written_back() -> None:
    def is_w(path: Any, value: Any) -> bool:
        return bool(path[-1] == "w")

    results = []
    for jit in (nnx.jit, treespec.jit):
        model = Plain()
        optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=is_w)

        @jit
        def step(model: Plain, optimizer: nnx.Optimizer, x: jax.Array) -> jax.Array:
            def loss(model: Plain) -> jax.Array:
                return jnp.sum(model(x) ** 2)

            value, grads = nnx.value_and_grad(loss, argnums=nnx.DiffState(0, is_w))(
                model
            )
            optimizer.update(model, grads)
            return value

        losses = [float(step(model, optimizer, jnp.ones((3, 2)))) for _ in range(3)]
        results.append((losses, int(model.count), np.asarray(model.w)))
    (theirs, n_theirs, w_theirs), (ours, n_ours, w_ours) = results
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    assert n_ours == n_theirs == 3
    np.testing.assert_allclose(w_ours, w_theirs, rtol=1e-6)


class Holds(nnx.Module):
    def __init__(self) -> None:
        child = Plain()
        self.left = child
        self.right = child


def test_an_object_with_plain_attributes_held_twice_reads_and_refuses_a_change() -> (
    None
):
    holds = Holds()
    read = treespec.jit(lambda m, x: m.left.w @ x + m.right.w @ x)
    np.testing.assert_allclose(
        read(holds, jnp.ones(2)), 2 * (holds.left.w @ jnp.ones(2))
    )
    with pytest.raises(ValidationError) as info:
        treespec.jit(lambda m, x: m.left(x))(holds, jnp.ones((1, 2)))
    text = str(info.value)
    assert "m.left.count" in text and "held at two places" in text, text
    assert int(holds.left.count) == 0  # nothing written
