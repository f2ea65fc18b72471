"""Specs derived from every kind of annotation DESIGN.md lists.

Each test resolves a concrete call and asserts the kind of every leaf.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import (
    Annotated,
    Any,
    Generic,
    NamedTuple,
    NotRequired,
    Optional,
    Required,
    TypedDict,
    TypeVar,
)

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from jaxtyping import Array, Float, PyTree

import treespec
from treespec import Donate, Dynamic, Static

from .conftest import resolve

A = jnp.ones(3)
T = TypeVar("T")


class Config(TypedDict):
    n_layers: Static[int]
    activation: Static[str]
    scale: Dynamic[float]


class Partial(TypedDict, total=False):
    lr: Dynamic[float]
    steps: Required[Static[int]]


class WithNotRequired(TypedDict):
    name: Static[str]
    extra: NotRequired[Dynamic[float]]


class Child(Config):
    depth: Static[int]


class Point(NamedTuple):
    x: Dynamic[float]
    label: Static[str]


@treespec.dataclass
class Layer:
    w: Float[Array, "n"]
    activation: Static[str]
    n: Static[int] = 3


@dataclasses.dataclass(frozen=True)
class Registered:
    w: Any
    k: Static[int]
    hinted: Static[int]


jax.tree_util.register_dataclass(
    Registered, data_fields=["w", "hinted"], meta_fields=["k"]
)


class Module(eqx.Module):
    w: jax.Array
    scale: Static[float]
    tag: str = eqx.field(static=True)


@struct.dataclass
class FlaxState:
    params: Dynamic[dict[str, jax.Array]]
    step: Static[int]
    name: str = struct.field(pytree_node=False)


@dataclasses.dataclass(frozen=True)
class Box(Generic[T]):
    value: T
    other: T


jax.tree_util.register_dataclass(Box, data_fields=["value", "other"], meta_fields=[])


class Tree(TypedDict):
    value: Static[int]
    children: list[Tree]


def test_positional_keyword_and_defaults() -> None:
    def f(a: Static[int], b: Dynamic[float], c, d: Donate[jax.Array] = A):
        return a

    assert resolve(f, 1, 2.0, A, d=A) == {
        "a": "static",
        "b": "dynamic",
        "c": "dynamic",
        "d": "donate",
    }
    assert resolve(f, 1, b=2.0, c="s") == {"a": "static", "b": "dynamic", "c": "static"}


def test_var_args_and_var_kwargs() -> None:
    def f(*args: Static[int], **kwargs: Dynamic[float]) -> None: ...

    assert resolve(f, 1, 2, u=1.0, v=2.0) == {
        "args[0]": "static",
        "args[1]": "static",
        "kwargs['u']": "dynamic",
        "kwargs['v']": "dynamic",
    }


def test_typeddict_total_required_notrequired_and_inheritance() -> None:
    def f(cfg: Config, p: Partial, q: WithNotRequired, c: Child) -> None: ...

    cfg = {"n_layers": 2, "activation": "relu", "scale": 0.5}
    got = resolve(
        f, cfg, {"steps": 3}, {"name": "x", "extra": 1.0}, {**cfg, "depth": 4}
    )
    assert got == {
        "cfg['activation']": "static",
        "cfg['n_layers']": "static",
        "cfg['scale']": "dynamic",
        "p['steps']": "static",
        "q['extra']": "dynamic",
        "q['name']": "static",
        "c['activation']": "static",
        "c['depth']": "static",
        "c['n_layers']": "static",
        "c['scale']": "dynamic",
    }


def test_namedtuple() -> None:
    def f(p: Point) -> None: ...

    assert resolve(f, Point(1.0, "a")) == {"p.x": "dynamic", "p.label": "static"}


def test_treespec_dataclass_and_register_dataclass() -> None:
    def f(layer: Layer, r: Registered) -> None: ...

    got = resolve(f, Layer(A, "relu"), Registered(A, 1, 2))
    # Static fields of treespec.dataclass are metadata: not leaves at all.
    assert got == {"layer.w": "dynamic", "r.w": "dynamic", "r.hinted": "static"}


def test_equinox_module_and_flax_struct() -> None:
    def f(m: Module, s: FlaxState) -> None: ...

    got = resolve(f, Module(A, 0.5, "t"), FlaxState({"w": A}, 3, "n"))
    assert got == {
        "m.w": "dynamic",
        "m.scale": "static",
        "s.params['w']": "dynamic",
        "s.step": "static",
    }


def test_tuple_forms_list_and_dict() -> None:
    def f(
        t: tuple[Static[int], Dynamic[float]],
        v: tuple[Static[int], ...],
        lst: list[Dynamic[float]],
        d: dict[str, Static[int]],
    ) -> None: ...

    got = resolve(f, (1, 2.0), (1, 2, 3), [1.0, 2.0], {"a": 1, "b": 2})
    assert got == {
        "t[0]": "static",
        "t[1]": "dynamic",
        "v[0]": "static",
        "v[1]": "static",
        "v[2]": "static",
        "lst[0]": "dynamic",
        "lst[1]": "dynamic",
        "d['a']": "static",
        "d['b']": "static",
    }


def test_optional_and_pipe_none() -> None:
    def f(a: Optional[Static[float]], b: Dynamic[float] | None) -> None: ...  # noqa: UP045

    assert resolve(f, 1.0, 2.0) == {"a": "static", "b": "dynamic"}
    assert resolve(f, None, None) == {}


def test_jaxtyping_pytree_and_arrays() -> None:
    def f(
        params: PyTree[Float[Array, "..."]],
        marked: Static[PyTree[int]],
        x: Float[Array, "n"],
    ) -> None: ...

    got = resolve(f, {"a": A, "b": [A]}, {"k": 1}, A)
    assert got == {
        "params['a']": "dynamic",
        "params['b'][0]": "dynamic",
        "marked['k']": "static",
        "x": "dynamic",
    }


def test_pytree_leaf_marker() -> None:
    def f(p: PyTree[Static[int]]) -> None: ...

    assert resolve(f, {"a": 1, "b": (2, 3)}) == {
        "p['a']": "static",
        "p['b'][0]": "static",
        "p['b'][1]": "static",
    }


def test_annotated_with_foreign_metadata() -> None:
    def f(a: Annotated[Static[int], "doc"], b: Annotated[float, "units"]) -> None: ...

    assert resolve(f, 1, np.float32(1)) == {"a": "static", "b": "dynamic"}


def test_the_items_of_a_variadic_tuple_keep_their_marker() -> None:
    # An int is static by default: only the item annotation traces these.
    def f(v: tuple[Dynamic[int], ...]) -> None: ...

    assert resolve(f, (1, 2)) == {"v[0]": "dynamic", "v[1]": "dynamic"}


def test_annotated_array_with_foreign_metadata_stays_an_array() -> None:
    # The annotation under foreign metadata still counts: an array annotation
    # traces even a Python float (bare, a float is static by default).
    def f(x: Annotated[jax.Array, "units"]) -> None: ...

    assert resolve(f, 1.0) == {"x": "dynamic"}


def test_typevar_generics() -> None:
    def f(b: Box[Static[int]], c: Box[Dynamic[float]]) -> None: ...

    assert resolve(f, Box(1, 2), Box(1.0, 2.0)) == {
        "b.value": "static",
        "b.other": "static",
        "c.value": "dynamic",
        "c.other": "dynamic",
    }


def test_generic_alias() -> None:
    Pair = tuple[T, T]

    def f(p: Pair[Static[int]]) -> None: ...

    assert resolve(f, (1, 2)) == {"p[0]": "static", "p[1]": "static"}


def test_string_annotations_and_future_import() -> None:
    # This module uses `from __future__ import annotations`: every hint is a string.
    def f(cfg: Config, n: Static[int], w: Dynamic[float]) -> None: ...

    assert (
        resolve(f, {"n_layers": 1, "activation": "a", "scale": 1.0}, 2, 3.0)["n"]
        == "static"
    )
    assert (
        resolve(f, {"n_layers": 1, "activation": "a", "scale": 1.0}, 2, 3.0)["w"]
        == "dynamic"
    )


def test_local_class_in_string_annotation() -> None:
    class Local(TypedDict):
        k: Static[int]
        v: Dynamic[float]

    def f(x: Local) -> None: ...

    assert resolve(f, {"k": 1, "v": 1.0}) == {"x['k']": "static", "x['v']": "dynamic"}


def test_recursive_type_does_not_loop() -> None:
    def f(t: Tree) -> None: ...

    tree = {"value": 1, "children": [{"value": 2, "children": []}]}
    assert resolve(f, tree) == {
        "t['children'][0]['value']": "static",
        "t['value']": "static",
    }
    spec = treespec.spec_of(f)
    assert "recursive" in spec.tree()
    hash(spec)


def test_nearest_marker_wins() -> None:
    class Inner(TypedDict):
        lr: Dynamic[float]
        n: int

    def f(cfg: Static[dict[str, Inner]]) -> None: ...

    assert resolve(f, {"a": {"lr": 1.0, "n": 2}}) == {
        "cfg['a']['lr']": "dynamic",
        "cfg['a']['n']": "static",
    }

    def g(m: Dynamic[list[Static[int]]]) -> None: ...

    assert resolve(g, [1, 2]) == {"m[0]": "static", "m[1]": "static"}


def test_method_self_resolved_from_its_class() -> None:
    class Model(eqx.Module):
        w: jax.Array
        depth: Static[int]

        def apply(self, x):
            return x

    m = Model(A, 2)
    assert resolve(Model.apply, m, A) == {
        "self.w": "dynamic",
        "self.depth": "static",
        "x": "dynamic",
    }


def test_default_policies() -> None:
    def f(a, b) -> None: ...

    assert resolve(f, A, 1) == {"a": "dynamic", "b": "static"}
    assert resolve(f, A, 1, _default="static") == {"a": "static", "b": "static"}
    assert resolve(f, A, 1, _default="dynamic") == {"a": "dynamic", "b": "dynamic"}


def test_spec_is_immutable_hashable_and_readable() -> None:
    def f(cfg: Config, x: Float[Array, "b n"]) -> Float[Array, "b n"]: ...

    spec = treespec.spec_of(f)
    assert hash(spec) == hash(treespec.spec_of(f))
    assert {spec: "f"}[spec] == "f"

    # Hashed and compared by content: the specs of two distinct functions with
    # the same name and annotations are equal; another annotation is not.
    def twin(marker: Any) -> Any:
        def g(cfg: Config, n: marker) -> None: ...

        return treespec.spec_of(g)

    a, b, other = twin(Static[int]), twin(Static[int]), twin(Dynamic[int])
    assert a is not b
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != other
    assert "cfg: Config" in repr(spec)
    assert "Float[Array, 'b n']" in repr(spec)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "g"  # type: ignore[misc]
    tree = spec.tree()
    assert "'n_layers': Static[int]" in tree and "'scale': Dynamic[float]" in tree


class _Pair(NamedTuple):
    k: Static[int]
    v: jax.Array


class _Wide(TypedDict):
    depth: Static[int]
    pair: _Pair
    first_long_field_name: int
    second_long_field_name: str
    third_long_field_name: float


class _Plain(TypedDict):
    a: int


@dataclasses.dataclass(frozen=True)
class _Chain:
    val: Static[int]
    nxt: _Chain | None


def test_spec_repr_shows_the_markers_inside_classes_bounded() -> None:
    def f(w: _Wide, p: _Plain, c: _Chain, s: Static[_Wide]) -> _Pair: ...

    text = repr(treespec.spec_of(f))
    assert (
        "w: _Wide{depth: Static[int], pair: _Pair{k: Static[int], v: Array}, " in text
    )
    assert "third_long_field_name" not in text and "...}" in text  # cut
    assert "p: _Plain, " in text  # no marker below: the name alone
    assert "c: _Chain{val: Static[int], nxt: _Chain | None}" in text  # recursive
    assert "s: Static[_Wide])" in text  # one marker covers all
    assert text.endswith(" -> _Pair{k: Static[int], v: Array})")


def test_spec_derived_once_per_function(spy: Any) -> None:
    import treespec._runtime.api as api

    recorded = spy(api, "derive_spec")

    def f(n: Static[int], x) -> None: ...

    for _ in range(3):
        treespec.spec_of(f)
    jitted = treespec.jit(lambda n, x: x)
    for _ in range(3):
        jitted(1, A)
    derived = [args[0] for args in recorded]
    assert derived.count(f) == 1
    assert len(derived) == 2


def test_bare_tuple_list_and_dict_hold_any_items(counter: dict[str, int]) -> None:
    def f(t: tuple, lst: list, d: dict, e: tuple[()]) -> None: ...

    spec = treespec.spec_of(f)
    assert repr(spec).endswith(".f(t: tuple, lst: list, d: dict, e: tuple) -> None)")
    assert spec.tree().splitlines()[1:] == [
        "  t: tuple",
        "    [*]: Any",
        "  lst: list",
        "    [*]: Any",
        "  d: dict",
        "    [*]: Any",
        "  e: tuple",  # tuple[()]: no items at all
        "  return: None",
    ]

    # No item annotation: the "infer" default decides each leaf.
    @treespec.jit
    def g(t: tuple, lst: list, d: dict, e: tuple[()]) -> Any:
        counter["n"] += 1
        return jax.tree_util.tree_map(
            lambda v: isinstance(v, jax.core.Tracer), (t, lst, d, e)
        )

    traced = g((1, A), [2.0, A], {"k": "s", "w": A}, ())
    assert traced == ((False, True), [False, True], {"k": False, "w": True}, ())
    g((1, 2 * A), [2.0, A], {"k": "s", "w": A}, ())
    assert counter["n"] == 1  # new array values: no retrace
    g((3, A), [2.0, A], {"k": "s", "w": A}, ())
    assert counter["n"] == 2  # a new static int: a retrace


@pytest.mark.parametrize(
    ("annotation", "good", "bad", "expected"),
    [
        (tuple, (1, A), [1], "tuple, got list [1]"),
        (list, [1, A], (1,), "list, got tuple (1,)"),
        (dict, {"a": 1}, [1], "dict, got list [1]"),
        (tuple[()], (), (1,), "tuple (length 0), got tuple of length 1"),
        (typing.Tuple[()], (), (1,), "tuple (length 0), got tuple of length 1"),  # noqa: UP006
    ],
)
def test_bare_containers_and_the_empty_tuple_check_the_container_they_get(
    annotation: Any, good: Any, bad: Any, expected: str
) -> None:
    treespec.validate(good, annotation)
    with pytest.raises(
        treespec.ValidationError, match=re.escape(f"expected {expected}")
    ):
        treespec.validate(bad, annotation)


def test_an_abstract_container_of_an_unknown_name_stays_one_opaque_annotation() -> None:
    # As a library's alias may be (`optax.OptState` is `Mapping[Any, "ArrayTree"]`,
    # a name only its module knows): no marker can be inside, so no SpecError.
    def f(cfg, sizes) -> None: ...  # type: ignore[no-untyped-def]

    f.__annotations__ = {
        "cfg": Mapping[str, "NoSuchName"],
        "sizes": Sequence["NoSuchName"],
    }
    spec = treespec.spec_of(f)
    assert repr(spec).endswith(
        ".f(cfg: Mapping[str, NoSuchName], sizes: Sequence[NoSuchName]))"
    )
    assert spec.tree().splitlines()[1:] == [
        "  cfg: Mapping[str, NoSuchName]",  # one leaf annotation: nothing below
        "  sizes: Sequence[NoSuchName]",
    ]
    assert resolve(f, {"n": 1, "w": A}, (2, A)) == {
        "cfg['n']": "static",
        "cfg['w']": "dynamic",
        "sizes[0]": "static",
        "sizes[1]": "dynamic",
    }
    # The annotation is still checked as a whole (by beartype).
    with pytest.raises(
        treespec.ValidationError,
        match=r"at cfg: expected Mapping\[str, NoSuchName\] \(static\), got int 1",
    ):
        treespec.jit(f)(1, ())


@pytest.mark.parametrize("annotation", [list["NoSuchName"], dict[str, "NoSuchName"]])
def test_a_list_or_dict_of_an_unknown_name_is_refused(annotation: Any) -> None:
    def f(x) -> None: ...  # type: ignore[no-untyped-def]

    f.__annotations__ = {"x": annotation}
    with pytest.raises(
        treespec.SpecError,
        match=r"cannot resolve the forward reference 'NoSuchName' in parameter 'x'",
    ):
        treespec.jit(f)


class _Unhashable:
    def __eq__(self, other: object) -> bool:  # sets __hash__ to None
        return self is other


class _Hashable:
    pass


def test_the_shared_rules_read_callables_and_unhashables_off_runtime_specs() -> None:
    # No runtime check reads these facts (a Static value that cannot be hashed
    # is refused at the call, from the value): the shared verdicts of
    # `treespec._model.rules`, which the mypy plugin asks of its own nodes, do.
    from treespec._model.markers import Marker
    from treespec._model.rules import type_problem

    def f(
        fn: Callable[[int], int],
        bare: Callable,
        u: Static[_Unhashable],
        h: Static[_Hashable],
    ) -> None: ...

    spec = treespec.spec_of(f)

    def problem(name: str, marker: Marker) -> str | None:
        param = spec.param(name)
        assert param is not None
        return type_problem(param.node, marker)

    assert "a callable cannot be traced" in (problem("fn", Marker.DYNAMIC) or "")
    assert "a callable cannot be traced" in (problem("bare", Marker.DYNAMIC) or "")
    assert "is not hashable, so it cannot be Static" in (
        problem("u", Marker.STATIC) or ""
    )
    assert problem("h", Marker.STATIC) is None


def test_a_required_key_of_a_total_false_typeddict_must_be_there() -> None:
    # This module's `from __future__ import annotations` hides `Required` (a
    # string hint) from `TypedDict` itself; treespec reads it there.
    treespec.validate({"steps": 2}, Partial)  # `lr` may be missing: total=False
    with pytest.raises(
        treespec.ValidationError,
        match=r"at value\['steps'\]: expected required key 'steps' of Partial, "
        r"got nothing \(the key is missing\)",
    ):
        treespec.validate({"lr": 1.0}, Partial)


def test_a_notrequired_key_of_a_total_typeddict_may_be_missing() -> None:
    treespec.validate({"name": "x"}, WithNotRequired)
    with pytest.raises(
        treespec.ValidationError, match=r"required key 'name' of WithNotRequired"
    ):
        treespec.validate({"extra": 1.0}, WithNotRequired)


def test_bare_typing_tuple_is_a_tuple_of_any_length() -> None:
    # `typing.Tuple` without arguments is `tuple`, not `tuple[()]` (on 3.11+
    # both have no type arguments).
    def f(t: typing.Tuple) -> Any:  # noqa: UP006
        return t

    assert treespec.jit(f)((1.0, 2.0)) == (1.0, 2.0)
    treespec.validate((1, "a", None), typing.Tuple)  # noqa: UP006
    with pytest.raises(treespec.ValidationError, match=r"expected tuple"):
        treespec.validate([1], typing.Tuple)  # noqa: UP006


def test_a_callable_annotation_reads_as_written_in_messages() -> None:
    def g(fn: Static[Callable[[int, str], int]]) -> None: ...

    with pytest.raises(
        treespec.ValidationError,
        match=re.escape("expected Static[Callable[[int, str], int]], got int 3"),
    ):
        treespec.jit(g)(3)


# -- annotations hidden behind another decorator ---------------------------------


def _logged(fn: Callable[..., Any]) -> Callable[..., Any]:
    def inner(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return inner


def _logged_with_wraps(fn: Callable[..., Any]) -> Callable[..., Any]:
    import functools

    @functools.wraps(fn)
    def inner(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return inner


def test_a_plain_wrapper_that_hides_markers_is_reported_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def update(params: Donate[dict[str, jax.Array]], n: Static[int]) -> Any:
        return params

    hidden = _logged(update)
    with caplog.at_level("WARNING", logger="treespec"):
        treespec.jit(hidden)
        treespec.jit(hidden)
        treespec.grad(hidden)
    messages = [r.getMessage() for r in caplog.records if r.name == "treespec"]
    assert len(messages) == 1, messages
    (text,) = messages
    assert "_logged.<locals>.inner" in text and "update" in text, text
    assert "functools.wraps" in text, text
    assert "Donate" in text or "markers" in text, text


def test_a_wrapper_that_keeps_wrapped_is_followed_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def update(params: Donate[dict[str, jax.Array]], n: Static[int]) -> Any:
        return params

    with caplog.at_level("WARNING", logger="treespec"):
        jitted = treespec.jit(_logged_with_wraps(update))
    assert [r for r in caplog.records if r.name == "treespec"] == []
    assert jitted.spec.param("n") is not None
    assert jitted.spec.param("n").node.text == "Static[int]"  # type: ignore[union-attr]


def test_a_wrapper_around_a_function_without_markers_is_quiet(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def plain(x: jax.Array, n: int) -> Any:
        return x

    with caplog.at_level("WARNING", logger="treespec"):
        treespec.jit(_logged(plain))
    assert [r for r in caplog.records if r.name == "treespec"] == []


def test_a_wrapper_with_annotations_of_its_own_is_not_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Its `*args`/`**kwargs` say what they take: it hides nothing by accident.
    def update(params: Donate[dict[str, jax.Array]], n: Static[int]) -> Any:
        return params

    def typed(fn: Callable[..., Any]) -> Callable[..., Any]:
        def inner(*args: jax.Array, **kwargs: int) -> Any:
            return fn(*args, **kwargs)

        return inner

    with caplog.at_level("WARNING", logger="treespec"):
        treespec.jit(typed(update))
    assert [r for r in caplog.records if r.name == "treespec"] == []
    # The same wrapper without its annotations is reported.
    with caplog.at_level("WARNING", logger="treespec"):
        treespec.jit(_logged(update))
    assert [r for r in caplog.records if r.name == "treespec"] != []
