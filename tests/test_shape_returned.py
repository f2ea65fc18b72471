"""A size only the return annotation names, read against the arguments'
sizes, and a count set against a named size: what is no error (a static's
choice, a default, a value given, a guess of several), and what is."""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
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


def test_a_count_against_a_caches_heads_finds_the_bug_at_its_line() -> None:
    assert treespec.check_shapes(Step.__call__).ok
    report = treespec.check_shapes(StepBug.__call__)
    (error,) = _errors(report)
    source = StepBug.__call__.__wrapped__.__code__
    assert error.line == source.co_firstlineno + 5, str(report)


class Widen(eqx.Module):
    lin: eqx.nn.Linear

    def __init__(self, din: int, dout: int) -> None:
        self.lin = eqx.nn.Linear(din, dout, key=jax.random.key(0))

    @treespec.jit
    def __call__(self, x: Float[Array, "b din"]) -> Float[Array, "b dout"]:
        return jax.vmap(self.lin)(x)


class WidenBug(eqx.Module):
    lin: eqx.nn.Linear

    def __init__(self, din: int, dout: int) -> None:
        self.lin = eqx.nn.Linear(din, din, key=jax.random.key(0))  # the bug

    @treespec.jit
    def __call__(self, x: Float[Array, "b din"]) -> Float[Array, "b dout"]:
        return jax.vmap(self.lin)(x)


def test_a_return_size_the_code_itself_keeps_equal_is_an_error() -> None:
    # No value was chosen or defaulted: the constructor's sizes are named
    # like the annotations' (`din`, `dout`), and the layer is built for din
    # where dout belongs: it returns din at every size.
    assert treespec.check_shapes(Widen.__call__).ok
    (error,) = _errors(treespec.check_shapes(WidenBug.__call__))
    assert "dout, which only the return annotation names, always comes out din" in (
        error.message
    )
