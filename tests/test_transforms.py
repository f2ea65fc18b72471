"""grad, value_and_grad, vmap, pmap, shard_map, checkpoint, eval_shape.

Each is compared with the JAX original (or Equinox) on the same function.
"""

from __future__ import annotations

import functools
import os
import traceback
from functools import partial
from typing import Any, NamedTuple, TypedDict

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P
from jaxtyping import Array, Float

import treespec
from treespec import Dynamic, SpecError, Static, ValidationError


class Config(TypedDict):
    depth: Static[int]
    scale: Static[float]


def loss(params: dict[str, Any], x: jax.Array, cfg: Config) -> jax.Array:
    h = x
    for _ in range(cfg["depth"]):
        h = jnp.tanh(h @ params["w"] + params["b"]) * cfg["scale"]
    return jnp.sum(h**2) + 0.0 * params["count"]


PARAMS = {"w": jnp.eye(3) * 0.5, "b": jnp.arange(3.0), "count": jnp.array(3)}
X = jnp.linspace(0.0, 1.0, 6).reshape(2, 3)
CFG: Config = {"depth": 2, "scale": 0.9}


def _close(a: Any, b: Any) -> None:
    la, ta = jax.tree_util.tree_flatten(a, is_leaf=lambda v: v is None)
    lb, tb = jax.tree_util.tree_flatten(b, is_leaf=lambda v: v is None)
    assert ta == tb, (ta, tb)
    for x, y in zip(la, lb):
        if x is None or y is None:
            assert x is None and y is None
        else:
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def _jax_grad(params: Any) -> Any:
    float_params = {k: v for k, v in params.items() if k != "count"}
    g = jax.grad(lambda p: loss({**p, "count": params["count"]}, X, CFG))(float_params)
    return {**g, "count": None}


def test_grad_matches_jax_with_none_for_integer_and_static_leaves() -> None:
    grads = treespec.grad(loss)(PARAMS, X, CFG)
    _close(grads, _jax_grad(PARAMS))
    assert grads["count"] is None


def test_grad_matches_equinox_filter_grad() -> None:
    grads = treespec.grad(loss)(PARAMS, X, CFG)
    expected = eqx.filter_grad(lambda p: loss(p, X, CFG))(PARAMS)
    _close(grads, expected)


def test_annotations_decide_what_is_differentiated() -> None:
    class Params(TypedDict):
        w: jax.Array
        lr: Static[float]

    def f(p: Params) -> jax.Array:
        return jnp.sum(p["w"] ** 2) * p["lr"]

    grads = treespec.grad(f)({"w": jnp.ones(2), "lr": 3.0})
    assert grads["lr"] is None
    np.testing.assert_allclose(grads["w"], 6.0)


def test_wrt_prefix_tree_and_callable() -> None:
    g = treespec.grad(loss, wrt={"w": True, "b": False, "count": None})(PARAMS, X, CFG)
    assert g["b"] is None and g["count"] is None
    _close(g["w"], _jax_grad(PARAMS)["w"])
    g = treespec.grad(loss, wrt=lambda leaf: leaf.ndim == 1)(PARAMS, X, CFG)
    assert g["w"] is None
    _close(g["b"], _jax_grad(PARAMS)["b"])
    with pytest.raises(SpecError, match=r"wrt has keys \['v'\]"):
        treespec.grad(loss, wrt={"v": True})(PARAMS, X, CFG)


def test_argnums_tuple_and_has_aux() -> None:
    def f(a: jax.Array, b: jax.Array, tag: Static[str]) -> Any:
        return jnp.sum(a * b), {"tag": tag, "prod": a * b}

    (ga, gb), aux = treespec.grad(f, argnums=(0, 1), has_aux=True)(
        jnp.ones(2), 2 * jnp.ones(2), "t"
    )
    jga, jgb = jax.grad(lambda a, b: f(a, b, "t")[0], argnums=(0, 1))(
        jnp.ones(2), 2 * jnp.ones(2)
    )
    _close((ga, gb), (jga, jgb))
    assert aux["tag"] == "t"
    np.testing.assert_allclose(aux["prod"], 2.0)
    with pytest.raises(SpecError, match="argnums 5 is out of range"):
        treespec.grad(f, argnums=5)(jnp.ones(2), jnp.ones(2), "t")


def typed_loss(
    params: dict[str, Float[Array, "n"]], x: Float[Array, "n"], k: Static[int]
) -> Float[Array, ""]:
    return jnp.sum((params["w"] * x) ** 2) * k


def _plain_loss(params: Any, x: Any) -> Any:
    return jnp.sum((params["w"] * x) ** 2) * 2


_PARAMS = {"w": jnp.arange(1.0, 4.0)}
_X = jnp.array([0.5, -1.0, 2.0])


