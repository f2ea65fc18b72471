"""A size only the return annotation names, read against the arguments'
sizes, and a count set against a named size: what is no error (a static's
choice, a default, a value given, a guess of several), and what is."""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest
from flax import nnx
from jaxtyping import Array, Float, Int

import treespec


def _errors(report: treespec.ShapeReport) -> list[Any]:
    return [p for p in report.problems if p.severity == "error"]


@treespec.jit
def conv2d(
    x: Float[Array, "b h w ci"],
    k: Float[Array, "kh kw ci co"],
    padding: treespec.Static[Literal["SAME", "VALID"]],
) -> Float[Array, "b ho wo co"]:
    dims = ("NHWC", "HWIO", "NHWC")
    return jax.lax.conv_general_dilated(x, k, (1, 1), padding, dimension_numbers=dims)


def test_a_return_size_a_statics_choice_keeps_equal_is_no_error() -> None:
    # With padding="SAME", ho is h; with "VALID" it is not: no unknown set
    # it equal to h, a static's choice did, which the caller makes.
    assert treespec.check_shapes(conv2d).ok


@treespec.jit
def avg_pool(
    x: Float[Array, "b n"], window: treespec.Static[int] = 1
) -> Float[Array, "b m"]:
    return x.reshape(x.shape[0], -1, window).mean(axis=-1)


def test_a_return_size_a_default_keeps_equal_is_no_error() -> None:
    assert not _errors(treespec.check_shapes(avg_pool))


class Classifier(eqx.Module):
    mlp: eqx.nn.MLP

    def __init__(self) -> None:
        self.mlp = eqx.nn.MLP(784, 10, 32, 1, key=jax.random.key(0))

    @treespec.jit
    def __call__(self, x: Float[Array, "b 784"]) -> Float[Array, "b c"]:
        return jax.vmap(self.mlp)(x)


def test_a_return_size_equal_to_a_given_size_by_chance_is_no_error() -> None:
    # A batch of 10 images given, 10 classes: equal here, by the values.
    report = treespec.check_shapes(
        Classifier.__call__, self=Classifier(), x=jnp.zeros((10, 784))
    )
    assert not _errors(report), str(report)


class NormedBias(nnx.Module):
    """The author builds it with `norm_dim == bias_dim == vocab`."""

    def __init__(
        self, c: int, vocab: int, norm_dim: int, bias_dim: int, *, rngs: nnx.Rngs
    ) -> None:
        self.out = nnx.Linear(c, vocab, rngs=rngs)
        self.norm = nnx.LayerNorm(norm_dim, rngs=rngs)
        self.bias = nnx.Param(jnp.zeros((bias_dim,)))

    @treespec.jit
    def __call__(self, feats: Float[Array, "b t c"]) -> Float[Array, "b t v"]:
        return self.norm(self.out(feats)) + self.bias[...]


def test_a_guess_with_the_sizes_solved_under_it_is_tried_again_whole() -> None:
    # vocab == c is a guess; norm_dim and bias_dim were solved under it: with
    # all three set to v instead, it runs, so v need not come out c.
    model = NormedBias(4, 7, 7, 7, rngs=nnx.Rngs(0))
    model(jnp.zeros((2, 3, 4)))  # it runs
    report = treespec.check_shapes(NormedBias.__call__)
    assert not _errors(report), str(report)


class PosConcat(eqx.Module):
    pos: jax.Array

    def __init__(self, num_tokens: int, pos_dim: int) -> None:
        self.pos = jnp.zeros((num_tokens, pos_dim))

    @treespec.jit
    def __call__(
        self, x: Float[Array, "n d"], z: Float[Array, "n r"]
    ) -> Float[Array, "n e"]:
        h = jnp.concatenate([x, self.pos], axis=1)
        return jnp.concatenate([h, z * jax.nn.sigmoid(self.pos)], axis=1)


