"""`treespec.check_with`: how the shape check builds an argument its
annotations cannot describe, declared beside the function and used by
`check_shapes` and `python -m treespec check` alike."""

from __future__ import annotations

import functools
import itertools
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Optional, TypedDict

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
import pytest
from flax import nnx
from jaxtyping import Array, Float

import treespec

from .conftest import child_env

TX = optax.adam(1e-3)


class Params(TypedDict):
    w: Float[Array, "n m"]
    b: Float[Array, " m"]


def _loss(params: Any, x: Any, y: Any) -> Any:
    return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)


def step(
    params: Params,
    opt_state: optax.OptState,
    x: Float[Array, "b n"],
    y: Float[Array, "b m"],
) -> Params:
    grads = jax.grad(_loss)(params, x, y)
    updates, opt_state = TX.update(grads, opt_state, params)
    return optax.apply_updates(params, updates)  # type: ignore[return-value]


def test_an_optimizer_state_is_skipped_until_declared() -> None:
    report = treespec.check_shapes(treespec.jit(step))
    (note,) = report.problems
    assert note.skipped and "opt_state" in note.message, str(report)
    assert "@treespec.check_with(opt_state=...)" in note.message, note.message


def _params() -> dict[str, jax.Array]:
    return {"w": jnp.ones((3, 2)), "b": jnp.ones(2)}


def test_a_declared_optimizer_state_is_built_from_the_params() -> None:
    declared = treespec.check_with(opt_state=lambda params: TX.init(params))
    f = declared(treespec.jit(step))
    # From the annotations alone: the params symbolic, the state made from
    # them abstractly; and from params given.
    for given in ({}, {"params": _params()}):
        report = treespec.check_shapes(f, **given)
        assert report.ok and not report.problems, str(report)


def bad_step(
    params: Params,
    opt_state: optax.OptState,
    x: Float[Array, "b n"],
    y: Float[Array, "b m"],
) -> Float[Array, ""]:
    loss, grads = jax.value_and_grad(_loss)(params, x, y)
    updates, opt_state = TX.update(grads, opt_state, params)
    return loss + jnp.sum(updates["w"] @ x)  # the bug: (n, m) @ (b, n)


def test_a_bug_past_a_declared_state_is_found_at_its_line() -> None:
    f = treespec.check_with(opt_state=lambda params: TX.init(params))(
        treespec.jit(bad_step)
    )
    report = treespec.check_shapes(f)
    (error,) = [p for p in report.problems if p.severity == "error"]
    assert error.line == bad_step.__code__.co_firstlineno + 8, str(report)


class MLP(eqx.Module):
    layers: list[eqx.nn.Linear]

    def __init__(self, sizes: tuple[int, ...], key: jax.Array) -> None:
        keys = jax.random.split(key, len(sizes) - 1)
        self.layers = [
            eqx.nn.Linear(a, b, key=k) for a, b, k in zip(sizes[:-1], sizes[1:], keys)
        ]


@treespec.jit
@treespec.check_with(model=lambda: MLP((3, 8, 2), jax.random.key(0)))
def forward(model: MLP, x: Float[Array, "b 3"]) -> Float[Array, "b 2"]:
    for layer in model.layers:
        x = jax.vmap(layer)(x)
    return x


@treespec.check_with(model=lambda: MLP((3, 8, 2), jax.random.key(0)))
@treespec.jit
def forward_bug(model: MLP, x: Float[Array, "b 3"]) -> Float[Array, "b 2"]:
    for layer in model.layers:
        x = jax.vmap(layer)(x.T)  # the bug: transposed
    return x


def test_a_model_from_its_constructor_below_or_above_the_transform() -> None:
    assert treespec.check_shapes(forward).ok
    report = treespec.check_shapes(forward_bug)
    assert not report.ok, str(report)
    # Nothing was computed: the model the builder made is abstract.
    assert forward.__wrapped__ is not None


def test_a_value_given_to_check_shapes_wins_over_the_declaration() -> None:
    wrong = MLP((4, 2), jax.random.key(1))  # takes 4 features, x has 3
    report = treespec.check_shapes(forward, model=wrong)
    assert not report.ok, str(report)