@pytest.mark.parametrize(
    ("ours", "theirs", "batched"),
    [
        (treespec.jit(treespec.grad(typed_loss)), jax.grad(_plain_loss), False),
        (
            treespec.jit(treespec.value_and_grad(typed_loss)),
            jax.value_and_grad(_plain_loss),
            False,
        ),
        (
            treespec.jit(treespec.checkpoint(typed_loss)),
            jax.checkpoint(_plain_loss),
            False,
        ),
        (treespec.grad(treespec.jit(typed_loss)), jax.grad(_plain_loss), False),
        (
            treespec.jit(treespec.vmap(typed_loss, in_axes=(None, 0, None))),
            jax.vmap(_plain_loss, in_axes=(None, 0)),
            True,
        ),
        (
            treespec.vmap(treespec.jit(typed_loss), in_axes=(None, 0, None)),
            jax.vmap(_plain_loss, in_axes=(None, 0)),
            True,
        ),
    ],
    ids=[
        "jit-grad",
        "jit-value_and_grad",
        "jit-checkpoint",
        "grad-jit",
        "jit-vmap",
        "vmap-jit",
    ],
)
def test_an_outer_transform_never_checks_the_inner_return_hint(
    ours: Any, theirs: Any, batched: bool
) -> None:
    # typed_loss returns Float[Array, ""] and takes Float[Array, "n"]: a gradient
    # dict or a batch of x is checked by the inner transform, never against
    # those hints by the outer one.
    x = jnp.stack([_X, 2 * _X]) if batched else _X
    for _ in range(2):  # the second call is a cache hit
        got = ours(_PARAMS, x, 2)
        want = theirs(_PARAMS, x)
        for g, w in zip(
            jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
        ):
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_the_inner_transform_still_validates_its_arguments() -> None:
    f = treespec.jit(treespec.grad(typed_loss))
    with pytest.raises(ValidationError, match=r"argument x"):
        f(_PARAMS, jnp.ones(4), 2)  # n is 3 in params, 4 in x


def test_grad_of_python_floats_matches_jax() -> None:
    assert float(treespec.grad(lambda x: x**2)(3.0)) == 6.0
    assert float(jax.grad(lambda x: x**2)(3.0)) == 6.0

    def loss(params: dict[str, Any], scale, steps):  # type: ignore[no-untyped-def]
        return (params["w"] * params["b"]) ** 2 * scale + steps

    params = {"w": 2.0, "b": 3.0}
    value, (g_params, g_scale) = treespec.value_and_grad(loss, argnums=(0, 1))(
        params, 0.5, 4
    )
    want_value, (want_params, want_scale) = jax.value_and_grad(loss, argnums=(0, 1))(
        params, 0.5, 4
    )
    np.testing.assert_allclose(value, want_value)
    np.testing.assert_allclose(g_params["w"], want_params["w"])
    np.testing.assert_allclose(g_params["b"], want_params["b"])
    np.testing.assert_allclose(g_scale, want_scale)
    # wrt narrows the floats too; an int is never differentiated.
    grads = treespec.grad(loss, wrt={"w": True, "b": False})(params, 0.5, 4)
    np.testing.assert_allclose(grads["w"], want_params["w"])
    assert grads["b"] is None
    assert treespec.grad(lambda p: p["x"] * 2.0)({"x": 3.0, "n": 2})["n"] is None


def test_floats_outside_differentiated_arguments_stay_static(
    counter: dict[str, int],
) -> None:
    def loss(x, lr):  # type: ignore[no-untyped-def]
        counter["n"] += 1
        assert not isinstance(lr, jax.core.Tracer)
        return jnp.sum(x**2) * lr

    g = treespec.grad(loss)
    np.testing.assert_allclose(g(jnp.ones(2), 0.5), jnp.full(2, 1.0))
    np.testing.assert_allclose(g(jnp.ones(2), 0.25), jnp.full(2, 0.5))
    assert counter["n"] == 2  # lr is static (retraced), never differentiated


def test_grad_has_aux_without_a_pair_says_so() -> None:
    def no_aux(p: Any) -> Any:
        return jnp.sum(p["w"] ** 2)

    for transform in (treespec.grad, treespec.value_and_grad):
        with pytest.raises(ValidationError) as info:
            transform(no_aux, has_aux=True)(PARAMS)
        (issue,) = info.value.issues
        assert issue.loc == "the return value"
        assert issue.expected == "a (value, aux) pair, since has_aux=True"
        assert issue.got == "float32[]"
        assert "drop has_aux=True" in issue.hint
        assert "no_aux: 1 problem in the return value" in str(info.value)
    with pytest.raises(ValidationError, match="got tuple of length 3"):
        treespec.grad(lambda p: (jnp.sum(p["w"]), 1, 2), has_aux=True)(PARAMS)


def test_wrt_callable_that_raises_or_returns_a_non_bool_is_a_spec_error() -> None:
    def shape_of(leaf: Any) -> bool:
        return bool(leaf.shape[3])

    with pytest.raises(SpecError) as info:
        treespec.grad(loss, wrt={"w": shape_of})(PARAMS, X, CFG)
    assert str(info.value).startswith(
        "wrt (callable) raised IndexError on the leaf at params['w'] (float32[3,3]):"
    )
    assert isinstance(info.value.__cause__, IndexError)
    with pytest.raises(SpecError, match=r"returned NoneType None for the leaf at"):
        treespec.grad(loss, wrt=lambda leaf: None)(PARAMS, X, CFG)


