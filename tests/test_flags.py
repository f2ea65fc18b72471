"""Explicit `static_flags`: the form of the original request, and its errors."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import treespec
from treespec import Dynamic, SpecError, Static

from .conftest import resolve

A = jnp.ones(2)


def fun(dic, other=None):
    return dic


def test_request_example_list_of_dicts() -> None:
    def fun(dic):  # the request's function: one parameter, one entry
        return dic

    got = resolve(fun, {"x": A, "y": A}, _flags=[dict(x=True, y=False)])
    assert got == {"dic['x']": "static", "dic['y']": "dynamic"}


def test_dict_keyed_by_parameter_name_and_none_entries() -> None:
    got = resolve(fun, {"x": 1, "y": A}, A, _flags={"dic": {"x": None, "y": True}})
    # None: no say, so the default infers; True wins over the array default.
    assert got == {"dic['x']": "static", "dic['y']": "static", "other": "dynamic"}


def test_single_bool_applies_everywhere() -> None:
    assert resolve(fun, {"x": 1, "y": 2}, _flags=False) == {
        "dic['x']": "dynamic",
        "dic['y']": "dynamic",
    }


def test_callable_entry_is_evaluated_per_leaf() -> None:
    got = resolve(
        fun, {"x": 1, "y": A, "z": "s"}, _flags=[lambda v: isinstance(v, str), None]
    )
    assert got == {"dic['x']": "dynamic", "dic['y']": "dynamic", "dic['z']": "static"}


def test_callable_flag_that_raises_or_returns_a_non_bool_is_a_spec_error() -> None:
    def f(a, dic) -> Any:
        return dic

    raising = treespec.jit(f, static_flags=[None, lambda v: v.startswith("s")])
    with pytest.raises(SpecError) as info:
        raising(A, {"n": 3})
    msg = str(info.value)
    assert msg.startswith(
        "static_flags[1] (callable) raised AttributeError on the leaf at "
        "dic['n'] (int 3): 'int' object has no attribute 'startswith'."
    )
    assert "must return True or False" in msg
    assert isinstance(info.value.__cause__, AttributeError)

    answering = treespec.jit(f, static_flags={"dic": lambda v: "yes"})
    with pytest.raises(SpecError) as info:
        answering(A, {"n": 3})
    assert str(info.value) == (
        "static_flags['dic'] (callable) returned str 'yes' for the leaf at "
        "dic['n'] (int 3); a callable entry must return True or False."
    )
    # NumPy's bool is a bool.
    numpy_bool = treespec.jit(f, static_flags=[None, lambda v: np.bool_(True)])
    assert numpy_bool(A, {"n": 3}) == {"n": 3}


def test_nested_prefix_tree_with_lists_and_objects() -> None:
    class Flags(eqx.Module):
        a: Any
        b: Any

    class Arg(eqx.Module):
        a: Any
        b: Any

    got = resolve(
        fun,
        {"p": [1, 2], "q": Arg(A, 3)},
        _flags=[{"p": [True, False], "q": Flags(False, True)}, None],
    )
    assert got == {
        "dic['p'][0]": "static",
        "dic['p'][1]": "dynamic",
        "dic['q'].a": "dynamic",
        "dic['q'].b": "static",
    }


def test_flags_override_markers_and_keep_donation() -> None:
    def f(cfg: Static[dict[str, int]], buf: treespec.Donate[Any]) -> None: ...

    got = resolve(f, {"a": 1}, A, _flags={"cfg": {"a": False}, "buf": False})
    assert got == {"cfg['a']": "dynamic", "buf": "donate"}


def test_a_list_entry_for_var_positional_means_what_the_dict_entry_means() -> None:
    # One entry per parameter, `*rest` being one: the entry covers every extra
    # argument, as `{"rest": ...}` does; a list there flags them one by one.
    def f(a, *rest) -> None: ...

    for flags in ([True, False], {"a": True, "rest": False}):
        for n in range(1, 5):
            got = resolve(f, 1, *range(n), _flags=flags)
            assert got == {"a": "static", **{f"rest[{i}]": "dynamic" for i in range(n)}}
    for flags in ([True, [False, True]], {"a": True, "rest": [False, True]}):
        got = resolve(f, 1, 2, 3, _flags=flags)
        assert got == {"a": "static", "rest[0]": "dynamic", "rest[1]": "static"}


def test_a_list_flag_on_var_positional_traces_once_for_every_length() -> None:
    count = {"n": 0}

    def f(x, *rest):  # type: ignore[no-untyped-def]
        count["n"] += 1
        return x + sum(rest)

    jitted = treespec.jit(f, static_flags=[None, False])
    for n in range(1, 5):
        jitted(jnp.ones(2), *[1.0] * n)
    assert count["n"] == 4  # one trace per number of arguments, none per value
    jitted(jnp.ones(2), *[2.0] * 4)
    assert count["n"] == 4


def test_a_list_entry_per_extra_argument_is_refused_with_the_spelling_that_works() -> (
    None
):
    def f(a, *rest) -> None: ...

    with pytest.raises(SpecError) as info:
        treespec.jit(f, static_flags=[True, False, True])
    msg = str(info.value)
    assert msg.startswith("static_flags has 3 entries but "), msg
    assert "f takes a, *rest: a list gives one entry per parameter" in msg, msg
    assert "static_flags=[True, [False, True]]" in msg, msg
    assert "{'rest': [False, True]}" in msg, msg


def test_too_many_entries_is_a_spec_error_at_decoration() -> None:
    with pytest.raises(SpecError, match=r"3 entries but .* takes 2 positional"):
        treespec.jit(fun, static_flags=[True, False, True])


def test_too_few_entries_is_a_spec_error_that_points_to_a_dict() -> None:
    def f(a, b, c=None, *rest) -> None: ...

    with pytest.raises(SpecError) as info:
        treespec.jit(f, static_flags=[True])
    msg = str(info.value)
    assert msg.startswith("static_flags has 1 entry but ")
    assert "f takes 3 positional parameters (a, b, c) before *rest." in msg
    assert "b, c would have none" in msg
    assert "None lets the hints decide" in msg and "give a dict by name" in msg
    # One more entry than the positional parameters is *rest's; a dict names some.
    treespec.jit(f, static_flags=[True, None, None, False])
    treespec.jit(f, static_flags={"a": True})

    def g(a) -> None: ...

    with pytest.raises(
        SpecError, match=r"2 entries but .*g takes 1 positional parameter \(a\)\."
    ):
        treespec.jit(g, static_flags=[True, False])


def test_unknown_parameter_name() -> None:
    with pytest.raises(
        SpecError, match=r"names \['dik'\].*parameters are \['dic', 'other'\]"
    ):
        treespec.jit(fun, static_flags={"dik": True})


def test_wrong_container_for_static_flags() -> None:
    with pytest.raises(SpecError, match="static_flags must be"):
        treespec.jit(fun, static_flags=3.5)


def test_flag_tree_not_a_prefix_names_the_place() -> None:
    with pytest.raises(SpecError, match=r"static_flags\[0\] has keys \['w'\]"):
        resolve(fun, {"x": 1}, _flags=[{"w": True}, None])
    with pytest.raises(SpecError, match=r"static_flags\[0\]\['x'\] has 3 entries"):
        resolve(fun, {"x": [1, 2]}, _flags=[{"x": [True, True, True]}, None])
    with pytest.raises(
        SpecError, match=r"static_flags\[0\]\['x'\] is an int, which has no entry"
    ):
        resolve(fun, {"x": {"a": 1}}, _flags=[{"x": 3}, None])
    with pytest.raises(
        SpecError, match=r"is a dict but the argument at dic\['x'\] is a leaf"
    ):
        resolve(fun, {"x": 1}, _flags=[{"x": {"deeper": True}}, None])


def test_default_error_names_uncovered_leaves() -> None:
    def f(a: Static[int], b: Any, c: Dynamic[Any]) -> None: ...

    with pytest.raises(SpecError, match=r"default='error'.*covers b\b"):
        resolve(f, 1, 2, A, _default="error")
    assert resolve(f, 1, 2, A, _default="error", _flags={"b": True})["b"] == "static"


def test_bad_default_policy() -> None:
    with pytest.raises(SpecError, match="default must be one of"):
        treespec.jit(fun, default="sometimes")
