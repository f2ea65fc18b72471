"""treespec.jit: every behaviour is checked by counting traces."""

from __future__ import annotations

import dataclasses
import logging
import re
from functools import partial
from typing import Any, NamedTuple, TypedDict

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from jaxtyping import Array, Float

import treespec
from treespec import Donate, Dynamic, Static, ValidationError

from .conftest import child_env


class Config(TypedDict):
    n_layers: Static[int]
    activation: Static[str]
    scale: Dynamic[float]


def test_request_example(counter: dict[str, int]) -> None:
    @partial(treespec.jit, static_flags=[dict(x=True, y=False)])
    def fun(dic):
        counter["n"] += 1
        return dic["x"] + dic["y"]

    assert float(fun({"x": 1, "y": jnp.float32(2)})) == 3.0
    assert float(fun({"x": 1, "y": jnp.float32(5)})) == 6.0
    assert counter["n"] == 1
    assert float(fun({"x": 2, "y": jnp.float32(5)})) == 7.0
    assert counter["n"] == 2


def test_decorator_forms_keep_metadata(counter: dict[str, int]) -> None:
    def f(x: jax.Array, n: Static[int] = 2) -> jax.Array:
        """Doc."""
        counter["n"] += 1
        return x * n

    for jitted in (
        treespec.jit(f),
        treespec.jit()(f),
        partial(treespec.jit, default="infer")(f),
    ):
        assert jitted.__name__ == "f" and jitted.__doc__ == "Doc."
        assert jitted.__wrapped__ is f
        np.testing.assert_allclose(jitted(jnp.ones(2)), 2.0)


def test_typeddict_config(counter: dict[str, int]) -> None:
    @treespec.jit
    def f(x: jax.Array, cfg: Config) -> jax.Array:
        counter["n"] += 1
        y = x * cfg["scale"]
        for _ in range(cfg["n_layers"]):
            y = jnp.tanh(y) if cfg["activation"] == "tanh" else jax.nn.relu(y)
        return y

    x = jnp.ones(3)
    f(x, {"n_layers": 2, "activation": "tanh", "scale": 0.5})
    f(x, {"n_layers": 2, "activation": "tanh", "scale": 0.7})  # traced leaf: no retrace
    assert counter["n"] == 1
    f(x, {"n_layers": 3, "activation": "tanh", "scale": 0.5})
    f(x, {"n_layers": 3, "activation": "relu", "scale": 0.5})
    assert counter["n"] == 3
    np.testing.assert_allclose(  # against JAX's on the same device
        f(x, {"n_layers": 1, "activation": "tanh", "scale": 0.5}),
        jnp.tanh(x * 0.5),
        rtol=1e-6,
    )


@treespec.dataclass
class TsLayer:
    w: jax.Array
    act: Static[str]


@dataclasses.dataclass(frozen=True)
class RegLayer:
    w: Any
    act: Static[str]


jax.tree_util.register_dataclass(RegLayer, data_fields=["w", "act"], meta_fields=[])


class EqxLayer(eqx.Module):
    w: jax.Array
    act: Static[str]


@struct.dataclass
class FlaxLayer:
    w: jax.Array
    act: Static[str]


class NTLayer(NamedTuple):
    w: Dynamic[jax.Array]
    act: Static[str]


@pytest.mark.parametrize("cls", [TsLayer, RegLayer, EqxLayer, FlaxLayer, NTLayer])
def test_dataclass_kinds(cls: Any, counter: dict[str, int]) -> None:
    @treespec.jit
    def f(layer: cls) -> jax.Array:  # type: ignore[valid-type]
        counter["n"] += 1
        return jnp.tanh(layer.w) if layer.act == "tanh" else layer.w

    f(cls(jnp.ones(2), "tanh"))
    f(cls(jnp.zeros(2), "tanh"))
    assert counter["n"] == 1
    np.testing.assert_allclose(f(cls(jnp.ones(2), "id")), 1.0)
    assert counter["n"] == 2


def test_nested_mix_kwargs_defaults_varargs(counter: dict[str, int]) -> None:
    @treespec.jit
    def f(
        x: jax.Array,
        *extra: Static[int],
        layers: list[NTLayer],
        scale: Dynamic[float] = 1.0,
        **opts: Static[str],
    ) -> jax.Array:
        counter["n"] += 1
        for layer in layers:
            x = x * layer.w
        return x * scale * sum(extra) * len(opts)

    layers = [NTLayer(jnp.ones(2), "a"), NTLayer(2 * jnp.ones(2), "b")]
    out = f(jnp.ones(2), 1, 2, layers=layers, scale=2.0, mode="m")
    np.testing.assert_allclose(out, 2 * 2 * 3 * 1)
    f(jnp.ones(2), 1, 2, layers=layers, scale=3.0, mode="m")
    assert counter["n"] == 1
    f(jnp.ones(2), 1, 3, layers=layers, scale=3.0, mode="m")
    f(jnp.ones(2), 1, 3, layers=layers, scale=3.0, mode="other")
    assert counter["n"] == 3