def test_the_axis_a_concatenation_joins_along_is_no_pair_of_sizes() -> None:
    # Along axis 1, d and pos_dim may differ: pos_dim is r (the gate's), and
    # never d (the concatenated axis).
    report = treespec.check_shapes(PosConcat.__call__)
    assert not _errors(report), str(report)
    assert "pos_dim == d" not in str(report), str(report)


class Cache(NamedTuple):
    k: Float[Array, "b h s dh"]
    v: Float[Array, "b h s dh"]


class Step(eqx.Module):
    num_heads: int = eqx.field(static=True)
    qkv: eqx.nn.Linear
    out: eqx.nn.Linear

    def __init__(self, d_model: int, num_heads: int) -> None:
        self.num_heads = num_heads
        k1, k2 = jax.random.split(jax.random.key(0))
        self.qkv = eqx.nn.Linear(d_model, 3 * d_model, use_bias=False, key=k1)
        self.out = eqx.nn.Linear(d_model, d_model, use_bias=False, key=k2)

    def attend(self, x: Array, cache: Cache, pos: Array) -> tuple[Array, Cache]:
        b, d = x.shape
        hd = d // self.num_heads
        q, k, v = jnp.split(jax.vmap(self.qkv)(x), 3, axis=-1)
        q, k, v = (y.reshape(b, self.num_heads, 1, hd) for y in (q, k, v))
        ck = jax.lax.dynamic_update_slice(cache.k, k, (0, 0, pos, 0))
        cv = jax.lax.dynamic_update_slice(cache.v, v, (0, 0, pos, 0))
        s = jnp.einsum("bhqd,bhsd->bhqs", q, ck) / jnp.sqrt(hd)
        o = jnp.einsum("bhqs,bhsd->bhqd", jax.nn.softmax(s, -1), cv)
        return jax.vmap(self.out)(o.reshape(b, d)), Cache(ck, cv)

    @treespec.jit
    def __call__(
        self, x: Float[Array, "b d"], cache: Cache, pos: Int[Array, ""]
    ) -> tuple[Float[Array, "b d"], Cache]:
        return self.attend(x, cache, pos)


class StepBug(Step):
    @treespec.jit
    def __call__(
        self, x: Float[Array, "b d"], cache: Cache, pos: Int[Array, ""]
    ) -> tuple[Float[Array, "b d"], Cache]:
        y, cache = self.attend(x, cache, pos)
        return y, Cache(cache.k, cache.v.transpose(0, 2, 1, 3))  # the bug


def test_a_bug_past_a_count_against_a_caches_heads_is_still_an_error() -> None:
    # The clean step runs with num_heads == h at d == h*dh (a note); the
    # twin fails at every try: an error (at the line the count first
    # failed: what fails further on, with another count still at its
    # default, may be no bug at all).
    assert treespec.check_shapes(Step.__call__).ok
    assert len(_errors(treespec.check_shapes(StepBug.__call__))) == 1