def test_grad_structure_work_runs_once_per_structure(spy: Any) -> None:
    import treespec._transforms.grad as grad_module

    walks = spy(grad_module, "broadcast_tree")

    def loss(params: dict[str, Any], scale: float) -> jax.Array:
        return jnp.sum(params["w"] ** 2) * params["b"] * scale

    g = treespec.grad(loss, wrt={"w": True, "b": lambda b: b.ndim == 0})
    expected = jax.grad(loss)
    for k in range(4):  # new values, same structure: the wrt walk is not redone
        params = {"w": jnp.arange(3.0) + k, "b": jnp.float32(2.0 + k)}
        got = g(params, 0.5)
        want = expected(params, 0.5)
        np.testing.assert_allclose(got["w"], want["w"])
        np.testing.assert_allclose(got["b"], want["b"])
    assert len(walks) == 1
    g({"w": jnp.ones(2), "b": jnp.float32(1.0), "extra": jnp.ones(1)}, 0.5)
    assert len(walks) == 2  # a new structure: walked once more
    # A leaf's dtype is asked per call: an integer array gets no gradient.
    assert g({"w": jnp.arange(3), "b": jnp.float32(2.0)}, 0.5)["w"] is None
    assert len(walks) == 2


def test_value_and_grad_matches_jax() -> None:
    value, grads = treespec.value_and_grad(loss)(PARAMS, X, CFG)
    np.testing.assert_allclose(value, loss(PARAMS, X, CFG), rtol=1e-6)
    _close(grads, _jax_grad(PARAMS))
    (value, aux), grads = treespec.value_and_grad(
        lambda p: (jnp.sum(p["w"]), "aux"), has_aux=True
    )({"w": jnp.ones(2)})
    assert float(value) == 2.0 and aux == "aux"


def step(x: jax.Array, cfg: Config) -> jax.Array:
    return jnp.tanh(x * cfg["scale"]) * cfg["depth"]


def test_vmap_matches_jax_and_never_maps_static_leaves() -> None:
    xs = jnp.linspace(0, 1, 12).reshape(4, 3)
    out = treespec.vmap(step)(xs, CFG)  # in_axes=0 covers cfg too: its leaves stay
    _close(out, jax.vmap(lambda x: step(x, CFG))(xs))
    out = treespec.vmap(step, in_axes=(1, None))(xs, CFG)
    _close(out, jax.vmap(lambda x: step(x, CFG), in_axes=1)(xs))


def test_vmap_callable_out_axes_match_equinox() -> None:
    def f(x: jax.Array) -> Any:
        return {"y": x * 2, "c": jnp.ones(3), "name": "layer", "k": 3}

    x = jnp.arange(4.0)
    ours = treespec.vmap(f, out_axes=eqx.if_array(0))(x)
    theirs = eqx.filter_vmap(f, out_axes=eqx.if_array(0))(x)
    assert ours["name"] == "layer" and ours["k"] == 3  # non-arrays as they came
    for key in ("y", "c"):
        np.testing.assert_allclose(ours[key], theirs[key])

    # A prefix tree of callables and axes: per leaf, moved where asked.
    def g(x: jax.Array) -> Any:
        return x * jnp.ones(2), jnp.ones(())

    spec = (lambda leaf: 1, None)
    got = treespec.vmap(g, out_axes=spec)(x)
    want = eqx.filter_vmap(g, out_axes=spec)(x)
    assert got[0].shape == want[0].shape == (2, 4) and got[1].shape == ()
    np.testing.assert_allclose(got[0], want[0])
    with pytest.raises(SpecError, match=r"out_axes.*returned str"):
        treespec.vmap(g, out_axes=lambda leaf: "zero")(x)


def test_pmap_callable_out_axes() -> None:
    f = treespec.pmap(
        lambda x: {"y": x * 2, "n": "hi", "c": jnp.ones(())},
        out_axes={"y": eqx.if_array(0), "n": None, "c": None},
    )
    for _ in range(2):  # the second call reuses the compiled function
        out = f(jnp.arange(1.0))
        assert out["n"] == "hi" and out["c"].shape == () and out["y"].shape == (1,)


def test_vmap_callable_in_axes_and_prefix_trees() -> None:
    def f(p: dict[str, jax.Array], k: Static[int]) -> jax.Array:
        return p["a"] * k + p["b"]

    p = {"a": jnp.ones((5, 2)), "b": jnp.ones(2)}
    out = treespec.vmap(f, in_axes=({"a": 0, "b": None}, None))(p, 3)
    _close(out, jax.vmap(lambda a: a * 3 + p["b"])(p["a"]))
    out = treespec.vmap(f, in_axes=lambda leaf: 0 if leaf.ndim == 2 else None)(p, 3)
    assert out.shape == (5, 2)


def test_vmap_non_array_outputs_and_annotated_dynamic() -> None:
    def f(x: jax.Array, name: Static[str], w: Dynamic[float]) -> Any:
        return {"y": x * w, "name": name}

    out = treespec.vmap(f, in_axes=(0, None, 0))(jnp.ones((3, 2)), "n", jnp.arange(3.0))
    assert out["name"] == "n"
    np.testing.assert_allclose(out["y"][:, 0], [0.0, 1.0, 2.0])


def test_vmap_bad_axes_name_the_path() -> None:
    with pytest.raises(
        SpecError, match=r"in_axes\[1\]\['depth'\] maps axis 0 of cfg\['depth'\]"
    ):
        treespec.vmap(step, in_axes=(0, {"depth": 0, "scale": None}))(
            jnp.ones((2, 3)), CFG
        )
    with pytest.raises(
        ValidationError, match=r"argument x, at x: expected an array with an axis 2"
    ):
        treespec.vmap(step, in_axes=(2, None))(jnp.ones((2, 3)), CFG)
    with pytest.raises(SpecError, match=r"in_axes\[1\] has keys \['zz'\]"):
        treespec.vmap(step, in_axes=(0, {"zz": 0}))(jnp.ones((2, 3)), CFG)