def test_method_decorator_self_static_fields(counter: dict[str, int]) -> None:
    class Model(eqx.Module):
        w: jax.Array
        depth: Static[int]

        @treespec.jit
        def apply(self, x: jax.Array) -> jax.Array:
            counter["n"] += 1
            for _ in range(self.depth):
                x = x * self.w
            return x

    np.testing.assert_allclose(Model(2 * jnp.ones(2), 3).apply(jnp.ones(2)), 8.0)
    Model(3 * jnp.ones(2), 3).apply(jnp.ones(2))
    assert counter["n"] == 1
    np.testing.assert_allclose(Model(2 * jnp.ones(2), 2).apply(jnp.ones(2)), 4.0)
    assert counter["n"] == 2


def test_plain_class_method(counter: dict[str, int]) -> None:
    class Scaler:
        def __init__(self, k: int) -> None:
            self.k = k

        @treespec.jit
        def __call__(self, x: jax.Array) -> jax.Array:
            counter["n"] += 1
            return x * self.k

    s = Scaler(3)
    np.testing.assert_allclose(s(jnp.ones(2)), 3.0)
    s(jnp.ones(2))
    assert counter["n"] == 1


def test_a_jitted_method_of_a_module_stays_an_equinox_pytree_bound_method() -> None:
    # equinox turns a bound method (types.MethodType) of a Module into its
    # BoundMethod, a pytree of the instance: transforms see the Module's
    # leaves, and the bound method's spec has no `self`.
    class Model(eqx.Module):
        w: jax.Array

        @treespec.jit
        def loss(self, x: jax.Array, k: Static[int]) -> jax.Array:
            return jnp.sum(self.w * x) * k

    m = Model(2 * jnp.ones(2))
    leaves = jax.tree_util.tree_leaves(m.loss)
    assert len(leaves) == 1 and leaves[0] is m.w
    assert [p.name for p in treespec.spec_of(m.loss).params] == ["x", "k"]
    np.testing.assert_allclose(treespec.grad(m.loss)(jnp.ones(2), 3), 6.0)
    np.testing.assert_allclose(jax.grad(m.loss)(jnp.ones(2), 3), 6.0)


def test_one_trace_per_key_static_types_are_distinct(counter: dict[str, int]) -> None:
    @treespec.jit
    def f(x: jax.Array, k: Static[Any]) -> Any:
        counter["n"] += 1
        return x, type(k).__name__

    x = jnp.ones(2)
    names = [f(x, k)[1] for k in (1, 1.0, True, 1, 1.0, True)]
    assert names == ["int", "float", "bool"] * 2
    assert counter["n"] == 3


def test_inferred_kind_follows_each_calls_leaf_type(counter: dict[str, int]) -> None:
    def f(x, s):  # no annotations: "infer" traces arrays, keeps the rest static
        counter["n"] += 1
        return x * s, isinstance(s, jax.core.Tracer)

    jitted = treespec.jit(f)
    calls = [2.0, jnp.float32(3.0), np.float32(4.0), 2.0, jnp.float32(5.0), 2]
    for s in calls:
        out, traced = jitted(jnp.ones(1), s)
        np.testing.assert_allclose(out, float(s))
        assert traced == (type(s) is not float and type(s) is not int)
    # Static 2.0, a traced float32[] (the JAX and the NumPy scalar alike), static 2.
    assert counter["n"] == 3
    (plan,) = jitted._splitter.positional._plans.values()
    assert len(plan._splits) == 2  # static s or traced s: one Split per answer


def test_dynamic_shapes_and_dtypes_key_the_cache(counter: dict[str, int]) -> None:
    @treespec.jit
    def f(x: jax.Array) -> jax.Array:
        counter["n"] += 1
        return x

    f(jnp.ones(2))
    f(jnp.zeros(2))
    f(jnp.ones(3))
    f(jnp.ones(3, jnp.int32))
    f(jnp.ones(3, jnp.int32))
    assert counter["n"] == 3


def test_equal_new_config_hits_cache(counter: dict[str, int]) -> None:
    @treespec.jit
    def f(cfg: Static[dict[str, Any]], x: jax.Array) -> jax.Array:
        counter["n"] += 1
        return x * cfg["k"]

    for _ in range(3):
        f({"k": 2, "name": "a", "sizes": (1, 2)}, jnp.ones(1))
    assert counter["n"] == 1


def test_mutated_static_list_is_seen(counter: dict[str, int]) -> None:
    @treespec.jit
    def f(sizes: Static[list[int]], x: jax.Array) -> jax.Array:
        counter["n"] += 1
        return x * sum(sizes)

    sizes = [1, 2]
    np.testing.assert_allclose(f(sizes, jnp.ones(1)), 3.0)
    sizes.append(3)
    np.testing.assert_allclose(f(sizes, jnp.ones(1)), 6.0)
    sizes[0] = 10
    np.testing.assert_allclose(f(sizes, jnp.ones(1)), 15.0)
    assert counter["n"] == 3