class GroupedDecode(eqx.Module):
    """A grouped-query decoding step as Llama writes it: `n_heads` query
    heads of width `dim // n_heads`, `n_kv_heads` cached heads, repeated."""

    wq: eqx.nn.Linear
    wkv: eqx.nn.Linear
    wo: eqx.nn.Linear
    n_heads: int = eqx.field(static=True)
    n_kv_heads: int = eqx.field(static=True)

    def __init__(self, dim: int, n_heads: int, n_kv_heads: int) -> None:
        k = jax.random.split(jax.random.key(0), 3)
        hd = dim // n_heads
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.wq = eqx.nn.Linear(dim, n_heads * hd, use_bias=False, key=k[0])
        self.wkv = eqx.nn.Linear(dim, 2 * n_kv_heads * hd, use_bias=False, key=k[1])
        self.wo = eqx.nn.Linear(n_heads * hd, dim, use_bias=False, key=k[2])

    def step(self, x: Array, cache: Cache, pos: Array) -> tuple[Array, Cache]:
        b, d = x.shape
        hd = d // self.n_heads
        q = jax.vmap(self.wq)(x).reshape(b, self.n_heads, 1, hd)
        k, v = jnp.split(jax.vmap(self.wkv)(x), 2, axis=-1)
        k, v = (y.reshape(b, self.n_kv_heads, 1, hd) for y in (k, v))
        ck = jax.lax.dynamic_update_slice(cache.k, k, (0, 0, pos, 0))
        cv = jax.lax.dynamic_update_slice(cache.v, v, (0, 0, pos, 0))
        rep = self.n_heads // self.n_kv_heads
        kk, vv = jnp.repeat(ck, rep, axis=1), jnp.repeat(cv, rep, axis=1)
        a = jax.nn.softmax(jnp.einsum("bhqd,bhkd->bhqk", q, kk), -1)
        o = jnp.einsum("bhqk,bhkd->bhqd", a, vv).reshape(b, d)
        return jax.vmap(self.wo)(o), Cache(ck, cv)

    @treespec.jit
    def __call__(
        self, x: Float[Array, "b d"], cache: Cache, pos: Int[Array, ""]
    ) -> tuple[Float[Array, "b d"], Cache]:
        return self.step(x, cache, pos)


class GroupedDecodeBug(GroupedDecode):
    @treespec.jit
    def __call__(
        self, x: Float[Array, "b d"], cache: Cache, pos: Int[Array, ""]
    ) -> tuple[Float[Array, "b d"], Cache]:
        y, cache = self.step(x, cache, pos)
        return y, Cache(cache.k, cache.v.transpose(0, 2, 1, 3))  # the bug


def test_a_grouped_query_decode_sets_both_counts_against_the_caches_heads() -> None:
    # One head and one cached head (the counts' default) fail against the
    # cache's `h`; both at h (as many query heads as cached ones) run where
    # d == h*dh: a note. The twin returns its values' cache transposed.
    model, cache = GroupedDecode(32, 8, 2), Cache(*[jnp.zeros((3, 2, 5, 4))] * 2)
    model(jnp.zeros((3, 32)), cache, jnp.array(0))  # it runs
    report = treespec.check_shapes(GroupedDecode.__call__)
    assert report.ok, str(report)
    assert "d == h*dh" in str(report), str(report)
    assert len(_errors(treespec.check_shapes(GroupedDecodeBug.__call__))) == 1


class WidthDecode(eqx.Module):
    """Heads of a width of their own (`head_dim`), written into a cache."""

    wqkv: eqx.nn.Linear
    wo: eqx.nn.Linear
    num_heads: int = eqx.field(static=True)
    head_dim: int = eqx.field(static=True)

    def __init__(self, d_model: int, num_heads: int, head_dim: int) -> None:
        k1, k2 = jax.random.split(jax.random.key(0))
        self.num_heads, self.head_dim = num_heads, head_dim
        self.wqkv = eqx.nn.Linear(d_model, 3 * num_heads * head_dim, key=k1)
        self.wo = eqx.nn.Linear(num_heads * head_dim, d_model, key=k2)

    @treespec.jit
    def __call__(
        self, x: Float[Array, "b d"], cache: Cache, pos: Int[Array, ""]
    ) -> tuple[Float[Array, "b d"], Cache]:
        b = x.shape[0]
        qkv = jax.vmap(self.wqkv)(x).reshape(b, 3, self.num_heads, 1, self.head_dim)
        q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]
        ck = jax.lax.dynamic_update_slice(cache.k, k, (0, 0, pos, 0))
        cv = jax.lax.dynamic_update_slice(cache.v, v, (0, 0, pos, 0))
        a = jax.nn.softmax(jnp.einsum("bhqd,bhkd->bhqk", q, ck), -1)
        o = jnp.einsum("bhqk,bhkd->bhqd", a, cv)
        return jax.vmap(self.wo)(o.reshape(b, -1)), Cache(ck, cv)