def test_pmap_single_device_broadcasts_static_leaves() -> None:
    n = jax.local_device_count()
    traces = []

    def f(x: jax.Array, cfg: Config) -> jax.Array:
        traces.append(cfg["depth"])
        return step(x, cfg)

    pm = treespec.pmap(f)
    xs = jnp.ones((n, 3))
    _close(pm(xs, CFG), jax.vmap(lambda x: step(x, CFG))(xs))
    pm(xs * 2, CFG)
    assert traces == [2]
    pm(xs, {**CFG, "depth": 3})
    assert traces == [2, 3]


def _tagged(x: jax.Array) -> Any:
    return {"y": x * 2, "tag": "t"}


def _plain(x: jax.Array) -> Any:
    return {"y": x * 2, "z": x}


@pytest.mark.parametrize("which", ["jit", "vmap", "pmap"])
def test_output_trees_cannot_describe_non_array_leaves(which: Any) -> None:
    mesh = Mesh(np.array(jax.devices()[:1]), ("d",))
    entry = {"jit": jax.sharding.NamedSharding(mesh, P()), "vmap": 0, "pmap": 0}[which]
    name = "out_shardings" if which == "jit" else "out_axes"
    transform = getattr(treespec, which)
    x = jnp.ones((1, 2))
    # A tree of output specs over array outputs, or one spec for everything: fine.
    plain = transform(_plain, **{name: {"y": entry, "z": entry}})
    np.testing.assert_allclose(plain(x)["z"], x)
    assert transform(_tagged, **{name: entry})(x)["tag"] == "t"
    # A tree, where the output also holds a non-array leaf: a SpecError says why.
    tagged = transform(_tagged, **{name: {"y": entry, "tag": entry}})
    with pytest.raises(SpecError, match=f"returns non-array leaves.*one {name} entry"):
        tagged(x)


def test_shard_map_single_device() -> None:
    mesh = Mesh(np.array(jax.devices()[:1]), ("d",))

    def f(x: jax.Array, cfg: Config) -> jax.Array:
        return jax.lax.psum(jnp.sum(step(x, cfg)), "d")

    out = treespec.shard_map(f, mesh, in_specs=(P("d"), None), out_specs=P())(X, CFG)
    np.testing.assert_allclose(out, jnp.sum(step(X, CFG)), rtol=1e-6)
    with pytest.raises(SpecError, match="static"):
        treespec.shard_map(
            f, mesh, in_specs=(P("d"), {"depth": P("d"), "scale": None}), out_specs=P()
        )(X, CFG)


def test_checkpoint_gives_the_same_gradient() -> None:
    ck = treespec.checkpoint(loss, policy=jax.checkpoint_policies.nothing_saveable)
    _close(
        jax.grad(lambda p: ck(p, X, CFG))(
            {k: PARAMS[k] for k in ("w", "b")} | {"count": 3.0}
        ),
        jax.grad(lambda p: loss(p, X, CFG))(
            {k: PARAMS[k] for k in ("w", "b")} | {"count": 3.0}
        ),
    )


def test_eval_shape() -> None:
    def f(x: jax.Array, cfg: Config) -> Any:
        return {"y": x @ x.T, "depth": cfg["depth"]}

    out = treespec.eval_shape(f, jax.ShapeDtypeStruct((4, 3), jnp.float32), CFG)
    assert out["y"] == jax.ShapeDtypeStruct((4, 4), jnp.float32)
    assert out["depth"] == 2
    expected = eqx.filter_eval_shape(f, jax.ShapeDtypeStruct((4, 3), jnp.float32), CFG)
    assert out["y"].shape == expected["y"].shape


class _Named(NamedTuple):
    y: jax.Array
    name: str


@treespec.dataclass
class _Model:
    w: jax.Array
    depth: Static[int]


def test_eval_shape_results_hold_the_shapes_their_types_claim() -> None:
    # At run time, what the type checkers are told (the overloads, and the
    # plugin's mapping: tests/typing/*/eval_shape_result.py check those): arrays
    # become ShapeDtypeStructs at any depth, Python leaves stay, a pytree class
    # stays itself.
    x = jnp.ones(2)
    sds = jax.ShapeDtypeStruct((2,), jnp.float32)

    def mixed(x: jax.Array, name: Static[str]) -> tuple[jax.Array, str]:
        return x * 2, name

    def nested(x: jax.Array) -> dict[str, list[tuple[jax.Array, int]]]:
        return {"a": [(x, 1)]}

    def as_named(x: jax.Array) -> _Named:
        return _Named(x, "a")

    def build(w: jax.Array, depth: Static[int]) -> _Model:
        return _Model(w, depth)

    assert treespec.eval_shape(mixed, x, "a") == (sds, "a")
    assert treespec.eval_shape(nested, x) == {"a": [(sds, 1)]}
    named = treespec.eval_shape(as_named, x)
    assert type(named) is _Named and named == (sds, "a")
    model = treespec.eval_shape(build, x, 3)
    assert type(model) is _Model and model.w == sds and model.depth == 3
    built = treespec.eval_shape(_Model, x, 3)
    assert type(built) is _Model and built.w == sds


def scalar(x: jax.Array, cfg: Config) -> jax.Array:
    return jnp.sum(jnp.sin(x) * cfg["scale"]) * cfg["depth"]


