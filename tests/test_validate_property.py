"""Property test: conforming values pass; one perturbed leaf fails at its path only."""

from __future__ import annotations

import itertools
from typing import Any, TypedDict

import jax.numpy as jnp
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxtyping import Array, Float

import treespec
from treespec import Dynamic, Static, ValidationError

_names = itertools.count()

LEAF_KINDS = ("static_int", "static_str", "array", "dynamic_float")


def _leaf_annotation(kind: str, k: int) -> Any:
    if kind == "static_int":
        return Static[int]
    if kind == "static_str":
        return Static[str]
    if kind == "array":
        return Dynamic[Float[Array, f"3 d{k}"]]
    return Dynamic[float]


def _leaf_value(kind: str, k: int, bad: str | None) -> Any:
    if kind == "static_int":
        return "7" if bad else 7
    if kind == "static_str":
        return 7 if bad else "seven"
    if kind == "array":
        if bad == "dtype":
            return jnp.ones((3, 2), jnp.int32)
        return jnp.ones((4 if bad == "dim" else 3, 2))
    return jnp.ones(2) if bad else 0.5


schemas = st.recursive(
    st.sampled_from(LEAF_KINDS).map(lambda kind: ("leaf", kind, next(_names))),
    lambda children: st.one_of(
        st.lists(children, min_size=1, max_size=3).map(
            lambda cs: ("typeddict", tuple(cs), next(_names))
        ),
        st.lists(children, min_size=1, max_size=3).map(lambda cs: ("tuple", tuple(cs))),
        children.map(lambda c: ("list", c)),
        children.map(lambda c: ("dict", c)),
    ),
    max_leaves=8,
)

_typeddicts: dict[int, Any] = {}


def annotation(schema: tuple[Any, ...]) -> Any:
    tag = schema[0]
    if tag == "leaf":
        return _leaf_annotation(schema[1], schema[2])
    if tag == "typeddict":
        key = schema[2]
        if key not in _typeddicts:
            fields = {f"k{i}": annotation(c) for i, c in enumerate(schema[1])}
            _typeddicts[key] = TypedDict(f"TD{key}", fields)  # type: ignore[operator]
        return _typeddicts[key]
    if tag == "tuple":
        return tuple[tuple(annotation(c) for c in schema[1])]  # type: ignore[misc]
    if tag == "list":
        return list[annotation(schema[1])]  # type: ignore[misc]
    return dict[str, annotation(schema[1])]  # type: ignore[misc]


def events(schema: tuple[Any, ...], path: str) -> list[tuple[str, str]]:
    """Every place that can be perturbed: (path, how)."""
    tag = schema[0]
    if tag == "leaf":
        hows = {"array": ["dtype", "dim"]}.get(schema[1], ["type"])
        return [(path, how) for how in hows]
    if tag == "typeddict":
        out = []
        for i, child in enumerate(schema[1]):
            out.append((f"{path}['k{i}']", "missing"))
            out += events(child, f"{path}['k{i}']")
        return out
    if tag == "tuple":
        return [e for i, c in enumerate(schema[1]) for e in events(c, f"{path}[{i}]")]
    if tag == "list":
        return events(schema[1], f"{path}[0]") + events(schema[1], f"{path}[1]")
    return events(schema[1], f"{path}['a']")


def value(schema: tuple[Any, ...], path: str, bad: tuple[str, str] | None) -> Any:
    tag = schema[0]
    how = bad[1] if bad and bad[0] == path else None
    if tag == "leaf":
        return _leaf_value(schema[1], schema[2], how)
    if tag == "typeddict":
        out = {}
        for i, child in enumerate(schema[1]):
            sub = f"{path}['k{i}']"
            if bad == (sub, "missing"):
                continue
            out[f"k{i}"] = value(child, sub, bad)
        return out
    if tag == "tuple":
        return tuple(value(c, f"{path}[{i}]", bad) for i, c in enumerate(schema[1]))
    if tag == "list":
        return [value(schema[1], f"{path}[{i}]", bad) for i in range(2)]
    return {"a": value(schema[1], f"{path}['a']", bad)}


@settings(max_examples=120, deadline=None)
@given(schemas, st.data())
def test_conforming_passes_and_one_bad_leaf_is_named(schema: Any, data: Any) -> None:
    ann = annotation(schema)
    good = value(schema, "value", None)
    assert treespec.validate(good, ann) is good

    bad = data.draw(st.sampled_from(events(schema, "value")))
    try:
        treespec.validate(value(schema, "value", bad), ann)
    except ValidationError as err:
        assert [issue.loc for issue in err.issues] == [f"argument value, at {bad[0]}"]
    else:
        raise AssertionError(f"perturbing {bad} was not caught")


#: Annotations each of which reads a name another binds: `k` is bound by
#: `"2*h k"` only, which reads `h`; `"h+k 3"` reads both.
_CHAINED = (("h", (5,)), ("2*h k", (10, 7)), ("h+k 3", (12, 3)))


@given(st.permutations(range(len(_CHAINED))), st.sampled_from([None, 0, 1, 2]))
@settings(max_examples=30, deadline=None)
def test_leaves_that_read_each_others_names_pass_in_any_order(
    order: list[int], bad: int | None
) -> None:
    # DESIGN: an axis of an expression is checked after the leaves that
    # bind its names, wherever it comes in the call.
    hints = [Float[Array, _CHAINED[i][0]] for i in order]

    def f(parts: Any) -> None:
        return None

    f.__annotations__ = {"parts": tuple[tuple(hints)], "return": None}
    checked = treespec.jit(f)
    shapes = [_CHAINED[i][1] for i in order]
    if bad is None:
        checked(tuple(jnp.ones(shape) for shape in shapes))
        return
    where = order.index(bad)
    shapes[where] = (shapes[where][0] + 1, *shapes[where][1:])
    try:
        checked(tuple(jnp.ones(shape) for shape in shapes))
    except ValidationError as error:
        paths = [issue.format().split(":")[0] for issue in error.issues]
        assert paths and all("argument parts, at parts[" in p for p in paths), paths
    else:
        raise AssertionError(f"{shapes} passed")