def test_a_count_of_one_against_h_of_a_width_is_set_at_h() -> None:
    # With one head the write fits (one head within h), and the attention
    # over the cache's h heads meets the output projection built for one:
    # `h*dh` against `dh`. With num_heads == h it runs.
    model, cache = WidthDecode(16, 2, 4), Cache(*[jnp.zeros((3, 2, 5, 4))] * 2)
    model(jnp.zeros((3, 16)), cache, jnp.array(0))  # it runs
    report = treespec.check_shapes(WidthDecode.__call__)
    assert report.ok, str(report)


# -- what the mutation audit found untested (each a line broken once) -------


class MergedKvHeads(eqx.Module):
    n_kv_heads: int = eqx.field(static=True)

    def __init__(self, n_kv_heads: int) -> None:
        self.n_kv_heads = n_kv_heads

    @treespec.jit
    def __call__(self, k: Float[Array, "b kvh dh"]) -> Float[Array, "b e"]:
        return k.reshape(k.shape[0], self.n_kv_heads * k.shape[-1])


class CachedKeysRepeated(eqx.Module):
    num_heads: int = eqx.field(static=True)
    head_dim: int = eqx.field(static=True)
    repeat_count: int = eqx.field(static=True)
    proj: eqx.nn.Linear

    def __init__(
        self, d: int, num_heads: int, head_dim: int, repeat_count: int
    ) -> None:
        self.num_heads, self.head_dim = num_heads, head_dim
        self.repeat_count = repeat_count
        self.proj = eqx.nn.Linear(d, num_heads * head_dim, key=jax.random.key(0))

    @treespec.jit
    def __call__(
        self, x: Float[Array, "b d"], keys: Float[Array, "b h s dh"]
    ) -> Float[Array, "b h s+1 dh"]:
        k = jax.vmap(self.proj)(x).reshape(x.shape[0], self.num_heads, 1, self.head_dim)
        k = jnp.repeat(k, self.repeat_count, axis=2)  # one new position: 1
        return jnp.concatenate([keys, k], axis=2)


class BiasPerHead(eqx.Module):
    num_heads: int = eqx.field(static=True)
    q: eqx.nn.Linear

    def __init__(self, d_model: int, num_heads: int) -> None:
        self.num_heads = num_heads
        self.q = eqx.nn.Linear(d_model, d_model, key=jax.random.key(0))

    @treespec.jit
    def __call__(
        self, x: Float[Array, "b d"], bias: Float[Array, "b h dh"]
    ) -> Float[Array, "b h dh"]:
        return bias + jax.vmap(self.q)(x).reshape(x.shape[0], self.num_heads, -1)


class FirstHeadsMerged(eqx.Module):
    num_heads: int = eqx.field(static=True)

    def __init__(self, num_heads: int) -> None:
        self.num_heads = num_heads

    @treespec.jit
    def __call__(
        self, x: Float[Array, "b h dh"], y: Float[Array, "b h dh"]
    ) -> Float[Array, "b e"]:
        b = x.shape[0]
        return x.reshape(b, -1) + y[:, : self.num_heads].reshape(b, -1)


class MergedKvHeadsKept(eqx.Module):
    n_kv_heads: int = eqx.field(static=True)

    def __init__(self, n_kv_heads: int) -> None:
        self.n_kv_heads = n_kv_heads

    @treespec.jit
    def __call__(self, k: Float[Array, "b kvh dh"]) -> Float[Array, "b e 1"]:
        return k.reshape(k.shape[0], self.n_kv_heads * k.shape[-1], 1)


class MergedKvHeadsOfOne(eqx.Module):
    n_kv_heads: int = eqx.field(static=True)

    def __init__(self, n_kv_heads: int) -> None:
        self.n_kv_heads = n_kv_heads

    @treespec.jit
    def __call__(self, k: Float[Array, "b kvh 1 dh"]) -> Float[Array, "b e"]:
        return k.reshape(k.shape[0], self.n_kv_heads * k.shape[-1])