def jax_scalar(x: jax.Array) -> jax.Array:
    return scalar(x, CFG)


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (treespec.jit(treespec.grad(scalar)), jax.jit(jax.grad(jax_scalar))),
        (treespec.jit(treespec.vmap(step)), jax.jit(jax.vmap(lambda x: step(x, CFG)))),
        (treespec.vmap(treespec.jit(step)), jax.vmap(jax.jit(lambda x: step(x, CFG)))),
        (
            treespec.grad(lambda x, cfg: jnp.sum(treespec.vmap(step)(x, cfg))),
            jax.grad(lambda x: jnp.sum(jax.vmap(lambda r: step(r, CFG))(x))),
        ),
        (
            treespec.jit(treespec.vmap(treespec.grad(scalar))),
            jax.jit(jax.vmap(jax.grad(jax_scalar))),
        ),
        (
            treespec.grad(lambda x, cfg: jnp.sum(treespec.grad(scalar)(x, cfg))),
            jax.grad(lambda x: jnp.sum(jax.grad(jax_scalar)(x))),
        ),
    ],
    ids=["jit-grad", "jit-vmap", "vmap-jit", "grad-vmap", "jit-vmap-grad", "grad-grad"],
)
def test_compositions_match_jax(ours: Any, theirs: Any) -> None:
    _close(ours(X, CFG), theirs(X))


@pytest.mark.parametrize(
    "transform",
    [
        treespec.grad,
        treespec.vmap,
        treespec.checkpoint,
        treespec.jit,
        partial(treespec.value_and_grad),
    ],
)
def test_plain_jax_jit_around_each_transform(transform: Any) -> None:
    ours = transform(scalar if transform is not treespec.vmap else step)
    # The numbers of the JAX original on the same function, never ours again.
    base = {
        treespec.grad: jax.grad(jax_scalar),
        treespec.vmap: lambda x: jax.vmap(lambda r: step(r, CFG))(x),
        treespec.checkpoint: jax.checkpoint(jax_scalar),
        treespec.jit: jax_scalar,
    }.get(transform, jax.value_and_grad(jax_scalar))
    got = jax.jit(lambda x: ours(x, CFG))(X)
    _close(got, base(X))
    _close(ours(X, CFG), base(X))


# -- an array at a static leaf, and sharding entries there ----------------------


def _depth(x: jax.Array, cfg: dict[str, Static[int]]) -> jax.Array:
    return jnp.sum(x) * cfg["depth"]


def _held_object(x: jax.Array, cfg: dict[str, Static[object]]) -> jax.Array:
    return jnp.sum(x)


def _one_device_mesh() -> Mesh:
    return Mesh(np.array(jax.devices()[:1]), ("d",))


_EVERY_TRANSFORM: dict[str, Any] = {
    "jit": treespec.jit,
    "vmap": treespec.vmap,
    "grad": treespec.grad,
    "checkpoint": treespec.checkpoint,
    "eval_shape": lambda f: partial(treespec.eval_shape, f),
    "pmap": treespec.pmap,
    "shard_map": lambda f: treespec.shard_map(
        f, _one_device_mesh(), in_specs=P("d"), out_specs=P(), check_vma=False
    ),
}


@pytest.mark.parametrize("name", sorted(_EVERY_TRANSFORM))
@pytest.mark.parametrize("fun", [_depth, _held_object], ids=["int", "object"])
def test_an_array_at_a_static_leaf_is_named_under_every_transform(
    name: str, fun: Any
) -> None:
    # pmap and shard_map hash the static key before anything traces; vmap,
    # grad and checkpoint never hash it, so `Static[object]` let an array
    # through there while jit refused it. Every transform names the leaf.
    transformed = _EVERY_TRANSFORM[name](fun)
    with pytest.raises(ValidationError, match=r"argument cfg, at cfg\['depth'\]"):
        transformed(jnp.ones((1, 3)), {"depth": jnp.int32(2)})


def test_a_replicated_in_spec_at_a_static_leaf_is_refused() -> None:
    # `P()` is an empty tuple: it was taken for "nothing given" and ignored.
    mapped = treespec.shard_map(
        _depth,
        _one_device_mesh(),
        in_specs=(P("d"), {"depth": P()}),
        out_specs=P(),
        check_vma=False,
    )
    with pytest.raises(SpecError, match=r"in_specs\[1\]\['depth'\] shards"):
        mapped(jnp.ones(2), {"depth": 2})
    # None there, or one spec for the whole argument, is fine.
    for specs in [(P("d"), {"depth": None}), (P("d"), P()), P("d")]:
        mapped = treespec.shard_map(
            _depth, _one_device_mesh(), in_specs=specs, out_specs=P(), check_vma=False
        )
        assert float(mapped(jnp.ones(2), {"depth": 2})) == 4.0


def test_a_replicated_in_sharding_at_a_static_leaf_is_refused() -> None:
    replicated = jax.sharding.NamedSharding(_one_device_mesh(), P())
    jitted = treespec.jit(_depth, in_shardings=(replicated, {"depth": replicated}))
    with pytest.raises(SpecError, match=r"in_shardings.*depth.*static"):
        jitted(jnp.ones(2), {"depth": 2})


# -- trace_count and explain_recompiles of pmap and shard_map --------------------


