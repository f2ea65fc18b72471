"""Unknown sizes solved, never guessed (DESIGN, "Sizes the annotations do not
name"): a constructor's size that no annotation names takes the value the
code's own checks ask for, said in a note; a bug past it is still found."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest
from flax import nnx
from jaxtyping import Array, Float, Int

import treespec


def _the_error(fun: Any, marker: str = "the bug") -> treespec.ShapeIssue:
    """The one error a check of `fun` finds, asserted at the line of its
    source that holds `marker`."""
    report = treespec.check_shapes(fun)
    (error,) = report.errors
    source, first = inspect.getsourcelines(inspect.unwrap(fun))
    line = next(i for i, text in enumerate(source) if marker in text)
    assert error.line == first + line, str(report)
    return error


class Downsample(eqx.Module):
    conv: eqx.nn.Conv2d

    def __init__(self, channels: int, *, key: Any = None) -> None:
        key = jax.random.key(0) if key is None else key
        self.conv = eqx.nn.Conv2d(channels, channels, 3, stride=2, padding=1, key=key)

    @treespec.jit
    def __call__(self, x: Float[Array, "c h w"]) -> Float[Array, "c (h+1)//2 (w+1)//2"]:
        return self.conv(x)


class DownsampleBug(eqx.Module):
    conv: eqx.nn.Conv2d

    def __init__(self, channels: int, *, key: Any = None) -> None:
        key = jax.random.key(0) if key is None else key
        self.conv = eqx.nn.Conv2d(channels, channels, 3, stride=2, padding=1, key=key)

    @treespec.jit
    def __call__(self, x: Float[Array, "c h w"]) -> Float[Array, "c (h+1)//2 (w+1)//2"]:
        return self.conv(x)[:, :, :1]  # the bug: one column kept


def test_a_constructors_size_no_annotation_names_is_solved_in_a_note() -> None:
    # `channels` is no dimension of the annotations: the conv needs it to be
    # c, which the check takes (and says), instead of an error at a guess.
    report = treespec.check_shapes(Downsample.__call__)
    assert report.ok, str(report)
    (note,) = report.problems
    assert note.severity == "note" and "channels == c" in note.message, str(report)


def test_a_bug_past_a_solved_size_is_still_an_error() -> None:
    report = treespec.check_shapes(DownsampleBug.__call__)
    errors = [p for p in report.problems if p.severity == "error"]
    assert errors and "the return value" in errors[0].message, str(report)


def test_a_given_model_keeps_its_own_sizes() -> None:
    # Given, the model's channels are what they are: an x of other channels
    # is the caller's mismatch, an error, not a size to take.
    model = Downsample(3)
    report = treespec.check_shapes(Downsample.__call__, self=model)
    (error,) = report.errors
    assert "but c != 3" in error.message, str(report)  # JAX's c // 1, as c


def test_a_constructors_size_against_the_return_annotation_is_a_bug() -> None:
    # `hidden` meets the return annotation's `d`: the contract broken, an
    # error, never a relation taken.
    class Block(eqx.Module):
        linear: eqx.nn.Linear

        def __init__(self, d: int, hidden: int, *, key: Any = None) -> None:
            key = jax.random.key(0) if key is None else key
            self.linear = eqx.nn.Linear(d, hidden, key=key)

        @treespec.jit
        def __call__(self, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
            return jax.vmap(self.linear)(x)

    report = treespec.check_shapes(Block.__call__)
    assert [p.severity for p in report.problems] == ["error"], str(report)


class FeedForwardBug(eqx.Module):
    up: eqx.nn.Linear
    down: eqx.nn.Linear

    def __init__(self, d: int, hidden: int, *, key: Any = None) -> None:
        k1, k2 = jax.random.split(jax.random.key(0) if key is None else key)
        self.up = eqx.nn.Linear(d, hidden, key=k1)
        self.down = eqx.nn.Linear(hidden, d, key=k2)

    @treespec.jit
    def __call__(self, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
        h = jax.vmap(self.up)(x)
        return x + jax.vmap(self.down)(x) * h.mean()  # the bug: x where h belongs


def test_a_size_beside_a_named_one_is_solved_too() -> None:
    # DESIGN, "an error is certain", no exception for an unknown beside a
    # named size: `hidden == d` makes the code run, so it runs, and the note
    # says what was assumed (the bug is in plain sight there: no FeedForward
    # has hidden == d). No annotation tells the two apart.
    report = treespec.check_shapes(FeedForwardBug.__call__)
    assert report.ok, str(report)
    (note,) = report.notes
    assert "hidden == d" in note.message, str(report)


class FeedForwardReturnsHidden(eqx.Module):
    up: eqx.nn.Linear

    def __init__(self, d: int, hidden: int, *, key: Any = None) -> None:
        self.up = eqx.nn.Linear(
            d, hidden, key=jax.random.key(0) if key is None else key
        )

    @treespec.jit
    def __call__(self, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
        return jax.vmap(self.up)(x)  # the bug: (t, hidden) where (t, d) is promised


def test_a_twin_whose_bug_the_annotations_can_see_stays_an_error() -> None:
    # The return annotation promises d: a constructor's size there is the
    # contract broken, never a relation taken.
    report = treespec.check_shapes(FeedForwardReturnsHidden.__call__)
    assert [p.severity for p in report.problems] == ["error"], str(report)


def _solving(
    runs: list[int],
    most: int,
    asked: Callable[[], dict[str, str]],
    relations: dict[str, str],
) -> Any:
    """`relations.solved` over a trace that always fails (it returns how
    many runs were made), each failure asking for `asked()`; more than
    `most` runs is a test failure: the solving did not end."""
    from treespec._shapes.relations import solved

    def trace() -> int:
        runs.append(1)
        if len(runs) > most:
            raise AssertionError(f"still solving after {most} runs")
        return len(runs)

    return solved(trace, lambda _: "text", lambda _: asked(), relations)


def test_solving_ends_when_a_relation_brings_nothing_new() -> None:
    # A relation the checker cannot use (a size JAX writes as `min(d, 3)`,
    # which it cannot evaluate) is asked for again after each run: the
    # solving ends there instead of running again for ever.
    runs: list[int] = []
    relations: dict[str, str] = {}
    found = _solving(runs, 10, lambda: {"in__1": "min(d, 3)"}, relations)
    assert found == len(runs) == 2
    assert relations == {"in__1": "min(d, 3)"}


def test_solving_ends_when_relations_undo_each_other() -> None:
    # Each failure asks for the relation the one before it replaced
    # (`kv_dim == d_q`, then `kv_dim == d_kv`): the second time a set of
    # relations comes back, the solving ends, with the relations of the
    # run whose failure stands.
    runs: list[int] = []
    asked = [{"kv_dim": "d_q"}, {"kv_dim": "d_kv"}]
    relations: dict[str, str] = {}
    found = _solving(runs, 10, lambda: asked[len(runs) % 2], relations)
    assert found == len(runs) == 3
    assert relations == {"kv_dim": "d_q"}, relations


def test_a_relation_in_jaxs_syntax_is_evaluated_at_the_sizes() -> None:
    # JAX writes a size as `floordiv(h, 2)` or `mod(n, 3)`: a relation
    # taken in that form sets the unknown at a run's sizes; one that cannot
    # be read (a name the run has no size for) leaves it.
    from treespec._shapes.relations import with_relations

    taken = {"half": "floordiv(h, 2)", "rest": "mod(n, 3)", "lost": "min(q, 3)"}
    sizes = with_relations({"h": 14, "n": 11}, taken)
    assert sizes == {"h": 14, "n": 11, "half": 7, "rest": 2}


def test_solving_ends_past_the_most_relations_a_function_takes() -> None:
    # Each failure asks for a new relation: past MAX_RELATIONS the solving
    # ends, the failure standing.
    from treespec._shapes.relations import MAX_RELATIONS

    runs: list[int] = []
    relations: dict[str, str] = {}
    _solving(runs, 100, lambda: {f"u{len(runs)}": "d"}, relations)
    assert len(relations) == MAX_RELATIONS + 1 and len(runs) == MAX_RELATIONS + 2


class Classifier(eqx.Module):
    head: eqx.nn.Linear

    def __init__(self, d: int, num_classes: int, *, key: Any = None) -> None:
        key = jax.random.key(0) if key is None else key
        self.head = eqx.nn.Linear(d, num_classes, key=key)

    @treespec.jit
    def loss(self, x: Float[Array, "b d"], y: Int[Array, " b"]) -> Float[Array, ""]:
        logits = jax.vmap(self.head)(x)
        targets = jax.nn.one_hot(y, logits.shape[-1])
        return -jnp.mean(jax.nn.log_softmax(logits) * targets)

    @treespec.jit
    def loss_bug(self, x: Float[Array, "b d"], y: Int[Array, " b"]) -> Float[Array, ""]:
        logits = jax.vmap(self.head)(x)
        targets = jax.nn.one_hot(y, 10)  # the bug: the class count hard-coded
        return -jnp.mean(jax.nn.log_softmax(logits) * targets)


def test_a_count_of_outputs_is_an_unknown_never_1() -> None:
    # `num_classes` is an output width, not a count of parts: taken as 1, the
    # hard-coded 10 would broadcast against it and the bug pass in silence.
    assert treespec.check_shapes(Classifier.loss).problems == ()
    (error,) = treespec.check_shapes(Classifier.loss_bug).errors
    assert "(b, num_classes), (b, 10)" in error.message, error.message


def test_a_number_the_body_hard_codes_is_never_taken_for_a_size() -> None:
    # DESIGN: a pass that needs a constructor's size to equal a number the
    # body hard-codes is an error: a module is built to fit its input.
    report = treespec.check_shapes(Classifier.loss_bug)
    assert not any("num_classes == 10" in p.message for p in report.problems)


# The false errors of issue 56's never-seen corpora, each beside a twin whose
# bug the annotations can see, which stays an error.


class EqxConv(eqx.Module):
    conv: eqx.nn.Conv2d

    def __init__(self, in_channels: int, out_channels: int, *, key: Any = None) -> None:
        key = jax.random.key(0) if key is None else key
        self.conv = eqx.nn.Conv2d(in_channels, out_channels, 3, padding=1, key=key)

    @treespec.jit
    def __call__(self, x: Float[Array, "c h w"]) -> Float[Array, "o h w"]:
        return self.conv(x)

    @treespec.jit
    def swapped(self, x: Float[Array, "c h w"]) -> Float[Array, "o h w"]:
        return self.conv(x).transpose(0, 2, 1)  # the bug: h and w swapped


class NnxConv(nnx.Module):
    def __init__(self, in_channels: int, out_channels: int, *, rngs: nnx.Rngs) -> None:
        self.conv = nnx.Conv(
            in_channels, out_channels, (3, 3), padding="SAME", rngs=rngs
        )

    @treespec.jit
    def __call__(self, x: Float[Array, "b h w c"]) -> Float[Array, "b h w o"]:
        return self.conv(x)

    @treespec.jit
    def swapped(self, x: Float[Array, "b h w c"]) -> Float[Array, "b h w o"]:
        return self.conv(x).transpose(0, 2, 1, 3)  # the bug: h and w swapped


class Norm(eqx.Module):
    norm: eqx.nn.LayerNorm

    def __init__(self, latent_dim: int) -> None:
        self.norm = eqx.nn.LayerNorm(latent_dim)

    @treespec.jit
    def __call__(self, z: Float[Array, "b m d_lat"]) -> Float[Array, "b m d_lat"]:
        return jax.vmap(jax.vmap(self.norm))(z)

    @treespec.jit
    def swapped(self, z: Float[Array, "b m d_lat"]) -> Float[Array, "b m d_lat"]:
        return jax.vmap(jax.vmap(self.norm))(z).transpose(1, 0, 2)  # the bug


class Residual(eqx.Module):
    weight: Float[Array, "d d"]


class Stack(eqx.Module):
    layers: tuple[Residual, ...]

    @treespec.jit
    def __call__(self, x: Float[Array, "batch d"]) -> Float[Array, "batch d"]:
        for layer in self.layers:
            x = x + x @ layer.weight
        return x

    @treespec.jit
    def transposed(self, x: Float[Array, "batch d"]) -> Float[Array, "batch d"]:
        for layer in self.layers:
            x = x + x @ layer.weight
        return x.T  # the bug


class Cache(eqx.Module):
    @treespec.jit
    def write(
        self, cache: Float[Array, "max_len d"], new: Float[Array, "t d"]
    ) -> Float[Array, "max_len d"]:
        return jax.lax.dynamic_update_slice(cache, new, (0, 0))

    @treespec.jit
    def write_bug(
        self, cache: Float[Array, "max_len d"], new: Float[Array, "t d"]
    ) -> Float[Array, "max_len d"]:
        return new  # the bug: the update, not the cache written with it


class Coupling(eqx.Module):
    """A flow's coupling layer: the halves come from the constructor's
    `dim // 2`, which JAX's symbolic sizes cannot build with."""

    net: eqx.nn.Linear
    split: int = eqx.field(static=True)

    def __init__(self, dim: int, *, key: Any = None) -> None:
        key = jax.random.key(0) if key is None else key
        self.split = dim // 2
        self.net = eqx.nn.Linear(self.split, dim - self.split, key=key)

    @treespec.jit
    def __call__(self, x: Float[Array, "b d"]) -> Float[Array, "b d"]:
        x1, x2 = x[:, : self.split], x[:, self.split :]
        return jnp.concatenate([x1, x2 * jax.vmap(self.net)(x1)], axis=-1)

    @treespec.jit
    def shifted(self, x: Float[Array, "b d"]) -> Float[Array, "b d"]:
        x1, x2 = x[:, : self.split], x[:, self.split :]
        return jnp.concatenate([x1, x2 * jax.vmap(self.net)(x1)], axis=0)  # the bug