def test_non_array_outputs_come_back_as_python_objects() -> None:
    @treespec.jit
    def f(x: jax.Array, name: Static[str]) -> Any:
        return {"y": x * 2, "name": name, "n": 3, "none": None, "nested": [("a", x)]}

    out = f(jnp.ones(2), "hello")
    assert out["name"] == "hello" and out["n"] == 3 and type(out["n"]) is int
    assert out["none"] is None
    assert out["nested"][0][0] == "a"
    assert isinstance(out["nested"][0][1], jax.Array)
    np.testing.assert_allclose(out["y"], 2.0)


def test_donate_leaves_are_donated_others_not() -> None:
    @treespec.jit
    def f(buf: Donate[jax.Array], keep: jax.Array) -> jax.Array:
        return buf + keep

    buf, keep = jnp.ones(4), jnp.ones(4)
    out = f(buf, keep)
    np.testing.assert_allclose(out, 2.0)
    assert buf.is_deleted()
    assert not keep.is_deleted()

    # Two outputs shaped like both inputs: JAX could reuse either buffer, so a
    # donation of `keep` would not be skipped as unusable.
    @treespec.jit
    def g(buf: Donate[jax.Array], keep: jax.Array) -> Any:
        return buf + keep, buf * keep

    buf, keep = jnp.full(4, 3.0), jnp.full(4, 2.0)
    total, product = g(buf, keep)
    np.testing.assert_allclose(total, 5.0)
    np.testing.assert_allclose(product, 6.0)
    assert buf.is_deleted()
    assert not keep.is_deleted()
    np.testing.assert_allclose(keep, 2.0)  # still readable


def test_donate_leaf_of_a_mixed_argument_spares_its_siblings() -> None:
    class State(TypedDict):
        opt: Donate[jax.Array]
        keep: jax.Array
        step: Static[int]

    @treespec.jit
    def f(state: State, x: jax.Array) -> Any:
        return state["opt"] + x, state["keep"] * state["step"], x * 2

    state = {"opt": jnp.ones(3), "keep": jnp.full(3, 2.0), "step": 3}
    x = jnp.full(3, 4.0)
    a, b, c = f(state, x)
    np.testing.assert_allclose(a, 5.0)
    np.testing.assert_allclose(b, 6.0)
    np.testing.assert_allclose(c, 8.0)
    assert state["opt"].is_deleted()
    assert not state["keep"].is_deleted() and not x.is_deleted()
    np.testing.assert_allclose(state["keep"], 2.0)
    np.testing.assert_allclose(x, 4.0)


def test_donate_inside_a_typeddict() -> None:
    class State(TypedDict):
        opt: Donate[jax.Array]
        step: Static[int]

    @treespec.jit
    def f(state: State) -> jax.Array:
        return state["opt"] * state["step"]

    opt = jnp.ones(3)
    f({"opt": opt, "step": 2})
    assert opt.is_deleted()


def test_lower_compile_spec_clear_cache(counter: dict[str, int]) -> None:
    @treespec.jit
    def f(x: jax.Array, n: Static[int]) -> Any:
        counter["n"] += 1
        return x * n, "tag"

    lowered = f.lower(jnp.ones(2), 3)
    # Only the traced leaf is a parameter; the static 3 is baked into the program.
    assert _main_params(lowered.as_text()) == ["tensor<2xf32>"]
    assert "3.000000e+00" in lowered.as_text()
    compiled = lowered.compile()
    out, tag = compiled(jnp.ones(2), 3)
    np.testing.assert_allclose(out, 3.0)
    assert tag == "tag"
    assert f.spec is treespec.spec_of(f)
    assert "n: Static[int]" in repr(f.spec)
    assert repr(f.spec) == f"Spec({f.spec.name}(x: Array, n: Static[int]) -> Any)"
    assert f.spec.name.endswith(".f")
    assert [p.name for p in f.spec.params] == ["x", "n"]
    assert f.spec.param("n").node.text == "Static[int]"  # type: ignore[union-attr]
    assert f.spec.param("x").node.marker is None  # type: ignore[union-attr]
    f(jnp.ones(2), 3)
    before = counter["n"]
    f.clear_cache()
    f(jnp.ones(2), 3)
    assert counter["n"] == before + 1


def test_jax_kwargs_pass_through() -> None:
    device = jax.devices()[0]

    @partial(treespec.jit, device=device, keep_unused=True)
    def f(x: jax.Array, unused: jax.Array, n: Static[int]) -> jax.Array:
        return x * n

    # `device`/`backend` are deprecated by JAX itself; treespec passes them on.
    with pytest.warns(DeprecationWarning, match="backend and device"):
        out = f(jnp.ones(2), jnp.ones(2), 2)
    assert out.devices() == {device}
    # keep_unused=True: the unused argument stays a parameter of the program.
    with pytest.warns(DeprecationWarning, match="backend and device"):
        lowered = f.lower(jnp.ones(2), jnp.ones(2), 2).as_text()
    assert _main_params(lowered) == ["tensor<2xf32>", "tensor<2xf32>"]

    g = treespec.jit(lambda x: x + 1, backend="cpu", compiler_options={})
    with pytest.warns(DeprecationWarning, match="backend and device"):
        np.testing.assert_allclose(g(jnp.ones(1)), 2.0)