@pytest.mark.parametrize(
    ("method", "taken"),
    [
        # From `(b, kvh, 1, dh)`: its axis of one is no size folded away.
        (MergedKvHeadsOfOne.__call__, "n_kv_heads=kvh"),
        # A reshape JAX refuses, `(b, kvh, dh)` into `(b, dh)`: the count is
        # the axis folded away.
        (MergedKvHeads.__call__, "n_kv_heads=kvh"),
        # Into `(b, dh, 1)`: an axis of one added is no size to fold.
        (MergedKvHeadsKept.__call__, "n_kv_heads=kvh"),
        # Two counts at 1: the heads set alone (a repeat count set with them
        # breaks the concatenation).
        (CachedKeysRepeated.__call__, "num_heads=h"),
        # JAX writes the product first, `(b, dh*h)` against `(b, dh)`.
        (FirstHeadsMerged.__call__, "num_heads=h"),
    ],
)
def test_a_count_is_set_against_the_size_the_message_pairs_it_with(
    method: Any, taken: str
) -> None:
    report = treespec.check_shapes(method)
    assert report.errors == (), str(report)
    assert any(taken in note.message for note in report.notes), str(report)


def test_a_count_against_a_product_read_either_way_round() -> None:
    # `(b, h, dh)` against `(b, 1, d)`: the product is the second's, and
    # `d == h*dh` is the relation the note states.
    report = treespec.check_shapes(BiasPerHead.__call__)
    assert report.errors == (), str(report)
    assert any("d == h*dh" in note.message for note in report.notes), str(report)


class GatedBy(eqx.Module):
    score: eqx.nn.Linear

    def __init__(self, in_features: int) -> None:
        self.score = eqx.nn.Linear(in_features, "scalar", key=jax.random.key(0))

    @treespec.jit
    def __call__(
        self, x: Float[Array, "b din"], y: Float[Array, "b dy"]
    ) -> Float[Array, "b dout"]:
        gate = jax.nn.sigmoid(jax.vmap(self.score)(x))  # in_features == din
        return y * gate[:, None]  # dout is dy by the code, no unknown set to dy


class SeventeenWide(eqx.Module):
    lin: eqx.nn.Linear

    def __init__(self, in_features: int) -> None:
        self.lin = eqx.nn.Linear(in_features, 17, key=jax.random.key(0))

    @treespec.jit
    def __call__(self, x: Float[Array, "b din"]) -> Float[Array, "b k"]:
        return jax.vmap(self.lin)(x)  # k is 17, whatever din is


def test_a_return_size_no_unknown_was_set_to_is_no_error() -> None:
    # `dout` comes out `dy` by the code itself, and 17 is `din`'s first
    # witness only by chance: neither is a size an unknown was set to.
    for method in (GatedBy.__call__, SeventeenWide.__call__):
        report = treespec.check_shapes(method)
        assert report.errors == (), str(report)


class PaddedResidual(eqx.Module):
    lin: eqx.nn.Linear

    def __init__(self, in_features: int, out_features: int) -> None:
        self.lin = eqx.nn.Linear(in_features, out_features, key=jax.random.key(0))

    @treespec.jit
    def __call__(self, x: Float[Array, "b din"]) -> Float[Array, "b dout"]:
        y = x + jax.vmap(self.lin)(x)  # out_features == din
        width = max(y.shape[1], 3)  # a number: read at the witnesses
        return jnp.pad(y, ((0, 0), (0, width - y.shape[1])))


def test_a_return_found_at_witnesses_says_its_sizes_by_name() -> None:
    (error,) = treespec.check_shapes(PaddedResidual.__call__).errors
    assert "got float32[b,din]" in error.message, str(error)
    assert "always comes out din" in error.message, str(error)


