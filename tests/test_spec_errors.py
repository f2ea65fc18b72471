"""SpecError at decoration time: what is wrong, where, and how to fix it."""

from __future__ import annotations

from typing import Any, TypedDict, Union

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treespec
from treespec import Dynamic, SpecError, Static, ValidationError


def test_union_whose_members_disagree() -> None:
    def f(x: Union[Static[int], Dynamic[jax.Array]]) -> None: ...  # noqa: UP007

    with pytest.raises(SpecError) as info:
        treespec.jit(f)
    msg = str(info.value)
    assert "parameter 'x'" in msg
    assert "disagree on markers" in msg
    assert "Static[A | B]" in msg


def test_union_marked_and_unmarked_member_disagree() -> None:
    def f(x: Static[int] | str) -> None: ...

    with pytest.raises(SpecError, match="disagree on markers"):
        treespec.spec_of(f)


def test_union_that_agrees_and_optional_are_fine() -> None:
    def f(x: Static[int] | Static[str], y: Static[int] | None) -> Any:
        return x, y

    spec = treespec.spec_of(f)
    assert "x: Static[int] | Static[str], y: Static[int] | None" in repr(spec)
    # Fine at run time too: every member is accepted and held static.
    jitted = treespec.jit(f)
    assert jitted(1, None) == (1, None)
    assert jitted("a", 2) == ("a", 2)
    assert jitted(1, None) == (1, None) and jitted.trace_count == 2
    assert treespec.flag_tree((1, None), f) == (True, None)
    assert treespec.flag_tree(("a", 2), f) == (True, True)


def test_nested_marker() -> None:
    def f(x: Static[Dynamic[int]]) -> None: ...

    with pytest.raises(
        SpecError,
        match=r"parameter 'x'.*Static\[Dynamic\[int\]\].*marker directly inside",
    ):
        treespec.jit(f)


def test_nested_marker_inside_typeddict_names_the_field() -> None:
    class Cfg(TypedDict):
        n: Dynamic[Static[int]]

    def f(cfg: Cfg) -> None: ...

    with pytest.raises(SpecError, match=r"Cfg\['n'\]"):
        treespec.spec_of(f)


def test_unresolvable_forward_reference() -> None:
    def f(x: NoSuchType) -> None: ...  # type: ignore[name-defined]

    with pytest.raises(SpecError) as info:
        treespec.jit(f)
    assert "'NoSuchType'" in str(info.value)
    assert "parameter 'x'" in str(info.value)
    assert "Define the name" in str(info.value)


def test_forbidden_jax_arguments() -> None:
    for name in (
        "static_argnums",
        "static_argnames",
        "donate_argnums",
        "donate_argnames",
    ):
        with pytest.raises(SpecError, match=f"does not take {name}") as info:
            treespec.jit(lambda x: x, **{name: 0})
        assert "static_flags" in str(info.value) or "Donate" in str(info.value)


def test_spec_error_is_a_type_error_for_callers_that_catch_broadly() -> None:
    assert issubclass(SpecError, TypeError)


def test_any_annotation_is_not_an_error() -> None:
    def f(x: Any) -> Any:
        return x

    assert "x: Any" in repr(treespec.spec_of(f))
    # An `Any` says nothing: the default policy decides, leaf by leaf.
    jitted = treespec.jit(f)
    out = jitted((1, jnp.ones(2)))
    assert out[0] == 1 and type(out[0]) is int
    np.testing.assert_allclose(out[1], 1.0)
    jitted((1, jnp.zeros(2)))  # a new array value: traced, no retrace
    assert jitted.trace_count == 1
    jitted((2, jnp.ones(2)))  # a new int: static, a retrace
    assert jitted.trace_count == 2
    assert treespec.flag_tree(((1, jnp.ones(2)),), f) == ((True, False),)


def test_a_quoted_marker_directly_inside_a_marker_is_refused() -> None:
    def f(x: Static["Dynamic[int]"]) -> None: ...

    with pytest.raises(SpecError, match="a marker directly inside another"):
        treespec.jit(f)


def test_a_generic_leaf_annotation_is_still_checked() -> None:
    @treespec.jit
    def f(x: jax.Array, t: Static[type[int]]) -> jax.Array:
        return x

    f(jnp.ones(1), bool)  # bool is a subclass of int
    with pytest.raises(ValidationError, match=r"argument t.*type\[int\]"):
        f(jnp.ones(1), str)


# -- the error classes as the user sees them --------------------------------------


def _raised(error_type: type[Exception]) -> Exception:
    def f(x: Static[int] | jax.Array) -> None: ...

    class Keyed(TypedDict):
        n: Static[int]

    def g(cfg: Keyed) -> int:
        return cfg["n"]

    with pytest.raises(error_type) as info:
        if error_type is SpecError:
            treespec.jit(f)
        else:
            treespec.jit(g)({"m": 1})  # type: ignore[typeddict-unknown-key]
    return info.value


@pytest.mark.parametrize("error_type", [SpecError, ValidationError])
def test_the_errors_print_under_their_public_name_and_pickle(
    error_type: type[Exception],
) -> None:
    import pickle
    import traceback
    import typing

    error = _raised(error_type)
    name = f"treespec.{error_type.__name__}"
    last = traceback.format_exception(error)[-1]
    assert last.startswith(f"{name}: "), last
    assert repr(error).startswith(f"{error_type.__name__}(")
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is error_type and str(again) == str(error)
    if isinstance(error, ValidationError):
        assert isinstance(again, ValidationError)
        assert again.issues == error.issues and again.context == error.context
    typing.get_type_hints(error_type)  # its annotations still resolve
