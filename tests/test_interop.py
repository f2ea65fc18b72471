"""The ecosystem's own ideas of what is static: Equinox, flax.struct, Flax NNX,
`jax.tree_util.register_dataclass` and `jax.tree.static()` fields.

A marker on a field that the class holds in its tree structure is honoured or
refused by name, never dropped; NNX modules work with every transform and
match `nnx.jit`/`jax.jit` on the same model.
"""

from __future__ import annotations

import abc
import dataclasses
import logging
import warnings
from collections.abc import Callable
from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx, struct
from jaxtyping import Array, Float

import treespec
from treespec import Donate, Dynamic, SpecError, Static

from .conftest import HAS_TREE_STATIC, needs_tree_static

# -- a marker on a field held in the structure: refused by name ---------------


class EqxStaticDynamic(eqx.Module):
    w: jax.Array
    scale: Dynamic[float] = eqx.field(static=True)


class EqxStaticStatic(eqx.Module):
    w: jax.Array
    act: Static[str] = eqx.field(static=True)


@struct.dataclass
class FlaxStaticDonate:
    w: jax.Array
    scale: Donate[float] = struct.field(pytree_node=False)


class FlaxNodeStatic(struct.PyTreeNode):
    w: jax.Array
    name: Static[str] = struct.field(pytree_node=False)


if HAS_TREE_STATIC:

    @jax.tree_util.register_dataclass
    @dataclasses.dataclass(frozen=True)
    class TreeStaticDynamic:
        w: jax.Array
        scale: Dynamic[float] = jax.tree.static(default=1.0)  # noqa: RUF009
else:
    TreeStaticDynamic = None  # type: ignore[assignment,misc]


@partial(jax.tree_util.register_dataclass, data_fields=["w"], meta_fields=["scale"])
@dataclasses.dataclass(frozen=True)
class MetaFieldsDynamic:
    w: jax.Array
    scale: Dynamic[float]


@treespec.dataclass
class TreespecStaticInnerDynamic:
    w: jax.Array
    sizes: Static[tuple[Dynamic[float], ...]]


class NnxScaled(nnx.Module):
    scale: Dynamic[float]  # the user wants it traced; NNX keeps a float static

    def __init__(self, scale: float, rngs: nnx.Rngs) -> None:
        self.lin = nnx.Linear(2, 2, rngs=rngs)
        self.scale = scale

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.lin(x) * self.scale


class NnxStaticField(nnx.Module):
    scale: Donate[float] = nnx.static()

    def __init__(self, scale: float) -> None:
        self.w = jnp.ones(2)
        self.scale = scale


def _decorate(cls: type) -> None:
    @treespec.jit
    def f(m: cls) -> jax.Array:  # type: ignore[valid-type]
        return m.w

    del f


@pytest.mark.parametrize(
    ("cls", "switch", "fix"),
    [
        (EqxStaticDynamic, "eqx.field(static=True)", "drop static=True"),
        (FlaxStaticDonate, "flax.struct.field(pytree_node=False)", "pytree_node=False"),
        pytest.param(
            TreeStaticDynamic,
            "jax.tree.static()",
            "data field",
            marks=needs_tree_static,
            id="TreeStaticDynamic",
        ),
        (TreespecStaticInnerDynamic, "Static[...]", "treespec.dataclass"),
        (NnxStaticField, "nnx.static()", "nnx.data"),
    ],
)
def test_a_traced_marker_on_a_field_the_class_holds_static_is_refused_at_decoration(
    cls: type, switch: str, fix: str
) -> None:
    with pytest.raises(SpecError) as caught:
        _decorate(cls)
    text = str(caught.value)
    field = "sizes" if cls is TreespecStaticInnerDynamic else "scale"
    assert f"{cls.__qualname__}.{field}" in text, text
    assert switch in text, text
    assert fix in text, text
    assert "drop the marker" in text, text