def _main_params(text: str) -> list[str]:
    """The parameter types of the lowered module's public `@main`."""
    match = re.search(r"func\.func public @main\((.*?)\)\s*->", text, flags=re.S)
    assert match, text
    return re.findall(r"%arg\d+: (tensor<[^>]*>)", match.group(1))


@pytest.mark.parametrize("whole", [False, True], ids=["planned", "static-layout"])
def test_keep_unused_reaches_jax(whole: bool) -> None:
    # An unused argument of a distinct shape: kept as a parameter of the lowered
    # program only with keep_unused=True, as with jax.jit.
    def body(x: Any, unused: Any, n: int) -> jax.Array:
        return x * n

    if whole:

        def f(x: Dynamic[jax.Array], unused: Dynamic[jax.Array], n: Static[int]):
            return body(x, unused, n)
    else:

        def f(x: jax.Array, unused: jax.Array, n: Static[int]):
            return body(x, unused, n)

    args = (jnp.ones(2), jnp.ones(3), 2)
    kept = treespec.jit(f, keep_unused=True).lower(*args).as_text()
    dropped = treespec.jit(f, keep_unused=False).lower(*args).as_text()
    default = treespec.jit(f).lower(*args).as_text()
    assert _main_params(kept) == ["tensor<2xf32>", "tensor<3xf32>"]
    assert _main_params(dropped) == ["tensor<2xf32>"]
    assert _main_params(default) == ["tensor<2xf32>"]
    plain = jax.jit(body, static_argnums=2, keep_unused=True).lower(*args)
    assert _main_params(plain.as_text()) == _main_params(kept)


def test_in_and_out_shardings_over_the_dynamic_view() -> None:
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("d",))
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())

    @partial(treespec.jit, in_shardings=(replicated, None), out_shardings=replicated)
    def f(params: dict[str, Any], x: jax.Array) -> jax.Array:
        return params["w"] * x * params["n"]

    out = f({"w": jnp.ones(2), "n": 3}, jnp.ones(2))
    np.testing.assert_allclose(out, 3.0)
    assert out.sharding == replicated


def test_explain_recompiles_logs_what_changed(caplog: pytest.LogCaptureFixture) -> None:
    @partial(treespec.jit, explain_recompiles=True)
    def f(x: jax.Array, cfg: Static[dict[str, Any]]) -> jax.Array:
        return x * cfg["scale"]

    cfg = {"n_layers": 3, "activation": "relu", "scale": 1.0}
    with caplog.at_level(logging.WARNING, logger="treespec"):
        f(jnp.ones(3), cfg)
        assert caplog.records == []  # the first trace is not a retrace
        f(jnp.ones(3), {**cfg, "n_layers": 4})
        f(jnp.ones(4), {**cfg, "n_layers": 4})
        f(jnp.ones(4), {"n_layers": 4, "activation": "relu", "scale": 1.0, "extra": 1})
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3
    assert "cfg['n_layers']: 3 (int) -> 4 (int)" in messages[0]
    assert "x: float32[3] -> float32[4]" in messages[1]
    assert "structure changed at cfg" in messages[2]
    assert all(r.name == "treespec" for r in caplog.records)