def test_pmap_counts_its_traces_and_explains_a_retrace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    parallel = treespec.pmap(_depth, explain_recompiles=True)
    x = jnp.ones((1, 3))
    with caplog.at_level("WARNING", logger="treespec"):
        parallel(x, {"depth": 2})
        parallel(x * 2, {"depth": 2})
        assert parallel.trace_count == 1
        parallel(x, {"depth": 3})
    assert parallel.trace_count == 2
    (message,) = [r.getMessage() for r in caplog.records if r.name == "treespec"]
    assert "treespec.pmap: retracing _depth (trace #2)" in message, message
    assert "cfg['depth']: 2 (int) -> 3 (int)" in message, message


def test_pmap_explains_against_the_nearest_trace_that_completed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # As jit's: a trace that raised is neither counted nor compared with, and
    # a retrace is explained against the compiled key nearest to it.
    def body(x: jax.Array, cfg: dict[str, Static[int]]) -> jax.Array:
        if cfg["depth"] == 3:
            raise ValueError("depth 3 is not supported")
        return jnp.sum(x) * cfg["depth"]

    parallel = treespec.pmap(body, explain_recompiles=True)
    with caplog.at_level("WARNING", logger="treespec"):
        parallel(jnp.ones((1, 8)), {"depth": 2})
        with pytest.raises(ValueError, match="depth 3"):
            parallel(jnp.ones((1, 8)), {"depth": 3})
        assert parallel.trace_count == 1
        parallel(jnp.ones((1, 16)), {"depth": 2})
        parallel(jnp.ones((1, 8)), {"depth": 4})  # float32[8] compiled already
    assert parallel.trace_count == 3
    *_, last = [r.getMessage() for r in caplog.records if r.name == "treespec"]
    assert "cfg['depth']: 2 (int) -> 4 (int)" in last, last
    assert "float32[16]" not in last and "3 (int)" not in last, last


def test_shard_map_counts_its_traces_eager_and_under_jit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sharded = treespec.shard_map(
        _depth,
        _one_device_mesh(),
        in_specs=P("d"),
        out_specs=P(),
        check_vma=False,
        explain_recompiles=True,
    )
    with caplog.at_level("WARNING", logger="treespec"):
        sharded(jnp.ones(2), {"depth": 2})
        sharded(jnp.ones(2), {"depth": 2})
    # An eager call traces each time it runs, as jax.shard_map's: said so.
    assert sharded.trace_count == 2
    (message,) = [r.getMessage() for r in caplog.records if r.name == "treespec"]
    assert "no leaf changed" in message and "treespec.jit" in message, message
    compiled = treespec.jit(sharded)
    compiled(jnp.ones(2), {"depth": 2})
    compiled(jnp.ones(2), {"depth": 2})
    assert sharded.trace_count == 3


# A function another transform made (JAX's, Equinox's, functools.partial)
# shows the annotations of the function it wraps (`functools.wraps`): its
# return annotation is not a promise about what the wrapper returns (a
# gradient, a Jacobian, a `(value, grad)` pair), and a mapped function's
# argument annotations describe one slice. A treespec transform over it checks
# only what the function it receives promises (issue 41, 0).


def _loss(p: dict[str, jax.Array], x: Float[Array, "n"]) -> Float[Array, ""]:
    return jnp.sum(jnp.tanh(p["w"] * x) ** 2)


def _row(x: Float[Array, "n"]) -> Float[Array, ""]:
    return jnp.sum(x**2)


_P_W = {"w": jnp.linspace(0.5, 1.5, 3)}
_X3 = jnp.linspace(-1.0, 1.0, 3)
_XS = jnp.linspace(-1.0, 1.0, 12).reshape(4, 3)

_OF_LOSS = {
    "jax.grad": jax.grad(_loss),
    "jax.value_and_grad": jax.value_and_grad(_loss),
    "jax.jacfwd": jax.jacfwd(_loss),
    "jax.jacrev": jax.jacrev(_loss),
    "jax.hessian": jax.hessian(_loss, argnums=1),
    "jax.checkpoint": jax.checkpoint(_loss),
    "eqx.filter_grad": eqx.filter_grad(_loss),
    "eqx.filter_value_and_grad": eqx.filter_value_and_grad(_loss),
    "functools.partial of jax.grad": partial(jax.grad(_loss), _P_W),
}


def _args(name: str, x: jax.Array) -> tuple[Any, ...]:
    return (x,) if name.startswith("functools.partial") else (_P_W, x)


@pytest.mark.parametrize("name", sorted(_OF_LOSS))
@pytest.mark.parametrize("outer", ["jit", "checkpoint"])
def test_a_transform_over_a_jax_made_function_checks_only_its_own_promise(
    name: str, outer: str
) -> None:
    made = _OF_LOSS[name]
    ours = getattr(treespec, outer)(made)(*_args(name, _X3))
    theirs = made(*_args(name, _X3))  # (jax.jit cannot hash Equinox's wrappers)
    jax.tree.map(partial(np.testing.assert_allclose, rtol=1e-6), ours, theirs)


@pytest.mark.parametrize("name", sorted(_OF_LOSS))
def test_vmap_over_a_jax_made_function_gives_per_example_results(name: str) -> None:
    # Per-example gradients, as DP-SGD writes them.
    made = _OF_LOSS[name]
    axes = (0,) if name.startswith("functools.partial") else (None, 0)
    ours = treespec.vmap(made, in_axes=axes)(*_args(name, _XS))
    theirs = jax.vmap(made, in_axes=axes)(*_args(name, _XS))
    jax.tree.map(partial(np.testing.assert_allclose, rtol=1e-6), ours, theirs)


