"""Symbolic dimensions (`jax.export.symbolic_shape`) validated as concrete
ones are: fixed sizes checked, names bound to symbolic expressions and
compared with JAX's symbolic equality, each problem named by its argument."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jaxtyping import Array, Float, Int, Shaped

import treespec
from treespec import ValidationError


@treespec.jit
def g(x: Float[Array, "b n"], y: Float[Array, "b n"]) -> Float[Array, "b n"]:
    return x + y


def _spec(*shape: object, dtype: object = jnp.float32) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, dtype)


@pytest.mark.parametrize("width", [4, 1])
def test_export_with_a_symbolic_batch_names_the_argument_of_the_wrong_width(
    width: int,
) -> None:
    (b,) = jax.export.symbolic_shape("b")
    with pytest.raises(ValidationError) as info:
        jax.export.export(g)(_spec(b, 3), _spec(b, width))
    message = str(info.value)
    assert "argument y" in message
    assert "n=3 bound by x" in message
    assert "argument x" not in message


def test_a_symbolic_batch_that_differs_between_arguments_is_named() -> None:
    b, c = jax.export.symbolic_shape("b, c")
    with pytest.raises(ValidationError, match="b bound by x") as info:
        jax.export.export(g)(_spec(b, 3), _spec(c, 3))
    assert "argument y" in str(info.value)


def test_equal_symbolic_expressions_bind_one_name() -> None:
    n, m = jax.export.symbolic_shape("n, m")
    out = g.eval_shape(_spec(n + m, 3), _spec(m + n, 3))
    assert out.shape == (n + m, 3)
    with pytest.raises(ValidationError, match="argument y"):
        g.eval_shape(_spec(n + m, 3), _spec(n + m, 3 * n))


def test_fixed_sizes_expressions_and_broadcasting_are_checked() -> None:
    @treespec.jit
    def h(
        x: Float[Array, "b 3"], z: Float[Array, "#b n"], y: Float[Array, "b n+1"]
    ) -> Float[Array, "b"]:
        return x.sum(1) + z.sum(1) + y.sum(1)

    b, n = jax.export.symbolic_shape("b, n")
    h.eval_shape(_spec(b, 3), _spec(1, n), _spec(b, n + 1))
    h.eval_shape(_spec(b, 3), _spec(b, n), _spec(b, n + 1))
    with pytest.raises(ValidationError, match="argument x"):
        h.eval_shape(_spec(b, 4), _spec(1, n), _spec(b, n + 1))
    with pytest.raises(ValidationError, match="argument y"):
        h.eval_shape(_spec(b, 3), _spec(1, n), _spec(b, n))
    with pytest.raises(ValidationError, match="argument z"):
        h.eval_shape(_spec(b, 3), _spec(2, n), _spec(b, n + 1))


def test_rank_and_dtype_of_a_symbolic_argument_are_checked() -> None:
    @treespec.jit
    def k(x: Int[Array, "b"]) -> Int[Array, "b"]:
        return x

    (b,) = jax.export.symbolic_shape("b")
    with pytest.raises(ValidationError, match="argument x"):
        jax.export.export(k)(_spec(b, 2, dtype=jnp.int32))
    with pytest.raises(ValidationError, match="argument x"):
        jax.export.export(k)(_spec(b, dtype=jnp.float32))


def test_a_variadic_dimension_binds_a_tuple_of_symbolic_sizes() -> None:
    @treespec.jit
    def v(x: Float[Array, "*batch n"], y: Float[Array, "*batch"]) -> jax.Array:
        return x.sum(-1) + y

    b, c, n = jax.export.symbolic_shape("b, c, n")
    jax.export.export(v)(_spec(b, c, n), _spec(b, c))
    with pytest.raises(ValidationError, match="argument y"):
        jax.export.export(v)(_spec(b, c, n), _spec(c, b))


def test_a_variadic_dimension_may_be_no_dimension_at_all() -> None:
    @treespec.jit
    def v(x: Float[Array, "*batch n"], y: Float[Array, "*batch"]) -> jax.Array:
        return x.sum(-1) + y

    (n,) = jax.export.symbolic_shape("n")
    exported = jax.export.export(v)(_spec(n), _spec())  # zero batch dimensions
    assert exported.out_avals[0].shape == ()


def test_a_concrete_argument_is_compared_with_a_symbolic_binding() -> None:
    (b,) = jax.export.symbolic_shape("b")
    with pytest.raises(ValidationError, match="argument y"):
        jax.export.export(g)(_spec(b, 3), _spec(4, 3))


def test_the_return_value_is_checked_under_the_same_binding() -> None:
    @treespec.jit
    def wrong(x: Float[Array, "b n"]) -> Float[Array, "n b"]:
        return x

    b, n = jax.export.symbolic_shape("b, n")
    with pytest.raises(ValidationError, match="the return value"):
        jax.export.export(wrong)(_spec(b, n))


def test_a_shaped_annotation_takes_any_dtype() -> None:
    @treespec.jit
    def s(x: Shaped[Array, "b"]) -> Shaped[Array, "b"]:
        return x

    (b,) = jax.export.symbolic_shape("b")
    s.eval_shape(_spec(b, dtype=jnp.int32))