def test_explain_recompiles_from_the_environment(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TREESPEC_EXPLAIN_RECOMPILES", "1")

    @treespec.jit
    def f(n: Static[int]) -> int:
        return n

    with caplog.at_level(logging.WARNING, logger="treespec"):
        f(1)
        f(2)
    assert any("n: 1 (int) -> 2 (int)" in r.getMessage() for r in caplog.records)


def test_inside_user_transforms_dynamic_leaves_may_be_tracers() -> None:
    @treespec.jit
    def f(x: jax.Array, cfg: Config) -> jax.Array:
        return jnp.sum(x * cfg["scale"]) * cfg["n_layers"]

    cfg = {"n_layers": 2, "activation": "relu", "scale": 0.5}
    g = jax.jit(lambda x, s: f(x, {**cfg, "scale": s}))
    np.testing.assert_allclose(g(jnp.ones(3), 2.0), 12.0)
    np.testing.assert_allclose(jax.vmap(lambda x: f(x, cfg))(jnp.ones((4, 3))), 3.0)
    grad = jax.grad(lambda s: f(jnp.ones(3), {**cfg, "scale": s}))(1.0)
    np.testing.assert_allclose(grad, 6.0)


def test_tracer_at_a_static_leaf_is_a_validation_error() -> None:
    @treespec.jit
    def f(x: jax.Array, cfg: Config) -> jax.Array:
        return x * cfg["n_layers"]

    with pytest.raises(ValidationError) as info:
        jax.jit(
            lambda n: f(jnp.ones(2), {"n_layers": n, "activation": "a", "scale": 1.0})
        )(3)
    msg = str(info.value)
    assert "cfg['n_layers']" in msg
    assert "tracer" in msg and "Dynamic" in msg


def test_unhashable_static_leaf_suggests_dynamic() -> None:
    @treespec.jit
    def f(w: Static[Any]) -> Any:
        return w

    with pytest.raises(ValidationError) as info:
        f(np.ones(3))
    msg = str(info.value)
    assert "argument w, at w" in msg
    assert "hashable" in msg and "float64[3]" in msg and "Dynamic" in msg


def test_string_at_a_dynamic_leaf() -> None:
    @treespec.jit
    def f(cfg: Config) -> Any:
        return cfg["scale"]

    with pytest.raises(ValidationError) as info:
        f({"n_layers": 1, "activation": "relu", "scale": "big"})
    msg = str(info.value)
    assert "argument cfg, at cfg['scale']" in msg
    assert "str 'big'" in msg and "Static" in msg
    assert info.value.__suppress_context__  # no JAX traceback shown first...
    assert info.value.__context__ is not None  # ...but it is kept


def test_structure_mismatch_with_the_annotation() -> None:
    @treespec.jit
    def f(cfg: Config, pair: tuple[jax.Array, jax.Array]) -> Any:
        return pair[0]

    good = {"n_layers": 1, "activation": "relu", "scale": 1.0}
    with pytest.raises(ValidationError) as info:
        f({"n_layers": 1, "scale": 1.0, "extra": 2}, [jnp.ones(1), jnp.ones(1)])
    msg = str(info.value)
    assert "cfg['activation']" in msg and "required key 'activation'" in msg
    assert "cfg['extra']" in msg and "unexpected key 'extra'" in msg
    assert "argument pair, at pair: expected tuple[Array, Array], got list" in msg
    with pytest.raises(ValidationError, match=r"length 2.*tuple of length 3"):
        f(good, (jnp.ones(1),) * 3)


def test_validate_false_skips_structure_checks() -> None:
    @partial(treespec.jit, validate=False)
    def f(cfg: Config) -> Any:
        return cfg["n_layers"]

    assert f({"n_layers": 2, "activation": "a", "scale": 1.0, "extra": 1}) == 2


def test_jaxtyping_annotations_are_fine(counter: dict[str, int]) -> None:
    @treespec.jit
    def f(x: Float[Array, "b n"], k: Static[int]) -> Float[Array, "b n"]:
        counter["n"] += 1
        return x * k

    np.testing.assert_allclose(f(jnp.ones((2, 3)), 2), 2.0)


class Pair(TypedDict):
    a: jax.Array
    b: jax.Array


def test_whole_dynamic_argument_is_checked_while_tracing(
    counter: dict[str, int],
) -> None:
    # A Dynamic[...] argument with no marker below is handed to JAX whole; its
    # structure is checked at trace time instead, with the same message.
    @treespec.jit
    def f(p: Dynamic[Pair], k: Static[int]) -> jax.Array:
        counter["n"] += 1
        return p["a"] * k

    assert f._splitter.positional.whole_idx == (0,)
    np.testing.assert_allclose(f({"a": jnp.ones(2), "b": jnp.ones(2)}, 2), 2.0)
    with pytest.raises(ValidationError, match=r"p\['b'\]: expected required key 'b'"):
        f({"a": jnp.ones(2)}, 2)
    with pytest.raises(ValidationError) as info:
        f({"a": jnp.ones(2), "b": "text"}, 2)
    assert "argument p, at p['b']" in str(info.value) and "str 'text'" in str(
        info.value
    )


def test_whole_arguments_flagged_false_and_donated() -> None:
    @partial(treespec.jit, static_flags=[False, True])
    def f(tree: Any, n: Any) -> Any:
        return jax.tree_util.tree_map(lambda v: v * n, tree)

    assert f._splitter.positional.whole_idx == (0,)
    out = f({"a": jnp.ones(2), "b": [jnp.ones(1)]}, 3)
    np.testing.assert_allclose(out["b"][0], 3.0)

    @treespec.jit
    def g(state: Donate[dict[str, jax.Array]], scale: Static[float]) -> Any:
        return {k: v * scale for k, v in state.items()}

    state = {"a": jnp.ones(2), "b": jnp.ones(3)}
    g(state, 2.0)
    assert state["a"].is_deleted() and state["b"].is_deleted()


def test_keyword_and_positional_calls_agree() -> None:
    @treespec.jit
    def f(p: Dynamic[Pair], k: Static[int]) -> jax.Array:
        return p["a"] * k

    p = {"a": jnp.ones(2), "b": jnp.ones(2)}
    np.testing.assert_allclose(f(p, 2), f(p, k=2))
    np.testing.assert_allclose(f(p=p, k=2), f(p, 2))


def test_resolution_runs_once_per_tree_structure(spy: Any) -> None:
    import treespec._runtime.calling.routes as routes

    builds = spy(routes, "build_plan")

    @treespec.jit
    def f(x: jax.Array, cfg: Static[dict[str, Any]]) -> jax.Array:
        return x

    for k in range(4):  # new static values, same structure: no new plan
        f(jnp.ones(2), {"k": k})
    assert len(builds) == 1
    f(jnp.ones(2), {"k": 1, "extra": 2})  # a new structure: one more plan
    f(jnp.ones(2), {"k": 5, "extra": 6})
    assert len(builds) == 2


def test_a_retrace_storm_of_an_unmarked_scalar_is_named_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    @treespec.jit
    def step(x: jax.Array, lr):  # type: ignore[no-untyped-def]
        return x * lr

    with caplog.at_level(logging.WARNING, logger="treespec"):
        for i in range(12):  # a learning-rate schedule passed as a float
            step(jnp.ones(2), 0.1 / (i + 1))
    assert step.trace_count == 12
    (record,) = [r for r in caplog.records if "unmarked Python float" in r.message]
    msg = record.getMessage()
    assert "argument lr, at lr" in msg and "Dynamic[float]" in msg
    assert "traced 6 times" in msg  # five new values: the threshold, then never again
    # Silenced by the environment variable, and by the logger.
    monkeypatch.setenv("TREESPEC_RETRACE_WARNING", "0")
    caplog.clear()

    @treespec.jit
    def quiet(x: jax.Array, lr):  # type: ignore[no-untyped-def]
        return x * lr

    with caplog.at_level(logging.WARNING, logger="treespec"):
        for i in range(8):
            quiet(jnp.ones(2), float(i))
    assert not caplog.records


def test_marked_or_array_scalars_never_warn(caplog: pytest.LogCaptureFixture) -> None:
    @treespec.jit
    def step(x: jax.Array, n: Static[int], lr: Dynamic[float]):  # type: ignore[no-untyped-def]
        return x * n * lr

    with caplog.at_level(logging.WARNING, logger="treespec"):
        for i in range(8):
            step(jnp.ones(2), i, 0.1 * i)  # n is Static by choice: no warning
    assert step.trace_count == 8 and not caplog.records


def test_explain_names_a_changed_keyword_value(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @partial(treespec.jit, explain_recompiles=True)
    def f(x: jax.Array, *, n: Static[int] = 1, scale: Static[float] = 1.0):  # type: ignore[no-untyped-def]
        return x * n * scale

    with caplog.at_level(logging.WARNING, logger="treespec"):
        f(jnp.ones(1), n=2)
        f(jnp.ones(1), n=3)
        f(jnp.ones(1), n=3, scale=2.0)
    first, second = (r.getMessage() for r in caplog.records)
    assert "n: 2 (int) -> 3 (int)" in first
    assert "scale: 1.0 (float) -> 2.0 (float)" in second
    for msg in (first, second):
        assert "no leaf changed" not in msg and "top level" not in msg


def test_a_call_that_fails_validation_is_no_retrace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @partial(treespec.jit, explain_recompiles=True)
    def f(x: jax.Array, n: Static[int]) -> jax.Array:
        return x * n

    with caplog.at_level(logging.WARNING, logger="treespec"):
        f(jnp.ones(1), 2)
        with pytest.raises(ValidationError):
            f(jnp.ones(1), "3")  # type: ignore[arg-type]
        assert f.trace_count == 1 and not caplog.records
        f(jnp.ones(1), 4)
    (record,) = caplog.records
    assert "n: 2 (int) -> 4 (int)" in record.getMessage()
    assert f.trace_count == 2


def test_lowered_compile_forwards_jax_keywords() -> None:
    f = treespec.jit(lambda x: x * 2)
    lowered = f.lower(jnp.ones(1))
    with pytest.raises(Exception, match="no_such_option_xyz"):
        lowered.compile(compiler_options={"no_such_option_xyz": True})
    compiled = lowered.compile(compiler_options={"xla_embed_ir_in_executable": True})
    np.testing.assert_allclose(compiled(jnp.ones(1)), 2.0)


def test_deepcopy_gives_a_working_copy_and_pickling_says_why_not(
    counter: dict[str, int],
) -> None:
    import copy
    import pickle

    def f(x: jax.Array, n: Static[int]) -> jax.Array:
        counter["n"] += 1
        return x * n

    jitted = treespec.jit(f)
    jitted(jnp.ones(1), 2)
    for clone in (copy.deepcopy(jitted), copy.copy(jitted)):
        np.testing.assert_allclose(clone(jnp.ones(1), 2), 2.0)
        np.testing.assert_allclose(clone(jnp.ones(1), 3), 3.0)
    assert counter["n"] == 2  # the copies share the function's cache
    with pytest.raises(TypeError, match=r"cannot be pickled.*pickle the function"):
        pickle.dumps(jitted)


@treespec.dataclass
class _Layer:
    w: jax.Array
    act: Static[str]


class _Doubling:
    def __new__(cls, x: jax.Array) -> Any:  # not an instance
        return x * 2


def test_a_class_jitted_as_a_function_returns_what_it_makes() -> None:
    # A class's `__init__` says `-> None`, which return validation used to hold
    # the instance to; what a class call makes is not checked (its `__new__`
    # may make anything). Its parameters still are.
    make = treespec.jit(_Layer)
    assert repr(make.spec).endswith("-> Any)")
    layer = make(jnp.ones(2), "relu")
    assert type(layer) is _Layer and layer.act == "relu"
    np.testing.assert_allclose(layer.w, 1.0)
    with pytest.raises(ValidationError, match=r"act"):
        make(jnp.ones(2), 3)
    np.testing.assert_allclose(treespec.jit(_Doubling)(jnp.ones(2)), 2.0)


class _Plain:
    @treespec.jit
    def f(self, x: jax.Array, k: Static[int]) -> jax.Array:
        return jnp.sum(x) * k


def test_a_bound_jitted_method_has_the_spec_of_its_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `m.f` is called without `self`: its spec, and so grad/vmap/explain of
    # it, line the arguments up without `self` (they took x for self).
    m = _Plain()
    assert [p.name for p in treespec.spec_of(m.f).params] == ["x", "k"]
    np.testing.assert_allclose(treespec.grad(m.f)(jnp.ones(2), 3), 3.0)
    batched = treespec.vmap(m.f, in_axes=(0, None))(jnp.ones((3, 2)), 3)
    np.testing.assert_allclose(batched, 6.0)
    treespec.explain(m.f, jnp.ones(2), 3)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:2] == ["x", "dynamic"]
    assert lines[2].split()[:2] == ["k", "static"]
    assert _Plain.f.spec.params[0].name == "self"  # the function's own spec


def test_explain_of_a_bound_grad_method_marks_what_it_differentiates(
    capsys: pytest.CaptureFixture[str],
) -> None:
    class M:
        @partial(treespec.grad, argnums=1)
        def loss(self, x: float, n: float) -> float:
            return x * n

    m = M()
    assert float(m.loss(1.0, 2.0)) == 2.0  # d/dx
    treespec.explain(m.loss, 1.0, 2.0)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:2] == ["x", "dynamic"], lines
    assert lines[2].split()[:2] == ["n", "static"], lines