def _cube(t: Float[Array, ""]) -> Float[Array, ""]:
    return t**3


_UNDER_GRAD = {
    "jax.checkpoint": (jax.checkpoint(_row), _X3, False),
    "functools.partial": (partial(_row), _X3, False),
    "jax.grad": (jax.grad(_cube), jnp.float32(0.5), False),  # a second derivative
    # (value, grad) differentiated as value with aux: a pair where `_cube`
    # promises a scalar.
    "jax.value_and_grad": (jax.value_and_grad(_cube), jnp.float32(0.5), True),
}


@pytest.mark.parametrize("name", sorted(_UNDER_GRAD))
def test_grad_over_a_jax_made_function(name: str) -> None:
    made, x, aux = _UNDER_GRAD[name]
    ours = treespec.grad(made, has_aux=aux)(x)
    theirs = jax.grad(made, has_aux=aux)(x)
    jax.tree.map(partial(np.testing.assert_allclose, rtol=1e-6), ours, theirs)


@pytest.mark.parametrize(
    "mapped",
    [jax.vmap(_row), eqx.filter_vmap(_row)],
    ids=["jax.vmap", "eqx.filter_vmap"],
)
@pytest.mark.parametrize("outer", ["jit", "checkpoint"])
def test_a_mapped_functions_slice_annotations_do_not_describe_its_batch(
    mapped: Any, outer: str
) -> None:
    ours = getattr(treespec, outer)(mapped)(_XS)
    np.testing.assert_allclose(ours, jax.vmap(_row)(_XS))


def test_the_wrapped_functions_argument_annotations_still_hold() -> None:
    # jax.grad keeps the signature: its arguments are still `_loss`'s.
    with pytest.raises(ValidationError, match="argument x"):
        treespec.jit(jax.grad(_loss))(_P_W, jnp.ones((2, 3)))
    assert treespec.jit(partial(_loss, _P_W))(_X3).shape == ()
    with pytest.raises(ValidationError, match="the return value"):
        treespec.jit(_bad_return)(_X3)  # the function's own promise: checked

    def logged(fn: Any) -> Any:  # a decorator of the user's keeps the promise
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        return inner

    with pytest.raises(ValidationError, match="the return value"):
        treespec.jit(logged(_bad_return))(_X3)


def _bad_return(x: Float[Array, "n"]) -> Float[Array, ""]:
    return x


# JAX sees the user's function: its name in the compile log, the lowered
# module and the profiler, its file and line and its parameters' names (with
# key paths) in JAX's own errors, under every transform (issue 41, 5).


def _train_step(
    x: jax.Array, cfg: Dynamic[dict[str, float]], n: Static[int]
) -> jax.Array:
    return x * cfg["scale"] * n