class Interaction(eqx.Module):
    """Two constructor sizes met only in a sum: `edge_dim + 2 * node_dim`."""

    mlp: eqx.nn.Linear

    def __init__(self, node_dim: int, edge_dim: int, *, key: Any = None) -> None:
        key = jax.random.key(0) if key is None else key
        self.mlp = eqx.nn.Linear(edge_dim + 2 * node_dim, edge_dim, key=key)

    @treespec.jit
    def __call__(
        self,
        nodes: Float[Array, "n f"],
        edges: Float[Array, "e g"],
        send: Int[Array, " e"],
    ) -> Float[Array, "e g"]:
        edge_in = jnp.concatenate([edges, nodes[send], nodes[send]], axis=-1)
        return edges + jax.vmap(self.mlp)(edge_in)

    @treespec.jit
    def summed(
        self,
        nodes: Float[Array, "n f"],
        edges: Float[Array, "e g"],
        send: Int[Array, " e"],
    ) -> Float[Array, "e g"]:
        edge_in = jnp.concatenate([edges, nodes[send], nodes[send]], axis=-1)
        return (edges + jax.vmap(self.mlp)(edge_in)).sum(0)  # the bug


class Patches(eqx.Module):
    """Positions for `(image_size // patch) ** 2` patches, applied to `s`
    (`"p e"`, names of its own: `"p c"` would make `channels` the `c`)."""

    pos: Float[Array, "p e"]
    patch: int = eqx.field(static=True)

    def __init__(self, image_size: int, patch: int, channels: int) -> None:
        self.patch = patch
        self.pos = jnp.zeros(((image_size // patch) ** 2, channels))

    @treespec.jit
    def __call__(self, x: Float[Array, "s s c"]) -> Float[Array, "q c"]:
        g = x.shape[0] // self.patch
        grid = x[: g * self.patch, : g * self.patch].reshape(g * g, -1, x.shape[-1])
        return grid.mean(1) + self.pos

    @treespec.jit
    def flat(self, x: Float[Array, "s s c"]) -> Float[Array, "q c"]:
        g = x.shape[0] // self.patch
        grid = x[: g * self.patch, : g * self.patch].reshape(g * g, -1, x.shape[-1])
        return (grid.mean(1) + self.pos).reshape(-1)  # the bug


@pytest.mark.parametrize(
    ("clean", "assumed", "twin"),
    [
        (EqxConv.__call__, "in_channels == c", EqxConv.swapped),
        (NnxConv.__call__, "in_channels == c", NnxConv.swapped),
        (Norm.__call__, "latent_dim == d_lat", Norm.swapped),
        (Stack.__call__, "d of self.layers[0] == d", Stack.transposed),
        (Cache.write, "t <= max_len", Cache.write_bug),
        (Coupling.__call__, "dim == d", Coupling.shifted),
        (Interaction.__call__, "edge_dim == g, node_dim == f", Interaction.summed),
        (Patches.__call__, "channels == c", Patches.flat),
    ],
    ids=[
        "equinox conv",
        "nnx conv",
        "norm",
        "square layers",
        "cache",
        "coupling halves",
        "two sizes in a sum",
        "patch grid",
    ],
)
def test_a_size_its_author_decides_is_a_note_and_a_visible_bug_an_error(
    clean: Any, assumed: str, twin: Any
) -> None:
    report = treespec.check_shapes(clean)
    assert report.ok, str(report)
    assert any(assumed in note.message for note in report.notes), str(report)
    assert treespec.check_shapes(twin).errors, str(treespec.check_shapes(twin))


class Depthwise(eqx.Module):
    """A depthwise conv (`groups=channels`): JAX says `c // channels != 1`."""

    conv: eqx.nn.Conv2d

    def __init__(self, channels: int, *, key: Any = None) -> None:
        key = jax.random.key(0) if key is None else key
        self.conv = eqx.nn.Conv2d(
            channels, channels, 3, padding=1, groups=channels, key=key
        )

    @treespec.jit
    def __call__(self, x: Float[Array, "c h w"]) -> Float[Array, "c h w"]:
        return self.conv(x)

    @treespec.jit
    def pooled(self, x: Float[Array, "c h w"]) -> Float[Array, "c h w"]:
        return self.conv(x).mean(-1)  # the bug: w pooled away


def test_a_depthwise_convs_channels_are_solved_and_a_bug_past_them_found() -> None:
    report = treespec.check_shapes(Depthwise.__call__)
    assert report.ok, str(report)
    assert any("channels == c" in n.message for n in report.notes), str(report)
    assert treespec.check_shapes(Depthwise.pooled).errors


def test_a_value_the_check_built_that_a_library_refuses_is_a_note() -> None:
    # A bare `eqx.Module` (the base, where any layer goes) is built as
    # `eqx.Module()`, and a library's constructor given no `**kwargs`:
    # JAX's and Equinox's refusals of those are about the value built, not
    # about a shape. Not checked past that line, a note, never an error.
    @treespec.jit
    def rotated(x: Float[Array, "t d"], rope: eqx.Module) -> Float[Array, "t d"]:
        return jax.vmap(rope)(x)

    @treespec.jit
    def with_mlp(x: Float[Array, "t d"], **kwargs: Any) -> Float[Array, "t d"]:
        mlp = eqx.nn.MLP(x.shape[-1], x.shape[-1], 8, **kwargs)
        return jax.vmap(mlp)(x)

    for fn in (rotated, with_mlp):
        report = treespec.check_shapes(fn)
        assert not report.errors, str(report)
        assert any("not checked past this line" in n.message for n in report.notes)


class Halved(eqx.Module):
    """Two stride-2 convs: the author asserts `h` and `w` are multiples of 4
    (odd witness sizes, and twice them, break the assert)."""

    down: eqx.nn.Conv2d

    def __init__(self, channels: int, *, key: Any = None) -> None:
        key = jax.random.key(0) if key is None else key
        self.down = eqx.nn.Conv2d(channels, channels, 2, stride=2, key=key)

    @treespec.jit
    def __call__(self, x: Float[Array, "c h w"]) -> Float[Array, "c h//4 w//4"]:
        assert x.shape[1] % 4 == 0 and x.shape[2] % 4 == 0, "h, w multiples of 4"
        return self.down(self.down(x))

    @treespec.jit
    def once(self, x: Float[Array, "c h w"]) -> Float[Array, "c h//4 w//4"]:
        assert x.shape[1] % 4 == 0 and x.shape[2] % 4 == 0, "h, w multiples of 4"
        return self.down(x)  # the bug: downsampled once


def test_sizes_the_code_asserts_are_multiples_are_checked_at_such_sizes() -> None:
    # Issue 56's fifth corpus: an author's `assert h % 4 == 0` stopped the
    # check at every witness, and the bug past it was never seen. Sizes that
    # are multiples of 8 (still distinct) pass the assert: checked there.
    assert treespec.check_shapes(Halved.__call__).ok
    report = treespec.check_shapes(Halved.once)
    (error,) = report.errors
    assert "h//4" in error.message or "return" in error.message, str(report)


class WeightNormed(eqx.Module):
    """A layer whose field names its sizes as its constructor does."""

    weight: Float[Array, "out_features in_features"]

    def __init__(self, in_features: int, out_features: int, *, key: Any) -> None:
        self.weight = jax.random.normal(key, (out_features, in_features))

    def __call__(
        self, x: Float[Array, " in_features"]
    ) -> Float[Array, " out_features"]:
        return self.weight @ x


class Head(eqx.Module):
    """DINOv2's projection head, in short: the constructor's `in_features` is
    the input's width, and the last layer's field names `in_features` for
    the bottleneck (a size of that layer's own)."""

    fc: eqx.nn.Linear
    last: WeightNormed

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bottleneck: int = 8,
        *,
        key: Any = None,
    ) -> None:
        k1, k2 = jax.random.split(jax.random.key(0) if key is None else key)
        self.fc = eqx.nn.Linear(in_features, bottleneck, key=k1)
        self.last = WeightNormed(bottleneck, out_features, key=k2)

    @treespec.jit
    def __call__(self, x: Float[Array, "s d"]) -> Float[Array, "s o"]:
        return jax.vmap(lambda v: self.last(self.fc(v)))(x)

    @treespec.jit
    def flipped(self, x: Float[Array, "s d"]) -> Float[Array, "s o"]:
        return jax.vmap(lambda v: self.last(self.fc(v)))(x).T  # the bug


def test_a_constructor_size_named_like_a_layers_field_is_still_an_unknown() -> None:
    # Issue 56's public code (Equimo's DINOHead): `in_features` was taken for
    # the name of the last layer's field, a size the function's annotations
    # never bind, and `in_features != d` was reported as an error.
    report = treespec.check_shapes(Head.__call__)
    assert not report.errors, str(report)
    assert any("in_features == d" in n.message for n in report.notes), str(report)
    assert treespec.check_shapes(Head.flipped).errors


def _rotate(x: jax.Array, cos: jax.Array) -> jax.Array:
    # x: (t, heads, head_dim); cos: (t, head_dim // 2), as rotary tables are
    x1, x2 = x[..., ::2], x[..., 1::2]
    c = cos[:, None, :]
    return jnp.stack([x1 * c - x2 * c, x1 * c + x2 * c], axis=-1).reshape(x.shape)


class RotaryHeads(eqx.Module):
    wq: eqx.nn.Linear
    num_heads: int = eqx.field(static=True)

    def __init__(self, d_model: int, num_heads: int, *, key: Any) -> None:
        self.num_heads = num_heads
        self.wq = eqx.nn.Linear(d_model, d_model, use_bias=False, key=key)

    def __call__(self, x: jax.Array, cos: jax.Array) -> jax.Array:
        t, d = x.shape
        q = jax.vmap(self.wq)(x).reshape(t, self.num_heads, d // self.num_heads)
        return _rotate(q, cos).reshape(t, d)


@treespec.jit
def _rotary(
    attn: RotaryHeads, x: Float[Array, "t d"], cos: Float[Array, "t r"]
) -> Float[Array, "t d"]:
    return attn(x, cos)


@treespec.jit
def _rotary_bug(
    attn: RotaryHeads, x: Float[Array, "t d"], cos: Float[Array, "t r"]
) -> Float[Array, "t d"]:
    return attn(x, cos.T)  # positions against the table's width


def test_a_count_of_heads_is_an_unknown_a_relation_can_need() -> None:
    # The table's r is half a head: d == 2*r*num_heads. At one head (the
    # count taken) that is d == 2*r, an equality of named sizes; with the
    # count an unknown, it holds where sizes divide each other: a note.
    report = treespec.check_shapes(_rotary)
    assert report.ok, str(report)
    notes = [p.message for p in report.problems if "divide each other" in p.message]
    assert notes and "r=" in notes[0] and "d=" in notes[0], str(report)
    report = treespec.check_shapes(_rotary_bug)
    errors = [p for p in report.problems if p.severity == "error"]
    assert errors, str(report)


class Stack(eqx.Module):
    layers: list[eqx.nn.Linear]

    def __init__(self, d: int, num_layers: int, *, key: Any) -> None:
        keys = jax.random.split(key, num_layers)
        self.layers = [eqx.nn.Linear(d, d, key=k) for k in keys]

    def __call__(self, x: jax.Array) -> jax.Array:
        for layer in self.layers:
            x = layer(x)
        return x


def _checked_counting(fun: Any, cls: type, param: str) -> tuple[Any, list[Any]]:
    """`check_shapes(fun)`, and the value of `cls`'s constructor parameter
    `param` at each instance the check built."""
    built: list[Any] = []
    init = cls.__init__  # type: ignore[misc]

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = inspect.signature(init).bind(self, *args, **kwargs)
        built.append(bound.arguments[param])
        init(self, *args, **kwargs)

    counting.__signature__ = inspect.signature(init)  # type: ignore[attr-defined]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cls, "__init__", counting)
        report = treespec.check_shapes(fun)
    return report, built


def test_a_count_of_layers_is_never_tried_at_other_values() -> None:
    # More layers of one shape never make a shape fit: a bug stays an error
    # at once, the stack built once per witness (not at sizes that divide).
    @treespec.jit
    def bug(stack: Stack, x: Float[Array, "n d"]) -> Float[Array, " n"]:
        return jax.vmap(stack)(x)  # (n, d) against " n"

    report, built = _checked_counting(bug, Stack, "num_layers")
    assert [p.severity for p in report.problems] == ["note", "error"], str(report)
    assert set(built) == {1}, built


class StackedGRU(eqx.Module):
    cells: list[eqx.nn.GRUCell]

    def __init__(self, din: int, dh: int, num_layers: int, *, key: Any) -> None:
        keys = jax.random.split(key, num_layers)
        sizes = [din] + [dh] * (num_layers - 1)
        self.cells = [eqx.nn.GRUCell(i, dh, key=k) for i, k in zip(sizes, keys)]

    def scanned(
        self, xs: Float[Array, "t din"], h0: Float[Array, "nl dh"], axis: int
    ) -> tuple[Float[Array, "t dh"], Float[Array, "nl dh"]]:
        def step(hs: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
            new = []
            for cell, h in zip(self.cells, hs):
                x = cell(x, h)
                new.append(x)
            return jnp.stack(new, axis=axis), x

        last, ys = jax.lax.scan(step, h0, xs)
        return ys, last

    @treespec.jit
    def __call__(
        self, xs: Float[Array, "t din"], h0: Float[Array, "nl dh"]
    ) -> tuple[Float[Array, "t dh"], Float[Array, "nl dh"]]:
        return self.scanned(xs, h0, axis=0)


class StackedGRUBug(StackedGRU):
    @treespec.jit
    def __call__(
        self, xs: Float[Array, "t din"], h0: Float[Array, "nl dh"]
    ) -> tuple[Float[Array, "t dh"], Float[Array, "nl dh"]]:
        return self.scanned(xs, h0, axis=-1)  # the bug: states stacked last


def test_a_count_of_layers_the_code_stacks_is_set_against_its_named_size() -> None:
    # One state per layer, stacked against `h0: "nl dh"`: the layers' count
    # stands against `nl` (`float32[1,dh]` against `float32[nl,dh]`), so it
    # is tried at `nl`, where the stack runs: a note, not an error. Never at
    # more than 64 layers (a chain's sizes reach thousands of cells).
    report, built = _checked_counting(StackedGRU.__call__, StackedGRU, "num_layers")
    assert report.ok and not report.skipped, str(report)
    assert any("num_layers=nl" in n.message for n in report.notes), str(report)
    assert max(built) <= 64, built
    # Stacked on the wrong axis, `(dh, nl)` against `(nl, dh)`: two names.
    report = treespec.check_shapes(StackedGRUBug.__call__)
    (error,) = report.errors
    assert "float32[dh,1]" in error.message or "float32[dh,nl]" in error.message


@treespec.jit
def _lstm_cell(
    w_x: Float[Array, "i g"],
    w_h: Float[Array, "h g"],
    x: Float[Array, "b i"],
    state: tuple[Float[Array, "b h"], Float[Array, "b h"]],
) -> tuple[Float[Array, "b h"], Float[Array, "b h"]]:
    h, c = state
    i, f, g, o = jnp.split(x @ w_x + h @ w_h, 4, axis=-1)
    c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    return jax.nn.sigmoid(o) * jnp.tanh(c), c


@treespec.jit
def _lstm_cell_bug(
    w_x: Float[Array, "i g"],
    w_h: Float[Array, "h g"],
    x: Float[Array, "b i"],
    state: tuple[Float[Array, "b h"], Float[Array, "b h"]],
) -> tuple[Float[Array, "b h"], Float[Array, "b h"]]:
    h, c = state
    i, f, g, o = jnp.split(x @ w_x + h @ w_h, 4, axis=0)  # the batch axis split
    c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    return jax.nn.sigmoid(o) * jnp.tanh(c), c


def test_a_quarter_of_a_size_is_read_as_one_and_its_relation_is_a_note() -> None:
    # An LSTM's four gates side by side: g == 4*h, a relation between named
    # sizes the annotations do not state (the 18 of a gate at g=72 is
    # g // 4), as n == h*w of a patch grid is.
    report = treespec.check_shapes(_lstm_cell)
    (note,) = report.problems
    assert note.severity == "note" and "g == 4*h" in note.message, str(report)
    assert "(b, g // 4), (b, h)" in note.message, note.message
    report = treespec.check_shapes(_lstm_cell_bug)
    assert [p.severity for p in report.problems] == ["error"], str(report)


@treespec.jit
def _decoder_step(
    w_x: Float[Array, "dx g"],
    w_h: Float[Array, "h g"],
    emb: Float[Array, "b e"],
    context: Float[Array, "b h"],
    state: tuple[Float[Array, "b h"], Float[Array, "b h"]],
) -> Float[Array, "b h"]:
    x = jnp.concatenate([emb, context], axis=-1)
    return _lstm_cell(w_x, w_h, x, state)[0]


def test_a_nested_calls_binding_against_an_expression_is_a_relation() -> None:
    # The decoder's input is an embedding and a context side by side: its
    # dx is e + h, which a nested treespec function's validation says as
    # `i=dx bound by w_x, got float32[b,h + e]` (JAX orders the sum): a
    # relation, not a bug.
    report = treespec.check_shapes(_decoder_step)
    assert report.ok, str(report)
    relations = [p.message for p in report.problems if "needs a relation" in p.message]
    assert relations and "dx == h + e" in relations[0], str(report)


class Subsample(nnx.Module):
    def __init__(self, num_mels: int, channels: int, *, rngs: nnx.Rngs) -> None:
        self.conv1 = nnx.Conv(1, channels, (3, 3), strides=(2, 2), rngs=rngs)
        self.conv2 = nnx.Conv(channels, channels, (3, 3), strides=(2, 2), rngs=rngs)
        self.proj = nnx.Linear(channels * (num_mels // 4), channels, rngs=rngs)


@treespec.jit
def _subsample(sub: Subsample, mel: Float[Array, "b t m"]) -> Float[Array, "b t//4 c"]:
    x = nnx.relu(sub.conv2(nnx.relu(sub.conv1(mel[..., None]))))
    b, t4, m4, c = x.shape
    return sub.proj(x.reshape(b, t4, m4 * c))


@treespec.jit
def _subsample_bug(
    sub: Subsample, mel: Float[Array, "b t m"]
) -> Float[Array, "b t//4 c"]:
    x = nnx.relu(sub.conv2(nnx.relu(sub.conv1(mel[..., None]))))
    b, t4, m4, c = x.shape
    return sub.proj(x.reshape(b, m4, t4 * c))  # time folded, not frequency


def test_a_constructors_size_is_solved_at_sizes_that_divide_each_other() -> None:
    # num_mels // 4 after two stride-2 convolutions over m: num_mels == m
    # holds only where m is a multiple of 4, which no witness of distinct
    # odd sizes (or their doubles) is; at sizes that divide each other it
    # runs: a note. The bug past it stays an error.
    report = treespec.check_shapes(_subsample)
    assert report.ok, str(report)
    notes = [p.message for p in report.problems if "divide each other" in p.message]
    assert notes and notes[0].startswith("holds only when sizes divide each other")
    ran_at = notes[0].split(", and fails")[0]  # num_mels is m there: unsaid
    assert "m=" in ran_at and "num_mels" not in ran_at, notes[0]
    report = treespec.check_shapes(_subsample_bug)
    assert any(p.severity == "error" for p in report.problems), str(report)


class Attend(eqx.Module):
    w_k: Float[Array, "d_kv d_a"]
    heads: int = eqx.field(static=True)  # no shape: built by __init__

    def __init__(self, kv_dim: int, attn_dim: int, *, key: Any) -> None:
        self.heads = 1
        self.w_k = jax.random.normal(key, (kv_dim, attn_dim)) / kv_dim**0.5


@treespec.jit
def _attend(attn: Attend, ctx: Float[Array, "s d_kv"]) -> Float[Array, "s d_a"]:
    return ctx @ attn.w_k


class CrossLayer(eqx.Module):
    cross: Attend

    def __init__(self, memory_dim: int, attn_dim: int, *, key: Any) -> None:
        self.cross = Attend(memory_dim, attn_dim, key=key)


@treespec.jit
def _cross_layer(layer: CrossLayer, memory: Float[Array, "s e"]) -> Float[Array, "s a"]:
    return _attend(layer.cross, memory)


@treespec.jit
def _cross_layer_bug(
    layer: CrossLayer, memory: Float[Array, "s e"]
) -> Float[Array, "s a"]:
    return _attend(layer.cross, memory.T)  # positions where features go


def test_a_nested_calls_own_name_is_not_the_callers() -> None:
    # The nested call binds its d_kv to the layer's memory_dim, and the
    # caller passes a memory of width e: memory_dim == e (it was taken as
    # d_kv, a name of the nested function only, and the check stopped).
    report = treespec.check_shapes(_cross_layer)
    assert report.ok, str(report)
    assert any("memory_dim == e" in p.message for p in report.notes), str(report)
    assert not any("cannot evaluate" in p.message for p in report.notes), str(report)
    report = treespec.check_shapes(_cross_layer_bug)
    assert any(p.severity == "error" for p in report.problems), str(report)


class Heads(eqx.Module):
    wq: eqx.nn.Linear
    num_heads: int = eqx.field(static=True)

    def __init__(self, d: int, num_heads: int, *, key: Any) -> None:
        self.num_heads = num_heads
        self.wq = eqx.nn.Linear(d, d, key=key)


def test_two_names_that_differ_are_never_tried_at_other_counts() -> None:
    # `(b, t)` against `(t, b)`: an equality between named sizes, which no
    # count of heads changes. The error stands without a run at sizes that
    # divide each other (every one a multiple of 12).
    @treespec.jit
    def bug(m: Heads, x: Float[Array, "b t d"]) -> Float[Array, "b t d"]:
        q = jax.vmap(jax.vmap(m.wq))(x) / x.shape[-1] ** 0.5
        return q + q.transpose(1, 0, 2)

    report, built = _checked_counting(bug, Heads, "d")
    assert [p.severity for p in report.problems][-1] == "error", str(report)
    assert built and not any(d % 12 == 0 for d in built if isinstance(d, int)), built


class BiasedWindowHeads(eqx.Module):
    """blind18's Swin window attention: a count of heads no annotation
    names, whose scores meet a relative bias annotated `"heads t t"`."""

    qkv: eqx.nn.Linear
    num_heads: int = eqx.field(static=True)

    def __init__(self, dim: int, num_heads: int, *, key: Any) -> None:
        self.qkv = eqx.nn.Linear(dim, 3 * dim, key=key)
        self.num_heads = num_heads

    def heads(self, x: jax.Array) -> jax.Array:
        nw, t, c = x.shape
        qkv = jax.vmap(jax.vmap(self.qkv))(x)
        qkv = qkv.reshape(nw, t, 3, self.num_heads, c // self.num_heads)
        return qkv.transpose(2, 0, 3, 1, 4)  # q, k, v: (w, heads, t, dh)

    @treespec.jit
    def __call__(
        self, x: Float[Array, "w t dim"], bias: Float[Array, "heads t t"]
    ) -> Float[Array, "w t dim"]:
        q, k, v = self.heads(x)
        attn = jax.nn.softmax(q @ k.swapaxes(-1, -2) + bias[None], axis=-1)
        return (attn @ v).transpose(0, 2, 1, 3).reshape(x.shape)


class BiasedWindowHeadsBug(BiasedWindowHeads):
    @treespec.jit
    def __call__(
        self, x: Float[Array, "w t dim"], bias: Float[Array, "heads t t"]
    ) -> Float[Array, "w t dim"]:
        q, k, v = self.heads(x)
        attn = jax.nn.softmax(q @ k + bias[None], axis=-1)  # k not transposed
        return (attn @ v).transpose(0, 2, 1, 3).reshape(x.shape)


def test_a_count_of_heads_a_bias_names_is_set_where_the_width_divides() -> None:
    # With one head, the bias's heads broadcast and the output folds `heads`
    # into the width: a false error. `num_heads == heads` needs `dim`
    # divisible by `heads`, where sizes divide each other: a note.
    report = treespec.check_shapes(BiasedWindowHeads.__call__)
    assert report.ok, str(report)
    assert any("num_heads=heads" in p.message for p in report.notes), str(report)
    report = treespec.check_shapes(BiasedWindowHeadsBug.__call__)
    (error,) = report.errors
    lines, first = inspect.getsourcelines(inspect.unwrap(BiasedWindowHeadsBug.__call__))
    bug = next(i for i, text in enumerate(lines) if "q @ k +" in text)
    assert error.line == first + bug, str(report)
    model = BiasedWindowHeads(8, 2, key=jax.random.key(0))
    assert model(jnp.ones((3, 5, 8)), jnp.ones((2, 5, 5))).shape == (3, 5, 8)


class PatchTowerBug(eqx.Module):
    """blind17's CLIP image tower, its pool over the channels and rows."""

    patchify: eqx.nn.Conv2d
    proj: eqx.nn.Linear

    def __init__(
        self, in_channels: int, width: int, embed_dim: int, patch_size: int, *, key: Any
    ) -> None:
        k1, k2 = jax.random.split(key)
        self.patchify = eqx.nn.Conv2d(
            in_channels, width, kernel_size=patch_size, stride=patch_size, key=k1
        )
        self.proj = eqx.nn.Linear(width, embed_dim, use_bias=False, key=k2)

    @treespec.jit
    def __call__(self, images: Float[Array, "b c h w"]) -> Float[Array, "b embed_dim"]:
        feats = jax.vmap(self.patchify)(images)
        pooled = jax.nn.gelu(feats).mean(axis=(1, 2))  # not the rows and columns
        return jax.vmap(self.proj)(pooled)


def test_a_count_is_never_tried_where_nine_sizes_of_2_3_and_5_coincide() -> None:
    # At a chain witness of nine names, with `width == embed_dim // 4` set
    # as a relation, the pooled columns `w // patch_size` (64800/720) were
    # `embed_dim // 4` (360/4): the bug ran there, a divisibility note.
    (error,) = treespec.check_shapes(PatchTowerBug.__call__).errors
    lines, first = inspect.getsourcelines(inspect.unwrap(PatchTowerBug.__call__))
    returned = next(i for i, text in enumerate(lines) if "return jax.vmap" in text)
    assert error.line == first + returned, str(error)


class Critic(nnx.Module):
    """blind6's SAC critic: one layer over observations and actions side by
    side, its input width a sum of two constructor sizes."""

    def __init__(self, obs_dim: int, action_dim: int, *, rngs: nnx.Rngs) -> None:
        self.fc = nnx.Linear(obs_dim + action_dim, 1, rngs=rngs)


@treespec.jit
def _q_value(
    critic: Critic, obs: Float[Array, "b o"], action: Float[Array, "b a"]
) -> Float[Array, " b"]:
    return critic.fc(jnp.concatenate([obs, action], axis=-1))[:, 0]


@treespec.jit
def _q_value_bug(
    critic: Critic, obs: Float[Array, "b o"], action: Float[Array, "b a"]
) -> Float[Array, " b"]:
    return critic.fc(jnp.concatenate([obs, action], axis=-1))[0]  # BUG: a row


def test_a_sum_of_constructor_sizes_against_a_sum_of_named_ones_is_solved() -> None:
    # `(o + a,)` against `(obs_dim + action_dim,)`: each unknown is the
    # named size its name begins like; the function runs, and says so.
    report = treespec.check_shapes(_q_value)
    assert report.errors == (), str(report)
    (note,) = report.notes
    # (JAX 0.12 writes the sums' terms in another order: each pair counts.)
    assert "obs_dim == o" in note.message and "action_dim == a" in note.message, note
    (error,) = treespec.check_shapes(_q_value_bug).errors
    lines, start = inspect.getsourcelines(_q_value_bug)
    assert "# BUG" in lines[error.line - start], str(error)


class ConvEncoder(eqx.Module):
    """blind8's VAE encoder: a Linear over the flattened feature map, its
    width from five constructor sizes, which only `height == h` and `width
    == w` together make fit."""

    conv1: eqx.nn.Conv2d
    conv2: eqx.nn.Conv2d
    fc: eqx.nn.Linear

    def __init__(
        self, in_ch: int, ch: int, height: int, width: int, latent: int, key: Any
    ) -> None:
        k1, k2, k3 = jax.random.split(key, 3)
        self.conv1 = eqx.nn.Conv2d(in_ch, ch, 4, stride=2, padding=1, key=k1)
        self.conv2 = eqx.nn.Conv2d(ch, 2 * ch, 4, stride=2, padding=1, key=k2)
        size = 2 * ch * (height // 4) * (width // 4)
        self.fc = eqx.nn.Linear(size, latent, key=k3)


@treespec.jit
def _encode(enc: ConvEncoder, x: Float[Array, "b c h w"]) -> Float[Array, "b z"]:
    def one(x: jax.Array) -> jax.Array:
        h = enc.conv2(jax.nn.relu(enc.conv1(x)))
        return enc.fc(h.reshape(-1))

    return jax.vmap(one)(x)


@treespec.jit
def _encode_bug(enc: ConvEncoder, x: Float[Array, "b c h w"]) -> Float[Array, "b z"]:
    def one(x: jax.Array) -> jax.Array:
        h = enc.conv2(jax.nn.relu(enc.conv1(x)))
        return enc.fc(h.reshape(h.shape[0], -1))  # BUG: the channels kept apart

    return jax.vmap(one)(x)


def test_sizes_named_like_the_annotations_are_tried_together_first() -> None:
    # No single size set equal to a named one makes the Linear fit; the
    # sizes named like them (`height`: `h`, `width`: `w`) do, tried first.
    report = treespec.check_shapes(_encode)
    assert report.errors == (), str(report)
    assert any(
        "height == h" in n.message and "width == w" in n.message for n in report.notes
    ), str(report)
    assert treespec.check_shapes(_encode_bug).errors, str(
        treespec.check_shapes(_encode_bug)
    )


class ScaledNorm(eqx.Module):
    scale: jax.Array

    def __init__(self, d_model: int) -> None:
        self.scale = jnp.ones(d_model)

    @treespec.jit
    def __call__(self, x: Float[Array, "b 1 d"]) -> Float[Array, "b 1 d"]:
        # JAX says `shapes=[(b, 1, d), (d_model,)]` of a product of three.
        ms = jnp.mean(x * x, axis=-1, keepdims=True)
        return x * jax.lax.rsqrt(ms + 1e-6) * self.scale


def test_a_constructors_size_in_a_broadcast_of_a_listed_pair_is_solved() -> None:
    # The pair is read from JAX's message: the relation taken, and nothing
    # else to say (no divisibility, which a guess left behind).
    report = treespec.check_shapes(ScaledNorm.__call__)
    (note,) = report.problems
    assert "d_model == d" in note.message, str(report)


def _positional(x: Any, num_freqs: int) -> Any:
    freqs = 2.0 ** jnp.arange(num_freqs)
    scaled = (x[:, None, :] * freqs[None, :, None]).reshape(x.shape[0], -1)
    return jnp.concatenate([x, jnp.sin(scaled), jnp.cos(scaled)], axis=-1)


class Radiance(eqx.Module):
    """NeRF's field: its input width is the encoding's, `6*num_freqs + 3`."""

    layer: eqx.nn.Linear

    def __init__(self, pos_dim: int, width: int, *, key: Any = None) -> None:
        key = jax.random.key(0) if key is None else key
        self.layer = eqx.nn.Linear(pos_dim, width, key=key)


@treespec.jit
def _radiance(
    field: Radiance, x: Float[Array, "n 3"], num_freqs: treespec.Static[int]
) -> Float[Array, "n w"]:
    return jax.vmap(field.layer)(_positional(x, num_freqs))


@treespec.jit
def _radiance_bug(
    field: Radiance, x: Float[Array, "n 3"], num_freqs: treespec.Static[int]
) -> Float[Array, "n w"]:
    return jax.vmap(field.layer)(_positional(x, num_freqs).T)  # the bug: transposed


def test_a_constructors_size_against_a_number_that_moves_with_the_sizes() -> None:
    # At concrete witnesses `pos_dim` meets 177 (num_freqs=29), then 351 at
    # twice the sizes: an expression of them, which the author builds the
    # field with; a number the body hard-coded would stay put.
    report = treespec.check_shapes(_radiance)
    assert report.ok, str(report)
    assert any("pos_dim == 6*num_freqs + 3" in n.message for n in report.notes), str(
        report
    )
    assert treespec.check_shapes(_radiance_bug).errors


def test_a_number_the_body_hard_codes_is_never_an_unknowns_size() -> None:
    class Head(eqx.Module):
        linear: eqx.nn.Linear

        def __init__(self, d: int, num_classes: int, *, key: Any = None) -> None:
            key = jax.random.key(0) if key is None else key
            self.linear = eqx.nn.Linear(d, num_classes, key=key)

        @treespec.jit
        def loss(self, x: Float[Array, " d"], y: Int[Array, ""]) -> Float[Array, ""]:
            return -(jax.nn.log_softmax(self.linear(x)) * jax.nn.one_hot(y, 10)).sum()

    report = treespec.check_shapes(Head.loss)
    assert report.errors, str(report)


class Projection(eqx.Module):
    lin: eqx.nn.Linear

    def __init__(self, in_size: int, out_size: int, *, key: jax.Array) -> None:
        self.lin = eqx.nn.Linear(in_size, out_size, key=key)


@treespec.jit
def project_bug(
    m: Projection, x: Float[Array, "b d"], y: Float[Array, "b e"]
) -> Float[Array, "b e"]:
    return jax.vmap(m.lin)(x) + y.T  # y not transposed back: (b, e) + (e, b)


def test_the_sizes_an_error_was_found_at_are_those_the_run_used() -> None:
    # in_size and out_size were taken as the code needs them (in_size == d,
    # out_size == b): the run had no in_size=11 of its own, so the sizes
    # shown are the annotations' only, the relations said in their note.
    report = treespec.check_shapes(project_bug)
    (error,) = report.errors
    assert "found at concrete sizes b=" in error.message, error.message
    assert "in_size=" not in error.message and "out_size=" not in error.message
    assert any("in_size == d" in note.message for note in report.notes), str(report)


class Downsampler(eqx.Module):
    convs: tuple[eqx.nn.Conv1d, ...]
    head: eqx.nn.Linear

    def __init__(
        self, channels: int, length: int, num_stages: int, *, key: jax.Array
    ) -> None:
        keys = jax.random.split(key, num_stages + 1)
        self.convs = tuple(
            eqx.nn.Conv1d(channels, channels, 2, stride=2, key=k) for k in keys[:-1]
        )
        self.head = eqx.nn.Linear(channels * (length // 2**num_stages), 1, key=keys[-1])

    @treespec.jit
    def __call__(self, x: Float[Array, "c n"]) -> Float[Array, "1"]:
        for conv in self.convs:
            x = conv(x)
        return self.head(x.reshape(-1))


def test_a_number_of_stages_is_a_count_of_repeats_never_a_size() -> None:
    # `num_stages` repeats a layer: 1, said, and never the size 11 of a
    # witness (eleven stride-2 stages of a length of 13 leave nothing).
    report = treespec.check_shapes(Downsampler.__call__)
    assert not report.errors and not report.skipped, str(report)
    assert any("self.num_stages=1" in n.message for n in report.notes), str(report)


class Routing(eqx.Module):
    W: jax.Array

    def __init__(self, in_caps: int, in_dim: int, out_caps: int, out_dim: int) -> None:
        self.W = jnp.zeros((in_caps, out_caps, out_dim, in_dim))

    @treespec.jit
    def __call__(self, u: Float[Array, "b ni di"]) -> Float[Array, "b ni no do"]:
        return jnp.einsum("iojd,bid->bioj", self.W, u)


class RoutingBug(eqx.Module):
    W: jax.Array

    def __init__(self, in_caps: int, in_dim: int, out_caps: int, out_dim: int) -> None:
        self.W = jnp.zeros((in_caps, out_caps, out_dim, in_dim))

    @treespec.jit
    def __call__(self, u: Float[Array, "b ni di"]) -> Float[Array, "b ni no do"]:
        return jnp.einsum("iojd,bjd->bioj", self.W, u)  # reads u's capsules as j


def test_a_constructors_sizes_met_by_einsum_labels_are_taken_label_by_label() -> None:
    # JAX's einsum names the shapes and their labels: `i` pairs in_caps with
    # ni, `d` in_dim with di; the sizes are taken so, said in a note.
    report = treespec.check_shapes(Routing.__call__)
    assert report.ok, str(report)
    (note,) = [n for n in report.notes if "taken as the code needs" in n.message]
    assert "in_caps == ni" in note.message and "in_dim == di" in note.message
    # The twin's sizes taken for j leave a result that breaks its annotation.
    (error,) = treespec.check_shapes(RoutingBug.__call__).errors
    assert "the return value" in error.message, error.message


class Readout(eqx.Module):
    W: jax.Array

    def __init__(self, in_size: int, out_size: int) -> None:
        self.W = jnp.zeros((in_size, out_size))

    @treespec.jit
    def __call__(self, u: Float[Array, " n"]) -> Float[Array, " o"]:
        return jnp.einsum("i,ij->j", u, self.W)


def test_an_einsum_operand_of_one_axis_is_paired_by_its_label() -> None:
    # JAX prints a one-axis operand as `(n,)`: its label pairs n with in_size.
    report = treespec.check_shapes(Readout.__call__)
    assert report.ok, str(report)
    (note,) = report.notes
    assert "in_size == n" in note.message and "divide" not in note.message, note


class Adapter(nnx.Module):
    def __init__(
        self, in_features: int, out_features: int, rank: int, *, rngs: nnx.Rngs
    ):
        self.base = nnx.Linear(in_features, out_features, rngs=rngs)
        self.down = nnx.Param(jnp.zeros((in_features, rank)))
        self.up = nnx.Param(jnp.zeros((rank, out_features)))

    @treespec.jit
    def __call__(self, x: Float[Array, "b din"]) -> Float[Array, "b dout"]:
        return self.base(x) + x @ self.down[...] @ self.up[...]


class AdapterBug(nnx.Module):
    def __init__(
        self, in_features: int, out_features: int, rank: int, *, rngs: nnx.Rngs
    ):
        self.base = nnx.Linear(in_features, out_features, rngs=rngs)
        self.down = nnx.Param(jnp.zeros((in_features, rank)))
        self.up = nnx.Param(jnp.zeros((rank, in_features)))  # the bug: in, not out

    @treespec.jit
    def __call__(self, x: Float[Array, "b din"]) -> Float[Array, "b dout"]:
        return self.base(x) + x @ self.down[...] @ self.up[...]


def test_a_return_size_solved_to_an_arguments_size_is_an_error() -> None:
    # `dout` is named only by the return: the clean adapter returns its
    # `out_features`, whatever it is; the bug's sum needs out_features == din,
    # so it always returns din where the annotation names a size of its own.
    assert treespec.check_shapes(Adapter.__call__).ok
    report = treespec.check_shapes(AdapterBug.__call__)
    errors = [p for p in report.problems if p.severity == "error"]
    assert len(errors) == 1, str(report)
    assert "dout" in errors[0].message and "din" in errors[0].message, str(report)
    assert "out_features == din" in errors[0].message, str(report)


class Dueling(eqx.Module):
    value: eqx.nn.Linear
    advantage: eqx.nn.Linear

    def __init__(self, features: int, n_actions: int, *, key: Any = None) -> None:
        k1, k2 = jax.random.split(jax.random.key(0) if key is None else key)
        self.value = eqx.nn.Linear(features, 1, key=k1)
        self.advantage = eqx.nn.Linear(features, n_actions, key=k2)

    @treespec.jit
    def __call__(
        self, h: Float[Array, "b f"], bug: treespec.Static[bool] = False
    ) -> tuple[Float[Array, "b a"], Float[Array, " b"]]:
        v = jax.vmap(self.value)(h)
        adv = jax.vmap(self.advantage)(h)
        mean = adv.mean(axis=1) if bug else adv.mean(axis=1, keepdims=True)
        q = v + adv - mean  # the bug: (b, a) less (b,) needs a == b
        return q, q.max(axis=1)


def test_a_return_size_of_a_tuple_solved_to_an_arguments_size_names_its_place() -> None:
    report = treespec.check_shapes(Dueling.__call__)
    errors = [p for p in report.problems if p.severity == "error"]
    assert len(errors) == 1 and "bug=True" in errors[0].message, str(report)
    message = errors[0].message
    assert message.startswith("the return value, at return[0]: "), str(report)
    assert "a, which only the return annotation names, always comes out b" in message
    assert "(n_actions == b, as the code needs)" in message, str(report)
    lines, first = inspect.getsourcelines(inspect.unwrap(Dueling.__call__))
    returned = next(i for i, text in enumerate(lines) if "return q" in text)
    assert errors[0].line == first + returned, str(report)


class HeadsCache(NamedTuple):
    k: Float[Array, "b h s dh"]
    v: Float[Array, "b h s dh"]


class CachedAttention(eqx.Module):
    """One decoding step of attention over a cache annotated by heads and
    head width, beside a model width `d`: the author builds it with
    `num_heads == h` and `d == h*dh`."""

    num_heads: int = eqx.field(static=True)
    head_dim: int = eqx.field(static=True)
    qkv: eqx.nn.Linear
    out: eqx.nn.Linear

    def __init__(self, d_model: int, num_heads: int, *, key: Any = None):
        k1, k2 = jax.random.split(jax.random.key(0) if key is None else key)
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.qkv = eqx.nn.Linear(d_model, 3 * d_model, use_bias=False, key=k1)
        self.out = eqx.nn.Linear(d_model, d_model, use_bias=False, key=k2)

    def write(self, cache: HeadsCache, k: Array, v: Array, pos: Array) -> HeadsCache:
        return HeadsCache(cache.k.at[:, :, pos].set(k), cache.v.at[:, :, pos].set(v))

    @treespec.jit
    def __call__(
        self, x: Float[Array, "b d"], cache: HeadsCache, pos: Int[Array, ""]
    ) -> tuple[Float[Array, "b d"], HeadsCache]:
        b = x.shape[0]
        q, k, v = jnp.split(jax.vmap(self.qkv)(x), 3, axis=-1)
        q, k, v = (y.reshape(b, self.num_heads, self.head_dim) for y in (q, k, v))
        cache = self.write(cache, k, v, pos)
        scores = jnp.einsum("bhd,bhsd->bhs", q, cache.k) / self.head_dim**0.5
        mixed = jnp.einsum("bhs,bhsd->bhd", jax.nn.softmax(scores, axis=-1), cache.v)
        return jax.vmap(self.out)(mixed.reshape(b, -1)), cache


class CachedAttentionBug(CachedAttention):
    def write(self, cache: HeadsCache, k: Array, v: Array, pos: Array) -> HeadsCache:
        # The bug: the values written along the heads' axis, not the steps'.
        return HeadsCache(cache.k.at[:, :, pos].set(k), cache.v.at[:, pos].set(v))

    @treespec.jit
    def __call__(
        self, x: Float[Array, "b d"], cache: HeadsCache, pos: Int[Array, ""]
    ) -> tuple[Float[Array, "b d"], HeadsCache]:
        return CachedAttention.__call__.__wrapped__(self, x, cache, pos)


def test_a_count_of_heads_set_against_a_caches_heads_is_solved_in_a_note() -> None:
    # One head (the count's default) fails against the cache's `h`; with
    # num_heads == h it runs where d == h*dh, which no annotation states:
    # a relation the code needs, a note that says it, never an error.
    cache = HeadsCache(*[jnp.zeros((2, 4, 9, 6))] * 2)
    CachedAttention(24, 4)(jnp.zeros((2, 24)), cache, jnp.array(0))  # it runs
    report = treespec.check_shapes(CachedAttention.__call__)
    assert report.ok, str(report)
    text = str(report)
    assert "d == h*dh" in text and "num_heads=h" in text, text


def test_a_bug_past_a_count_set_against_a_caches_heads_is_an_error() -> None:
    cache = HeadsCache(*[jnp.zeros((2, 4, 9, 6))] * 2)
    with pytest.raises(ValueError):  # it fails at run time
        CachedAttentionBug(24, 4)(jnp.zeros((2, 24)), cache, jnp.array(0))
    report = treespec.check_shapes(CachedAttentionBug.__call__)
    errors = [p for p in report.problems if p.severity == "error"]
    assert errors, str(report)


@treespec.jit
def best_items(
    scores: Float[Array, "b n"], k: treespec.Static[int]
) -> Int[Array, "b r"]:
    return jax.lax.top_k(scores, k)[1]


class NormedLogits(nnx.Module):
    def __init__(self, c: int, vocab: int, *, rngs: nnx.Rngs) -> None:
        self.out = nnx.Linear(c, vocab, rngs=rngs)
        self.norm = nnx.LayerNorm(c, rngs=rngs)  # the bug: the width of the input

    @treespec.jit
    def __call__(self, feats: Float[Array, "b t c"]) -> Float[Array, "b t v"]:
        return self.norm(self.out(feats))


def test_a_return_size_that_one_guess_of_several_sets_is_no_error() -> None:
    # `k` may be any size up to n: the first that runs (k == b) is a guess,
    # and with k == n it runs too, so `r` need not come out b.
    report = treespec.check_shapes(best_items)
    assert report.ok, str(report)


def test_a_return_size_that_the_only_guess_that_runs_sets_is_an_error() -> None:
    # Only vocab == c runs (the norm is built for c), so `v` always comes
    # out c: the bug, though no message of JAX's named vocab.
    with pytest.raises(TypeError):  # it fails at run time where vocab != c
        NormedLogits.__call__.__wrapped__(
            NormedLogits(4, 7, rngs=nnx.Rngs(0)), jnp.zeros((2, 3, 4))
        )
    report = treespec.check_shapes(NormedLogits.__call__)
    errors = [p for p in report.problems if p.severity == "error"]
    assert len(errors) == 1, str(report)
    assert (
        "v, which only the return annotation names, always comes out c"
        in errors[0].message
    )


class CachedKeys(eqx.Module):
    """Heads of a width of their own (`head_dim`, no annotation names it)
    appended to a cache annotated by heads: one head (the count's default)
    fails against `h`; with num_heads == h it runs."""

    num_heads: int = eqx.field(static=True)
    head_dim: int = eqx.field(static=True)
    proj: eqx.nn.Linear

    def __init__(self, d: int, num_heads: int, head_dim: int, *, key: Any = None):
        self.num_heads, self.head_dim = num_heads, head_dim
        key = jax.random.key(0) if key is None else key
        self.proj = eqx.nn.Linear(d, num_heads * head_dim, use_bias=False, key=key)

    @treespec.jit
    def __call__(
        self, x: Float[Array, "b d"], keys: Float[Array, "b h s dh"]
    ) -> Float[Array, "b h s+1 dh"]:
        k = jax.vmap(self.proj)(x).reshape(x.shape[0], self.num_heads, 1, self.head_dim)
        return jnp.concatenate([keys, k], axis=2)


class CachedKeysBug(CachedKeys):
    @treespec.jit
    def __call__(
        self, x: Float[Array, "b d"], keys: Float[Array, "b h s dh"]
    ) -> Float[Array, "b h s+1 dh"]:
        k = jax.vmap(self.proj)(x).reshape(x.shape[0], self.num_heads, 1, self.head_dim)
        return jnp.concatenate([keys, k], axis=1)  # the bug: along the heads


def test_a_count_set_against_a_named_size_alone_is_taken_in_a_note() -> None:
    report = treespec.check_shapes(CachedKeys.__call__)
    assert report.ok, str(report)
    assert "count taken as the code needs it, num_heads=h" in str(report), str(report)
    bug = treespec.check_shapes(CachedKeysBug.__call__)
    errors = [p for p in bug.problems if p.severity == "error"]
    assert len(errors) == 1 and "concatenat" in errors[0].message, str(bug)


class Fuse(eqx.Module):
    local: eqx.nn.Linear
    pooled: eqx.nn.Linear
    head: eqx.nn.Linear

    def __init__(self, d: int, local_dim: int, global_dim: int, k: int):
        k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
        self.local = eqx.nn.Linear(d, local_dim, key=k1)
        self.pooled = eqx.nn.Linear(d, global_dim, key=k2)
        self.head = eqx.nn.Linear(local_dim + global_dim, k, key=k3)

    def both(self, x: Array) -> Array:
        local = jax.vmap(self.local)(x)
        pooled = jnp.tile(self.pooled(x.mean(axis=0)), (x.shape[0], 1))
        return jnp.concatenate([local, pooled], axis=1)

    @treespec.jit
    def __call__(self, x: Float[Array, "n d"]) -> Float[Array, "n k"]:
        return jax.vmap(self.head)(self.both(x))


class FuseBug(Fuse):
    def both(self, x: Array) -> Array:
        local = jax.vmap(self.local)(x)
        pooled = jnp.tile(self.pooled(x.mean(axis=0)), (x.shape[0], 1))
        return jnp.concatenate([local, pooled], axis=0)  # the bug: the points

    @treespec.jit
    def __call__(self, x: Float[Array, "n d"]) -> Float[Array, "n k"]:
        return jax.vmap(self.head)(self.both(x))


def test_a_size_against_a_multiple_of_itself_is_no_relation_to_take() -> None:
    # Concatenated along the points, the sizes must match: local_dim ==
    # global_dim, an unknown against another, taken; the head then gets
    # global_dim where it was built for twice that, which no size fits:
    # the error stands, not a stop in a note.
    assert treespec.check_shapes(Fuse.__call__).ok
    report = treespec.check_shapes(FuseBug.__call__)
    errors = [p for p in report.problems if p.severity == "error"]
    assert len(errors) == 1, str(report)
    assert "not checked past" not in str(report), str(report)
    assert "global_dim == 2*global_dim" not in str(report), str(report)


class OptionalWidthMlp(eqx.Module):
    """timm's and Equimo's `Mlp`: `out_dim=None` is the input's width."""

    fc1: eqx.nn.Linear
    fc2: eqx.nn.Linear

    def __init__(
        self, dim: int, *, out_dim: int | None = None, hidden_dim: int | None = None
    ) -> None:
        hidden_dim = hidden_dim or 4 * dim
        out_dim = out_dim or dim
        k1, k2 = jax.random.split(jax.random.key(0))
        self.fc1 = eqx.nn.Linear(dim, hidden_dim, key=k1)
        self.fc2 = eqx.nn.Linear(hidden_dim, out_dim, key=k2)

    @treespec.jit
    def __call__(self, x: Float[Array, "n dim"]) -> Float[Array, "n dim"]:
        return jax.vmap(self.fc2)(jax.nn.gelu(jax.vmap(self.fc1)(x)))


class OptionalWidthMlpBug(eqx.Module):
    fc1: eqx.nn.Linear
    fc2: eqx.nn.Linear

    def __init__(
        self, dim: int, *, out_dim: int | None = None, hidden_dim: int | None = None
    ) -> None:
        hidden_dim = hidden_dim or 4 * dim
        out_dim = out_dim or dim
        k1, k2 = jax.random.split(jax.random.key(0))
        self.fc1 = eqx.nn.Linear(dim, hidden_dim, key=k1)
        self.fc2 = eqx.nn.Linear(hidden_dim, hidden_dim, key=k2)  # BUG: hidden out

    @treespec.jit
    def __call__(self, x: Float[Array, "n dim"]) -> Float[Array, "n dim"]:
        return jax.vmap(self.fc2)(jax.nn.gelu(jax.vmap(self.fc1)(x)))


def test_an_optional_size_left_at_none_is_checked_at_its_default_too() -> None:
    # As a size of its own, `out_dim` breaks the return annotation; at its
    # default the constructor makes it `dim`, as the annotation says: the
    # module as its author builds it runs, so a note (DESIGN, "an error is
    # certain"), which says both. A bug at the default too stays an error.
    (note,) = treespec.check_shapes(OptionalWidthMlp.__call__).problems
    assert note.severity == "note", str(note)
    assert "self.out_dim" in note.message and "default None" in note.message
    assert "got float32[n,out_dim]" in note.message, str(note)
    (error,) = treespec.check_shapes(OptionalWidthMlpBug.__call__).errors
    source, first = inspect.getsourcelines(OptionalWidthMlpBug.__call__)
    returned = next(i for i, text in enumerate(source) if "return" in text)
    assert error.line == first + returned, str(error)
    assert "got float32[n,hidden_dim]" in error.message, str(error)


class CategoricalTokens(nnx.Module):
    """An FT-Transformer's tokenizer: one embedding per categorical feature,
    as many as `cardinalities` has, which is `n_cat`."""

    def __init__(
        self, cardinalities: tuple[int, ...], embed_dim: int, *, rngs: nnx.Rngs
    ) -> None:
        embeds = [nnx.Embed(c, embed_dim, rngs=rngs) for c in cardinalities]
        self.embeds = nnx.List(embeds)

    @treespec.jit
    def __call__(self, cat: Int[Array, "b n_cat"]) -> Float[Array, "b n_cat embed_dim"]:
        return jnp.stack([e(cat[:, i]) for i, e in enumerate(self.embeds)], axis=1)


class CategoricalTokensBug(CategoricalTokens):
    @treespec.jit
    def __call__(self, cat: Int[Array, "b n_cat"]) -> Float[Array, "b n_cat embed_dim"]:
        return jnp.stack([e(cat[:, i]) for i, e in enumerate(self.embeds)], axis=2)


class EqxCategoricalTokens(eqx.Module):
    embeds: list[eqx.nn.Embedding]

    def __init__(self, cardinalities: tuple[int, ...], embed_dim: int) -> None:
        key = jax.random.key(0)
        self.embeds = [eqx.nn.Embedding(c, embed_dim, key=key) for c in cardinalities]

    @treespec.jit
    def __call__(self, cat: Int[Array, "n_cat"]) -> Float[Array, "n_cat+1 embed_dim"]:
        tokens = jnp.stack([e(cat[i]) for i, e in enumerate(self.embeds)])
        return jnp.concatenate([jnp.zeros_like(tokens[:1]), tokens])


def test_a_sequence_of_sizes_has_as_many_parts_as_the_size_it_stands_for() -> None:
    # `cardinalities` is taken with two parts, each a size of its own; the
    # module then makes two tokens where the annotation says n_cat. With as
    # many parts as n_cat, as its author builds it, it runs: a note saying
    # both (DESIGN, "an error is certain"). A wrong axis fails at any
    # length: the error stands, at its line.
    for clean in (CategoricalTokens, EqxCategoricalTokens):
        report = treespec.check_shapes(clean.__call__)
        assert report.ok, str(report)
        (note,) = report.problems
        assert "self.cardinalities of n_cat parts" in note.message, str(note)
        assert "with two parts" in note.message, str(note)
    (error,) = treespec.check_shapes(CategoricalTokensBug.__call__).errors
    source, first = inspect.getsourcelines(CategoricalTokensBug.__call__)
    returned = next(i for i, text in enumerate(source) if "return" in text)
    assert error.line == first + returned, str(error)
    assert "of n_cat parts" not in error.message, str(error)


class RoutedExperts(eqx.Module):
    """eqx-zoo's `SparseMoE`: its constructor refuses `k > num_experts`."""

    gate: eqx.nn.Linear
    w: jax.Array
    k: int = eqx.field(static=True)

    def __init__(self, dim: int, *, num_experts: int, num_experts_per_tok: int) -> None:
        if not 1 <= num_experts_per_tok <= num_experts:
            raise ValueError("num_experts_per_tok must be between 1 and num_experts")
        self.gate = eqx.nn.Linear(dim, num_experts, key=jax.random.key(0))
        self.w = jnp.ones((num_experts, dim, dim))
        self.k = num_experts_per_tok

    @treespec.jit
    def __call__(self, x: Float[Array, "seq dim"]) -> Float[Array, "seq dim"]:
        weights, idx = jax.lax.top_k(jax.vmap(self.gate)(x), self.k)
        outs = jnp.einsum("sd,sked->ske", x, self.w[idx])
        return (weights[..., None] * outs).sum(1)  # over the chosen experts


class RoutedExpertsBug(RoutedExperts):
    @treespec.jit
    def __call__(self, x: Float[Array, "seq dim"]) -> Float[Array, "seq dim"]:
        weights, idx = jax.lax.top_k(jax.vmap(self.gate)(x), self.k)
        outs = jnp.einsum("sd,sked->ske", x, self.w[idx])
        return (weights[..., None] * outs).sum(2)  # BUG: over the features


def test_a_constructor_refusing_an_ordering_of_two_sizes_is_built_the_other_way() -> (
    None
):
    # The witnesses give `num_experts_per_tok` the larger size; its
    # constructor refuses both. With the two its message names the other
    # way round it is built, as its author builds it: checked, no note.
    report = treespec.check_shapes(RoutedExperts.__call__)
    assert report.problems == (), str(report)
    (error,) = treespec.check_shapes(RoutedExpertsBug.__call__).errors
    assert "got float32[seq,num_experts_per_tok]" in error.message, str(error)


class Stacked(NamedTuple):
    w: Float[Array, "l d d"]
    b: Float[Array, "l d"]


@treespec.jit
def ema_step(ema: Stacked, params: Stacked, decay: Float[Array, " l"]) -> Stacked:
    def update(e: jax.Array, p: jax.Array) -> jax.Array:
        rate = decay.reshape((-1,) + (1,) * (p.ndim - 1))
        return e - (1.0 - rate) * (e - p)

    return jax.tree.map(update, ema, params)


def test_relations_taken_hold_together() -> None:
    # Two arguments of one class bind their names per instance: the code
    # needs `d of ema == d of params`, then `l of params == l`, and each
    # relation taken holds with the others (`l of ema` is `l` too), so the
    # check goes on to the end, never stops at "a size the checker cannot
    # evaluate"; the note says each relation once.
    report = treespec.check_shapes(ema_step)
    assert report.ok, str(report)
    (note,) = report.problems
    assert "not checked past" not in note.message, str(note)
    assert "l of params == l" in note.message, str(note)
    assert "d of params == d of ema" not in note.message, str(note)


class HeadCache(eqx.Module):
    k: Float[Array, "max_len kv_heads head_dim"]

    @treespec.jit
    def update(
        self, k: Float[Array, "seq kv_heads head_dim"], start: Int[Array, ""]
    ) -> HeadCache:
        return HeadCache(jax.lax.dynamic_update_slice_in_dim(self.k, k, start, axis=0))


class OneHeadKeys(eqx.Module):
    proj: eqx.nn.Linear

    def __init__(self, dim: int, head_dim: int) -> None:
        self.proj = eqx.nn.Linear(dim, head_dim, key=jax.random.key(0))

    @treespec.jit
    def __call__(
        self, x: Float[Array, "seq dim"], cache: HeadCache, start: Int[Array, ""]
    ) -> HeadCache:
        k = jax.vmap(self.proj)(x)[:, None, :]  # one head where the cache has kv_heads
        return cache.update(k, start)


def test_an_unknown_tried_at_each_named_size_is_no_size_it_cannot_evaluate() -> None:
    # The body hard-codes one head against the cache's `kv_heads`: no value
    # of the constructor's `head_dim` helps, and each value tried asks for
    # itself again. That is the failure standing, an error at the call, not
    # a stop at "a size the checker cannot evaluate" that exits 0.
    report = treespec.check_shapes(OneHeadKeys.__call__)
    (error,) = report.errors
    assert "got float32[seq,1,head_dim]" in error.message, str(error)
    assert "cannot evaluate" not in str(report), str(report)


class GroupedKeys(eqx.Module):
    proj: eqx.nn.Linear
    num_kv_heads: int = eqx.field(static=True)
    head_dim: int = eqx.field(static=True)

    def __init__(self, dim: int, num_kv_heads: int, head_dim: int) -> None:
        self.proj = eqx.nn.Linear(dim, num_kv_heads * head_dim, key=jax.random.key(0))
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim

    @treespec.jit
    def __call__(
        self, x: Float[Array, "seq dim"], cache: HeadCache, start: Int[Array, ""]
    ) -> HeadCache:
        shape = (x.shape[0], self.num_kv_heads, self.head_dim)
        return cache.update(jax.vmap(self.proj)(x).reshape(shape), start)


def test_a_count_against_a_nested_calls_bound_size_is_set_at_it() -> None:
    # eqx-zoo's grouped-query attention: the key-value heads, a count taken
    # as 1, meet the cache's `kv_heads` through the nested call's refusal
    # (`kv_heads=kv_heads bound by self.k, got float32[seq,1,head_dim]`).
    # Built with as many, as its author builds it, it runs: a note.
    report = treespec.check_shapes(GroupedKeys.__call__)
    assert report.errors == (), str(report)
    assert any("num_kv_heads=kv_heads" in n.message for n in report.notes), str(report)


class PatchTokens(nnx.Module):
    """A ViT's patches, a class token, and positions for the patches only."""

    def __init__(
        self, img: int, patch: int, chans: int, dim: int, *, rngs: nnx.Rngs
    ) -> None:
        size = (patch, patch)
        self.proj = nnx.Conv(chans, dim, size, strides=size, padding="VALID", rngs=rngs)
        self.cls = nnx.Param(jnp.zeros((1, 1, dim)))
        self.pos = nnx.Param(jnp.zeros((1, (img // patch) ** 2, dim)))

    @treespec.jit
    def __call__(self, x: Float[Array, "b img img chans"]) -> Float[Array, "b t dim"]:
        x = self.proj(x)
        x = x.reshape(x.shape[0], -1, x.shape[-1])
        cls = jnp.broadcast_to(self.cls[...], (x.shape[0], 1, x.shape[-1]))
        return jnp.concatenate([cls, x], axis=1) + self.pos[...]


def test_witnesses_taken_the_other_way_round_are_apart() -> None:
    # The first witnesses make a patch larger than its image: no patch at
    # all. The other order puts the image well above the patch, never a
    # single patch by chance, whose one position broadcasts over the class
    # token too. Only `patch == img` makes the bug run, and the note says so.
    report = treespec.check_shapes(PatchTokens.__call__)
    assert report.errors == (), str(report)
    assert any("patch == img" in n.message for n in report.notes), str(report)


class GroupedKeysMasked(GroupedKeys):
    """`GroupedKeys` with a mask over the cache's slots."""

    @treespec.jit
    def __call__(  # type: ignore[override]  # one more argument, the mask
        self,
        x: Float[Array, "seq dim"],
        cache: HeadCache,
        start: Int[Array, ""],
        mask: Float[Array, "seq keys"],
    ) -> Float[Array, "max_len kv_heads head_dim"]:
        shape = (x.shape[0], self.num_kv_heads, self.head_dim)
        cache = cache.update(jax.vmap(self.proj)(x).reshape(shape), start)
        return cache.k * mask.T[:, :1, None]  # keys where the cache has max_len


def test_a_count_set_as_needed_shows_the_error_it_hid() -> None:
    # As taken (one key-value head) the cache refuses the keys; set as the
    # code needs it, the count gets past that line to the real error: the
    # mask's `keys` against the cache's `max_len`, two sizes the annotations
    # keep distinct. That line is the error, saying the count it ran with.
    (error,) = treespec.check_shapes(GroupedKeysMasked.__call__).errors
    source, first = inspect.getsourcelines(GroupedKeysMasked.__call__)
    line = next(i for i, text in enumerate(source) if "mask.T" in text)
    assert error.line == first + line, str(error)
    assert "num_kv_heads=kv_heads" in error.message, str(error)
    assert "keys" in error.message and "max_len" in error.message, str(error)


class LatentCrossAttention(nnx.Module):
    """Perceiver's cross-attention: latents of one width attend to inputs of
    another, each through a norm built from a constructor's width."""

    def __init__(
        self, latent_dim: int, input_dim: int, head_dim: int, *, rngs: nnx.Rngs
    ) -> None:
        self.norm_q = nnx.LayerNorm(latent_dim, rngs=rngs)
        self.norm_kv = nnx.LayerNorm(input_dim, rngs=rngs)
        self.q = nnx.Linear(latent_dim, head_dim, use_bias=False, rngs=rngs)
        self.k = nnx.Linear(input_dim, head_dim, use_bias=False, rngs=rngs)
        self.v = nnx.Linear(input_dim, head_dim, use_bias=False, rngs=rngs)
        self.o = nnx.Linear(head_dim, latent_dim, rngs=rngs)

    @treespec.jit
    def __call__(
        self, latents: Float[Array, "b n d"], inputs: Float[Array, "b m c"]
    ) -> Float[Array, "b n d"]:
        return latents + self.o(self.attend(self.norm_q(latents), self.norm_kv(inputs)))

    def attend(self, x: Any, kv: Any) -> Any:
        q, k, v = self.q(x), self.k(kv), self.v(kv)
        scores = jnp.einsum("bnk,bmk->bnm", q, k) / jnp.sqrt(q.shape[-1])
        return jnp.einsum("bnm,bmk->bnk", jax.nn.softmax(scores), v)


class LatentCrossAttentionBug(LatentCrossAttention):
    @treespec.jit
    def __call__(
        self, latents: Float[Array, "b n d"], inputs: Float[Array, "b m c"]
    ) -> Float[Array, "b n d"]:
        x, kv = self.norm_q(latents), self.norm_kv(inputs)
        q, k, v = self.q(x), self.k(kv), self.v(x)  # the bug: v of the latents
        scores = jnp.einsum("bnk,bmk->bnm", q, k) / jnp.sqrt(q.shape[-1])
        return latents + self.o(jnp.einsum("bnm,bmk->bnk", jax.nn.softmax(scores), v))


class TupleRMSNorm(nnx.Module):
    """A norm that asks its scale's length (a concrete size only), the scale
    reshaped over the input in the tuple form, `reshape(1, 1, d)`."""

    def __init__(self, width: int) -> None:
        self.scale = nnx.Param(jnp.ones((width,)))

    def __call__(self, x: jax.Array) -> jax.Array:
        if len(self.scale[...]) == 0:
            return x
        ms = jnp.mean(x * x, axis=-1, keepdims=True)
        return x / jnp.sqrt(ms + 1e-6) * self.scale[...].reshape(1, 1, x.shape[-1])


class LatentCrossAttentionRMS(LatentCrossAttention):
    def __init__(
        self, latent_dim: int, input_dim: int, head_dim: int, *, rngs: nnx.Rngs
    ) -> None:
        super().__init__(latent_dim, input_dim, head_dim, rngs=rngs)
        self.norm_q, self.norm_kv = TupleRMSNorm(latent_dim), TupleRMSNorm(input_dim)


@pytest.mark.parametrize(
    "cls", [LatentCrossAttention, LatentCrossAttentionRMS], ids=["list", "tuple"]
)
def test_norms_of_two_constructor_widths_are_each_the_width_they_meet(
    cls: type[LatentCrossAttention],
) -> None:
    # Neither norm can take a symbolic width (each asks its scale's
    # length); at concrete sizes its scale reshaped over `[b, n, d]`, as
    # JAX writes a list (`[1, 1, d]`) or a tuple (`(1, 1, d)`), says
    # `latent_dim == d`, and the other's `input_dim == c`: a note.
    model = cls(5, 3, 4, rngs=nnx.Rngs(0))
    model(jnp.zeros((2, 6, 5)), jnp.zeros((2, 7, 3)))  # it runs
    report = treespec.check_shapes(cls.__call__)
    assert report.ok and not report.skipped, str(report)
    (note,) = report.notes
    assert "latent_dim == d" in note.message and "input_dim == c" in note.message


def test_a_norm_of_the_inputs_width_applied_to_the_latents_is_an_error() -> None:
    report = treespec.check_shapes(LatentCrossAttentionBug.__call__)
    (error,) = report.errors
    source, first = inspect.getsourcelines(LatentCrossAttentionBug.__call__)
    line = next(i for i, text in enumerate(source) if "the bug" in text)
    assert error.line == first + line, str(error)


class Mixer(eqx.Module):
    """Made by its constructor (a static field of no shape), its weight
    annotated with the function's own names."""

    weight: Float[Array, "cin cout"]
    scale: float = eqx.field(static=True)

    def __init__(
        self, in_channels: int, out_channels: int, scale: float = 2.0, *, key: jax.Array
    ) -> None:
        self.weight = jax.random.normal(key, (in_channels, out_channels))
        self.scale = scale

    @treespec.jit
    def __call__(self, x: Float[Array, "n cin"]) -> Float[Array, "n cout"]:
        return self.scale * (x @ self.weight)


class MixerBug(Mixer):
    @treespec.jit
    def __call__(self, x: Float[Array, "n cin"]) -> Float[Array, "n cout"]:
        return self.scale * (x @ self.weight.T)  # the bug: transposed


def test_a_constructors_size_a_field_names_is_the_functions_size() -> None:
    # `out_channels` lands where the weight's annotation says `cout`, a name
    # of the function's (its return): it is `cout`, no unknown to take as
    # `cin`. The clean module checks with no assumption to note.
    report = treespec.check_shapes(Mixer.__call__)
    assert report.ok and not report.notes, str(report)


def test_a_transpose_that_needs_two_field_sizes_equal_is_an_error() -> None:
    # `x @ weight.T` runs only where cin == cout, two names the annotations
    # keep distinct: an error, never `out_channels == cin` taken.
    model = MixerBug(3, 4, 2.0, key=jax.random.key(0))
    with pytest.raises(TypeError):
        MixerBug.__call__.__wrapped__(model, jnp.zeros((5, 3)))
    (error,) = treespec.check_shapes(MixerBug.__call__).errors
    source, first = inspect.getsourcelines(MixerBug.__call__)
    line = next(i for i, text in enumerate(source) if "the bug" in text)
    assert error.line == first + line, str(error)
    assert "cin" in error.message and "cout" in error.message, str(error)


class Square(eqx.Module):
    """A square weight of one constructor size, annotated `"cin cout"`."""

    weight: Float[Array, "cin cout"]
    scale: float = eqx.field(static=True)  # no shape: built by its constructor

    def __init__(self, dim: int, scale: float = 2.0, *, key: jax.Array) -> None:
        self.weight = jax.random.normal(key, (dim, dim))
        self.scale = scale

    @treespec.jit
    def __call__(self, x: Float[Array, "n cin"]) -> Float[Array, "n cout"]:
        return self.scale * (x @ self.weight)


def test_one_constructor_size_held_under_two_names_is_an_error() -> None:
    # `dim` is both `cin` and `cout`: the module runs only where the two
    # names the annotations keep distinct are equal, an error at the return.
    Square(3, key=jax.random.key(0))(jnp.zeros((2, 3)))  # it runs at cin == cout
    error = _the_error(Square.__call__, "return")
    assert "always comes out cin" in error.message, str(error)


class MixerStack(eqx.Module):
    """Mixers in a list: each instance binds its `cin` and `cout` itself."""

    layers: list[Mixer]

    @treespec.jit
    def __call__(self, x: Float[Array, "n cin"]) -> Float[Array, "n cout"]:
        for layer in self.layers:
            x = jax.nn.relu(layer(x))
        return x


class MixerStackBug(MixerStack):
    @treespec.jit
    def __call__(self, x: Float[Array, "n cin"]) -> Float[Array, "n cout"]:
        for layer in self.layers:
            x = jax.nn.relu(layer(x))
        return x.T  # the bug


def test_a_class_held_twice_takes_its_constructor_size_as_the_input_needs() -> None:
    # The first mixer's `in_channels` meets the input's `cin`: taken as the
    # code needs it, in a note; the twin's transposed return stays an error.
    key = jax.random.key(0)
    model = MixerStack([Mixer(3, 8, key=key), Mixer(8, 5, key=key)])
    assert model(jnp.zeros((4, 3))).shape == (4, 5)
    report = treespec.check_shapes(MixerStack.__call__)
    assert report.ok and not report.skipped, str(report)
    (note,) = report.notes
    assert "in_channels == cin" in note.message, str(note)
    _the_error(MixerStackBug.__call__)


class Positions(eqx.Module):
    """A table of another rank than the input (`"... d"` over `(heads,
    max_len, dim)`), its first head added."""

    table: Float[Array, "... d"]
    scale: float = eqx.field(static=True)  # no shape: built by its constructor

    def __init__(self, heads: int, max_len: int, dim: int, scale: float = 2.0) -> None:
        self.table = jnp.zeros((heads, max_len, dim))
        self.scale = scale

    @treespec.jit
    def __call__(self, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
        return self.scale * (x + self.table[0])


class PositionsBug(Positions):
    @treespec.jit
    def __call__(self, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
        return self.scale * (x + self.table[0]).T  # the bug


def test_a_field_of_another_rank_binds_only_its_named_axis() -> None:
    # Built by its constructor, the table's `"... d"` names its last axis
    # only; its other sizes are the constructor's, taken as the code needs
    # them (`max_len == t`), a note.
    assert Positions(2, 5, 3)(jnp.zeros((5, 3))).shape == (5, 3)
    report = treespec.check_shapes(Positions.__call__)
    assert report.ok and not report.skipped, str(report)
    assert any("max_len == t" in n.message for n in report.notes), str(report)
    _the_error(PositionsBug.__call__)


class TiledHeads(eqx.Module):
    """A query tiled over `num_heads` heads, added to `h` heads of each of
    `kvh` groups; `num_groups` repeats the result (1 keeps the groups)."""

    num_heads: int = eqx.field(static=True)
    num_groups: int = eqx.field(static=True)

    def __init__(self, num_heads: int, num_groups: int) -> None:
        self.num_heads, self.num_groups = num_heads, num_groups

    @treespec.jit
    def __call__(
        self, q: Float[Array, " dh"], x: Float[Array, "g kvh h dh"]
    ) -> Float[Array, "g kvh e"]:
        return self.grouped(q, x)

    def grouped(self, q: jax.Array, x: jax.Array) -> jax.Array:
        a = jnp.tile(q, self.num_heads)[None, None, :]
        b = x.reshape(x.shape[0], x.shape[1], -1)
        return jnp.repeat(a + b, self.num_groups, axis=0)


def test_two_counts_against_three_sizes_reach_the_pairing_that_runs() -> None:
    # Two counts at 1 against g, kvh and h make nine pairings; the one that
    # runs (num_heads=h alone) is the eighth, which a budget of six cut: a
    # false error on a module that runs with num_heads == h.
    model = TiledHeads(4, 1)
    model(jnp.zeros(3), jnp.zeros((2, 5, 4, 3)))  # it runs
    report = treespec.check_shapes(TiledHeads.__call__)
    assert report.ok, str(report)
    assert any("num_heads=h" in note.message for note in report.notes), str(report)


class TiledHeadsRegroupedBug(TiledHeads):
    """Regrouped over the heads (which needs `num_groups == h`), then one
    head's width added: the bug, on the last line."""

    @treespec.jit
    def __call__(
        self, q: Float[Array, " dh"], x: Float[Array, "g kvh h dh"]
    ) -> Float[Array, "g kvh e"]:
        b = x.reshape(x.shape[0], x.shape[1], -1)
        r = self.grouped(q, x) + jnp.repeat(b, x.shape[2], axis=0)  # num_groups == h
        return r + q[None, None, :]  # the bug


def test_of_two_counts_the_pairing_that_gets_furthest_is_said() -> None:
    # num_heads=h alone stops at the regrouping, a line that runs once
    # num_groups == h too; with both set, the run gets to the last line:
    # that is the error, never the regrouping's.
    error = _the_error(TiledHeadsRegroupedBug.__call__)
    assert "num_heads=h, num_groups=h" in error.message, str(error)


class MergedRotaryKeys(eqx.Module):
    """Key-value heads merged (a count, taken as 1), then rotated in halves,
    which needs an even width."""

    n_kv_heads: int = eqx.field(static=True)

    def __init__(self, n_kv_heads: int) -> None:
        self.n_kv_heads = n_kv_heads

    @treespec.jit
    def __call__(self, k: Float[Array, "b kvh dh"]) -> Float[Array, "b e"]:
        y = k.reshape(k.shape[0], self.n_kv_heads * k.shape[-1])
        y1, y2 = jnp.split(y, 2, axis=-1)  # rotary halves: an even width
        return jnp.concatenate([-y2, y1], axis=-1)


class MergedRotaryKeysBug(MergedRotaryKeys):
    """Then one head's width added: the bug."""

    @treespec.jit
    def __call__(self, k: Float[Array, "b kvh dh"]) -> Float[Array, "b e"]:
        y = k.reshape(k.shape[0], self.n_kv_heads * k.shape[-1])
        y1, y2 = jnp.split(y, 2, axis=-1)  # rotary halves: an even width
        return jnp.concatenate([-y2, y1], axis=-1) + k[:, 0, :]  # the bug


def test_past_a_count_set_as_needed_the_furthest_error_is_said() -> None:
    # With n_kv_heads=kvh at odd sizes the split of an odd width stops (a
    # parity, no bug); at even sizes it gets past to the residual of one
    # head's width: that line is the error, not the split's.
    (error,) = treespec.check_shapes(MergedRotaryKeysBug.__call__).errors
    source, first = inspect.getsourcelines(MergedRotaryKeysBug.__call__)
    line = next(i for i, text in enumerate(source) if "the bug" in text)
    assert error.line == first + line, str(error)
    assert "n_kv_heads=kvh" in error.message, str(error)


def test_a_count_set_as_needed_is_tried_at_even_sizes_too() -> None:
    # n_kv_heads must be kvh, and the halves need an even width: at odd
    # sizes the count so set stops at the split; at even ones it runs.
    MergedRotaryKeys(2)(jnp.zeros((3, 2, 5)))  # it runs
    report = treespec.check_shapes(MergedRotaryKeys.__call__)
    assert report.ok, str(report)
    assert any("n_kv_heads=kvh" in note.message for note in report.notes)


class PatchRowsAndColumnsBug(nnx.Module):
    """Positions for `(img // patch) * 2` patches: rows plus columns."""

    def __init__(
        self, img: int, patch: int, chans: int, dim: int, *, rngs: nnx.Rngs
    ) -> None:
        size = (patch, patch)
        self.proj = nnx.Conv(chans, dim, size, strides=size, padding="VALID", rngs=rngs)
        self.pos = nnx.Param(jnp.zeros((1, (img // patch) * 2, dim)))  # the bug

    @treespec.jit
    def __call__(self, x: Float[Array, "b img img chans"]) -> Float[Array, "b t dim"]:
        x = self.proj(x)
        return x.reshape(x.shape[0], -1, x.shape[-1]) + self.pos[...]


class PatchCeilBug(nnx.Module):
    """Positions for `ceil(img / patch)` patches a side, as SAME padding
    makes; the VALID convolution makes `img // patch`."""

    def __init__(
        self, img: int, patch: int, chans: int, dim: int, *, rngs: nnx.Rngs
    ) -> None:
        size = (patch, patch)
        self.proj = nnx.Conv(chans, dim, size, strides=size, padding="VALID", rngs=rngs)
        self.pos = nnx.Param(jnp.zeros((1, (-(-img // patch)) ** 2, dim)))  # the bug

    @treespec.jit
    def __call__(self, x: Float[Array, "b img img chans"]) -> Float[Array, "b t dim"]:
        x = self.proj(x)
        return x.reshape(x.shape[0], -1, x.shape[-1]) + self.pos[...]


@pytest.mark.parametrize(
    "twin", [PatchRowsAndColumnsBug, PatchCeilBug], ids=["rows plus columns", "ceil"]
)
def test_the_other_orders_witnesses_neither_double_nor_divide(twin: type) -> None:
    # Taken the other way round, the image is three times the patch and
    # does not divide by it: 2 a side would make `2*2 == 2**2`, 33 over 11
    # would make ceil and floor agree, and either bug would run unseen.
    # Only `patch == img` makes them run: a note that says so.
    report = treespec.check_shapes(twin.__call__)
    assert any("patch == img" in note.message for note in report.notes), str(report)


class FeatureTokensBug(eqx.Module):
    """Numeric and categorical features pooled; the categorical positions
    sized `n_num`, a parameter of its own, where `len(cardinalities)`
    belongs."""

    num_w: jax.Array
    cat_pos: jax.Array
    embeds: list[eqx.nn.Embedding]

    def __init__(self, n_num: int, cardinalities: tuple[int, ...], d: int) -> None:
        key = jax.random.key(0)
        self.num_w = jnp.zeros((n_num, d))
        self.cat_pos = jnp.zeros((n_num, d))  # the bug
        self.embeds = [eqx.nn.Embedding(c, d, key=key) for c in cardinalities]

    @treespec.jit
    def __call__(
        self, x_num: Float[Array, " n_num"], x_cat: Int[Array, " n_cat"]
    ) -> Float[Array, " d"]:
        num = x_num[:, None] * self.num_w
        cat = jnp.stack([e(x_cat[i]) for i, e in enumerate(self.embeds)])
        return num.sum(0) + (cat + self.cat_pos).sum(0)


def test_a_sequence_is_never_as_long_as_a_size_a_parameter_took() -> None:
    # `n_num` is the constructor's own parameter, so `cardinalities` of
    # n_num parts is no way its author builds it: the error stands.
    report = treespec.check_shapes(FeatureTokensBug.__call__)
    (error,) = report.errors
    source, first = inspect.getsourcelines(FeatureTokensBug.__call__)
    line = next(i for i, text in enumerate(source) if "self.cat_pos).sum" in text)
    assert error.line == first + line, str(error)
    assert "of n_num parts" not in str(report), str(report)


class SpectralBug(eqx.Module):
    """A Fourier layer made by its constructor (`modes` has no shape), its
    weights annotated with the function's `cin` and `cout`."""

    weights: Float[Array, "cin cout m"]
    modes: int = eqx.field(static=True)

    def __init__(
        self, in_channels: int, out_channels: int, modes: int, *, key: jax.Array
    ) -> None:
        shape = (in_channels, out_channels, modes)
        self.weights = jax.random.normal(key, shape) / (in_channels * out_channels)
        self.modes = modes

    @treespec.jit
    def __call__(self, x: Float[Array, "cin n"]) -> Float[Array, "cout n"]:
        x_ft = jnp.fft.rfft(x, axis=-1)[:, : self.modes]
        w = self.weights.astype(x_ft.dtype)
        out = jnp.einsum("im,oim->om", x_ft, w)  # the bug: i and o swapped
        return jnp.fft.irfft(out, n=x.shape[-1], axis=-1)


def test_a_field_named_size_is_not_shown_at_a_witness_of_its_own() -> None:
    # The einsum pairs cin with cout, two names of the function's; found at
    # concrete sizes, where out_channels ran at cout's size: the message
    # shows the sizes the run used, never out_channels at one of its own.
    (error,) = treespec.check_shapes(SpectralBug.__call__).errors
    assert "(cin)" in error.message and "(cout)" in error.message, str(error)
    assert "concrete sizes" in error.message, str(error)
    assert "out_channels=" not in error.message, str(error)


class FlatPositions(eqx.Module):
    """A flat table of a constructor's `n_pos` positions, reshaped over the
    tokens and the width."""

    pos: jax.Array
    scale: float = eqx.field(static=True)

    def __init__(self, n_pos: int, scale: float = 2.0) -> None:
        self.pos = jnp.zeros((n_pos,))
        self.scale = scale

    @treespec.jit
    def __call__(self, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
        return x / self.scale + self.pos.reshape(x.shape[0], x.shape[1])


class FlatPositionsBug(FlatPositions):
    @treespec.jit
    def __call__(self, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
        return x / self.scale + self.pos.reshape(x.shape[1], x.shape[0])  # the bug


def test_a_flat_table_reshaped_over_two_sizes_holds_their_product() -> None:
    # `(n_pos,)` into `(t, d)` runs where n_pos == t*d: a relation of the
    # constructor's size to state in a note, never an error at a guess.
    assert FlatPositions(12)(jnp.zeros((3, 4))).shape == (3, 4)  # it runs
    report = treespec.check_shapes(FlatPositions.__call__)
    assert report.ok and not report.skipped, str(report)
    (note,) = report.notes
    assert re.search(r"n_pos == (t\*d|d\*t)$", note.message), str(note)
    # Reshaped the other way round, the positions meet `(t, d)` as `(d, t)`.
    _the_error(FlatPositionsBug.__call__)


class Cross(eqx.Module):
    """Cross-attention weights whose fields name sizes of their own (no
    field says `kv_dim` is the context's `d_kv`)."""

    w_q: Float[Array, "qq aa"]
    w_k: Float[Array, "kk aa"]
    heads: int = eqx.field(static=True)  # no shape: built by its constructor

    def __init__(self, q_dim: int, kv_dim: int, attn_dim: int, *, key: jax.Array):
        self.heads = 1
        self.w_q = jax.random.normal(key, (q_dim, attn_dim))
        self.w_k = jax.random.normal(key, (kv_dim, attn_dim))


@treespec.jit
def cross_scores_bug(
    x: Float[Array, "t d_q"], ctx: Float[Array, "s d_kv"], attn: Cross
) -> Float[Array, "t s"]:
    q = (x @ attn.w_q) / x.shape[1]  # a size as a number
    return q @ (x @ attn.w_k).T  # the bug: keys from x, not ctx


def test_an_instance_after_the_arrays_is_said_in_the_annotations_names() -> None:
    # Found at concrete sizes, where a number is both a named size and a
    # constructor's size related to it: the note reads it as the named one
    # (`q_dim == d_q`), whichever argument the instance is.
    _the_error(cross_scores_bug)
    (note,) = treespec.check_shapes(cross_scores_bug).notes
    assert "q_dim == d_q" in note.message, str(note)


def test_a_check_leaves_jaxs_messages_as_they_were() -> None:
    # NNX's constructors are built with JAX's origin messages unwritten
    # (quadratic in the parameters, and read by nobody); afterwards a
    # tracer's error says where it came from again.
    assert treespec.check_shapes(LatentCrossAttention.__call__).ok
    with pytest.raises(jax.errors.TracerBoolConversionError, match="argument x"):
        jax.make_jaxpr(lambda x: bool(x.sum() > 0))(jnp.ones(3))
