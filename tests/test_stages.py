"""Ahead of time: the stages (`trace`, `lower`, `compile`), `eval_shape` and
`jax.export`, spoken in the user's arguments, never in the internal split."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, TypedDict

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, Float

import treespec
from treespec import Donate, Dynamic, SpecError, Static, ValidationError


class Config(TypedDict):
    depth: Static[int]
    scale: Dynamic[float]


@treespec.jit
def forward(x: Float[Array, "b 3"], cfg: Config) -> jax.Array:
    for _ in range(cfg["depth"]):
        x = jnp.tanh(x * cfg["scale"])
    return x


X = jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3)
CFG: Config = {"depth": 2, "scale": 0.5}


# -- export -------------------------------------------------------------------


def test_jax_export_takes_a_treespec_function_with_statics_baked_in() -> None:
    (b,) = jax.export.symbolic_shape("b")
    specs = (
        jax.ShapeDtypeStruct((b, 3), jnp.float32),
        {"depth": 2, "scale": jax.ShapeDtypeStruct((), jnp.float32)},
    )
    exported = jax.export.export(forward)(*specs)
    # The traced arguments only: the user's arguments, None at static leaves.
    assert exported.in_tree == jax.tree.structure(
        ((X, {"depth": None, "scale": 0.5}), {})
    )
    restored = jax.export.deserialize(exported.serialize())
    for rows in (2, 5):
        x = jnp.ones((rows, 3), jnp.float32)
        out = restored.call(x, {"depth": None, "scale": jnp.float32(0.25)})
        expected = forward(x, {"depth": 2, "scale": 0.25})
        np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_a_wholly_static_argument_leaves_the_exported_signature_as_in_jax() -> None:
    # As jax.jit's static_argnums: exp.call(x) for g(x, depth); a static leaf
    # inside a traced argument stays None (cfg['depth'] above).
    def g(x: jax.Array, depth: Static[int]) -> jax.Array:
        return x * depth

    spec = jax.ShapeDtypeStruct((3,), jnp.float32)
    theirs = jax.export.export(jax.jit(g, static_argnums=1))(spec, 2)
    ours = jax.export.export(treespec.jit(g))(spec, 2)
    assert ours.in_tree == theirs.in_tree == jax.tree.structure(((X,), {}))
    restored = jax.export.deserialize(ours.serialize())
    np.testing.assert_allclose(restored.call(jnp.ones(3)), 2.0)
    # A keyword argument: as static_argnames.
    keyword = treespec.jit(lambda x, *, depth: x * depth, static_flags={"depth": True})
    assert jax.export.export(keyword)(spec, depth=2).in_tree == theirs.in_tree
    # The stages agree: the program's arguments are the traced ones; a Compiled
    # is still called like the function, static arguments included.
    lowered = treespec.jit(g).lower(jnp.ones(3), 2)
    assert lowered.in_tree == theirs.in_tree
    np.testing.assert_allclose(lowered.compile()(jnp.ones(3), 2), 2.0)
    with pytest.raises(ValidationError, match="compiled for 2, called with 3"):
        lowered.compile()(jnp.ones(3), 3)


def test_an_exported_program_returns_arrays_with_none_for_the_other_outputs() -> None:
    # Non-array outputs are constants of the trace: the program (and a serving
    # process without treespec) gets None in their places; eval_shape and
    # Lowered.out_info give the values.
    @treespec.jit
    def tagged(x: jax.Array, name: Static[str]) -> tuple[jax.Array, str, Any]:
        return x * 2, name, {"k": (1, 2.5)}

    spec = jax.ShapeDtypeStruct((3,), jnp.float32)
    exported = jax.export.export(tagged)(spec, "a")
    restored = jax.export.deserialize(exported.serialize())
    y, name, extra = restored.call(jnp.ones(3))
    np.testing.assert_allclose(y, 2.0)
    assert (name, extra) == (None, {"k": (None, None)})
    assert tagged.eval_shape(spec, "a")[1:] == ("a", {"k": (1, 2.5)})


def test_export_of_a_donated_argument_keeps_the_arguments() -> None:
    @treespec.jit
    def update(params: Donate[dict[str, jax.Array]], g: jax.Array) -> dict[str, Any]:
        return {"w": params["w"] - g}

    spec = jax.ShapeDtypeStruct((3,), jnp.float32)
    restored = jax.export.deserialize(
        jax.export.export(update)({"w": spec}, spec).serialize()
    )
    out = restored.call({"w": jnp.ones(3)}, jnp.ones(3))
    np.testing.assert_allclose(out["w"], 0.0)


# -- the stages -----------------------------------------------------------------


def test_trace_gives_jaxs_traced_in_the_users_arguments() -> None:
    traced = forward.trace(X, CFG)
    assert isinstance(traced, jax.stages.Traced)
    assert "tanh" in str(traced.jaxpr)
    assert traced.out_info.shape == (2, 3)
    assert traced.lower().compile()(X, {"depth": None, "scale": 0.5}).shape == (2, 3)


def test_lowered_and_compiled_offer_what_jaxs_do() -> None:
    lowered = forward.lower(X, CFG)
    assert "tanh" in lowered.as_text()
    assert lowered.compiler_ir() is not None
    assert lowered.in_tree == jax.tree.structure(
        ((X, {"depth": None, "scale": 0.5}), {})
    )
    assert lowered.out_info.shape == (2, 3)
    costs = lowered.cost_analysis()
    assert costs is None or isinstance(costs, (dict, list))
    compiled = lowered.compile()
    np.testing.assert_allclose(compiled(X, CFG), forward(X, CFG), rtol=1e-6)
    assert compiled.input_shardings is not None
    assert compiled.output_shardings is not None
    assert "tanh" in compiled.as_text()
    if hasattr(jax.stages.Compiled, "memory_analysis"):
        compiled.memory_analysis()
    # A name JAX has is forwarded; one it has not is an AttributeError.
    assert compiled.runtime_executable() is not None
    with pytest.raises(AttributeError):
        compiled.no_such_name


def test_out_info_holds_non_array_outputs_as_values() -> None:
    @treespec.jit
    def named(x: jax.Array, name: Static[str]) -> dict[str, Any]:
        return {"y": x + 1, "name": name}

    info = named.lower(jnp.ones(2), "n").out_info
    assert info["name"] == "n" and info["y"].shape == (2,)
    out = named.lower(jnp.ones(2), "n").compile()(jnp.ones(2), "n")
    assert out["name"] == "n"


def test_eval_shape_of_a_jitted_function() -> None:
    out = forward.eval_shape(X, CFG)
    assert isinstance(out, jax.ShapeDtypeStruct) and out.shape == (2, 3)


def test_a_partly_donated_argument_cannot_be_lowered_as_is() -> None:
    class State(TypedDict):
        w: Donate[jax.Array]
        b: jax.Array

    @treespec.jit
    def mixed(state: State) -> jax.Array:
        return state["w"] + state["b"]

    state = {"w": jnp.ones(2), "b": jnp.ones(2)}
    with pytest.raises(SpecError, match=r"state\['w'\].*whole arguments") as info:
        mixed.lower(state)
    # Exactly the leaves of each side: the donated one is not among those kept.
    assert "(donated: state['w']; kept: state['b'])" in str(info.value)
    assert float(mixed(state)[0]) == 2.0  # the call donates leaf by leaf


def _main_signature(lowered: Any) -> str:
    (line,) = [line for line in lowered.as_text().splitlines() if "@main(" in line]
    return str(line)


def test_a_donated_keyword_argument_is_donated_by_lower_and_compile() -> None:
    @treespec.jit
    def add(x: jax.Array, *, buf: Donate[jax.Array]) -> jax.Array:
        return buf + x

    @treespec.jit
    def kept(x: jax.Array, *, buf: jax.Array) -> jax.Array:
        return buf + x

    lowered = add.lower(jnp.ones(3), buf=jnp.ones(3))
    # The program's second argument (buf) gives its buffer to the output.
    assert "%arg1: tensor<3xf32> {tf.aliasing_output" in _main_signature(lowered)
    assert "aliasing" not in _main_signature(kept.lower(jnp.ones(3), buf=jnp.ones(3)))
    compiled = lowered.compile()
    np.testing.assert_allclose(compiled(jnp.ones(3), buf=jnp.ones(3)), 2.0)


# -- a stage reuses the call's trace, as jax.jit's do ------------------------------


def _counting() -> dict[str, Any]:
    """Functions of each route that count how often their body runs."""
    runs = {"mixed": 0, "whole": 0, "keyword": 0, "options": 0}

    @treespec.jit(explain_recompiles=True)
    def mixed(x: Float[Array, "b 3"], cfg: Config) -> jax.Array:
        runs["mixed"] += 1
        return x * cfg["scale"] * cfg["depth"]

    @treespec.jit(explain_recompiles=True)
    def whole(x: jax.Array, n: Static[int]) -> tuple[jax.Array, str]:
        runs["whole"] += 1
        return x * n, "done"

    @treespec.jit(explain_recompiles=True)
    def keyword(x: jax.Array, *, n: Static[int], y: jax.Array) -> jax.Array:
        runs["keyword"] += 1
        return x * n + y

    # Options only a top-level jax.jit takes: the stages' program is no
    # nested call of the call's.
    @treespec.jit(
        explain_recompiles=True,
        compiler_options={"xla_embed_ir_in_executable": True},
    )
    def options(x: jax.Array, n: Static[int]) -> jax.Array:
        runs["options"] += 1
        return jnp.tanh(x) * n

    calls = {
        "mixed": (mixed, (X, CFG), {}),
        "whole": (whole, (X, 3), {}),
        "keyword": (keyword, (X,), {"n": 2, "y": X}),
        "options": (options, (X, 3), {}),
    }
    return {"runs": runs, "calls": calls}


STAGES = {
    "trace": lambda f, a, k: f.trace(*a, **k).out_info,
    "lower": lambda f, a, k: f.lower(*a, **k).as_text(),
    "compile": lambda f, a, k: f.lower(*a, **k).compile()(*a, **k),
    "eval_shape": lambda f, a, k: f.eval_shape(*a, **k),
}


@pytest.mark.parametrize("route", ["mixed", "whole", "keyword", "options"])
@pytest.mark.parametrize("stage", list(STAGES))
@pytest.mark.parametrize("first", ["call", "stage"])
def test_a_stage_and_a_call_share_one_trace(
    route: str, stage: str, first: str, caplog: pytest.LogCaptureFixture
) -> None:
    # As jax.jit's: `f(x)` then `f.lower(x)` (or the other way round) runs the
    # function once, counts one trace and explains no retrace.
    made = _counting()
    f, args, kwargs = made["calls"][route]
    steps = [lambda: f(*args, **kwargs), lambda: STAGES[stage](f, args, kwargs)]
    with caplog.at_level(logging.DEBUG, logger="treespec"):
        for step in steps if first == "call" else steps[::-1]:
            step()
        for step in steps:  # and again: both cached
            step()
    assert made["runs"][route] == 1
    assert f.trace_count == 1
    assert [r.getMessage() for r in caplog.records if r.name == "treespec"] == []
    # The call's program itself, as jax.jit's stages give it: no nested jit.
    eqns = f.trace(*args, **kwargs).jaxpr.eqns
    assert eqns and all(e.primitive.name not in ("jit", "pjit") for e in eqns)


def test_a_methods_stages_share_the_calls_trace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runs = {"n": 0}

    class Layer(eqx.Module):
        w: jax.Array

        @treespec.jit(explain_recompiles=True)
        def apply(self, x: jax.Array, k: Static[int]) -> jax.Array:
            runs["n"] += 1
            return x * self.w * k

    layer = Layer(jnp.ones(3))
    x = jnp.arange(3.0)
    with caplog.at_level(logging.DEBUG, logger="treespec"):
        layer.apply(x, 2)
        layer.apply.trace(x, 2)
        compiled = layer.apply.lower(x, 2).compile()
        Layer.apply.lower(layer, x, 2)
        layer.apply.eval_shape(x, 2)
        np.testing.assert_allclose(compiled(x, 2), 2 * x)
    assert runs["n"] == 1 and layer.apply.trace_count == 1
    assert [r.getMessage() for r in caplog.records if r.name == "treespec"] == []


class _Keyed(TypedDict):
    n: Static[int]


class _KeyedLayer(eqx.Module):
    w: jax.Array

    @treespec.jit
    def apply(self, x: jax.Array, cfg: _Keyed) -> jax.Array:
        return x * self.w * cfg["n"]


def test_a_methods_stage_refuses_a_wrong_argument_as_a_validation_error() -> None:
    # Not a TypeError with a hint about binding the instance: the instance
    # was bound, the argument is wrong.
    layer = _KeyedLayer(jnp.ones(2))
    for stage in (layer.apply.lower, partial(_KeyedLayer.apply.lower, layer)):
        with pytest.raises(ValidationError, match=r"cfg\['m'\]") as info:
            stage(jnp.ones(2), {"m": 1})
        assert "instance first" not in str(info.value)


# -- what the programs say of where they came from ----------------------------------


def _scaled_tanh(x: jax.Array, n: Static[int]) -> jax.Array:
    return jnp.sum(jnp.tanh(x)) * n


def test_the_programs_source_locations_name_only_the_users_frames() -> None:
    # As jax.jit's: the locations a lowered module and a compiled program's
    # metadata carry (what dumps and profilers show) are the user's lines,
    # never a frame of treespec's own package.
    import os

    here = os.path.dirname(treespec.__file__) + os.sep
    for f in (treespec.jit(_scaled_tanh), treespec.jit(treespec.grad(_scaled_tanh))):
        # The call's program (which the stages' calls), under grad too.
        f(jnp.ones(2), 3)
        lowered = f.lower(jnp.ones(2), 3)
        text = lowered.as_text(debug_info=True)
        assert f'"{__file__}":' in text
        assert here not in text, [line for line in text.splitlines() if here in line]
        executable = lowered.compile().runtime_executable()
        (module,) = executable.hlo_modules()
        proto = module.as_serialized_hlo_module_proto()
        assert __file__.encode() in proto
        assert here.encode() not in proto


def test_the_lowered_programs_arguments_carry_the_users_names() -> None:
    # As jax.jit's: `loc("x")`, and key paths for the leaves of a parameter
    # (cfg['scale']), keywords by name; never args[0].
    @treespec.jit
    def step(
        x: jax.Array, cfg: Config, *, k: Static[int] = 2, y: jax.Array
    ) -> jax.Array:
        return x * cfg["scale"] * k + y

    lowered = step.lower(jnp.ones(2), CFG, y=jnp.ones(2))
    text = lowered.as_text(debug_info=True)
    (main,) = [line for line in text.splitlines() if "@main(" in line]
    for name in ('loc("x")', """loc("cfg['scale']")""", 'loc("y")'):
        assert name in main, main
    assert "args[" not in text and "kwargs[" not in text


# -- messages in the user's terms -------------------------------------------------


def _issues(call: Any) -> list[str]:
    with pytest.raises(ValidationError) as info:
        call()
    return [issue.format() for issue in info.value.issues]


def test_a_compiled_called_with_a_new_shape_names_the_leaf() -> None:
    compiled = forward.lower(X, CFG).compile()
    (issue,) = _issues(lambda: compiled(jnp.ones((4, 4)), CFG))
    assert (
        issue == "argument x, at x: compiled for float32[2,3], called with float32[4,4]"
    )
    assert "dynamic[" not in issue


def test_a_compiled_called_with_a_new_static_value_names_both_values() -> None:
    compiled = forward.lower(X, CFG).compile()
    (issue,) = _issues(lambda: compiled(X, {"depth": 5, "scale": 0.5}))
    assert issue == "argument cfg, at cfg['depth']: compiled for 2, called with 5"
    (issue,) = _issues(lambda: compiled(X, {"depth": 2.0, "scale": 0.5}))
    assert issue == (
        "argument cfg, at cfg['depth']: compiled for 2 (int), called with 2.0 (float)"
    )


def test_a_compiled_called_with_a_string_at_a_traced_leaf_shows_the_string() -> None:
    compiled = forward.lower(X, CFG).compile()
    bad: Any = {"depth": 2, "scale": "0.5"}
    assert _issues(lambda: compiled(X, bad)) == [
        "argument cfg, at cfg['scale']: compiled for float[], called with str '0.5'"
    ]


def test_a_compiled_called_with_another_structure_names_the_argument() -> None:
    @treespec.jit
    def total(x: jax.Array, parts: dict[str, Any]) -> jax.Array:
        return x + sum(parts.values())

    compiled = total.lower(X, {"a": 1.0}).compile()
    (issue,) = _issues(lambda: compiled(X, {"a": 1.0, "b": 2.0}))
    assert issue.startswith("argument parts, at parts: compiled for the structure ")
    assert "called with PyTreeDef({'a': *, 'b': *})" in issue, issue


def test_a_retrace_for_a_weak_type_is_named(caplog: pytest.LogCaptureFixture) -> None:
    @treespec.jit(explain_recompiles=True)
    def f(x: jax.Array) -> jax.Array:
        return x * 2

    with caplog.at_level(logging.WARNING, logger="treespec"):
        f(1.0)  # a Python float: a weakly typed float32[]
        f(jnp.float32(1.0))
    (message,) = [r.getMessage() for r in caplog.records]
    assert "x: float32[] (weak type) -> float32[]" in message, message
    assert "no leaf changed" not in message


@pytest.mark.parametrize("empty", [None, ()], ids=["None", "empty tuple"])
def test_an_argument_with_no_leaves_stays_in_the_lowered_signature(empty: Any) -> None:
    def f(x: jax.Array, nothing: Any, n: Static[int]) -> jax.Array:
        return x * n

    ours = treespec.jit(f).lower(jnp.ones(2), empty, 2)
    theirs = jax.jit(f, static_argnums=2).lower(jnp.ones(2), empty, 2)
    assert ours.in_tree == theirs.in_tree
    np.testing.assert_allclose(ours.compile()(jnp.ones(2), empty, 2), 2.0)


def test_in_shardings_given_for_a_wholly_static_argument_lowers_and_runs() -> None:
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    def f(x: jax.Array, n: Static[int]) -> jax.Array:
        return x * n

    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("d",))
    sharding = NamedSharding(mesh, P())
    for given in (sharding, (sharding, None)):  # one for all, or None there
        g = treespec.jit(f, in_shardings=given)
        np.testing.assert_allclose(g(jnp.ones(2), 3), 3.0)
        compiled = g.lower(jnp.ones(2), 3).compile()
        np.testing.assert_allclose(compiled(jnp.ones(2), 3), 3.0)


def test_the_lowered_and_exported_programs_carry_the_functions_name() -> None:
    def train_step(x: jax.Array, n: Static[int]) -> jax.Array:
        return x * n

    jitted = treespec.jit(train_step)
    text = jitted.lower(jnp.ones(2), 3).as_text()
    assert "module @jit_train_step" in text
    exported = jax.export.export(jitted)(jnp.ones(2), 3)
    assert exported.fun_name == "train_step"


@pytest.mark.parametrize("how", ["copy", "deepcopy"])
def test_every_stage_object_copies(how: str) -> None:
    # As jax.jit's stages copy; a deep copy shares the compiled program, which
    # cannot be copied (JAX's own deepcopy refuses), as a deep copy shares a
    # function.
    import copy

    def f(x: jax.Array, n: Static[int]) -> jax.Array:
        return x * n

    lowered = treespec.jit(f).lower(jnp.ones(2), 3)
    compiled = lowered.compile()
    copier = getattr(copy, how)
    again = copier(lowered)
    assert type(again) is type(lowered) and again.as_text() == lowered.as_text()
    np.testing.assert_allclose(again.compile()(jnp.ones(2), 3), 3.0)
    np.testing.assert_allclose(copier(compiled)(jnp.ones(2), 3), 3.0)
    assert copier(compiled).in_tree == compiled.in_tree