def test_a_builder_that_raises_skips_the_function_naming_it() -> None:
    def broken() -> Any:
        raise RuntimeError("no weights here")

    f = treespec.check_with(model=broken)(treespec.jit(forward.__wrapped__))
    (note,) = treespec.check_shapes(f).problems
    assert note.skipped, note
    assert "check_with builder raised RuntimeError: no weights here" in note.message


def test_a_name_that_is_no_parameter_is_refused_at_decoration() -> None:
    with pytest.raises(TypeError, match="has no parameter 'opt'"):
        treespec.check_with(opt=lambda: 0)(step)
    with pytest.raises(TypeError, match="takes 'weights', which is no other"):
        treespec.check_with(opt_state=lambda weights: 0)(step)


def test_the_command_builds_what_the_module_declares(tmp_path: Path) -> None:
    source = textwrap.dedent(
        """
        import jax.numpy as jnp
        import optax
        import treespec
        from jaxtyping import Array, Float

        tx = optax.sgd(0.1)


        @treespec.check_with(opt_state=lambda w: tx.init(w))
        @treespec.jit
        def step(w: Float[Array, "n m"], opt_state: optax.OptState,
                 x: Float[Array, "b n"]) -> Float[Array, "b m"]:
            updates, _ = tx.update(jnp.ones_like(w), opt_state, w)
            return x @ (w + updates).T
        """
    )
    (tmp_path / "train.py").write_text(source)
    done = subprocess.run(
        [sys.executable, "-m", "treespec", "check", "train.py"],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "train.py:15: error: step: dot_general" in done.stdout, done.stdout
    assert "1 error, 0 notes, 0 skipped" in done.stdout, done.stdout


def test_the_docstring_example_runs() -> None:
    namespace: dict[str, Any] = {}
    doc = treespec.check_with.__doc__ or ""
    code = textwrap.dedent(doc.split("```python")[1].split("```")[0])
    exec(compile(code, "<check_with example>", "exec"), namespace)


class ConvBN(eqx.Module):
    conv: eqx.nn.Conv1d
    bn: eqx.nn.BatchNorm

    def __init__(self, c: int, h: int, *, key: jax.Array) -> None:
        self.conv = eqx.nn.Conv1d(c, h, kernel_size=3, padding="SAME", key=key)
        self.bn = eqx.nn.BatchNorm(h, axis_name="batch", mode="ema")


def _apply(
    model: ConvBN, state: eqx.nn.State, x: Float[Array, "b c t"]
) -> tuple[Float[Array, "b h t"], eqx.nn.State]:
    def one(xi: Any, st: Any) -> Any:
        return model.bn(model.conv(xi), st)

    batched = jax.vmap(one, axis_name="batch", in_axes=(0, None), out_axes=(0, None))
    return batched(x, state)  # type: ignore[no-any-return]


def test_an_equinox_state_is_built_from_the_model_as_make_with_state_does() -> None:
    # No declaration: the state of the model the check built (its BatchNorm's
    # running statistics), as eqx.nn.make_with_state makes it.
    report = treespec.check_shapes(treespec.jit(_apply))
    assert report.ok and not any(p.skipped for p in report.problems), str(report)
    model = ConvBN(3, 5, key=jax.random.key(0))
    bad = eqx.tree_at(lambda m: m.bn, model, eqx.nn.BatchNorm(3, "batch"))
    report = treespec.check_shapes(treespec.jit(_apply), model=bad)
    assert not report.ok, str(report)


@treespec.check_with(constraints=("n == 2*k",))
@treespec.jit
def pairs(x: Float[Array, "b n"]) -> Float[Array, "b n"]:
    return x.reshape(x.shape[0], -1, 2).reshape(x.shape)


def test_constraints_stated_where_the_function_is() -> None:
    # What the note suggests, stated beside the function: no note, and the
    # function itself unchanged.
    assert treespec.check_shapes(pairs).problems == ()
    assert treespec.check_shapes(pairs.__wrapped__).problems == ()
    assert pairs(jnp.ones((1, 4))).shape == (1, 4)


def test_constraints_of_stacked_declarations_and_check_shapes_add_up() -> None:
    @treespec.check_with(constraints=("b >= 2",))
    @treespec.check_with(constraints=("n == 2*k",))
    @treespec.jit
    def head(x: Float[Array, "b n"]) -> Float[Array, "n"]:
        return x.reshape(x.shape[0], -1, 2).reshape(x.shape)[1]

    assert treespec.check_shapes(head).problems == ()
    # A relation that contradicts a stated one is JAX's refusal, a usage error.
    with pytest.raises(ValueError, match="bad constraints"):
        treespec.check_shapes(head, constraints=("n == 2*k + 1",))


def test_constraints_must_be_a_sequence_of_relations() -> None:
    with pytest.raises(TypeError, match=r"sequence of relations.*'n == 2\*k'"):
        treespec.check_with(constraints="n == 2*k")


class Block(eqx.Module):
    linear: eqx.nn.Linear
    dropout: eqx.nn.Dropout

    def __init__(self, d: int, rate: float, *, key: Any = None) -> None:
        key = jax.random.key(0) if key is None else key
        self.linear = eqx.nn.Linear(d, d, key=key)
        self.dropout = eqx.nn.Dropout(rate)

    @treespec.jit
    def __call__(self, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
        return self.dropout(jax.vmap(self.linear)(x), inference=True)


def test_a_float_constructor_parameter_takes_a_value_that_is_no_size() -> None:
    # A dropout rate with no default never made the function skipped: it
    # takes 1.0, said in a note, and the function is checked.
    report = treespec.check_shapes(Block.__call__)
    assert report.ok and not any(p.skipped for p in report.problems), str(report)
    (note,) = report.notes
    assert "self.rate=1.0 (a float, never a size)" in note.message, str(report)


class Coupling(eqx.Module):
    """A flow's coupling layer: a static `split` field computed by the
    constructor from `dim`, and a `flip` switch with no default."""

    net: eqx.nn.Linear
    split: int = eqx.field(static=True)
    flip: bool = eqx.field(static=True)

    def __init__(self, dim: int, flip: bool, *, key: Any = None) -> None:
        key = jax.random.key(0) if key is None else key
        self.split, self.flip = dim // 2, flip
        self.net = eqx.nn.Linear(self.split, dim - self.split, key=key)

    @treespec.jit
    def __call__(self, x: Float[Array, "b d"]) -> Float[Array, "b d"]:
        x = x[:, ::-1] if self.flip else x
        x1, x2 = x[:, : self.split], x[:, self.split :]
        return jnp.concatenate([x1, x2 + jax.vmap(self.net)(x1)], axis=-1)


def test_a_bool_constructor_parameter_takes_its_false_side() -> None:
    # Issue 56's fifth corpus: the field `split` has no value, and the
    # constructor that computes it was refused for `flip` (a bool with no
    # default): the function was skipped. It takes False, said in a note.
    report = treespec.check_shapes(Coupling.__call__)
    assert not any(p.skipped for p in report.problems), str(report)
    assert not report.errors, str(report)
    assert any("self.flip=False (a switch" in n.message for n in report.notes)


def test_a_builder_that_takes_its_own_parameter_is_refused() -> None:
    with pytest.raises(TypeError, match="builder of 'opt_state' takes 'opt_state'"):
        treespec.check_with(opt_state=lambda opt_state: opt_state)(step)


def test_stacked_declarations_both_count() -> None:
    # One decorator says how to build the state, the other the params: the
    # check uses both (a given Params below, the state from it above).
    given = {"w": jnp.ones((3, 2)), "b": jnp.ones(2)}
    f = treespec.check_with(opt_state=lambda params: TX.init(params))(
        treespec.check_with(params=given)(treespec.jit(step))
    )
    report = treespec.check_shapes(f)
    assert report.problems == (), str(report)
    # The params given fix n and m: an x of the wrong width is found.
    assert treespec.check_shapes(f, x=jnp.ones((5, 4))).errors


def test_a_value_that_is_not_callable_is_passed_as_it_is() -> None:
    state = TX.init({"w": jnp.ones((3, 2)), "b": jnp.ones(2)})
    f = treespec.check_with(opt_state=state)(treespec.jit(step))
    assert treespec.check_shapes(f).problems == ()


def _logged(fun: Any) -> Any:
    """A plain decorator, as users stack them (`functools.wraps`)."""

    @functools.wraps(fun)
    def inner(*args: Any, **kwargs: Any) -> Any:
        return fun(*args, **kwargs)

    return inner


def test_a_declaration_below_two_plain_decorators_is_found() -> None:
    # The transform sees through every `__wrapped__`, not only the first.
    @treespec.jit
    @_logged
    @_logged
    @treespec.check_with(constraints=("n == 2*k",))
    def paired(x: Float[Array, "b n"]) -> Float[Array, "b n"]:
        return x.reshape(x.shape[0], -1, 2).reshape(x.shape)

    assert treespec.check_shapes(paired).problems == ()


class Scaler(eqx.Module):
    @treespec.check_with(constraints=("n == 2*k",))
    def pairs(self, x: Float[Array, "b n"]) -> Float[Array, "b n"]:
        return x.reshape(x.shape[0], -1, 2).reshape(x.shape)


def test_a_bound_methods_declaration_is_its_functions() -> None:
    from treespec._shapes.declared import constraints_of

    assert constraints_of(Scaler().pairs) == ("n == 2*k",)


class _Regressor(nnx.Module):
    def __init__(self, n: int, m: int, *, rngs: nnx.Rngs) -> None:
        self.linear = nnx.Linear(n, m, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.linear(x)


def _nnx_step(
    model: _Regressor,
    optimizer: nnx.Optimizer,
    x: Float[Array, "b n"],
    y: Float[Array, "b m"],
) -> Float[Array, ""]:
    def loss_fn(m: _Regressor) -> jax.Array:
        return jnp.mean((m(x) - y) ** 2)

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


def _nnx_step_bug(
    model: _Regressor,
    optimizer: nnx.Optimizer,
    x: Float[Array, "b n"],
    y: Float[Array, "b m"],
) -> Float[Array, ""]:
    def loss_fn(m: _Regressor) -> jax.Array:
        return jnp.mean((m(x) - y.T) ** 2)  # b against m

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


def test_an_nnx_optimizer_is_built_for_the_model_beside_it() -> None:
    # An NNX training step's optimizer, undeclared: made for the model the
    # check built (its update needs that model's parameters), as a training
    # script makes it; the step is checked, and a bug in it found.
    report = treespec.check_shapes(treespec.jit(_nnx_step))
    assert report.ok and not any(p.skipped for p in report.problems), str(report)
    report = treespec.check_shapes(treespec.jit(_nnx_step_bug))
    (error,) = [p for p in report.problems if p.severity == "error"]
    assert "b" in error.message and "m" in error.message, error.message


def test_an_nnx_optimizer_with_no_model_beside_it_is_skipped_naming_it() -> None:
    def lonely(optimizer: nnx.Optimizer, x: Float[Array, " n"]) -> Float[Array, " n"]:
        return x

    report = treespec.check_shapes(treespec.jit(lonely))
    (note,) = report.problems
    assert note.skipped and "optimizer" in note.message, str(report)
    assert "no Flax NNX module" in note.message, note.message


class Dilated(eqx.Module):
    """A stack of causal convolutions, one per dilation: `dilations` has no
    default, and the fields (`eqx.nn.Conv1d`s) give no shape."""

    convs: list[eqx.nn.Conv1d]

    def __init__(self, channels: int, dilations: tuple[int, ...], *, key: Any) -> None:
        self.convs = [
            eqx.nn.Conv1d(channels, channels, 2, dilation=d, key=key) for d in dilations
        ]


@treespec.jit
def _dilated(model: Dilated, x: Float[Array, "c t"]) -> Float[Array, "c t"]:
    for conv in model.convs:
        pad = conv.dilation[0]
        x = conv(jnp.pad(x, ((0, 0), (pad, 0))))
    return x


class Widths(eqx.Module):
    layers: list[eqx.nn.Linear]

    def __init__(self, widths: tuple[int, ...], *, key: Any) -> None:
        pairs = itertools.pairwise(widths)
        self.layers = [eqx.nn.Linear(a, b, key=key) for a, b in pairs]


class Activated(eqx.Module):
    layer: eqx.nn.Linear
    act: Callable[[Any], Any]

    def __init__(self, n: int, act: Callable[[Any], Any], *, key: Any) -> None:
        self.layer = eqx.nn.Linear(n, n, key=key)
        self.act = act


def test_a_constructors_counts_of_each_part_take_one_part() -> None:
    # `dilations: tuple[int, ...]` with no default made the function
    # skipped, blaming a field of Conv1d (`num_spatial_dims`): it takes one
    # part, (1,), said in the note, and the function is checked.
    report = treespec.check_shapes(_dilated)
    assert report.ok and not any(p.skipped for p in report.problems), str(report)
    assert any("model.dilations=(1,)" in n.message for n in report.notes)


class Moded(eqx.Module):
    """flowMC's constructors: an optional width and a mode, neither with a
    default."""

    proj: eqx.nn.Linear
    act: str = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        hidden: Optional[int],  # noqa: UP045 (as public code writes it)
        out: int | None,
        act: Literal["relu", "gelu"],
        *,
        key: Any,
    ) -> None:
        self.proj = eqx.nn.Linear(dim, out or dim, key=key)
        self.act = act


@treespec.jit
def _moded(model: Moded, x: Float[Array, "b dim"]) -> Float[Array, "b e"]:
    y = jax.vmap(model.proj)(x)
    return jax.nn.relu(y) if model.act == "relu" else jax.nn.gelu(y)


@treespec.jit
def _moded_bug(model: Moded, x: Float[Array, "b dim"]) -> Float[Array, "b e"]:
    y = jax.vmap(model.proj)(x.T)  # BUG: the batch axis mapped over features
    return jax.nn.relu(y) if model.act == "relu" else jax.nn.gelu(y)


def test_an_optional_int_is_an_int_and_a_literal_its_first_value() -> None:
    # `Optional[int]` and `int | None` with no default are ints (sizes or
    # counts, as an `int` is); a `Literal` mode takes its first value, said.
    report = treespec.check_shapes(_moded)
    assert report.ok and not report.skipped, str(report)
    assert any(
        "model.act='relu' (a mode, its first value)" in n.message for n in report.notes
    ), str(report)
    (error,) = treespec.check_shapes(_moded_bug).errors
    assert "BUG" in Path(error.file).read_text().splitlines()[error.line - 1]


def test_a_constructor_parameter_with_no_value_is_the_one_named() -> None:
    # An activation is never guessed: the function is skipped, and the note
    # names that parameter, not a field of a layer.
    @treespec.jit
    def block(model: Activated, x: Float[Array, " n"]) -> Float[Array, " n"]:
        return model.act(model.layer(x))

    (note,) = treespec.check_shapes(block).problems
    assert note.skipped, str(note)
    assert "model.act (" in note.message and "a parameter of its constructor)" in (
        note.message
    ), note.message


def test_a_constructors_sizes_of_each_part_are_unknowns_never_guessed() -> None:
    # A tuple of sizes (an MLP's widths) is never guessed: two parts, each a
    # size of its own, solved where the code needs them (`widths0 == n`).
    @treespec.jit
    def mlp(model: Widths, x: Float[Array, " n"]) -> Float[Array, " m"]:
        for layer in model.layers:
            x = layer(x)
        return x

    report = treespec.check_shapes(mlp)
    assert report.ok and not report.skipped, str(report)
    assert any("widths0 == n" in p.message for p in report.notes), str(report)


def test_a_declared_state_wins_over_the_one_built_from_the_model() -> None:
    # What the user declares for an `eqx.nn.State` is what the check uses:
    # a builder that raises skips the function, naming it.
    def broken(model: ConvBN) -> Any:
        raise RuntimeError("no state here")

    report = treespec.check_shapes(
        treespec.check_with(state=broken)(treespec.jit(_apply))
    )
    (note,) = report.problems
    assert note.skipped and "RuntimeError: no state here" in note.message, str(report)


class Gain(eqx.Module):
    w: jax.Array  # no shape: made by its constructor

    def __init__(self, n: int) -> None:
        self.w = jnp.ones(n)


class Wrapped(eqx.Module):
    """Fields that give every shape once its layer is built, and a
    constructor that takes a module the check cannot make."""

    inner: Gain
    scale: Float[Array, " n"]

    def __init__(self, inner: eqx.Module, n: int) -> None:
        self.inner = inner  # type: ignore[assignment]
        self.scale = jnp.ones(n)


def test_a_constructor_it_cannot_call_leaves_the_fields_that_stand() -> None:
    # Its layer was made by its own constructor, so the class's constructor
    # was tried too, and refused (`inner: eqx.Module`): the instance made
    # from its fields is checked, as before, not skipped naming `inner`.
    @treespec.jit
    def apply(w: Wrapped, x: Float[Array, " n"]) -> Float[Array, " n"]:
        return w.scale * w.inner.w * x

    report = treespec.check_shapes(apply)
    assert not any(p.skipped for p in report.problems), str(report)
    assert report.ok, str(report)