def test_lower_of_a_method_takes_the_instance_first_and_says_so() -> None:
    m = _Plain()
    compiled = _Plain.f.lower(m, jnp.ones(2), 3).compile()
    np.testing.assert_allclose(compiled(m, jnp.ones(2), 3), 6.0)
    # On an instance, `m.f.lower` is the function's: a clear error, not only
    # "missing a required argument".
    with pytest.raises(
        TypeError,
        match=r"missing a required argument: 'k'.*"
        r"_Plain\.f\.lower\(instance, \.\.\.\)",
    ):
        m.f.lower(jnp.ones(2), 3)


def test_a_donated_buffer_passed_again_is_named_by_its_key_path() -> None:
    @treespec.jit
    def step(params: Donate[dict[str, jax.Array]], g: jax.Array) -> dict[str, Any]:
        return {"w": params["w"] - g}

    @treespec.jit
    def mixed(state: dict[str, Any]) -> jax.Array:
        return state["buf"] * state["k"]

    params = {"w": jnp.ones(3)}
    step(params, jnp.ones(3))
    with pytest.raises(ValidationError) as info:
        step(params, jnp.ones(3))
    (issue,) = info.value.issues
    assert issue.loc == "argument params, at params['w']", issue
    assert "given away before this call" in issue.hint, issue
    assert re.search(r"as \S*\bstep\b donates it", issue.hint), issue
    assert "deleted" in issue.got, issue

    # Donated by another function: never blamed on a call of step.
    @treespec.jit
    def other(p: Donate[dict[str, jax.Array]]) -> jax.Array:
        return p["w"] * 2

    fresh = {"w": jnp.ones(3)}
    other(fresh)
    with pytest.raises(ValidationError) as info:
        step(fresh, jnp.ones(3))
    (issue,) = info.value.issues
    assert "an earlier call of" not in issue.hint, issue
    assert "given away before this call" in issue.hint, issue

    # Flattened with static leaves beside it, and a buffer deleted by hand.
    buf = jnp.ones(2)
    buf.delete()
    with pytest.raises(ValidationError, match=r"state\['buf'\].*deleted"):
        mixed({"buf": buf, "k": 2})


