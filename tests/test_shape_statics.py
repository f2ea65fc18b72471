"""A static `int` or `float` no one gave a value (DESIGN, "an error is
certain"): the function's own static size is an unknown, as a
constructor's is (one rule): named like a dimension, that dimension; a
count (`heads`) 1 and a rate 1.0, said in a note; any other a size of its
own, checked at every witness. An ordering or a divisibility the code needs
of such sizes is a note; a bug the annotations can see stays an error."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, TypedDict

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest
from jaxtyping import Array, Float, Int

import treespec
from treespec import Static


@treespec.jit
def top_k(scores: Float[Array, "b n"], k: Static[int]) -> Float[Array, "b k"]:
    return jax.lax.top_k(scores, k)[0]


@treespec.jit
def top_k_bug(scores: Float[Array, "b n"], k: Static[int]) -> Float[Array, "b k"]:
    return jax.lax.top_k(scores, k)[0].T  # the bug: axes swapped


def test_a_static_size_named_like_a_dimension_needs_only_an_ordering() -> None:
    # `k` is the return's `k`; top_k needs k <= n: an ordering between named
    # sizes, a note with the side that runs, never an error.
    report = treespec.check_shapes(top_k)
    assert report.ok and not report.skipped, str(report)
    (note,) = report.notes
    assert "'n >= k'" in note.message, str(report)


def test_a_static_sizes_twin_with_a_bug_is_an_error() -> None:
    report = treespec.check_shapes(top_k_bug)
    (error,) = report.errors
    assert "the return value" in error.message, str(report)


@treespec.jit
def top_k_pool(
    nodes: Float[Array, "n d"], projection: Float[Array, " d"], k: Static[int]
) -> Float[Array, "k d"]:
    _, idx = jax.lax.top_k(nodes @ projection, k)  # over a vector: shape=[n]
    return nodes[idx]


@treespec.jit
def top_k_pool_bug(
    nodes: Float[Array, "n d"], projection: Float[Array, " d"], k: Static[int]
) -> Float[Array, "k d"]:
    _, idx = jax.lax.top_k(nodes @ projection, k)
    return nodes[:, idx]  # the bug: the features indexed, not the nodes


def test_top_k_over_a_vector_needs_only_an_ordering() -> None:
    # JAX writes a vector's shape as a list (`shape=[11]`): a size, read as
    # `n`, never an index of a key path left a number; so the ordering is
    # found, a note, as for a matrix's rows.
    report = treespec.check_shapes(top_k_pool)
    assert report.ok and not report.skipped, str(report)
    (note,) = report.notes
    assert "constraints=('n >= k',)" in note.message, str(report)
    assert "shape=[n]" in note.message, str(report)
    (error,) = treespec.check_shapes(top_k_pool_bug).errors
    assert "the return value" in error.message, str(error)


@treespec.jit
def top_k_hits(
    logits: Float[Array, "b c"], labels: Int[Array, " b"], k: Static[int]
) -> Float[Array, " b"]:
    _, top = jax.lax.top_k(logits, k)
    return jnp.any(top == labels[:, None], axis=-1).astype(jnp.float32)


@treespec.jit
def top_k_hits_bug(
    logits: Float[Array, "b c"], labels: Int[Array, " b"], k: Static[int]
) -> Float[Array, " b"]:
    _, top = jax.lax.top_k(logits, k)
    return jnp.any(top == labels[:, None], axis=0).astype(jnp.float32)  # the bug


def test_a_static_size_no_annotation_names_gets_the_ordering_it_needs() -> None:
    # `k` is an unknown; JAX says top_k needs it no larger than the axis:
    # the note states that ordering, never `k` equal to some named size
    # (`k == b` runs too, by chance of the witnesses, and is no rule).
    report = treespec.check_shapes(top_k_hits)
    assert report.ok and not report.skipped, str(report)
    (note,) = report.notes
    assert "constraints=('c >= k',)" in note.message, str(report)
    assert "k == b" not in str(report), str(report)


def test_past_a_static_sizes_ordering_a_wrong_return_is_an_error() -> None:
    (error,) = treespec.check_shapes(top_k_hits_bug).errors
    assert "the return value" in error.message, str(error)


@treespec.jit
def first_k_mass(logits: Float[Array, "b c"], k: Static[int]) -> Float[Array, " b"]:
    top = jax.lax.slice_in_dim(jnp.sort(logits, axis=-1), 0, k, axis=1)
    return jnp.sum(top, axis=-1)


@treespec.jit
def first_k_window(logits: Float[Array, "b c"], k: Static[int]) -> Float[Array, " b"]:
    return jnp.sum(jax.lax.dynamic_slice_in_dim(logits, 0, k, axis=1), axis=-1)


@pytest.mark.parametrize("fn", [first_k_mass, first_k_window], ids=["slice", "dynamic"])
def test_a_slice_as_long_as_a_static_size_needs_only_an_ordering(fn: Any) -> None:
    # JAX says a slice's limit must be no larger than the axis: the note
    # says the side that runs, `c >= k`, never `k` equal to a named size.
    assert fn(jnp.ones((2, 5)), 3).shape == (2,)
    report = treespec.check_shapes(fn)
    assert report.ok and not report.skipped, str(report)
    (note,) = report.notes
    assert "constraints=('c >= k',)" in note.message, str(note)
    assert "k == b" not in str(report), str(report)


@treespec.jit
def patchify(x: Float[Array, "b h w c"], p: Static[int]) -> Float[Array, "b n e"]:
    b, h, w, c = x.shape
    x = x.reshape(b, h // p, p, w // p, p, c).transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(b, (h // p) * (w // p), p * p * c)


@treespec.jit
def patchify_bug(x: Float[Array, "b h w c"], p: Static[int]) -> Float[Array, "b n e"]:
    b, h, w, c = x.shape
    x = x.reshape(b, h // p, p, w // p, p, c).transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(b, (h // p) * (w // p), p * c)  # the bug: one p too few


def test_a_static_size_of_its_own_is_checked_and_its_divisibility_noted() -> None:
    # `p` names no dimension: a size of its own, never skipped for want of
    # a value; the reshape needs h and w divisible by p, a note.
    report = treespec.check_shapes(patchify)
    assert report.ok and not report.skipped, str(report)
    (note,) = report.notes
    assert "divide" in note.message and "p=" in note.message, str(report)
    bug = treespec.check_shapes(patchify_bug)
    assert len(bug.errors) == 1 and "reshape" in bug.errors[0].message, str(bug)


@treespec.jit
def heads_split(x: Float[Array, "b t d"], heads: Static[int]) -> Float[Array, "b t d"]:
    b, t, d = x.shape
    return x.reshape(b, t, heads, d // heads).reshape(b, t, d)


@treespec.jit
def mix(x: Float[Array, "b d"], alpha: Static[float]) -> Float[Array, "b d"]:
    lam = jax.random.beta(jax.random.key(0), alpha, alpha)
    return lam * x + (1 - lam) * x[::-1]


def test_a_static_count_and_a_static_rate_take_one_said_in_a_note() -> None:
    (note,) = treespec.check_shapes(heads_split).notes
    assert "checked with heads=1" in note.message, note.message
    assert "check_shapes(heads_split, heads=...)" in note.message
    (note,) = treespec.check_shapes(mix).notes
    assert "checked with alpha=1.0 (a float, never a size)" in note.message
    # A value given is checked as it is, nothing assumed: d must divide by 4.
    (note,) = treespec.check_shapes(heads_split, heads=4).notes
    assert "checked with" not in note.message and "divide" in note.message


@treespec.jit
def rope_tables(
    positions: Float[Array, " seq"], head_dim: int, theta: float
) -> Float[Array, "seq head_dim"]:
    inv = 1.0 / theta ** (jnp.arange(0, head_dim, 2) / head_dim)
    freqs = positions[:, None] * inv
    return jnp.cos(jnp.concatenate([freqs, freqs], axis=-1))


@treespec.jit
def rope_pairs(positions: Float[Array, " seq"], heads: int) -> Float[Array, "seq d"]:
    return jnp.ones((positions.shape[0], heads)) @ jnp.ones((heads + 1, 4))  # bug


def test_an_unmarked_int_or_float_parameter_takes_the_static_rule() -> None:
    # eqx-zoo's `rope_cos_sin(positions, head_dim: int, theta: float)`: an
    # `int` or `float` parameter is static under `default="infer"`, as a
    # `Static[int]` is: named like a dimension, that size; a rate 1.0, said;
    # a count 1, said. Checked, never skipped.
    report = treespec.check_shapes(rope_tables)
    assert not report.skipped and report.errors == (), str(report)
    (note,) = report.notes
    assert "checked with theta=1.0 (a float, never a size)" in note.message
    report = treespec.check_shapes(rope_pairs)
    (error,) = report.errors
    assert "got (1,) and (2,)" in error.message, str(error)  # heads + 1 at 1
    assert "checked with heads=1" in report.notes[0].message, str(report)


@treespec.jit
def pooled(x: Float[Array, "b n"], how: Static[str]) -> Float[Array, " b"]:
    return getattr(jnp, how)(x, axis=1)


def test_a_static_leaf_that_is_no_size_still_skips_naming_it() -> None:
    report = treespec.check_shapes(pooled)
    assert report.skipped, str(report)
    assert "how (Static[str]) has no value" in report.notes[0].message
    assert treespec.check_shapes(pooled, how="mean").problems == ()


class Windows(TypedDict):
    ws: Static[int]


@treespec.jit
def windows(x: Float[Array, "h w c"], cfg: Windows) -> Float[Array, "n ws ws c"]:
    h, w, c = x.shape
    ws = cfg["ws"]
    x = x.reshape(h // ws, ws, w // ws, ws, c).transpose(0, 2, 1, 3, 4)
    return x.reshape(-1, ws, ws, c)


def test_a_static_size_in_a_config_dict_is_the_dimension_it_is_named_like() -> None:
    report = treespec.check_shapes(windows)
    assert report.ok and not report.skipped, str(report)
    (note,) = report.notes
    assert "divide" in note.message, str(report)


@treespec.jit
def down_up(x: Float[Array, "c h w"]) -> Float[Array, ""]:
    # Two stride-2 poolings and two upsamplings: the same size only when h
    # and w are multiples of 4.
    c, h, w = x.shape
    y = x[:, : h // 2 * 2, : w // 2 * 2].reshape(c, h // 2, 2, w // 2, 2).mean((2, 4))
    y = y[:, : h // 4 * 2, : w // 4 * 2].reshape(c, h // 4, 2, w // 4, 2).mean((2, 4))
    up = jnp.repeat(jnp.repeat(y, 4, axis=1), 4, axis=2)
    return jnp.mean((up - x) ** 2)


@treespec.jit
def down_up_bug(x: Float[Array, "c h w"]) -> Float[Array, ""]:
    c, h, w = x.shape
    y = x[:, : h // 2 * 2, : w // 2 * 2].reshape(c, h // 2, 2, w // 2, 2).mean((2, 4))
    y = y[:, : h // 4 * 2, : w // 4 * 2].reshape(c, h // 4, 2, w // 4, 2).mean((2, 4))
    up = jnp.repeat(jnp.repeat(y, 2, axis=1), 4, axis=2)  # the bug: 2 for 4
    return jnp.mean((up - x) ** 2)


def test_a_size_the_body_needs_a_multiple_of_four_is_a_note_naming_it() -> None:
    # It fails at odd sizes and at twice them: at multiples of 8 it runs, a
    # divisibility of h and w (not c), a note.
    report = treespec.check_shapes(down_up)
    assert report.ok, str(report)
    (note,) = report.notes
    assert "divide each other (h, w)" in note.message, str(report)
    bug = treespec.check_shapes(down_up_bug)
    assert len(bug.errors) == 1, str(bug)


@treespec.jit
def quarter(x: Float[Array, "c h w"]) -> Float[Array, "c (h+3)//4 (w+3)//4"]:
    c, h, w = x.shape  # the bug: a floor where the annotation says a ceiling
    return (
        x[:, : h // 4 * 4, : w // 4 * 4].reshape(c, h // 4, 4, w // 4, 4).mean((2, 4))
    )


def test_a_divisibility_against_an_annotation_that_rounds_is_an_error() -> None:
    # `(h+3)//4` says what every h gives: at multiples of 8 it runs, but the
    # annotation promised the ceiling at any h.
    report = treespec.check_shapes(quarter)
    (error,) = report.errors
    assert "the return value" in error.message, str(report)


class Stages(eqx.Module):
    layers: list[eqx.nn.Linear]
    head: eqx.nn.Linear

    def __init__(self, d: int, widths: Sequence[int], *, key: Any = None) -> None:
        key = jax.random.key(0) if key is None else key
        pairs = itertools.pairwise([d, *widths])
        self.layers = [eqx.nn.Linear(i, o, key=key) for i, o in pairs]
        self.head = eqx.nn.Linear(widths[-1], 1, key=key)


class StagesBug(Stages):
    def __init__(self, d: int, widths: Sequence[int], *, key: Any = None) -> None:
        key = jax.random.key(0) if key is None else key
        pairs = itertools.pairwise([d, *widths])
        self.layers = [eqx.nn.Linear(i, o, key=key) for i, o in pairs]
        self.head = eqx.nn.Linear(widths[0], 1, key=key)  # the bug: the first width


@treespec.jit
def score(model: Stages, x: Float[Array, " d"]) -> Float[Array, " 1"]:
    for layer in model.layers:
        x = jax.nn.relu(layer(x))
    return model.head(x)


@treespec.jit
def score_bug(model: StagesBug, x: Float[Array, " d"]) -> Float[Array, " 1"]:
    for layer in model.layers:
        x = jax.nn.relu(layer(x))
    return model.head(x)


def test_a_constructors_sizes_of_each_part_are_two_sizes_of_their_own() -> None:
    # `widths: Sequence[int]` with no default: two stages of sizes of their
    # own, never skipped for want of a value. A head sized for the first
    # stage where the last belongs runs when the two are equal (an error is
    # certain, DESIGN): the note says the relation it needed.
    report = treespec.check_shapes(score)
    assert report.ok and not report.skipped and not report.notes, str(report)
    bug = treespec.check_shapes(score_bug)
    (note,) = bug.notes
    assert "widths0 == widths1" in note.message, str(bug)


@treespec.jit
def repeated(x: Float[Array, "n d"], k: Static[int]) -> Float[Array, "n*k d"]:
    return jnp.tile(x, (k, 1))


def test_a_static_size_of_its_own_is_a_symbol_checked_for_every_size() -> None:
    # Symbolic first, as an array's sizes: the output is `k*n`, for every k.
    report = treespec.check_shapes(repeated)
    assert report.problems == (), str(report)
    ((_, out),) = report.outputs
    assert "k" in str(out.shape[0]) and "n" in str(out.shape[0]), out


@treespec.jit
def _scaled(x: Float[Array, " n"], k: Static[int]) -> Float[Array, " n"]:
    return x * k


def test_a_symbolic_size_passed_as_a_static_int_is_an_int_under_export() -> None:
    # `x.shape[0]` under `jax.export` with symbolic shapes is JAX's int.
    n = jax.export.symbolic_shape("n")
    arg = jax.ShapeDtypeStruct(n, jnp.float32)
    exported = jax.export.export(jax.jit(lambda x: _scaled(x, x.shape[0])))(arg)
    assert str(exported.out_avals[0].shape) == "(n,)"


@treespec.jit
def enqueue(
    queue: Float[Array, "q d"], keys: Float[Array, "b d"]
) -> Float[Array, "q d"]:
    return jnp.concatenate([keys, queue[: queue.shape[0] - keys.shape[0]]])


def test_an_ordering_of_two_sizes_not_next_to_each_other_is_a_note() -> None:
    # At q=11, d=13, b=17 the queue is too short; swapping q and d or d and
    # b does not help, q and b does: the queue holds at least a batch.
    report = treespec.check_shapes(enqueue)
    assert report.ok, str(report)
    (note,) = report.notes
    assert "'q >= b'" in note.message, str(report)


@treespec.dataclass
class Attention:
    w: Float[Array, "d d"]
    heads: Static[int]


@treespec.jit
def attend(cfg: Attention, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
    t, d = x.shape
    return (x @ cfg.w).reshape(t, cfg.heads, d // cfg.heads).reshape(t, d)


def test_a_static_count_in_a_dataclass_field_takes_the_same_rule() -> None:
    # The mission's config dataclass: a field `heads: Static[int]` with no
    # default is a count, 1, said; the function is checked, not skipped.
    report = treespec.check_shapes(attend)
    assert report.ok and not report.skipped, str(report)
    (note,) = [n for n in report.notes if "cfg.heads=1" in n.message]
    # Taken for the function's own leaf, not by a constructor: "checked".
    assert "checked with cfg.heads=1" in note.message, note.message
    assert "constructor" not in note.message, note.message


class Heads(TypedDict):
    heads: Static[int]


@treespec.jit
def attend_dict(cfg: Heads, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
    t, d = x.shape
    return x.reshape(t, cfg["heads"], d // cfg["heads"]).reshape(t, d)


def test_a_static_count_in_a_config_dict_is_said_checked_with_its_key_path() -> None:
    report = treespec.check_shapes(attend_dict)
    assert report.ok and not report.skipped, str(report)
    (note,) = [n for n in report.notes if "heads" in n.message]
    assert "checked with cfg['heads']=1" in note.message, note.message
    assert "constructor" not in note.message, note.message
    assert "check_shapes(attend_dict, cfg=...)" in note.message, note.message


@treespec.jit
def head_of(x: Float[Array, "a b"], z: Float[Array, "c b"]) -> Float[Array, "c b"]:
    return x[: z.shape[0]] + z


def test_an_ordering_between_the_outer_of_three_named_sizes_is_a_note() -> None:
    # At a=11, b=13, c=17 JAX's message names all three; swapping a and b,
    # or b and c, leaves a < c: only a and c swapped run, a >= c.
    report = treespec.check_shapes(head_of)
    assert report.ok, str(report)
    (note,) = report.notes
    assert "'a >= c'" in note.message, str(report)


@treespec.dataclass
class Latents:
    stoch: Static[int]
    classes: Static[int]


@treespec.jit
def rollout(
    cfg: Latents, xs: Float[Array, "t b e"], z0: Float[Array, "b s c"]
) -> Float[Array, "t b s c"]:
    def step(z: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        z = jnp.full((x.shape[0], cfg.stoch, cfg.classes), x.mean() + z.mean())
        return z, z

    return jax.lax.scan(step, z0, xs)[1]


@treespec.jit
def rollout_bug(
    cfg: Latents, xs: Float[Array, "t b e"], z0: Float[Array, "b s c"]
) -> Float[Array, "t b s c"]:
    def step(z: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        z = jnp.full((x.shape[0], cfg.stoch, cfg.classes), x.mean() + z.mean())
        return z.sum(axis=1), z  # the carry loses an axis

    return jax.lax.scan(step, z0, xs)[1]


def test_a_config_size_met_by_a_scans_carry_is_taken_as_the_carry_needs() -> None:
    # The carry comes in as (b, s, c) and goes out as (b, stoch, classes):
    # JAX's loop message pairs them, and the config's sizes are taken so.
    report = treespec.check_shapes(rollout)
    assert report.ok, str(report)
    assert any("stoch == s" in n.message for n in report.notes), str(report)
    assert not any("divide" in n.message for n in report.notes), str(report)
    (error,) = treespec.check_shapes(rollout_bug).errors
    assert "carry" in error.message, error.message


@treespec.jit
def carry_half(z0: Float[Array, "b n"], xs: Float[Array, "t e"]) -> Float[Array, "b n"]:
    def step(z: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        return z[:, : z.shape[1] // 2] * 2, x  # the carry loses half its width

    return jax.lax.scan(step, z0, xs)[0]


def test_a_carry_that_comes_out_at_an_expression_of_its_size_is_an_error() -> None:
    # JAX prints the carry's size `floordiv(n, 2)`, with a comma inside: no
    # pair is read from it, and no relation (`n == 2)`) makes it a note.
    (error,) = treespec.check_shapes(carry_half).errors
    assert "carry" in error.message, error.message


def _frames(x: jax.Array, n: int, hop: int) -> jax.Array:
    """Frames of `n` samples every `hop`, the signal padded with n - 1
    zeros: one frame where hop >= t."""
    padded = jnp.pad(x, ((0, 0), (0, n - 1)))
    starts = jnp.arange(1 + (x.shape[-1] - 1) // hop)[:, None] * hop
    return padded[:, starts + jnp.arange(n)[None, :]]


@treespec.jit
def framed(
    x: Float[Array, "b t"], window: Float[Array, " n"], hop: Static[int]
) -> Float[Array, "b f n"]:
    return _frames(x, window.shape[0], hop) * window


@treespec.jit
def framed_bug(
    x: Float[Array, "b t"], window: Float[Array, " n"], hop: Static[int]
) -> Float[Array, "b f n"]:
    return _frames(x, window.shape[0], hop) * window[:, None]  # the bug


def test_a_size_of_its_own_is_also_tried_smaller_than_the_others() -> None:
    # Named last, `hop` takes the largest witness: longer than the signal,
    # one frame, and a 1 broadcasts as the twin's column window needs. The
    # names in the other order make several frames: the clean function
    # still runs, the twin fails there, a note that says both sizes.
    assert framed(jnp.ones((2, 9)), jnp.ones(4), 2).shape == (2, 5, 4)
    report = treespec.check_shapes(framed)
    assert report.problems == (), str(report)
    (note,) = treespec.check_shapes(framed_bug).notes
    assert "holds only at some sizes" in note.message, str(note)
    assert "hop=19" in note.message and "hop=11" in note.message, str(note)