def test_the_same_refusal_for_an_unannotated_instance_at_the_first_call() -> None:
    @treespec.jit
    def f(m):  # type: ignore[no-untyped-def]
        return m.w * m.scale

    with pytest.raises(SpecError, match=r"EqxStaticDynamic\.scale.*eqx\.field"):
        f(EqxStaticDynamic(jnp.ones(2), 0.5))


def test_meta_fields_given_to_register_dataclass_are_refused_at_the_first_call() -> (
    None
):
    @treespec.jit
    def f(m: MetaFieldsDynamic) -> jax.Array:
        return m.w * m.scale

    with pytest.raises(SpecError) as caught:
        f(MetaFieldsDynamic(jnp.ones(2), 0.5))
    text = str(caught.value)
    assert "MetaFieldsDynamic.scale" in text and "meta_fields" in text, text


def test_the_nnx_example_of_the_report_is_refused_at_the_first_call() -> None:
    @treespec.jit(explain_recompiles=True)
    def apply(m: NnxScaled, x: jax.Array) -> jax.Array:
        return m(x)

    with pytest.raises(SpecError) as caught:
        apply(NnxScaled(0.5, nnx.Rngs(0)), jnp.ones(2))
    text = str(caught.value)
    assert "NnxScaled.scale" in text, text
    assert "nnx.Module" in text and "nnx.data(" in text and "nnx.Param" in text, text
    assert apply.trace_count == 0


def test_a_static_marker_agrees_with_a_field_held_static_and_stays_quiet() -> None:
    @treespec.jit
    def f(m: EqxStaticStatic, n: FlaxNodeStatic) -> jax.Array:
        return m.w + n.w

    out = f(EqxStaticStatic(jnp.ones(2), "relu"), FlaxNodeStatic(jnp.ones(2), "a"))
    np.testing.assert_allclose(out, 2.0)


def test_explain_lists_fields_held_in_the_structure_with_their_switch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def f(m: EqxStaticStatic, n: FlaxNodeStatic) -> jax.Array:
        return m.w

    treespec.explain(
        f, EqxStaticStatic(jnp.ones(2), "relu"), FlaxNodeStatic(jnp.ones(2), "a")
    )
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert " static " in rows["m.act"], rows
    assert "eqx.field(static=True)" in rows["m.act"], rows
    assert "'relu'" in rows["m.act"], rows
    assert "flax.struct.field(pytree_node=False)" in rows["n.name"], rows
    assert " dynamic " in rows["m.w"], rows