def test_a_retrace_is_explained_against_the_nearest_compiled_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @partial(treespec.jit, explain_recompiles=True)
    def f(x: jax.Array, n: Static[int]) -> jax.Array:
        return x * n

    with caplog.at_level(logging.WARNING, logger="treespec"):
        f(jnp.ones(8), 2)
        f(jnp.ones(16), 2)
        f(jnp.ones(8), 3)  # float32[8] compiled already: only n is new
    *_, record = caplog.records
    assert "n: 2 (int) -> 3 (int)" in record.getMessage()
    assert "float32[16]" not in record.getMessage()


def test_a_trace_that_raised_is_neither_counted_nor_compared_with(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @partial(treespec.jit, explain_recompiles=True)
    def f(x: jax.Array, depth: Static[int]) -> jax.Array:
        if depth == 3:
            raise ValueError("depth 3 is not supported")
        return x * depth

    with caplog.at_level(logging.WARNING, logger="treespec"):
        f(jnp.ones(1), 2)
        with pytest.raises(ValueError, match="depth 3"):
            f(jnp.ones(1), 3)
        assert f.trace_count == 1
        f(jnp.ones(1), 4)
    assert f.trace_count == 2
    messages = [r.getMessage() for r in caplog.records]
    assert any("depth: 2 (int) -> 4 (int)" in m for m in messages)
    assert not any("-> 3 (int)" in m or "3 (int) ->" in m for m in messages)


def test_a_retrace_with_no_new_value_says_so(caplog: pytest.LogCaptureFixture) -> None:
    @partial(treespec.jit, explain_recompiles=True)
    def f(x: jax.Array, n: Static[int]) -> jax.Array:
        return x * n

    with caplog.at_level(logging.WARNING, logger="treespec"):
        f(jnp.ones(1), 2)
        jax.clear_caches()  # JAX forgets the program; treespec's key is the same
        f(jnp.ones(1), 2)
    assert f.trace_count == 2
    (record,) = caplog.records
    assert "no leaf changed" in record.getMessage()
    assert "jax.clear_caches()" in record.getMessage()


def test_the_retrace_history_keeps_at_most_its_documented_number_of_traces() -> None:
    from treespec._runtime.checking.retrace import MAX_TRACES_KEPT, Seen, TraceHistory

    assert MAX_TRACES_KEPT == 256
    traces = [{"n": Seen(str(i))} for i in range(MAX_TRACES_KEPT + 1)]

    def history() -> TraceHistory:
        made = TraceHistory()
        for trace in traces:  # one trace more than kept
            made.completed(trace)
        assert made.count == MAX_TRACES_KEPT + 1
        return made

    # The first trace is no longer kept: the same leaves again are explained
    # against another trace. The second still is, and is found exactly.
    assert history().completed({"n": Seen("0")}) is not traces[0]
    assert history().completed({"n": Seen("1")}) is traces[1]


def test_between_equally_near_traces_a_retrace_is_explained_against_the_latest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from treespec._runtime.checking.retrace import Seen, nearest

    a, b = {"n": Seen("1"), "m": Seen("1")}, {"n": Seen("1"), "m": Seen("2")}
    assert nearest([a, b], {"n": Seen("2"), "m": Seen("3")}) is b
    assert nearest([b, a], {"n": Seen("2"), "m": Seen("3")}) is a

    @partial(treespec.jit, explain_recompiles=True)
    def f(x: jax.Array, n: Static[int], m: Static[int]) -> jax.Array:
        return x * n * m

    with caplog.at_level(logging.WARNING, logger="treespec"):
        f(jnp.ones(1), 1, 1)
        f(jnp.ones(1), 1, 2)
        f(jnp.ones(1), 2, 3)  # two leaves away from both: the latest
    message = caplog.records[-1].getMessage()
    assert "m: 2 (int) -> 3 (int)" in message and "n: 1 (int) -> 2 (int)" in message


def test_clear_cache_forgets_the_traces_explanations_compare_with(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @partial(treespec.jit, explain_recompiles=True)
    def f(x: jax.Array, n: Static[int]) -> jax.Array:
        return x * n

    with caplog.at_level(logging.WARNING, logger="treespec"):
        f(jnp.ones(1), 2)
        f.clear_cache()
        f(jnp.ones(1), 2)  # traced again, but a first trace: nothing to explain
    assert f.trace_count == 2
    assert [r for r in caplog.records if "retracing" in r.getMessage()] == []


_RAISES = """
import os, traceback, jax, jax.numpy as jnp, treespec
from treespec import Static

def step(x: jax.Array, n: Static[int]) -> jax.Array:
    raise KeyError("the user's own error")

try:
    treespec.jit(step)(jnp.ones(2), 3)
except KeyError as error:
    frames = traceback.extract_tb(error.__traceback__)
    here = os.path.dirname(treespec.__file__)
    print(sum(f.filename.startswith(here) for f in frames), len(frames))
"""


@pytest.mark.parametrize("filtering", ["auto", "off"])
def test_treespecs_frames_are_hidden_as_jax_hides_its_own(filtering: str) -> None:
    import subprocess
    import sys

    env = child_env(JAX_TRACEBACK_FILTERING=filtering)
    done = subprocess.run(
        [sys.executable, "-c", _RAISES], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    ours, total = map(int, done.stdout.split())
    if filtering == "off":
        assert ours > 1  # everything shown, treespec's frames too
    else:
        assert ours <= 1 and total <= 3  # the call site, its wrapper, the raise