@treespec.jit
def project(w: Float[Array, "i g"], x: Float[Array, "b i"]) -> Float[Array, "b g"]:
    return x @ w


@treespec.jit
def project_named(
    w: Float[Array, "in_features g"], x: Float[Array, "b in_features"]
) -> Float[Array, "b g"]:
    return x @ w


class RankSlip(eqx.Module):
    """Hands a rank-3 `x` to a nested call annotated `"b i"`."""

    w: jax.Array

    def __init__(self, in_features: int, out_features: int) -> None:
        self.w = jnp.zeros((in_features, out_features))

    @treespec.jit
    def __call__(self, x: Float[Array, "b s d"]) -> Float[Array, "b s e"]:
        return project(self.w, x)


class RankSlipNamed(eqx.Module):
    w: jax.Array

    def __init__(self, in_features: int, out_features: int) -> None:
        self.w = jnp.zeros((in_features, out_features))

    @treespec.jit
    def __call__(self, x: Float[Array, "b s d"]) -> Float[Array, "b s e"]:
        return project_named(self.w, x)


def test_a_nested_call_given_another_rank_is_an_error_no_size_fixes() -> None:
    # `"b i"` given `[b,s,d]`: no value of the constructor's `in_features`
    # makes a rank-3 array rank 2, so nothing is taken (neither the nested
    # function's own `i` nor `in_features == in_features`) and the call's
    # line is an error, not a stop in a note that exits 0.
    for cls in (RankSlip, RankSlipNamed):
        report = treespec.check_shapes(cls.__call__)
        (error,) = report.errors
        assert "got float32[b,s,d]" in error.message, str(error)
        assert "not checked past" not in str(report), str(report)
        assert "in_features ==" not in str(report), str(report)


class DoubledHeads(eqx.Module):
    """Heads of `2*d` folded from a doubled width: the message's `2*d`
    has a number where a count's partner is read."""

    num_heads: int = eqx.field(static=True)

    def __init__(self, num_heads: int) -> None:
        self.num_heads = num_heads

    @treespec.jit
    def __call__(
        self, x: Float[Array, "t d"], g: Float[Array, "t d"]
    ) -> Float[Array, "t d"]:
        y = jnp.concatenate([x, x], axis=-1).reshape(x.shape[0], self.num_heads, -1)
        return (y * g[:, None, :]).mean(axis=1)


def test_a_count_against_a_number_times_a_size_is_checked_not_skipped() -> None:
    # With one head, `(t, 1, 2*d)` meets `(t, 1, d)`: `2*d` names the
    # number 2, never a size to set the count to. The check runs (two heads
    # of d), no skip and no error.
    report = treespec.check_shapes(DoubledHeads.__call__)
    assert report.errors == (), str(report)
    assert not any(p.skipped for p in report.problems), str(report)
    assert "num_heads=2" in str(report), str(report)


def test_each_count_alone_is_tried_before_any_at_even_sizes() -> None:
    # One key-value head against `kvh` heads of `h*dh`: both counts at each
    # size, then each alone, all at the odd witnesses first; the even tries
    # (a rotary table's halves need them) come after, in their own budget,
    # never in place of a count set alone.
    from treespec._shapes.counts import _tries

    failed = "add got incompatible shapes for broadcasting: (t, 1, dh), (t, kvh, h*dh)."
    counts = {"num_heads": 1, "num_kv_heads": 1}
    tries = [t for t in _tries(["t", "h", "kvh", "dh"], counts, failed) if t[3]]
    parity = [sizes["t"] % 2 for sizes, *_ in tries]
    assert parity == sorted(parity, reverse=True), tries  # odd ones first
    odd = [said for sizes, _, _, said in tries if sizes["t"] % 2]
    for alone in ("num_kv_heads=kvh", "num_heads=h", "num_kv_heads=h"):
        assert alone in odd, odd