def test_the_retrace_log_names_a_changed_static_field(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Plain(nnx.Module):
        def __init__(self, scale: float) -> None:
            self.w = jnp.ones(2)
            self.scale = scale

    @treespec.jit(explain_recompiles=True)
    def f(m: EqxStaticStatic, p: Plain) -> jax.Array:
        return m.w * p.scale

    with caplog.at_level(logging.WARNING, logger="treespec"):
        f(EqxStaticStatic(jnp.ones(2), "relu"), Plain(0.5))
        f(EqxStaticStatic(jnp.ones(2), "tanh"), Plain(0.5))
        f(EqxStaticStatic(jnp.ones(2), "tanh"), Plain(0.25))
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert "m.act: 'relu' (str) -> 'tanh' (str)" in messages[0], messages
    assert "p.scale: 0.5 (float) -> 0.25 (float)" in messages[1], messages
    assert not any("no leaf changed" in m for m in messages), messages


# -- Flax NNX, first-class ----------------------------------------------------


class Net(nnx.Module):
    def __init__(self, rngs: nnx.Rngs, depth: int = 2) -> None:
        self.lin = nnx.Linear(3, 3, rngs=rngs)
        self.bias = nnx.Param(jnp.full(3, 0.5))
        self.depth = depth  # a plain int: NNX keeps it static

    def __call__(self, x: jax.Array) -> jax.Array:
        for _ in range(self.depth):
            x = jnp.tanh(self.lin(x) + self.bias[...])
        return x


def _loss(model: Net, x: jax.Array) -> jax.Array:
    return jnp.sum(model(x) ** 2)


def test_an_nnx_module_argument_matches_nnx_jit_and_jax_jit() -> None:
    model, x = Net(nnx.Rngs(0)), jnp.arange(6.0).reshape(2, 3)
    count = {"n": 0}

    @treespec.jit
    def forward(m: Net, x: jax.Array) -> jax.Array:
        count["n"] += 1
        return m(x)

    expected = nnx.jit(lambda m, x: m(x))(model, x)
    np.testing.assert_allclose(forward(model, x), expected, rtol=1e-6)
    np.testing.assert_allclose(
        jax.jit(lambda m, x: m(x))(model, x), expected, rtol=1e-6
    )
    forward(Net(nnx.Rngs(1)), x)  # same structure: no retrace
    assert count["n"] == 1
    forward(Net(nnx.Rngs(1), depth=3), x)  # a static attribute changed
    assert count["n"] == 2


def test_grad_and_value_and_grad_of_an_nnx_module_match_nnx() -> None:
    model, x = Net(nnx.Rngs(0)), jnp.ones((2, 3))
    ours = treespec.grad(_loss)(model, x)
    theirs = nnx.grad(_loss)(model, x)
    np.testing.assert_allclose(ours.lin.kernel[...], theirs.lin.kernel[...], rtol=1e-6)
    np.testing.assert_allclose(ours.bias[...], theirs.bias[...], rtol=1e-6)
    value, grads = treespec.value_and_grad(_loss)(model, x)
    np.testing.assert_allclose(value, _loss(model, x), rtol=1e-6)
    np.testing.assert_allclose(grads.bias[...], theirs.bias[...], rtol=1e-6)
    assert grads.depth == 2  # static attributes ride along, as in nnx.grad


def test_vmap_over_the_input_of_an_nnx_module_matches_nnx_vmap() -> None:
    model, xs = Net(nnx.Rngs(0)), jnp.ones((4, 2, 3))
    ours = treespec.vmap(lambda m, x: m(x), in_axes=(None, 0))(model, xs)
    theirs = nnx.vmap(lambda m, x: m(x), in_axes=(None, 0))(model, xs)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_markers_on_nnx_attributes_are_followed() -> None:
    class Marked(nnx.Module):
        w: Dynamic[jax.Array]
        n: Static[int]

        def __init__(self) -> None:
            self.w = jnp.ones(2)
            self.n = 3

    @treespec.jit
    def f(m: Marked) -> jax.Array:
        return m.w * m.n

    np.testing.assert_allclose(f(Marked()), 3.0)
    spec_text = treespec.spec_of(f).tree()
    assert "n: Static[int]" in spec_text and "w: Dynamic[Array]" in spec_text


def test_nnx_annotations_that_disagree_with_a_marker_are_spec_errors() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # nnx.Static/Data

        class Agree(nnx.Module):
            n: nnx.Static[Static[int]]
            w: nnx.Data[Dynamic[jax.Array]]

            def __init__(self) -> None:
                self.n = 2
                self.w = jnp.ones(2)

        class HeldButTraced(nnx.Module):
            n: nnx.Static[Dynamic[float]]

            def __init__(self) -> None:
                self.n = 2.0

        class DataButStatic(nnx.Module):
            n: nnx.Data[Static[int]]

            def __init__(self) -> None:
                self.n = 2

    @treespec.jit
    def ok(m: Agree) -> jax.Array:
        return m.w * m.n

    np.testing.assert_allclose(ok(Agree()), 2.0)
    with pytest.raises(SpecError, match=r"HeldButTraced\.n.*nnx\.Static"):
        _decorate(HeldButTraced)
    with pytest.raises(SpecError, match=r"DataButStatic\.n.*nnx\.Data"):
        _decorate(DataButStatic)


@jax.tree_util.register_pytree_node_class
class SelfFlattening:
    a: Dynamic[jax.Array]
    name: Static[str]

    def __init__(self, a: jax.Array, name: str) -> None:
        self.a, self.name = a, name

    def tree_flatten(self) -> tuple[tuple[jax.Array], str]:
        return (self.a,), self.name

    @classmethod
    def tree_unflatten(cls, name: str, children: tuple[jax.Array]) -> SelfFlattening:
        return cls(children[0], name)


def test_markers_in_a_class_that_flattens_itself_are_refused() -> None:
    # Its children have no field names: the markers could not be followed.
    with pytest.raises(SpecError) as caught:
        _decorate(SelfFlattening)
    text = str(caught.value)
    assert "SelfFlattening" in text and "a: Dynamic[jax.Array]" in text, text
    assert "register_dataclass" in text, text

    @treespec.jit
    def unannotated(p):  # type: ignore[no-untyped-def]
        return p.a

    with pytest.raises(SpecError, match="SelfFlattening has markers on its fields"):
        unannotated(SelfFlattening(jnp.ones(2), "x"))

    # A marker where it is used does not make the class's own markers count.
    with pytest.raises(SpecError, match="SelfFlattening has markers on its fields"):

        @treespec.jit
        def marked_where_used(p: Dynamic[SelfFlattening]) -> jax.Array:
            return p.a


def test_the_refusal_of_a_marker_on_a_held_field_quotes_it_as_written() -> None:
    with pytest.raises(SpecError, match=r"scale is annotated Dynamic\[float\], but"):
        _decorate(EqxStaticDynamic)


class NnxNeverSet(nnx.Module):
    """An annotated attribute that `__init__` leaves unset."""

    w: Dynamic[jax.Array]
    later: Static[int]

    def __init__(self) -> None:
        self.w = jnp.ones(2)


def test_an_annotated_nnx_attribute_an_instance_never_set_is_no_crash() -> None:
    @treespec.jit
    def f(m: NnxNeverSet) -> jax.Array:
        return m.w * 2

    np.testing.assert_allclose(f(NnxNeverSet()), 2.0)
    assert not hasattr(NnxNeverSet(), "later")


class EqxOptionalBranch(eqx.Module):
    """Equimo's HATBlock: a field its `__init__` sets only for some sizes."""

    lin: eqx.nn.Linear
    extra: eqx.nn.Linear | None = eqx.field(default=None)

    def __init__(self, dim: int, with_extra: bool = False) -> None:
        self.lin = eqx.nn.Linear(dim, dim, key=jax.random.key(0))
        if with_extra:
            self.extra = eqx.nn.Linear(dim, dim, key=jax.random.key(1))

    @treespec.jit
    def __call__(self, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
        if self.extra is not None:
            x = jax.vmap(self.extra)(x)
        return jax.vmap(self.lin)(x)


def test_an_equinox_field_its_init_never_set_reads_its_default() -> None:
    # Equinox flattens such a field to a marker of its own; the function
    # reads the class's default (None), which the annotation allows.
    x = jnp.ones((3, 4))
    for with_extra in (False, True):
        module = EqxOptionalBranch(4, with_extra)
        raw = EqxOptionalBranch.__call__.__wrapped__
        expected = jax.jit(raw)(module, x)
        np.testing.assert_allclose(module(x), expected)
    report = treespec.check_shapes(EqxOptionalBranch.__call__)
    assert report.errors == () and not report.skipped, str(report)
    wrong = EqxOptionalBranch(4)
    object.__setattr__(wrong, "extra", "not a layer")
    with pytest.raises(treespec.ValidationError, match=r"self\.extra"):
        wrong(x)


class EqxDense(eqx.Module):
    lin: eqx.nn.Linear

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.lin(x)


class EqxGated(eqx.Module):
    lin: eqx.nn.Linear

    def __call__(self, x: jax.Array) -> jax.Array:
        return jax.nn.sigmoid(self.lin(x)) * x


class EqxEitherStack(eqx.Module):
    """Equimo's C3k2: one kind of block or the other, by a flag."""

    blocks: tuple[EqxDense, ...] | tuple[EqxGated, ...]

    def __init__(self, gated: bool) -> None:
        kind = EqxGated if gated else EqxDense
        self.blocks = (kind(eqx.nn.Linear(4, 4, key=jax.random.key(0))),)

    @treespec.jit
    def __call__(self, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
        for block in self.blocks:
            x = jax.vmap(block)(x)
        return x


class EqxAbstractMixer(eqx.Module):
    @abc.abstractmethod
    def __call__(self, x: jax.Array) -> jax.Array: ...


class EqxScaledMixer(EqxAbstractMixer):
    scale: jax.Array
    activation: Callable[[jax.Array], jax.Array] = jax.nn.gelu

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.activation(self.scale * x)


class EqxOpenFields(eqx.Module):
    """Equimo's SHSA: a field annotated with a base class, holding an
    activation function the subclass adds."""

    act: eqx.Module
    mixer: EqxAbstractMixer

    def __init__(self) -> None:
        self.act = eqx.nn.Sequential([eqx.nn.Lambda(jax.nn.relu)])
        self.mixer = EqxScaledMixer(jnp.full((4,), 2.0))

    @treespec.jit
    def __call__(self, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
        return self.mixer(jax.vmap(self.act)(x))


def test_a_field_annotated_with_a_base_class_keeps_its_functions_static(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `act: eqx.Module` and an abstract base say nothing of the leaves the
    # instance holds: a function there is static (as eqx.filter_jit holds
    # it), never handed to JAX as an argument.
    module, x = EqxOpenFields(), jnp.linspace(-1.0, 1.0, 12).reshape(3, 4)
    raw = eqx.filter_jit(EqxOpenFields.__call__.__wrapped__)
    np.testing.assert_allclose(module(x), raw(module, x))
    treespec.explain(EqxOpenFields.__call__, module, x)
    explained = capsys.readouterr().out
    assert "self.act.layers[0].fn  static" in explained, explained
    assert "self.mixer.activation  static" in explained, explained


def test_a_union_of_tuples_follows_the_member_its_items_fit() -> None:
    x = jnp.ones((3, 4))
    for gated in (False, True):
        stack = EqxEitherStack(gated)
        raw = EqxEitherStack.__call__.__wrapped__
        np.testing.assert_allclose(stack(x), jax.jit(raw)(stack, x))
    mixed = EqxEitherStack(True)
    object.__setattr__(mixed, "blocks", (*mixed.blocks, "not a block"))
    with pytest.raises(treespec.ValidationError, match=r"self\.blocks\[1\]") as info:
        mixed(x)
    assert "blocks[0]" not in str(info.value)  # read as the member it fits


class PlainMarked:
    """Not a pytree: one leaf, whatever its annotations say."""

    a: Dynamic[float]
    name: Static[str]

    def __init__(self, a: float, name: str) -> None:
        self.a, self.name = a, name

    def __hash__(self) -> int:
        return hash((self.a, self.name))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlainMarked) and hash(self) == hash(other)


def test_a_plain_class_with_marker_annotations_is_no_class_that_flattens_itself() -> (
    None
):
    # Only a registered pytree class flattens itself; a plain class is a leaf.
    @treespec.jit
    def f(x: jax.Array, p: Static[PlainMarked]) -> jax.Array:
        return x * p.a

    np.testing.assert_allclose(f(jnp.ones(2), PlainMarked(3.0, "p")), 3.0)


class NnxPlain(nnx.Module):
    def __init__(self) -> None:
        self.w = nnx.Param(jnp.ones(2))
        self.scale = 0.5
        self.name = "m"


def test_explain_lists_the_plain_attributes_nnx_holds_static(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # They are in the cache key (a new value retraces): listed, with their fate.
    def f(m: NnxPlain) -> jax.Array:
        return m.w * m.scale

    treespec.explain(f, NnxPlain())
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert " static " in rows["m.scale"] and "float 0.5" in rows["m.scale"], rows
    assert "which NNX holds static" in rows["m.name"], rows
    assert " dynamic " in rows["m.w.value"], rows