def test_the_compile_log_names_the_users_function(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging

    f = treespec.jit(_train_step)
    with caplog.at_level(logging.WARNING), jax.log_compiles(True):
        f(jnp.ones(2), {"scale": 2.0}, 3)
    compiled = [r.getMessage() for r in caplog.records if "Compiling" in r.getMessage()]
    assert any("jit(_train_step)" in m for m in compiled), compiled
    assert not any("traced" in m for m in compiled), compiled


def _branchy(x: jax.Array, cfg: Dynamic[dict[str, float]], n: Static[int]) -> Any:
    if cfg["scale"] > 0:  # a traced value used as a Python bool
        return x * n
    return -x


_BRANCHY_LINE = _branchy.__code__.co_firstlineno


@pytest.mark.parametrize("name", ["jit", "checkpoint", "vmap"])
def test_jaxs_tracer_errors_name_the_users_function_and_arguments(name: str) -> None:
    transform = getattr(treespec, name)
    x = jnp.ones((2, 2)) if name == "vmap" else jnp.ones(2)
    scale = jnp.ones(2) if name == "vmap" else 2.0
    with pytest.raises(jax.errors.TracerBoolConversionError) as info:
        transform(_branchy)(x, {"scale": scale}, 3)
    message = str(info.value)
    if name == "vmap":  # JAX's vmap names the line the tracer came from
        assert f"{__file__}:{_BRANCHY_LINE + 1}" in message, message
        assert "(_branchy)" in message, message
        # No frame of treespec's own package (the checkout may be named
        # treespec too: this file's path is in the message).
        assert os.path.dirname(treespec.__file__) + os.sep not in message, message
        return
    assert f"_branchy at {__file__}:{_BRANCHY_LINE}" in message, message
    assert "argument cfg['scale']" in message, message
    assert "args[" not in message and "leaves" not in message


def test_vmaps_inconsistent_sizes_name_the_users_arguments() -> None:
    def g(x: jax.Array, w: jax.Array) -> jax.Array:
        return x * w

    with pytest.raises(ValueError, match="inconsistent sizes") as info:
        treespec.vmap(g)(jnp.ones((3, 2)), jnp.ones((4, 2)))
    message = str(info.value)
    assert "argument x" in message and "argument w" in message, message
    assert "args[" not in message and "leaves" not in message


class _VCfg(TypedDict):
    n: Static[int]
    scale: Dynamic[float]


def _per_row(x: Float[Array, "n"], cfg: _VCfg) -> Float[Array, "n"]:
    return x * cfg["n"] * cfg["scale"]


@pytest.mark.parametrize(
    "cfg",
    [{"n": 2}, {"n": 2, "scale": 1.0, "extra": 1}, {"n": [2], "scale": 1.0}],
    ids=["missing key", "extra key", "a list at Static[int]"],
)
def test_a_vmap_message_names_only_the_arguments_that_are_wrong(cfg: Any) -> None:
    # x is correctly batched: a row is Float[Array, "n"]; only cfg is wrong.
    with pytest.raises((ValidationError, SpecError)) as info:
        treespec.vmap(_per_row, in_axes=(0, None))(jnp.ones((4, 3)), cfg)
    message = str(info.value)
    assert "cfg" in message
    assert "argument x" not in message, message


# -- a ValidationError reaches the user under treespec's call only ---------------


class _Keys(TypedDict):
    depth: Static[int]
    scale: float


def _keyed(x: Float[Array, "... 3"], cfg: _Keys) -> jax.Array:
    return jnp.sum(x) * cfg["depth"] * cfg["scale"]


_STAGES: dict[str, Any] = {
    "jit.lower": lambda f: treespec.jit(f).lower,
    "jit.trace": lambda f: treespec.jit(f).trace,
    "jit.eval_shape": lambda f: treespec.jit(f).eval_shape,
    "value_and_grad": treespec.value_and_grad,
    "checked": treespec.checked,
}


def _treespecs_frames(error: BaseException) -> int:
    """How many frames of treespec's own package the printed traceback shows."""
    folder = os.path.dirname(treespec.__file__) + os.sep
    text = "".join(traceback.format_exception(error))
    return text.count(f'File "{folder}')


@pytest.mark.parametrize("name", sorted({**_EVERY_TRANSFORM, **_STAGES}))
def test_a_wrong_structure_is_shown_under_no_more_frames_than_a_wrong_shape(
    name: str,
) -> None:
    # A missing, misspelt or wrong-container TypedDict key is found before
    # JAX traces (the plan of the structure); a wrong shape while it traces.
    # Both are raised from the transform's call, under its one frame.
    transformed = {**_EVERY_TRANSFORM, **_STAGES}[name](_keyed)
    x = jnp.ones((1, 3))
    with pytest.raises(ValidationError, match=r"argument x") as shape:
        transformed(jnp.ones((1, 4)), {"depth": 2, "scale": 1.0})
    assert _treespecs_frames(shape.value) <= 1
    for cfg in [{"depth": 2}, {"depth": 2, "scal": 1.0}, [2, 1.0]]:
        with pytest.raises(ValidationError, match=r"argument cfg") as structure:
            transformed(x, cfg)
        assert _treespecs_frames(structure.value) <= _treespecs_frames(shape.value)


@pytest.mark.parametrize("name", sorted({**_EVERY_TRANSFORM, **_STAGES}))
def test_a_refusal_inside_the_users_except_block_reads_as_under_jit(
    name: str,
) -> None:
    # Called while the user handles an exception of their own: the refusal
    # is printed alone (the user's exception not shown as its context), under
    # the transform's one frame, for a wrong structure as for a wrong shape.
    transformed = {**_EVERY_TRANSFORM, **_STAGES}[name](_keyed)
    for args in [
        (jnp.ones((1, 4)), {"depth": 2, "scale": 1.0}),
        (jnp.ones((1, 3)), {"depth": 2}),
    ]:
        try:
            try:
                raise KeyError("the user's own")
            except KeyError:
                transformed(*args)
        except ValidationError as error:
            printed = "".join(traceback.format_exception(error))
            assert "the user's own" not in printed, (name, printed)
            assert error.__suppress_context__, name
            assert _treespecs_frames(error) <= 1, (name, printed)
        else:
            raise AssertionError(f"{name}: {args} was not refused")


class _Full(TypedDict):
    w: Float[Array, " n"]
    scale: float


def test_a_structure_mismatch_is_named_alone() -> None:
    # A missing key, a None where the annotation says None only: one
    # problem each, not a second about the same leaf.
    def f(cfg: _Full, x: Float[Array, " n"], flag: None) -> jax.Array:
        return cfg["w"] * x

    with pytest.raises(ValidationError) as info:
        treespec.jit(f)({"w": jnp.ones(3)}, jnp.ones(3), "on")
    locs = [issue.loc for issue in info.value.issues]
    assert locs == ["argument cfg, at cfg['scale']", "argument flag, at flag"], locs
    assert "expected None, got str 'on'" in str(info.value)


def test_the_stages_of_a_function_closing_over_an_outer_trace_run() -> None:
    # Inside an outer jax.jit, a treespec function closing over its tracer:
    # its program has arguments of its own, which JAX's call binds.
    def outer(y: jax.Array) -> jax.Array:
        @treespec.jit
        def scaled(x: jax.Array) -> jax.Array:
            return x * y

        shape = scaled.eval_shape(jnp.ones(2))
        return scaled(jnp.ones(2)) * shape.shape[0]

    np.testing.assert_allclose(jax.jit(outer)(jnp.float32(3.0)), [6.0, 6.0])

    def traced(y: jax.Array) -> jax.Array:
        @treespec.jit
        def scaled(x: jax.Array) -> jax.Array:
            return x * y

        return scaled.trace(jnp.ones(2)).jaxpr.out_avals[0].shape[0] + y

    assert float(jax.jit(traced)(jnp.float32(1.0))) == 3.0
