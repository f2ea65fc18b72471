"""Methods whose annotations name classes that do not exist yet at decoration.

The classes here live at module level on purpose: that is where a method's
annotations are looked up at its first call.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treespec
from treespec import SpecError, Static, ValidationError


class Model(eqx.Module):
    w: jax.Array
    depth: int = eqx.field(static=True)

    @treespec.jit
    def scaled(self, k: Static[float]) -> Model:  # its own class, not defined yet
        return Model(self.w * k, self.depth)

    @treespec.jit
    def wrong(self) -> Model:
        return self.w  # type: ignore[return-value]

    @treespec.jit
    def merge(self, other: Later) -> jax.Array:  # a class defined further down
        return self.w * other.k

    @treespec.checked
    def checked_scaled(self, k: float) -> Model:
        return Model(self.w * k, self.depth)

    @treespec.grad
    def norm(self, x: jax.Array) -> jax.Array:
        return jnp.sum(self.w * x) * self.depth


class Later(eqx.Module):
    k: int = eqx.field(static=True)


class Broken:
    @treespec.jit
    def f(self, x: NoSuchName) -> jax.Array:  # type: ignore[name-defined]
        return x


def test_method_returning_its_own_class() -> None:
    m = Model(jnp.ones(2), 3)
    out = m.scaled(2.0)
    assert isinstance(out, Model) and out.depth == 3
    np.testing.assert_allclose(out.w, 2.0)
    assert Model.scaled.trace_count == 1
    m.scaled(2.0)
    assert Model.scaled.trace_count == 1


def test_method_naming_a_later_class() -> None:
    np.testing.assert_allclose(Model(jnp.ones(2), 1).merge(Later(4)), 4.0)
    assert "other: Later" in repr(treespec.spec_of(Model.merge))


def test_deferred_return_annotation_is_checked() -> None:
    with pytest.raises(ValidationError, match="Model"):
        Model(jnp.ones(2), 3).wrong()


def test_checked_and_grad_methods_defer_too() -> None:
    m = Model(jnp.ones(2), 3)
    assert m.checked_scaled(2.0).depth == 3
    with pytest.raises(ValidationError, match=r"argument k"):
        m.checked_scaled("2")  # type: ignore[arg-type]
    grads = Model.norm(m, jnp.arange(2.0))
    np.testing.assert_allclose(grads.w, np.arange(2.0) * 3)


def test_unresolvable_name_in_a_method_fails_at_first_use() -> None:
    assert "Broken.f" in repr(Broken.f)  # no spec needed for the repr
    with pytest.raises(SpecError, match="'NoSuchName'") as info:
        Broken().f(jnp.ones(1))
    assert "parameter 'x'" in str(info.value)
    with pytest.raises(SpecError, match="'NoSuchName'"):
        treespec.spec_of(Broken.f)


def test_spec_and_explain_build_a_deferred_function(capsys: Any) -> None:
    class Local:
        @treespec.jit
        def f(self, x: Later) -> int:
            return x.k

    assert "x: Later" in repr(Local.f.spec)
    treespec.explain(Local.f)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == Local.f.spec.name and lines[0].endswith("Local.f")
    assert "  x: Later" in lines and "  return: int" in lines


class Stacked(eqx.Module):
    w: jax.Array

    @treespec.jit
    @treespec.grad
    def step(self, other: Stacked) -> jax.Array:  # nested transforms, deferred
        return jnp.sum(self.w * other.w)


def test_nested_transforms_each_build_their_own_splitter() -> None:
    s = Stacked(jnp.arange(3.0))
    grads = s.step(Stacked(jnp.ones(3)))
    np.testing.assert_allclose(grads.w, 1.0)
    outer, inner = Stacked.step, Stacked.step.__wrapped__
    assert outer._splitter is not inner._splitter
